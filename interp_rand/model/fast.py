"""A fast inference path for evaluation, derived from a :class:`HookedTransformer`'s weights.

:class:`FastForward` computes the same logits as ``HookedTransformer.forward`` (within float
rounding: ``tests/interp_rand/model/test_fast_forward.py`` checks them within 1e-5 of the logits'
scale on every zoo model and every option, and the colouring success matrix identical on the
exhaustive cycle set) with plain torch ops: no hook
dispatch, no per-step copies a hook would need (the positional table is broadcast, not
repeated; an input broadcast over the batch, such as the colouring's one-hot vertex ids, is
embedded once), and a per-example mask in which every query may read the same number ``k`` of
keys (the colouring's cycle adjacency: 2 of 10) is applied by gathering only those keys' rows of
the fused q/k/v projections. With a few output units (:data:`FEW_OUTPUTS`) the logits are a
transposed view (the unit axis outermost in memory), so flatten them with ``reshape``.

Evaluation pairs every input with every seed (``success_matrix``): with the seeds passed as a
table (``seed_rows``), a broadcast input's stream up to the first mix runs once per seed, and
(:class:`~interp_rand.model.first_block.FirstBlockTable`, built once per evaluation) the first block's output,
which then depends only on the seed, the position and the keys it reads, is looked up rather
than computed; both give the same numbers as the rows one by one (the mixer's table form,
:meth:`~interp_rand.model.mixer.Mixer.fast_table_plan`, does the mixing).

It holds no weights of its own: every call reads the model's parameters (the fused q/k/v
matrix is rebuilt whenever a parameter changes), and it reuses the model's own pieces where
they are functions (:func:`~interp_rand.model.layer_norm.layer_norm`, the MLP activations of
:data:`~interp_rand.model.mlp.ACTIVATIONS` through each MLP's own ``act`` and
``pre_activation``, ``PosEmbed``'s table, the model's own input checks and mask rule). The hooked
model stays the one model for analysis and interventions: this path has no hook points, so
anything that needs hooks (caches, patching, ablations) runs the hooked forward.

A causal model also decodes incrementally (``fast(new_inputs, seeds=..., cache=DecodeCache.
empty(cfg, batch))``: only the new positions run, over the cached keys and values), and the
forward can be ``torch.func.vmap``-ed over ``functional_call`` with a population's stacked
weights (no data-dependent branching for vector inputs; the caches' buffers are written in
place): the grid world's population rollouts (``interp_rand.gridworld.population``) run so.

    >>> fast = FastForward.from_model(model)
    >>> torch.allclose(fast(inputs, seeds=seeds), model(inputs, seeds=seeds), atol=1e-5)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp_rand.model.layer_norm import layer_norm

#: Up to this many output units the unembedding runs units-first and the logits come back as a
#: transposed view (``[batch, pos, d_vocab_out]`` with the unit axis outermost in memory: use
#: ``reshape``, not ``view``, to flatten them).
FEW_OUTPUTS = 8


def regular_key_index(allowed: Tensor) -> Tensor | None:
    """``allowed [batch, q, k]`` bool -> ``[batch, q, d]`` long, the allowed keys of every query
    in ascending order, when every query of every row may read exactly the same number ``d >= 1``
    of keys; otherwise ``None`` (the dense mask is used)."""
    batch, n_query = allowed.shape[:2]
    entries = allowed.nonzero()  # row-major: (row, query, key), each query's keys ascending
    queries = batch * n_query
    if queries == 0 or len(entries) == 0 or len(entries) % queries:
        return None
    d = len(entries) // queries
    owner = entries[:, 0] * n_query + entries[:, 1]  # the flat query of every entry
    if not torch.equal(owner, torch.arange(queries, device=allowed.device).repeat_interleave(d)):
        return None
    return entries[:, 2].view(batch, n_query, d)


class FastForward:
    """The hooked model's forward pass as plain tensor ops, for evaluation.

    Args:
        model: a :class:`~interp_rand.model.HookedTransformer`; read on every call, never copied.
        sparse_keys: with a per-example mask (``mask="custom"``) in which every query reads the
            same number ``d`` of keys, compute attention only over those keys (``True``), always
            over the full masked score matrix (``False``), or (``None``) the former where
            ``d`` is under half the positions. Measured (``bench/fast_eval.py`` and
            ``FastForward(model, sparse_keys=False)``): on the colouring's 2 of 10 keys the
            attention is ~2x faster gathered; the half-way switch is not measured elsewhere.
    """

    def __init__(self, model: nn.Module, sparse_keys: bool | None = None):
        self.model = model
        self.cfg = model.cfg
        self.sparse_keys = sparse_keys
        self._version: tuple[int, ...] | None = None
        self._params: list[Tensor] = []
        self._fused: list[tuple[Tensor, Tensor | None, Tensor]] = []

    @classmethod
    def from_model(cls, model: nn.Module, sparse_keys: bool | None = None) -> "FastForward":
        return cls(model, sparse_keys=sparse_keys)

    # ----------------------------------------------------------------------------------
    def _layers(self) -> list[tuple[Tensor, Tensor | None, Tensor]]:
        """Per block: ``W_qkv [d_model, 3 * h * e]`` transposed for ``F.linear``, its bias (or
        ``None`` without attention biases) and ``W_O [(h e), d_model]`` transposed; rebuilt when
        any parameter's version counter moved (training, ``load_state_dict``, ``copy_``)."""
        params = list(self.model.parameters())
        version = tuple(p._version for p in params)
        # the parameters themselves, compared by identity (ids of freed tensors are reused:
        # functional_call and vmap swap fresh tensors in on every call)
        if version != self._version or len(params) != len(self._params) or any(
            a is not b for a, b in zip(params, self._params)
        ):
            fused = []
            for block in self.model.blocks:
                w_qkv, b_qkv = block.attn.fused_qkv()  # the mixer's own projection
                fused.append((w_qkv.T.contiguous().detach(), None if b_qkv is None else b_qkv.detach(),
                              block.attn.fused_o().T.contiguous().detach()))
            self._fused, self._version, self._params = fused, version, params
        return self._fused

    # ----------------------------------------------------------------------------------
    def key_index(self, attention_mask: Tensor | None) -> Tensor | None:
        """``[batch, pos, d]`` the keys each query of ``attention_mask`` reads, where this model
        attends over the gathered keys for it (softmax, ``mask="custom"``, no seed token, a
        regular mask, ``sparse_keys``); else ``None``. Computed once for a batch, it can be
        sliced along with the mask and passed to each call (``key_index=``), which then skips
        finding it: evaluation repeats every input's mask for each of its seeds."""
        cfg = self.cfg
        if (attention_mask is None or cfg.mask != "custom" or cfg.attention != "softmax" or cfg.seed_offset
                or cfg.positional == "alibi"):  # (ALiBi's penalty is over the dense score matrix)
            return None
        if self.sparse_keys is False or attention_mask.dim() != 3:
            return None
        index = regular_key_index(attention_mask)
        if index is not None and self.sparse_keys is None and 2 * index.shape[-1] >= attention_mask.shape[-1]:
            return None  # half the keys or more: the dense mask
        return index

    def __call__(self, inputs: Tensor, seeds: Tensor | None = None, attention_mask: Tensor | None = None,
                 key_index: Tensor | None = None, cache: "DecodeCache | None" = None,
                 seed_rows: Tensor | None = None, first_block=None) -> Tensor:
        """As ``HookedTransformer.forward`` (same arguments, same checks, same result).

        ``key_index``: :meth:`key_index` of ``attention_mask``, if the caller has it (it must
        be that of this very mask; it is not checked against it).

        ``cache``: incremental decoding of a causal model (:class:`DecodeCache`): ``inputs``
        are the positions after the ``cache.length`` already decoded, and the result is their
        logits, equal to those positions' logits of one forward over the whole prefix.

        ``seed_rows``: ``[batch]`` long: ``seeds`` is then a table of ``S`` seeds and row ``b``
        has ``seeds[seed_rows[b]]`` (the result is that of ``seeds=seeds[seed_rows]``). Where
        one input is broadcast over the batch (stride 0) and the first block's mixer has a table
        form (:meth:`~interp_rand.model.mixer.Mixer.fast_table_plan`; attention: over gathered
        keys), the stream up to the first mix runs once per seed, not once per row: evaluation
        pairs every input with every seed.

        ``first_block``: a :class:`~interp_rand.model.first_block.FirstBlockTable` of these
        ``seeds`` (with ``seed_rows`` and ``key_index``): the first block's output is looked up,
        not computed."""
        model, cfg = self.model, self.cfg
        batch, n_pos = model._check_inputs(inputs)
        table = False  # the stream up to the first mix computed once per seed of the table
        if seed_rows is not None:
            if seeds is None or seed_rows.shape != (batch,) or seed_rows.dtype != torch.long:
                given = f"{seed_rows.dtype} {tuple(seed_rows.shape)}{' and no seeds' if seeds is None else ''}"
                raise ValueError(f"seed_rows must be long [batch={batch}] rows of a seeds table; got {given}")
            table = (cache is None and not model.embed.tokens and cfg.has_seed and not cfg.seed_offset
                     and batch > 1 and inputs.stride(0) == 0 and len(seeds) < batch)
            if not table:
                seeds = seeds[seed_rows]
        if first_block is not None:
            if (seed_rows is None or key_index is None or key_index.shape[:2] != (batch, n_pos)
                    or seeds is not first_block.seeds or cache is not None):
                raise ValueError("first_block needs the seeds it was built for, seed_rows and the [batch, pos, d] "
                                 "key_index (no cache)")
            model.allowed_keys(attention_mask, batch, n_pos)  # the mask's checks
            stream = first_block.lookup(self, key_index, seed_rows)
            return self._residual_stream(stream.view(batch, n_pos, -1), None, key_index, pos_added=True,
                                         first_layer=1)
        start = 0 if cache is None else cache.check(self, batch, n_pos, attention_mask, key_index)
        if table:
            x, pos_added = self._stream_input(inputs[:1].expand(len(seeds), -1, -1), seeds, start, cache)
        else:
            x, pos_added = self._stream_input(inputs, seeds, start, cache)
        allowed = cache.allowed(x.shape[1], x.device) if start else model.allowed_keys(attention_mask, batch, n_pos)
        if key_index is None:
            key_index = self.key_index(allowed)
        elif (key_index.shape[:2] != (batch, n_pos) or attention_mask is None
              or self.key_index(attention_mask[:1]) is None):
            raise ValueError(f"key_index must be FastForward.key_index of the [batch={batch}, pos={n_pos}, "
                             f"pos] attention_mask; got {tuple(key_index.shape)}")
        first = None
        if table:
            mixer = type(model.blocks[0].attn)
            first = mixer.fast_table_plan(cfg, key_index, seed_rows, n_pos)  # None without a table form
            if first is None:  # no table form: every row its copy of the table's
                x = x.index_select(0, seed_rows)
        return self._residual_stream(x, allowed, key_index, pos_added, cache,
                                     None if first is None else (first, seed_rows))

    def _stream_input(self, inputs: Tensor, seeds: Tensor | None, start: int,
                      cache: "DecodeCache | None") -> tuple[Tensor, bool]:
        """The residual stream's input ``[batch, pos, d_model]`` (embedding, seeds, input MLP,
        seed token) and whether the positions are already added to it."""
        model, cfg = self.model, self.cfg
        batch, n_pos = inputs.shape[:2]
        embed = model.embed
        # one input broadcast over the batch (the colouring's one-hot vertex ids, a stride-0
        # view): embedded once, with the positions added to that one copy
        broadcast = cache is None and not embed.tokens and batch > 1 and inputs.stride(0) == 0
        pos_added = broadcast and cfg.has_pos_table and not cfg.d_input_mlp and not cfg.seed_offset
        if embed.tokens:
            x = embed.W_E[inputs]
        elif broadcast:
            x = inputs[:1] @ embed.W_E
            x = x + model.pos_embed(n_pos) if pos_added else x.expand(batch, -1, -1)
        else:
            # (F.linear: under vmap over members a batched W_E stays one bmm, not a per-row expand)
            x = F.linear(inputs, embed.W_E.T)
        if cfg.has_seed and cfg.seed_mode == "append":
            x = self._plus_seed(x, seeds, batch, n_pos)
        if cfg.d_input_mlp > 0:
            x = self._mlp(model.input_mlp, x)
        if cfg.has_seed and cfg.seed_mode == "add":
            x = self._plus_seed(x, seeds, batch, n_pos)
        # (a seed token already decoded, start > 0, is in the cache: its seeds are not read again)
        if (cfg.seed_offset and not start) or not cfg.has_seed:
            seed_embed = self._seed_embed(seeds, batch, n_pos)  # raises where seeds are wrong
        if cfg.seed_offset and not start:
            x = torch.cat([seed_embed.expand(batch, -1, -1), x], dim=1)
        if cfg.positional == "digit_index":  # positions read from the tokens, so added here
            x, pos_added = x + model.pos_embed(x.shape[1], inputs), True
        return x.expand(batch, -1, -1), pos_added  # (a no-op unless nothing above was per row)

    def _plus_seed(self, x: Tensor, seeds: Tensor | None, batch: int, n_pos: int) -> Tensor:
        """``x`` plus the seeds' projection (``add`` / ``append``), broadcast to ``[batch, pos,
        d_model]``; one seed feature (the colouring's noise) is one fused multiply-add."""
        cfg = self.cfg
        if (cfg.d_seed == 1 and seeds is not None and seeds.shape[0] == batch and seeds.shape[-1] == 1
                and (seeds.dim() == 2 or (seeds.dim() == 3 and seeds.shape[1] == n_pos))):
            w_seed = self.model.seed_embed.W_seed
            seeds = seeds.to(w_seed.dtype)
            return torch.addcmul(x, seeds[:, None] if seeds.dim() == 2 else seeds, w_seed[0])
        return x + self._seed_embed(seeds, batch, n_pos)

    def _seed_embed(self, seeds: Tensor | None, batch: int, n_pos: int) -> Tensor | None:
        """``[batch, pos or 1, d_model]``: the hooked model's checks, and the projection of a
        shared seed once per row (broadcast over positions, not expanded first)."""
        model, cfg = self.model, self.cfg
        if not cfg.has_seed or seeds is None:
            return model._seed_embed(seeds, batch, n_pos)  # raises where seeds are wrong
        if seeds.shape[0] != batch or seeds.shape[-1] != cfg.d_seed or seeds.dim() not in (2, 3) or (
            seeds.dim() == 3 and (cfg.seed_offset or seeds.shape[1] != n_pos)
        ):
            return model._seed_embed(seeds, batch, n_pos)  # raises with the hooked model's message
        w_seed = model.seed_embed.W_seed
        seeds = seeds.to(w_seed.dtype)
        seeds = seeds[:, None] if seeds.dim() == 2 else seeds
        # one seed feature (the colouring's noise): a broadcast product, the same number as the
        # [.., 1] @ [1, d_model] matmul gives, without the matmul's call
        return seeds * w_seed[0] if cfg.d_seed == 1 else seeds @ w_seed

    def _mlp(self, mlp: nn.Module, x: Tensor) -> Tensor:
        pre = mlp.pre_activation(x)
        return F.linear(mlp.act(pre), mlp.W_out.T, mlp.b_out)

    def _norm(self, norm: nn.Module, x: Tensor) -> Tensor:
        if self.cfg.normalization_type != "LN":
            return x
        return layer_norm(x, norm.w, norm.b, norm.eps)

    def _residual_stream(self, x: Tensor, allowed: Tensor | None, key_index: Tensor | None,
                         pos_added: bool = False, cache: "DecodeCache | None" = None,
                         table: tuple | None = None, first_layer: int = 0, stop: int | None = None) -> Tensor:
        """``x [batch, pos, d_model]`` -> the logits; with ``table = (first, seed_rows)``, ``x``
        is the table ``[S, pos, d_model]`` whose row ``seed_rows[b]`` batch row ``b`` copies up
        to the first mix, and ``first`` the first block's table plan (the mixer's). ``x`` enters
        at block ``first_layer``; with ``stop`` the stream ``[batch * pos, d_model]`` after block
        ``stop - 1`` is returned instead of the logits."""
        model, cfg = self.model, self.cfg
        n_rows, n_pos, d_model = x.shape
        batch = n_rows if table is None else len(table[1])
        start = 0 if cache is None else cache.length
        if cfg.has_pos_table and not pos_added:
            # broadcast over the batch (no copy: no hook to see it)
            x = x + model.pos_embed(start + n_pos)[:, start:]
        mixer = type(model.blocks[0].attn)
        attend = mixer.fast_plan(cfg, allowed, key_index, batch, n_pos)  # the mixer's hook-free form
        gathered = key_index is not None and cfg.attention == "softmax"
        h, e = cfg.n_heads, cfg.d_head
        x = x.reshape(n_rows * n_pos, -1)
        for layer, (block, (w_qkv, b_qkv, w_o)) in enumerate(zip(model.blocks, self._layers())):
            if layer < first_layer:
                continue
            if layer == stop:
                break
            attn = block.attn
            qkv = F.linear(self._norm(block.ln1, x), w_qkv, b_qkv)  # [batch (or S) * pos, 3 h e]
            if table is not None:  # the table's one mix, then each row its copy of the stream
                first, seed_rows = table
                z = first(qkv, attn.scale)  # [batch * pos, h e]
                x = x.view(n_rows, n_pos * d_model).index_select(0, seed_rows).view(batch * n_pos, d_model)
                table = None
            elif gathered:
                z = attend(qkv, attn.scale)  # [batch * pos, h e]
            else:
                qkv = qkv.view(batch, n_pos, 3, h, e)
                q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
                if cache is None:
                    z = attend(q, k, v, attn.scale)  # [batch, pos, head, d_head]
                else:
                    z = cache.attend(layer, q, k, v, attn.scale, attend, cfg, mixer)
                z = z.reshape(batch * n_pos, h * e)
            if cfg.attn_bias:
                x = x + F.linear(z, w_o, attn.b_O)
            else:
                x = torch.addmm(x, z, w_o.T)  # x + z @ W_O in one pass
            if not cfg.attn_only:
                x = x + self._mlp(block.mlp, self._norm(block.ln2, x))
        if stop is not None:
            return x
        unembed = model.unembed
        x = self._norm(model.ln_final, x)
        if cfg.d_vocab_out <= FEW_OUTPUTS:
            # [d_vocab_out, rows]: a few output units are computed units-first (for 3 colours
            # ~2x faster than [rows, 16] @ [16, 3]); the logits are its transposed view
            logits = torch.addmm(unembed.b_U[:, None], unembed.W_U.T, x.T).T
        else:
            logits = F.linear(x, unembed.W_U.T, unembed.b_U)
        if cache is not None:
            cache.length = start + n_pos
        return logits.view(batch, n_pos, -1)[:, 0 if start else cfg.seed_offset :]


