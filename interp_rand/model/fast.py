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

It holds no weights of its own: every call reads the model's parameters (the fused q/k/v
matrix is rebuilt whenever a parameter changes), and it reuses the model's own pieces where
they are functions (:func:`~interp_rand.model.layer_norm.layer_norm`, the MLP activations of
:data:`~interp_rand.model.mlp.ACTIVATIONS` through each MLP's own ``act`` and
``pre_activation``, ``PosEmbed``'s table, the model's own input checks and mask rule). The hooked
model stays the one model for analysis and interventions: this path has no hook points, so
anything that needs hooks (caches, patching, ablations) runs the hooked forward.

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
        version = tuple(p._version for p in params) + tuple(id(p) for p in params)
        if version != self._version:
            fused = []
            for block in self.model.blocks:
                attn = block.attn
                w_qkv = torch.cat([w.permute(1, 0, 2).flatten(1) for w in (attn.W_Q, attn.W_K, attn.W_V)], 1)
                b_qkv = torch.cat([attn.b_Q.flatten(), attn.b_K.flatten(), attn.b_V.flatten()])
                fused.append((w_qkv.T.contiguous().detach(),
                              b_qkv.detach() if self.cfg.attn_bias else None,
                              attn.W_O.flatten(0, 1).T.contiguous().detach()))
            self._fused, self._version = fused, version
        return self._fused

    # ----------------------------------------------------------------------------------
    def key_index(self, attention_mask: Tensor | None) -> Tensor | None:
        """``[batch, pos, d]`` the keys each query of ``attention_mask`` reads, where this model
        attends over the gathered keys for it (softmax, ``mask="custom"``, no seed token, a
        regular mask, ``sparse_keys``); else ``None``. Computed once for a batch, it can be
        sliced along with the mask and passed to each call (``key_index=``), which then skips
        finding it: evaluation repeats every input's mask for each of its seeds."""
        cfg = self.cfg
        if attention_mask is None or cfg.mask != "custom" or cfg.attention != "softmax" or cfg.seed_offset:
            return None
        if self.sparse_keys is False or attention_mask.dim() != 3:
            return None
        index = regular_key_index(attention_mask)
        if index is not None and self.sparse_keys is None and 2 * index.shape[-1] >= attention_mask.shape[-1]:
            return None  # half the keys or more: the dense mask
        return index

    def __call__(self, inputs: Tensor, seeds: Tensor | None = None, attention_mask: Tensor | None = None,
                 key_index: Tensor | None = None) -> Tensor:
        """As ``HookedTransformer.forward`` (same arguments, same checks, same result).

        ``key_index``: :meth:`key_index` of ``attention_mask``, if the caller has it (it must
        be that of this very mask; it is not checked against it)."""
        model, cfg = self.model, self.cfg
        batch, n_pos = model._check_inputs(inputs)
        embed = model.embed
        # one input broadcast over the batch (the colouring's one-hot vertex ids, a stride-0
        # view): embedded once, with the positions added to that one copy
        broadcast = not embed.tokens and batch > 1 and inputs.stride(0) == 0
        pos_added = broadcast and cfg.positional != "none" and not cfg.d_input_mlp and not cfg.seed_offset
        if embed.tokens:
            x = embed.W_E[inputs]
        elif broadcast:
            x = inputs[:1] @ embed.W_E
            x = x + model.pos_embed(n_pos) if pos_added else x.expand(batch, -1, -1)
        else:
            x = inputs @ embed.W_E
        if cfg.has_seed and cfg.seed_mode == "append":
            x = self._plus_seed(x, seeds, batch, n_pos)
        if cfg.d_input_mlp > 0:
            x = self._mlp(model.input_mlp, x)
        if cfg.has_seed and cfg.seed_mode == "add":
            x = self._plus_seed(x, seeds, batch, n_pos)
        if cfg.seed_offset or not cfg.has_seed:
            seed_embed = self._seed_embed(seeds, batch, n_pos)  # raises where seeds are wrong
        if cfg.seed_offset:
            x = torch.cat([seed_embed.expand(batch, -1, -1), x], dim=1)
        x = x.expand(batch, -1, -1)  # (a no-op unless nothing above was per row)
        allowed = model.allowed_keys(attention_mask, batch, n_pos)
        if key_index is None:
            key_index = self.key_index(allowed)
        elif (key_index.shape[:2] != (batch, n_pos) or attention_mask is None
              or self.key_index(attention_mask[:1]) is None):
            raise ValueError(f"key_index must be FastForward.key_index of the [batch={batch}, pos={n_pos}, "
                             f"pos] attention_mask; got {tuple(key_index.shape)}")
        return self._residual_stream(x, allowed, key_index, pos_added)

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
                         pos_added: bool = False) -> Tensor:
        model, cfg = self.model, self.cfg
        batch, n_pos, _ = x.shape
        if cfg.positional != "none" and not pos_added:
            x = x + model.pos_embed(n_pos)  # broadcast over the batch (no copy: no hook to see it)
        attend = self._attention_plan(allowed, key_index, batch, n_pos)
        gathered = key_index is not None and cfg.attention == "softmax"
        h, e = cfg.n_heads, cfg.d_head
        x = x.reshape(batch * n_pos, -1)
        for block, (w_qkv, b_qkv, w_o) in zip(model.blocks, self._layers()):
            attn = block.attn
            qkv = F.linear(self._norm(block.ln1, x), w_qkv, b_qkv)  # [batch * pos, 3 h e]
            if gathered:
                z = attend(qkv, attn.scale)  # [batch * pos, h e]
            else:
                qkv = qkv.view(batch, n_pos, 3, h, e)
                z = attend(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], attn.scale)  # [batch, pos, head, d_head]
                z = z.reshape(batch * n_pos, h * e)
            if cfg.attn_bias:
                x = x + F.linear(z, w_o, attn.b_O)
            else:
                x = torch.addmm(x, z, w_o.T)  # x + z @ W_O in one pass
            if not cfg.attn_only:
                x = x + self._mlp(block.mlp, self._norm(block.ln2, x))
        unembed = model.unembed
        x = self._norm(model.ln_final, x)
        if cfg.d_vocab_out <= FEW_OUTPUTS:
            # [d_vocab_out, rows]: a few output units are computed units-first (for 3 colours
            # ~2x faster than [rows, 16] @ [16, 3]); the logits are its transposed view
            logits = torch.addmm(unembed.b_U[:, None], unembed.W_U.T, x.T).T
        else:
            logits = F.linear(x, unembed.W_U.T, unembed.b_U)
        return logits.view(batch, n_pos, -1)[:, cfg.seed_offset :]

    def _attention_plan(self, allowed: Tensor | None, index: Tensor | None, batch: int, n_pos: int):
        """``attend(q, k, v, scale) -> z``, all ``[batch, pos, head, d_head]``, with the mask
        prepared once for every block as an additive ``0 / -inf`` bias; or, over the allowed
        keys (``index``, :meth:`key_index`), ``attend(qkv, scale) -> z`` from the fused
        ``[batch * pos, 3 h e]`` projections to ``[batch * pos, h e]``."""
        cfg = self.cfg
        if cfg.attention == "linear":
            keep = None if allowed is None else (allowed if allowed.dim() == 2 else allowed[:, None])
            return lambda q, k, v, scale: _linear_attention(q, k, v, keep, scale)
        if index is not None:
            # [d * batch * query]: the flat row (of the [batch * pos, ...] activations) of every
            # query's j-th allowed key, slot-major so that slot j's keys are one block
            rows = index + torch.arange(batch, device=index.device)[:, None, None] * n_pos
            keys = rows.view(batch * n_pos, -1).T.flatten()
            return lambda qkv, scale: _gathered_softmax(qkv, keys, cfg.n_heads, cfg.d_head, scale)
        bias = empty = None
        if allowed is not None:
            keep = allowed if allowed.dim() == 2 else allowed[:, None]  # broadcast over heads
            bias = torch.zeros(keep.shape, device=allowed.device).masked_fill_(~keep, float("-inf"))
            if allowed.dim() == 3 and not bool(allowed.any(-1).all()):
                empty = ~keep  # a query with no allowed key gives NaN; it reads nothing (the hooked rule)
        return lambda q, k, v, scale: _softmax_attention(q, k, v, bias, empty, scale)


