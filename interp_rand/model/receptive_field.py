"""The distinct receptive fields of a batch, so that evaluation computes each one once.

Where every input of a batch is the same tensor (broadcast over the batch: stride 0, the
colouring's one-hot vertex ids) and the inputs differ only in which keys each query may read (a
mask in which every query reads the same number ``d`` of keys, which the fast path gathers:
:meth:`~interp_rand.model.fast.FastForward.key_index`), the logits at a position depend only on
the row's seed and on the position's *receptive field*, defined by depth:

    field_0(i) = i                                          the position (its input, its embedding)
    field_l(i) = (field_{l-1}(i), field_{l-1}(k_1), .., field_{l-1}(k_d))   k_j: the keys i reads
    logits(i)  = f(seed, field_{n_layers}(i))               every block reads only those keys

On the exhaustive colouring set (181,440 cycles, 10 positions, 2 keys each, 2 blocks) there are
15,120 distinct fields of depth 2 (a vertex, its two neighbours and theirs), found in 11,174 of
the inputs. :class:`ReceptiveFields` numbers the fields of a batch and names one (input,
position) where each occurs; ``success_matrix`` runs the fast path on those inputs only, with
every seed, and every other row's logits are copied from there: the same numbers (the fast path
computes a position from its field's values alone, by the same operations;
``tests/interp_rand/model/test_receptive_field.py`` checks it bitwise), at a fraction of the work.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class ReceptiveFields:
    """The receptive fields of a batch's ``[n, pos]`` (input, position) pairs, evaluated with
    ``n_seeds`` seeds each.

    Attributes:
        field: ``[n, pos]`` long, the field of every (input, position), numbered ``0 .. F-1``.
        inputs: ``[R]`` long, ascending: the representative inputs, those holding the first
            occurrence (input-major order) of some field.
        where: ``[F]`` long, ``representative * pos + position``: where each field first occurs,
            ``representative`` indexing :attr:`inputs`.
        n_seeds: the seeds each input is evaluated with.
        offset: ``[n, pos]`` long: where the logits of every (input, position) under seed 0 are in
            the representatives' logits ``[R * n_seeds * pos, K]`` (representative-major, then
            seed, then position: the representatives evaluated as a batch of their own); seed
            ``s`` adds ``s * pos``.
    """

    field: Tensor
    inputs: Tensor
    where: Tensor
    n_seeds: int
    offset: Tensor

    @classmethod
    def find(cls, inputs: Tensor, key_index: Tensor | None, depth: int,
             n_seeds: int = 1) -> "ReceptiveFields | None":
        """The fields of depth ``depth`` (the model's number of blocks) of a batch whose
        ``inputs`` are one tensor broadcast over the batch (stride 0) and whose queries read the
        keys ``key_index [n, pos, d]``; ``None`` where that does not hold (no ``key_index``,
        inputs that differ, fewer than 2 inputs)."""
        if key_index is None or inputs.dim() == 0 or inputs.shape[0] < 2 or inputs.stride(0) != 0:
            return None
        if depth < 1 or n_seeds < 1:
            raise ValueError(f"depth={depth} (the model's number of blocks) and n_seeds={n_seeds} must be >= 1")
        n, n_pos, d = key_index.shape
        flat_keys = key_index.reshape(n, n_pos * d)
        field = torch.arange(n_pos, device=key_index.device).expand(n, n_pos)  # depth 0: the position
        for _ in range(depth):
            read = torch.gather(field, 1, flat_keys).view(n, n_pos, d)  # the fields of the keys read
            signature = torch.cat([field[..., None], read], -1).view(n * n_pos, d + 1)
            field = _number(signature).view(n, n_pos)
        n_fields = int(field.max()) + 1
        pairs = field.flatten()
        first = torch.full((n_fields,), n * n_pos, dtype=torch.long, device=pairs.device)
        first = first.scatter_reduce(0, pairs, torch.arange(n * n_pos, device=pairs.device), "amin")
        representatives, rank = torch.unique(first // n_pos, return_inverse=True)
        where = rank * n_pos + first % n_pos
        found = where[field]
        offset = found // n_pos * (n_seeds * n_pos) + found % n_pos
        return cls(field=field, inputs=representatives, where=where, n_seeds=n_seeds, offset=offset)

    @property
    def n_fields(self) -> int:
        return len(self.where)

    @property
    def pays_off(self) -> bool:
        """The representative inputs are at most a quarter of the batch's: running them and
        looking every row up is then the cheaper way (evaluation uses the fields only then)."""
        return 4 * len(self.inputs) <= self.field.shape[0]

    def rows(self, rows: Tensor) -> Tensor:
        """``[len(rows), pos]`` long: for evaluation rows ``rows`` (row ``r`` = input ``r //
        n_seeds`` with seed ``r % n_seeds``), the row of the representatives' logits that holds
        each position's logits."""
        return self.offset[rows // self.n_seeds] + (rows % self.n_seeds)[:, None] * self.field.shape[1]


def _number(signature: Tensor) -> Tensor:
    """``[m, c]`` long rows -> ``[m]`` long: equal rows get equal numbers, ``0 ..`` distinct - 1
    (one integer per row where it fits in 63 bits, so a 1-D unique; else a row-wise unique)."""
    base = int(signature.max()) + 1
    if base ** signature.shape[1] < 2**62:
        code = signature[:, 0]
        for column in range(1, signature.shape[1]):
            code = code * base + signature[:, column]
        return torch.unique(code, return_inverse=True)[1]
    return torch.unique(signature, dim=0, return_inverse=True)[1]


__all__ = ["ReceptiveFields"]
