"""``x @ W + b`` whose weight gradient is computed in the faster orientation on CPU.

The weight gradient of a linear map over ``R`` rows is ``x.T @ grad``, a ``[d_in, d_out]``
product that sums over ``R``. On this toolkit's CPU (MKL) such a product with a small output
width runs up to 10x slower than its transpose ``(grad.T @ x).T`` (``R = 199,680`` rows of
width 40 to 5, the recall model's unembedding at batch 512 x 30 seeds: 162 ms against 16 ms);
``bench/throughput.py --profile`` shows it as the top op of the recall training step. The two
are the same sum (float32 rounding apart). :func:`linear` computes the weight gradient as the
product whose output has the fewer rows (``min(d_in, d_out)``); the forward and the input
gradient are the plain ``addmm``/``mm``.
"""

from __future__ import annotations

import torch
from torch import Tensor


class _Linear(torch.autograd.Function):
    generate_vmap_rule = True  # forward and backward are plain ops: vmap (grid-world populations) works

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        out = flat @ weight if bias is None else torch.addmm(bias, flat, weight)
        return out.view(*x.shape[:-1], weight.shape[1])

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        flat_grad = grad.reshape(-1, grad.shape[-1])
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (flat_grad @ weight.T).view(x.shape)
        if ctx.needs_input_grad[1]:
            flat = x.reshape(-1, x.shape[-1])
            d_in, d_out = weight.shape
            # the product with the fewer output rows: MKL sums a long axis far faster that way
            grad_w = (flat_grad.T @ flat).T if d_out < d_in else flat.T @ flat_grad
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = flat_grad.sum(0)
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight + bias``: ``x [..., d_in]``, ``weight [d_in, d_out]`` (TransformerLens's
    orientation, e.g. ``W_U``), ``bias [d_out]`` or ``None`` -> ``[..., d_out]``.

    Without gradients (``torch.no_grad``, inference) it is the forward alone: the autograd
    Function's own call costs more than a small ``addmm`` (its ``setup_context`` is inspected on
    every call), about 14% of an exact-patching reference's forwards."""
    if not torch.is_grad_enabled():
        return _Linear.forward(x, weight, bias)
    return _Linear.apply(x, weight, bias)


__all__ = ["linear"]
