"""The MLP of a block (and the input MLP), TransformerLens names: ``W_in: [d_model, d_mlp]``,
``W_out: [d_mlp, d_model]``, ``hook_pre``/``hook_post: [batch, pos, d_mlp]``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

_ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class MLP(nn.Module):
    def __init__(self, d_model: int, d_mlp: int, act_fn: str):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(d_model, d_mlp))
        self.b_in = nn.Parameter(torch.zeros(d_mlp))
        self.W_out = nn.Parameter(torch.empty(d_mlp, d_model))
        self.b_out = nn.Parameter(torch.zeros(d_model))
        self.act = _ACTIVATIONS[act_fn]
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, pos, d_model] -> [batch, pos, d_model]``."""
        pre = self.hook_pre(x @ self.W_in + self.b_in)
        post = self.hook_post(self.act(pre))
        return post @ self.W_out + self.b_out