class DecodeCache:
    """Keys and values of the positions decoded so far, for incremental decoding of a causal
    model: ``fast(inputs, seeds=seeds, cache=cache)`` runs only the new positions ``inputs``
    (the first call also the seed token), writes their keys and values into the buffers in
    place (so the buffers may be inputs of ``torch.func.vmap``, batched over a population's
    members), attends over every position so far and advances ``length``.

    Args:
        keys, values: per block ``[n_ctx, d_head, batch, head]`` buffers (:meth:`empty`):
            position-major, so a step writes one block and a single query's attention reduces
            over the outer axes (over contiguous rows of ``batch * head``), not over 4-entry
            rows nor through one tiny matmul per (row, head).
        length: positions already in them (0: nothing decoded yet).
    """

    def __init__(self, keys: list[Tensor], values: list[Tensor], length: int = 0):
        self.keys, self.values, self.length = list(keys), list(values), length

    @classmethod
    def empty(cls, cfg, batch: int | tuple[int, ...], device: torch.device | str | None = None,
              dtype: torch.dtype = torch.float32) -> "DecodeCache":
        """Zero buffers for ``batch`` rows; a tuple gives several batch dims (e.g. ``(members,
        rows)``: vmap over the members with ``in_dims=2``)."""
        lead = (batch,) if isinstance(batch, int) else tuple(batch)
        shape = (cfg.n_ctx, cfg.d_head, *lead, cfg.n_heads)
        return cls([torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)],
                   [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)])

    def check(self, fast: FastForward, batch: int, n_pos: int, attention_mask: Tensor | None,
              key_index: Tensor | None) -> int:
        """``ValueError`` unless ``fast`` can decode ``n_pos`` more positions of ``batch`` rows
        into this cache; returns ``length``."""
        cfg = fast.cfg
        if cfg.mask != "causal":
            raise ValueError(f"decoding with a DecodeCache needs a causal model; this model has mask={cfg.mask!r}")
        if cfg.positional == "digit_index":
            raise ValueError("decoding with a DecodeCache cannot read digit-index positions (a token's index depends "
                             "on the tokens before it, which the cache does not keep); run the whole prefix")
        if attention_mask is not None or key_index is not None:
            raise ValueError("decoding with a DecodeCache takes no attention_mask or key_index (the mask is causal)")
        shape = (cfg.n_ctx, cfg.d_head, batch, cfg.n_heads)
        if len(self.keys) != cfg.n_layers or len(self.values) != cfg.n_layers or any(
            tuple(t.shape) != shape for t in self.keys + self.values
        ):
            raise ValueError(f"DecodeCache buffers must be {cfg.n_layers} keys and values of shape {shape} "
                             f"[n_ctx, d_head, batch, head]; got {[tuple(t.shape) for t in self.keys]}")
        end = self.length + n_pos + (0 if self.length else cfg.seed_offset)
        if end > cfg.n_ctx:
            raise ValueError(f"decoding {n_pos} more positions after {self.length} exceeds n_ctx={cfg.n_ctx}")
        return self.length

    def allowed(self, n_new: int, device: torch.device) -> Tensor | None:
        """The causal mask of ``n_new`` new queries over every key so far: ``[n_new, length +
        n_new]`` bool, or ``None`` for one new query (it reads every key)."""
        if n_new == 1:
            return None
        return torch.ones(n_new, self.length + n_new, dtype=torch.bool, device=device).tril(self.length)

    def attend(self, layer: int, q: Tensor, k: Tensor, v: Tensor, scale: float, attend, cfg, mixer) -> Tensor:
        """Store block ``layer``'s new ``k, v [batch, new, head, d_head]`` and mix ``q`` over
        every position so far: one new query by the mixer's ``decode_one`` where it has one,
        otherwise by ``attend`` (the forward's plan, over views of the buffers). ``[batch, new,
        head, d_head]``."""
        end = self.length + k.shape[1]
        keys, values = self.keys[layer], self.values[layer]
        keys[self.length : end] = k.permute(1, 3, 0, 2)  # [new, d_head, batch, head]
        values[self.length : end] = v.permute(1, 3, 0, 2)
        if k.shape[1] == 1:
            z = mixer.decode_one(cfg, q, keys[:end], values[:end], scale)
            if z is not None:
                return z
        return attend(q, keys[:end].permute(2, 0, 3, 1), values[:end].permute(2, 0, 3, 1), scale)


__all__ = ["FEW_OUTPUTS", "DecodeCache", "FastForward", "regular_key_index"]
