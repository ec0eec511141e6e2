"""The MLP of a block (and the input MLP), TransformerLens names: ``W_in: [d_model, d_mlp]``,
``W_out: [d_mlp, d_model]``, ``hook_pre``/``hook_post: [batch, pos, d_mlp]``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.hook_dispatch import fire
from interp_rand.model.linear import linear

# The activation of an ``act_fn`` name (the MLPs here and the fast path, interp_rand.model.fast).
ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class MLP(nn.Module):
    """``act(x @ W_in + b_in) @ W_out + b_out``. With ``w_in=False`` there is no ``W_in`` (the
    layer before is the first linear map; ``d_mlp`` must equal ``d_model``):
    ``act(x + b_in) @ W_out + b_out``, the paper's recall input MLP."""

    def __init__(self, d_model: int, d_mlp: int, act_fn: str, w_in: bool = True):
        super().__init__()
        if not w_in and d_mlp != d_model:
            raise ValueError(f"an MLP without W_in needs d_mlp == d_model; got {d_mlp} and {d_model}")
        self.has_w_in = w_in
        if w_in:
            self.W_in = nn.Parameter(torch.empty(d_model, d_mlp))
        self.b_in = nn.Parameter(torch.zeros(d_mlp))
        self.W_out = nn.Parameter(torch.empty(d_mlp, d_model))
        self.b_out = nn.Parameter(torch.zeros(d_model))
        self.act = ACTIVATIONS[act_fn]
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def pre_activation(self, x: Tensor) -> Tensor:
        """``hook_pre`` from the input ``x: [..., d_model]``: ``x @ W_in + b_in`` (or ``x + b_in``)."""
        return linear(x, self.W_in, self.b_in) if self.has_w_in else x + self.b_in

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, pos, d_model] -> [batch, pos, d_model]``."""
        pre = fire(self.hook_pre, self.pre_activation(x))
        post = fire(self.hook_post, self.act(pre))
        return linear(post, self.W_out, self.b_out)
