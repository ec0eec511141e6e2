"""Multi-head attention, softmax or linear, with causal, full or per-example masks.

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

import einops
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_dispatch import fire, listening
from interp_rand.model.linear import linear


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, d, e))
        self.W_K = nn.Parameter(torch.empty(h, d, e))
        self.W_V = nn.Parameter(torch.empty(h, d, e))
        self.W_O = nn.Parameter(torch.empty(h, e, d))
        for name, shape in (("b_Q", (h, e)), ("b_K", (h, e)), ("b_V", (h, e)), ("b_O", (d,))):
            if cfg.attn_bias:
                setattr(self, name, nn.Parameter(torch.zeros(shape)))
            else:
                # zero buffers under the same names: readers of b_Q ... (circuits) need no case
                self.register_buffer(name, torch.zeros(shape))
        self.scale = e**0.5 if cfg.use_attn_scale else 1.0
        self.hook_q = HookPoint()
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()
        self.hook_result = HookPoint()

    def forward(self, x: Tensor, allowed: Tensor | None) -> Tensor:
        """``x: [batch, pos, d_model]``; ``allowed``: bool ``[pos, pos]`` or
        ``[batch, pos, pos]`` (true where query may attend key), ``None`` for full attention.
        Returns ``[batch, pos, d_model]``."""
        batch, n_pos, _ = x.shape
        # One matmul for q, k and v: [d_model, 3 * n_heads * d_head] (plain mm, which is much
        # faster on CPU than a 4-d einsum that lowers to many small bmm calls).
        w_qkv = einops.rearrange([self.W_Q, self.W_K, self.W_V], "three h d e -> d (three h e)")
        b_qkv = einops.rearrange([self.b_Q, self.b_K, self.b_V], "three h e -> (three h e)") if self.cfg.attn_bias else None
        # addmm fuses the bias add into the matmul (one pass over the activations, not two);
        # :func:`linear` takes the faster orientation for the weight gradient
        qkv = linear(x, w_qkv, b_qkv)
        # unbind: three views whose backward stacks the three gradients once (indexing
        # qkv[:, :, i] zero-fills and copies a full-size gradient per slice)
        q, k, v = qkv.view(batch, n_pos, 3, self.cfg.n_heads, self.cfg.d_head).unbind(2)
        q = fire(self.hook_q, q)  # [batch, pos, head, d_head]
        k = fire(self.hook_k, k)
        v = fire(self.hook_v, v)
        if self.cfg.attention == "softmax" and not (listening(self.hook_attn_scores) or listening(self.hook_pattern)):
            z = fire(self.hook_z, self._sdpa(q, k, v, allowed))
        else:
            z = fire(self.hook_z, self._explicit(q, k, v, allowed))
        if self.cfg.use_attn_result:
            result = fire(self.hook_result, einops.einsum(z, self.W_O, "b q h e, h e d -> b q h d"))
            return result.sum(dim=2) + self.b_O
        # [batch, pos, (head d_head)] @ [(head d_head), d_model]
        w_o = einops.rearrange(self.W_O, "h e d -> (h e) d")
        return linear(z.reshape(batch, n_pos, -1), w_o, self.b_O if self.cfg.attn_bias else None)

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

    def _explicit(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        """Scores, mask, softmax (none for linear attention) and pattern, each through its hook
        point (``[batch, pos, head, d_head]`` each -> ``z``, the same shape)."""
        # [batch, head, q_pos, d_head] @ [batch, head, d_head, k_pos] -> [batch, head, q_pos, k_pos]
        scores = q.transpose(1, 2) @ k.permute(0, 2, 3, 1)
        if self.scale != 1.0:  # x / 1.0 is x: no pass over the scores for an unscaled model
            scores = scores / self.scale
        if allowed is not None:
            # [pos, pos] or [batch, pos, pos] -> broadcast over heads
            keep = allowed if allowed.dim() == 2 else allowed[:, None]
        if self.cfg.attention == "softmax":
            if allowed is not None:
                scores = scores.masked_fill(~keep, float("-inf"))
            scores = fire(self.hook_attn_scores, scores)
            pattern = torch.softmax(scores, dim=-1)
            if allowed is not None and allowed.dim() == 3:
                # A query with no allowed key gives NaN; it reads nothing instead.
                pattern = pattern.masked_fill(~keep, 0.0)
        else:
            # Linear attention: the pattern is the masked scores themselves (no softmax), so
            # the causal sum over keys is a fixed-size state (the paper, recall).
            if allowed is not None:
                scores = scores.masked_fill(~keep, 0.0)
            scores = fire(self.hook_attn_scores, scores)
            pattern = scores
        pattern = fire(self.hook_pattern, pattern)
        # [batch, head, q_pos, k_pos] @ [batch, head, k_pos, d_head] -> [batch, q_pos, head, d_head]
        return (pattern @ v.transpose(1, 2)).transpose(1, 2)
