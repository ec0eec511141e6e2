"""A gated linear recurrence as a block's mixer (``ModelConfig.attention="recurrent"``).

The family the paper cites for a fixed-size memory (Mamba, Griffin, linear RNNs), in Griffin's
real-gated linear recurrent unit form: a *diagonal*, *data-dependent* decay, one state channel
per ``(head, d_head)`` entry. With the mixer's three projections (:class:`~interp_rand.model.
mixer.Mixer`) of the normalised residual stream at position ``t``, ``q_t, k_t, v_t [head,
d_head]``::

    a_t = sigmoid(k_t + DECAY_OFFSET)            the decay (hook_decay), in (0, 1) per channel
    h_t = a_t * h_{t-1} + sqrt(1 - a_t**2) * v_t  the state, h_{-1} = 0 (Griffin's input scale)
    z_t = q_t * h_t                               the read-out (hook_z), then z @ W_O + b_O

So ``k`` plays the gate (how much of the state each position keeps), ``v`` the input and ``q``
the read-out: the same reader sites as attention's queries, keys and values, with the same
reach (a changed ``q_t`` changes ``z_t`` only; a changed ``k_s`` or ``v_s`` every ``z_t``,
``t >= s``, the causal mask's), so circuits, patching and attribution run on it unchanged. The
state is ``n_heads * d_head`` numbers per block, whatever the length: ``d_head = 25`` with one
head is the size of the recall model's linear-attention state (``5 x 5``). ``DECAY_OFFSET``
starts the decays near 1 (``sigmoid(3) = 0.95``, a memory of about 20 positions), as Griffin
and Mamba initialise theirs; the scan is sequential over positions (13 for recall). It is
causal by construction (``mask="causal"`` only) and unscaled (``use_attn_scale`` is not read).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_dispatch import fire
from interp_rand.model.mixer import Mixer, Plan

#: added to ``k`` before the sigmoid: the decays start near 1 (module docstring)
DECAY_OFFSET = 3.0


def decay(k: Tensor) -> Tensor:
    """``a = sigmoid(k + DECAY_OFFSET)``, the per-channel decay."""
    return torch.sigmoid(k + DECAY_OFFSET)


#: the largest derivative of the input scale's square root (Griffin's ``max_gradient``): where a
#: decay saturates at 1 in float32 (``k + DECAY_OFFSET`` above about 17), ``d sqrt(x)/dx`` is
#: infinite and ``dx/dk`` zero, and their product would make the whole gradient NaN
MAX_SQRT_GRADIENT = 1000.0


def scan(a: Tensor, v: Tensor) -> Tensor:
    """``h_t = a_t * h_{t-1} + sqrt(1 - a_t**2) * v_t`` over the position axis ``-3`` of
    ``a, v [..., pos, head, d_head]`` -> ``h`` the same shape."""
    return _Scan.apply(a, _BoundedSqrt.apply((1 - a) * (1 + a)) * v)


class _BoundedSqrt(torch.autograd.Function):
    """``sqrt(x)`` whose derivative is at most :data:`MAX_SQRT_GRADIENT` (Griffin's
    ``SqrtBoundDerivative``); elsewhere its backward is autograd's ``grad / (2 sqrt(x))`` to
    the bit (``sqrt(4x) = 2 sqrt(x)`` exactly in floating point)."""

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.sqrt(x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad / torch.sqrt(torch.clamp(4 * x, min=MAX_SQRT_GRADIENT ** -2))


class _Scan(torch.autograd.Function):
    """``h_t = a_t * h_{t-1} + u_t`` (``h_{-1} = 0``) along axis ``-3``, with its backward
    written out as the reverse scan: autograd through a loop of ``select`` s would zero-fill a
    full-size gradient per position (the recall model's training step ~3x slower)."""

    @staticmethod
    def forward(a: Tensor, u: Tensor) -> Tensor:
        h = torch.empty_like(u)
        state = u.select(-3, 0)
        h.select(-3, 0).copy_(state)
        for t in range(1, u.shape[-3]):
            state = torch.addcmul(u.select(-3, t), a.select(-3, t), state)
            h.select(-3, t).copy_(state)
        return h

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0], output)

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, h = ctx.saved_tensors
        g = grad.clone()  # dL/dh_t, accumulated from the later positions: dL/du_t
        grad_a = torch.zeros_like(a)
        for t in range(g.shape[-3] - 1, 0, -1):
            g_t = g.select(-3, t)
            torch.mul(g_t, h.select(-3, t - 1), out=grad_a.select(-3, t))
            g.select(-3, t - 1).addcmul_(g_t, a.select(-3, t))
        return grad_a, g


class GatedRecurrence(Mixer):
    """The gated linear recurrence (module docstring); ``hook_decay [batch, pos, head,
    d_head]`` is its one inner hook."""

    INNER_HOOKS = ("hook_decay",)

    @classmethod
    def check_config(cls, cfg: ModelConfig) -> None:
        if cfg.mask != "causal":
            raise ValueError(
                f"ModelConfig.mask={cfg.mask!r} cannot be used with attention={cfg.attention!r}: a "
                "recurrence reads the positions in order, which needs mask 'causal'"
            )

    def mix(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        return q * scan(fire(self.hook_decay, decay(k)), v)

    def mix_at(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, queries: Tensor,
               per_example: bool, heads: Tensor | None = None) -> Tensor:
        return q * scan(decay(k), v).index_select(-3, queries)

    @classmethod
    def fast_plan(cls, cfg: ModelConfig, allowed: Tensor | None, index: Tensor | None, batch: int,
                  n_pos: int) -> Plan:
        # q may be the last positions only (a decoding cache's new ones over every key so far)
        return lambda q, k, v, scale: q * scan(decay(k), v)[:, k.shape[1] - q.shape[1]:]


__all__ = ["DECAY_OFFSET", "GatedRecurrence", "MAX_SQRT_GRADIENT", "decay", "scan"]