def _softmax_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, empty: Tensor | None,
                       scale: float) -> Tensor:
    """Softmax attention in the hooked attention's order of operations (so within a few float
    ulps of it), the mask an additive ``0 / -inf`` bias prepared once for every block."""
    scores = q.transpose(1, 2) @ k.permute(0, 2, 3, 1) / scale  # [batch, head, query, key]
    if bias is not None:
        scores = scores + bias
    pattern = torch.softmax(scores, dim=-1)
    if empty is not None:
        pattern = pattern.masked_fill(empty, 0.0)
    return (pattern @ v.transpose(1, 2)).transpose(1, 2)


def _linear_attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor | None, scale: float) -> Tensor:
    """Linear attention (the pattern is the masked scores), in the hooked order of operations."""
    scores = q.transpose(1, 2) @ k.permute(0, 2, 3, 1) / scale  # [batch, head, query, key]
    pattern = scores if keep is None else scores.masked_fill(~keep, 0.0)
    return (pattern @ v.transpose(1, 2)).transpose(1, 2)


def _gathered_softmax(qkv: Tensor, keys: Tensor, h: int, e: int, scale: float) -> Tensor:
    """Softmax attention over only the allowed keys, straight from the fused projections.

    ``qkv [rows, 3 * h * e]`` (``rows = batch * pos``: q, k, v of every position), ``keys
    [d * rows]``: slot-major, the row of each query's ``j``-th allowed key (the same number
    ``d`` for every query). The key and value rows are gathered once (``[d, rows, 2 h e]``),
    each score is the elementwise product with the query summed over ``d_head`` (no score
    matrix over all keys, no batched matmul of 10 x 10 blocks), its softmax runs over the slot
    axis (the outer axis: torch's fast kernel; over a last axis of a few entries its CPU
    softmax is ~10x slower) and the values are summed weighted by it. The masked keys'
    ``exp(-inf) = 0`` terms of the hooked softmax are simply absent. Returns ``z [rows, h e]``."""
    he = h * e
    rows = qkv.shape[0]
    kv = qkv[:, he:].index_select(0, keys).view(-1, rows, 2 * he)  # [d, rows, 2 h e]
    q = qkv[:, :he]
    scores = (kv[:, :, :he] * q).view(-1, rows, h, e).sum(-1)  # [d, rows, h]
    pattern = torch.softmax(scores.div_(scale), dim=0)[..., None]  # [d, rows, h, 1]
    values = kv[:, :, he:].view(-1, rows, h, e)
    z = pattern[0] * values[0]  # the weighted sum over slots, one fused multiply-add per slot
    for slot in range(1, len(values)):
        z.addcmul_(pattern[slot], values[slot])
    return z.view(rows, he)


__all__ = ["FEW_OUTPUTS", "FastForward", "regular_key_index"]
