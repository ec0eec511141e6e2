"""Pre-LayerNorm with TransformerLens names (``w``, ``b``, ``hook_scale``, ``hook_normalized``).

With neither hook point listened to, :func:`layer_norm` normalises with ``F.layer_norm`` (one
fused kernel forward and backward, then the affine map: the same function, within 1e-6); with
either, explicitly, so the scale can be read, frozen or patched."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_dispatch import listening


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
        if not (listening(self.hook_scale) or listening(self.hook_normalized)):
            return layer_norm(x, self.w, self.b, self.eps)
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
    (:mod:`interp_rand.model.fast`), so both compute it alike. Without hooks the
    normalisation is ``F.layer_norm``'s fused kernel (with the affine map when ``w``/``b`` are
    ``[d_model]``; member-axis weights are applied after it, broadcast);
    with either hook, the explicit steps, each hook seeing its value."""
    if hook_scale is _unhooked and hook_normalized is _unhooked:
        if w.shape == b.shape == x.shape[-1:]:  # one affine for every row: fused in the kernel
            return F.layer_norm(x, x.shape[-1:], w, b, eps)
        return F.layer_norm(x, x.shape[-1:], eps=eps) * w + b
    x = x - x.mean(-1, keepdim=True)
    scale = hook_scale((x.pow(2).mean(-1, keepdim=True) + eps).sqrt())
    return hook_normalized(x / scale * w + b)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """A :class:`LayerNorm`, or the identity when ``normalization_type`` is ``None``."""
    return LayerNorm(cfg) if cfg.normalization_type == "LN" else nn.Identity()
