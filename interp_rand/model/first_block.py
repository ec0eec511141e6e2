"""The fast path's first block looked up instead of computed, for evaluation over many seeds.

Where one input is broadcast over the batch (the colouring's one-hot vertex ids), each row has
one of ``S`` seeds and attention reads ``d`` gathered keys per query (the colouring's 2
neighbours), the stream after the first block at a query depends only on the seed, the
position and the keys it reads. :meth:`FirstBlockTable.build` computes it once for every
(seed, tuple of ``d`` keys, position) through the fast path itself (its embedding and the
mixer's table form, :meth:`~interp_rand.model.mixer.Mixer.fast_table_plan`), and
``FastForward(..., seed_rows=, first_block=)`` gathers each row's from it: the same numbers (the
same operations on the same values), one gather instead of the first block. ``success_matrix``
builds it once per evaluation where it costs under a quarter of what it replaces.
"""

from __future__ import annotations

import torch
from torch import Tensor


class FirstBlockTable:
    """``stream [(set * S + seed) * pos + query, d_model]``: the stream after the first block
    for every seed of ``seeds`` (a table, as with ``seed_rows``) and every tuple of ``d`` keys
    (``set``) a query may read, built under the fast path's weights ``version`` (module
    docstring)."""

    def __init__(self, stream: Tensor, seeds: Tensor, n_seeds: int, n_pos: int, d: int, version):
        self.stream, self.seeds, self.version = stream, seeds, version
        self.n_seeds, self.n_pos, self.d = n_seeds, n_pos, d

    @classmethod
    def build(cls, fast, inputs: Tensor, seeds: Tensor, key_index: Tensor | None,
              max_rows: int = 1 << 21) -> "FirstBlockTable | None":
        """The table of :class:`~interp_rand.model.fast.FastForward` ``fast`` for ``inputs``
        (broadcast over the batch: stride 0), ``seeds`` and the gathered keys ``key_index
        [batch, pos, d]`` (``fast.key_index``): ``n_pos ** d * S * n_pos`` rows; ``None``
        beyond ``max_rows`` or where it does not apply (no broadcast input, no seeds, a seed
        token, a dense mask, a mixer without a table form)."""
        model, cfg = fast.model, fast.cfg
        n_seeds = len(seeds)
        if (key_index is None or model.embed.tokens or not cfg.has_seed or cfg.seed_offset or inputs.shape[0] < 2
                or inputs.stride(0) != 0):
            return None
        n_pos, d = key_index.shape[1:]
        n_sets = n_pos**d
        if n_sets * n_seeds * n_pos > max_rows:
            return None
        mixer = type(model.blocks[0].attn)
        # every tuple of d keys (lexicographic: tuple (k_1 .. k_d) is row sum k_j n_pos^(d-j)),
        # read by every query, with every seed: row set * S + seed
        sets = torch.stack(torch.meshgrid(*[torch.arange(n_pos, device=key_index.device)] * d, indexing="ij"), -1)
        index = sets.view(n_sets, 1, d).expand(n_sets, n_pos, d).repeat_interleave(n_seeds, 0)
        seed_rows = torch.arange(n_seeds, device=key_index.device).repeat(n_sets)
        first = mixer.fast_table_plan(cfg, index, seed_rows, n_pos)
        if first is None:
            return None
        with torch.no_grad():  # (a plain tensor: usable with and without autograd)
            x, pos_added = fast._stream_input(inputs[:1].expand(n_seeds, -1, -1), seeds, 0, None)
            stream = fast._residual_stream(x, None, index, pos_added, table=(first, seed_rows), stop=1)
        return cls(stream, seeds, n_seeds, n_pos, d, fast._version)

    def lookup(self, fast, key_index: Tensor, seed_rows: Tensor) -> Tensor:
        """``[batch * pos, d_model]``: each batch row's stream after the first block (its seed
        ``seed_rows``, its queries' keys ``key_index [batch, pos, d]``)."""
        fast._layers()  # (brings the weights' version up to date)
        if fast._version != self.version or key_index.shape[1:] != (self.n_pos, self.d):
            raise ValueError("first_block was built for other weights or another key count; build it again")
        powers = self.n_pos ** torch.arange(self.d - 1, -1, -1, device=key_index.device)
        sets = (key_index * powers).sum(-1)  # [batch, pos]
        query = torch.arange(self.n_pos, device=key_index.device)
        return self.stream.index_select(0, ((sets * self.n_seeds + seed_rows[:, None]) * self.n_pos + query).flatten())


__all__ = ["FirstBlockTable"]
