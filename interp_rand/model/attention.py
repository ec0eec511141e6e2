"""Multi-head attention, softmax or linear, with causal, full or per-example masks: a
:class:`~interp_rand.model.mixer.Mixer`, and the one place attention's maths is written (the
hooked forward, the recompute-these-heads form of incremental patching and the fast path's
kernels).

Weights and hooks carry TransformerLens names and shapes: ``W_Q/W_K/W_V: [n_heads, d_model,
d_head]``, ``W_O: [n_heads, d_head, d_model]``; ``hook_q/k/v/z: [batch, pos, head, d_head]``,
``hook_attn_scores/hook_pattern: [batch, head, query_pos, key_pos]``,
``hook_result: [batch, pos, head, d_model]`` (only with ``use_attn_result``).

Softmax attention is computed explicitly (scores, mask, softmax, pattern, each through its
hook point) whenever ``hook_attn_scores`` or ``hook_pattern`` has a hook (``run_with_cache``
adds one to every hook point it caches), and otherwise by ``F.scaled_dot_product_attention``
with the same boolean mask and scale: the same function (a query with no allowed key reads
nothing on both paths; within 1e-6, ``tests/interp_rand/model/test_fast_paths.py``).
``hook_q/k/v/z`` fire on either path, so a patch there acts on both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp_rand.model.alibi import alibi_bias
from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_dispatch import fire, listening
from interp_rand.model.mixer import ATTENTION_CAPABILITIES, Mixer, Plan


def scores_of(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """``q [..., nq, head, e]``, ``k [..., P, head, e]`` -> the scaled scores ``[..., head, nq,
    P]`` (``x / 1.0`` is ``x``: an unscaled model's scores are the plain products)."""
    # [..., head, q_pos, d_head] @ [..., head, d_head, k_pos]
    scores = q.transpose(-3, -2) @ k.movedim(-3, -1)
    return scores / scale if scale != 1.0 else scores


def weighted_values(pattern: Tensor, v: Tensor) -> Tensor:
    """``pattern [..., head, nq, P] @ v [..., P, head, e]`` -> ``z [..., nq, head, e]``."""
    return (pattern @ v.transpose(-3, -2)).transpose(-3, -2)


class Attention(Mixer):
    INNER_HOOKS = ("hook_attn_scores", "hook_pattern")
    CAPABILITIES = ATTENTION_CAPABILITIES

    @classmethod
    def check_config(cls, cfg: ModelConfig) -> None:
        if cfg.attention == "linear" and cfg.mask == "custom":
            raise ValueError(
                "ModelConfig.mask='custom' cannot be used with attention='linear': linear attention "
                "keeps a fixed-size state, which needs mask 'causal' or 'full'"
            )

    def mix(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        if self.cfg.attention == "softmax" and self.cfg.positional != "alibi" and not (listening(self.hook_attn_scores) or listening(self.hook_pattern)):
            return self._sdpa(q, k, v, allowed)
        return self._explicit(q, k, v, allowed)

    def _sdpa(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        """Softmax attention by ``F.scaled_dot_product_attention`` (``[batch, pos, head,
        d_head]`` each -> ``z``, the same shape), for when no hook listens to the scores or the
        pattern. ``allowed`` is the explicit path's boolean mask, broadcast over heads (the
        causal one as ``is_causal``, SDPA's cheaper kernel); SDPA gives a query with no allowed
        key a zero output, as the explicit path does."""
        mask = None if allowed is None else (allowed if allowed.dim() == 2 else allowed[:, None])
        causal = mask is not None and mask.dim() == 2 and torch.equal(mask, torch.ones_like(mask).tril())
        z = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=None if causal else mask, is_causal=causal,
                                           scale=1.0 / self.scale)
        return z.transpose(1, 2)

    def mask_scores(self, scores: Tensor, keep: Tensor | None) -> Tensor:
        """Scores with the keys outside ``keep`` (bool, broadcastable; ``None``: every key)
        removed: ``-inf`` before a softmax, 0 for linear attention (whose pattern is the masked
        scores themselves, so the causal sum over keys is a fixed-size state: the paper, recall).
        What ``hook_attn_scores`` sees."""
        if keep is None:
            return scores
        return scores.masked_fill(~keep, float("-inf") if self.cfg.attention == "softmax" else 0.0)

    def pattern_of(self, scores: Tensor, keep: Tensor | None, *, per_example: bool) -> Tensor:
        """The pattern of masked ``scores`` (:meth:`mask_scores`): softmax over keys, or the
        scores themselves for linear attention. With a per-example mask a query may have no
        allowed key: the softmax gives NaN there, and it reads nothing instead."""
        if self.cfg.attention != "softmax":
            return scores
        pattern = torch.softmax(scores, dim=-1)
        return pattern.masked_fill(~keep, 0.0) if per_example and keep is not None else pattern

    def _explicit(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        """Scores, mask, softmax (none for linear attention) and pattern, each through its hook
        point (``[batch, pos, head, d_head]`` each -> ``z``, the same shape)."""
        # [pos, pos] or [batch, pos, pos] -> broadcast over heads
        keep = None if allowed is None else (allowed if allowed.dim() == 2 else allowed[:, None])
        scores = scores_of(q, k, self.scale)
        bias = alibi_bias(self.cfg, q.shape[-3], k.shape[-3], device=q.device)  # None: no ALiBi
        scores = fire(self.hook_attn_scores, self.mask_scores(scores if bias is None else scores + bias, keep))
        pattern = self.pattern_of(scores, keep, per_example=allowed is not None and allowed.dim() == 3)
        return weighted_values(fire(self.hook_pattern, pattern), v)

    def mix_at(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, queries: Tensor,
               per_example: bool, heads: Tensor | None = None) -> Tensor:
        scores = scores_of(q, k, self.scale)
        bias = alibi_bias(self.cfg, len(queries), k.shape[-3], queries=queries, heads=heads, device=q.device)
        pattern = self.pattern_of(self.mask_scores(scores if bias is None else scores + bias, allowed), allowed,
                                  per_example=per_example)
        return weighted_values(pattern, v)

    # ------------------------------------------------------------------ the fast path's forms
    @classmethod
    def fast_plan(cls, cfg: ModelConfig, allowed: Tensor | None, index: Tensor | None, batch: int,
                  n_pos: int) -> Plan:
        """``attend(q, k, v, scale) -> z``, all ``[batch, pos, head, d_head]``, with the mask
        prepared once for every block as an additive ``0 / -inf`` bias; or, over the allowed
        keys (``index``, :meth:`~interp_rand.model.fast.FastForward.key_index`), ``attend(qkv,
        scale) -> z`` from the fused ``[batch * pos, 3 h e]`` projections to ``[batch * pos, h e]``."""
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
        if cfg.positional == "alibi":  # the distance penalty, for the shapes of each call (a decoding cache's)
            def alibi_attend(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
                penalty = alibi_bias(cfg, q.shape[1], k.shape[1], device=q.device)
                return _softmax_attention(q, k, v, penalty if bias is None else penalty + bias, empty, scale)
            return alibi_attend
        return lambda q, k, v, scale: _softmax_attention(q, k, v, bias, empty, scale)

    @classmethod
    def fast_table_plan(cls, cfg: ModelConfig, index: Tensor | None, distinct: Tensor, n_pos: int) -> Plan | None:
        """Over the allowed keys (``index``, as :meth:`fast_plan`'s) of a table of distinct rows
        (:meth:`Mixer.fast_table_plan`): ``attend(qkv, scale) -> z`` from the table's fused
        projections ``[S * pos, 3 h e]`` to every batch row's ``[batch * pos, h e]``; ``None``
        for linear attention or a dense mask. The scores of every (query, key) pair of a table
        row are computed once on the table (``S * pos * pos * h`` products: a dense attention's
        over ``S`` rows), so each batch row only gathers its queries' few scores and values."""
        if cfg.attention != "softmax" or index is None or cfg.positional == "alibi":
            return None
        batch, _, d = index.shape
        # [batch, pos]: the table row of every batch row's position (query)
        query = distinct[:, None] * n_pos + torch.arange(n_pos, device=index.device)
        # slot-major [d * batch * pos]: each query's j-th allowed key, as a table row and as a
        # (query table row, key position) pair of the table's scores
        keys = (index + (distinct * n_pos)[:, None, None]).view(batch * n_pos, d).T.flatten()
        pairs = (query[:, :, None] * n_pos + index).view(batch * n_pos, d).T.flatten()
        h, e = cfg.n_heads, cfg.d_head
        return lambda qkv, scale: _gathered_softmax_from_table(qkv, keys, pairs, d, n_pos, h, e, scale)

    @classmethod
    def decode_one(cls, cfg: ModelConfig, q: Tensor, keys: Tensor, values: Tensor, scale: float) -> Tensor:
        """One new query per row over all ``t`` keys so far (the causal mask hides nothing):
        ``q [batch, 1, head, d_head]``, ``keys, values [t, d_head, batch, head]`` -> ``[batch, 1,
        head, d_head]``. Scores, softmax (or, linear, the scores themselves) and the weighted sum
        in the hooked attention's order, each reduction over an outer axis."""
        scores = (keys * q[:, 0].permute(2, 0, 1)).sum(1) / scale  # [t, batch, head]
        bias = alibi_bias(cfg, 1, len(keys), device=q.device)  # [head, 1, t]
        if bias is not None:
            scores = scores + bias[:, 0].T[:, None]
        pattern = scores if cfg.attention == "linear" else torch.softmax(scores, dim=0)
        return (pattern[:, None] * values).sum(0).permute(1, 2, 0)[:, None]


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
    return _weighted_slots(scores, kv[:, :, he:].view(-1, rows, h, e), scale)


def _gathered_softmax_from_table(qkv: Tensor, keys: Tensor, pairs: Tensor, d: int, n_pos: int, h: int, e: int,
                                 scale: float) -> Tensor:
    """:func:`_gathered_softmax` for batch rows that copy rows of a table: ``qkv [S * pos, 3 h
    e]`` the table's fused projections; ``keys [d * rows]`` (slot-major, ``rows = batch * pos``)
    the table row of each query's ``j``-th allowed key and ``pairs`` its (query table row, key
    position) pair, ``query_row * pos + key_pos``. Every score of a table row's positions is
    computed once (the same elementwise products summed over ``d_head``), each query gathers
    its ``d``; the values are gathered from the table. Returns ``z [rows, h e]``, the numbers
    :func:`_gathered_softmax` gives on the copied rows."""
    he = h * e
    n_table = qkv.shape[0] // n_pos
    q = qkv[:, :he].reshape(n_table, n_pos, 1, he)
    k = qkv[:, he : 2 * he].reshape(n_table, 1, n_pos, he)
    scores = (k * q).view(n_table * n_pos * n_pos, h, e).sum(-1)  # [S * q * key, h]
    values = qkv[:, 2 * he :].index_select(0, keys).view(d, -1, h, e)  # [d, rows, h, e]
    return _weighted_slots(scores.index_select(0, pairs).view(d, -1, h), values, scale)


def _weighted_slots(scores: Tensor, values: Tensor, scale: float) -> Tensor:
    """``scores [d, rows, h]`` (unscaled, overwritten) and ``values [d, rows, h, e]`` of each
    query's ``d`` allowed keys -> ``z [rows, h e]``: the softmax over the slot axis (the outer
    axis: torch's fast kernel; over a last axis of a few entries its CPU softmax is ~10x slower)
    and the values summed weighted by it, one fused multiply-add per slot."""
    d, rows, h, e = values.shape
    pattern = torch.softmax(scores.div_(scale), dim=0)[..., None]  # [d, rows, h, 1]
    z = pattern[0] * values[0]
    for slot in range(1, d):
        z.addcmul_(pattern[slot], values[slot])
    return z.view(rows, h * e)


__all__ = ["Attention", "scores_of", "weighted_values"]
