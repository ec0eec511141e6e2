"""Pre-LayerNorm with TransformerLens names (``w``, ``b``, ``hook_scale``, ``hook_normalized``)."""

from __future__ import annotations

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
        x = x - x.mean(-1, keepdim=True)
        scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt())
        return self.hook_normalized(x / scale * self.w + self.b)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """A :class:`LayerNorm`, or the identity when ``normalization_type`` is ``None``."""
    return LayerNorm(cfg) if cfg.normalization_type == "LN" else nn.Identity()
