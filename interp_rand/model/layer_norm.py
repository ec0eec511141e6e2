"""Pre-LayerNorm with TransformerLens names (``w``, ``b``, ``hook_scale``, ``hook_normalized``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.config import ModelConfig


class LayerNorm(nn.Module):
    """``(x - mean) / scale * w + b`` with the scale hooked, so it can be frozen or patched."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.eps = cfg.eps
        self.w = nn.Parameter(torch.ones(cfg.d_model))
        self.b = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.w, self.b, self.eps, self.hook_scale, self.hook_normalized)


def _unhooked(x: Tensor) -> Tensor:
    return x


def layer_norm(
    x: Tensor,
    w: Tensor,
    b: Tensor,
    eps: float,
    hook_scale: Callable[[Tensor], Tensor] = _unhooked,
    hook_normalized: Callable[[Tensor], Tensor] = _unhooked,
) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * w + b`` over the last axis: the one LayerNorm, of
    :class:`LayerNorm` (with its hook points) and of the fast path
    (:mod:`interp_rand.model.fast`), so both compute it alike."""
    x = x - x.mean(-1, keepdim=True)
    scale = hook_scale((x.pow(2).mean(-1, keepdim=True) + eps).sqrt())
    return hook_normalized(x / scale * w + b)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """A :class:`LayerNorm`, or the identity when ``normalization_type`` is ``None``."""
    return LayerNorm(cfg) if cfg.normalization_type == "LN" else nn.Identity()
