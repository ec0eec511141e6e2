"""The sequence mixer of a block: the one owner of its maths.

A :class:`Mixer` is what a block runs between its first LayerNorm and the residual stream, in
three steps, every one a method that the rest of the toolkit calls instead of re-implementing it:

1. **project** (:meth:`Mixer.project`, :meth:`Mixer.project_heads`): per-head projections of the
   normalised residual stream, ``q, k, v [..., pos, head, d_head]`` (for attention the queries,
   keys and values; for another mixer their analogue). These are the **reader sites**
   (:attr:`READER_HOOKS`: ``hook_q/k/v``, one reader per head each): circuits rebuild them from
   a per-head residual input and write them back there.
2. **mix** (:meth:`Mixer.mix`): ``q, k, v -> z [..., pos, head, d_head]`` along positions,
   firing the mixer's own inner hooks (:attr:`INNER_HOOKS`) when something listens; and two
   hook-free forms of the same function: :meth:`Mixer.mix_at`, *these heads at these query
   positions* (incremental patching recomputes a changed head's output only where it changes),
   :meth:`Mixer.fast_plan`, the fast path's whole-model plan
   (:class:`~interp_rand.model.fast.FastForward`), and optionally
   :meth:`Mixer.fast_table_plan`, its first block over a table of distinct rows.
3. **write** (:meth:`Mixer.write`, :meth:`Mixer.head_writes`): ``z @ W_O + b_O``, the **writer
   site** (:attr:`WRITER_HOOK`: ``hook_z``, one residual write per head).

Every mixer has TransformerLens's weight names and shapes (``W_Q/W_K/W_V: [n_heads, d_model,
d_head]``, ``W_O: [n_heads, d_head, d_model]``, biases ``b_Q/b_K/b_V/b_O``, zero buffers without
``attn_bias``) and hooks (``hook_q/k/v/z``, ``hook_result`` with ``use_attn_result``), so the
graph of a circuit (heads with q/k/v inputs), patching, attribution and drawing need no case per
mixer. What a mixer offers beyond these steps it declares (:attr:`Mixer.CAPABILITIES`: an
attention pattern and the scores it is made from, each carried by an inner hook) and the configs
it accepts it checks (:meth:`Mixer.check_config`); readers ask :func:`capability_hook`, never a
kind's name. A mixer kind is one class (:mod:`~interp_rand.model.attention`,
:mod:`~interp_rand.model.recurrence`) and one registration in :mod:`~interp_rand.model.block`
(into :data:`~interp_rand.model.config.MIXERS`, which ``ModelConfig.attention`` is checked
against).
"""

from __future__ import annotations

from typing import Callable

import einops
import torch
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_dispatch import fire
from interp_rand.model.hook_names import hook_name
from interp_rand.model.linear import linear

#: What a mixer may offer beyond the protocol, each carried by one of its inner hooks
#: (:attr:`Mixer.CAPABILITIES`): ``"pattern"``, ``[batch, head, query, key]``, each query's
#: weight on each key (the circuit drawing splits key/value edges by it; attention probes read
#: it); ``"scores"``, the bilinear ``q . k / scale`` (masked) the pattern is made from
#: (query/key attribution splits them into upstream parts).
CAPABILITY_NAMES = ("pattern", "scores")
#: attention's capabilities under TransformerLens's hook names: our :class:`~interp_rand.model.
#: attention.Attention` declares them, and a TransformerLens bridge's attention has them
ATTENTION_CAPABILITIES = {"pattern": "hook_pattern", "scores": "hook_attn_scores"}

#: ``plan(q, k, v, scale) -> z`` (``[batch, pos, head, d_head]`` each; ``q`` may be the last
#: positions only, over a decoding cache's keys), or, gathered, ``plan(qkv, scale) -> z``.
Plan = Callable[..., Tensor]


class Mixer(nn.Module):
    """A block's sequence mixer (module docstring). Subclasses define :meth:`mix`,
    :meth:`mix_at` and :meth:`fast_plan`; the projections and the write are shared."""

    #: the reader sites: one reader per head each, the hook its input is written back at
    READER_HOOKS = ("hook_q", "hook_k", "hook_v")
    #: the writer site: one residual write per head (times ``W_O``)
    WRITER_HOOK = "hook_z"
    #: the mixer's own hooks inside :meth:`mix`
    INNER_HOOKS: tuple[str, ...] = ()
    #: its capabilities (:data:`CAPABILITY_NAMES`), each to the inner hook that carries it; a
    #: mixer without a pattern (the recurrence) has none, and a reader of one skips it or refuses
    CAPABILITIES: dict[str, str] = {}

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
        self.hook_z = HookPoint()
        self.hook_result = HookPoint()
        for name in self.INNER_HOOKS:
            setattr(self, name, HookPoint())

    @classmethod
    def check_config(cls, cfg: ModelConfig) -> None:
        """Raise a ``ValueError`` naming the field for a config this mixer cannot run (say, a mask
        it does not support); :class:`~interp_rand.model.config.ModelConfig` calls it."""

    # ------------------------------------------------------------------ 1. project
    def fused_qkv(self) -> tuple[Tensor, Tensor | None]:
        """The three projections as one matrix ``[d_model, 3 * n_heads * d_head]`` (q, k, v
        blocks, head-major inside each) and its bias (``None`` without attention biases)."""
        w_qkv = einops.rearrange([self.W_Q, self.W_K, self.W_V], "three h d e -> d (three h e)")
        b_qkv = einops.rearrange([self.b_Q, self.b_K, self.b_V], "three h e -> (three h e)") if self.cfg.attn_bias else None
        return w_qkv, b_qkv

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``x [batch, pos, d_model]`` (normalised) -> ``q, k, v [batch, pos, head, d_head]``,
        hook-free: one matmul (plain ``mm``, much faster on CPU than a 4-d einsum)."""
        batch, n_pos, _ = x.shape
        w_qkv, b_qkv = self.fused_qkv()
        # addmm fuses the bias add into the matmul; :func:`linear` takes the faster
        # orientation for the weight gradient
        qkv = linear(x, w_qkv, b_qkv)
        # unbind: three views whose backward stacks the three gradients once
        q, k, v = qkv.view(batch, n_pos, 3, self.cfg.n_heads, self.cfg.d_head).unbind(2)
        return q, k, v

    def project_heads(self, x: Tensor, which: str | Tensor, heads: Tensor | None = None) -> Tensor:
        """One reader site rebuilt from per-head inputs (already normalised).

        ``which``: ``"q"``, ``"k"`` or ``"v"`` with ``x [..., nh, d_model]`` -> ``[..., nh,
        d_head]``; or a ``[3]``-long selection with ``x [..., 3, nh, d_model]`` (every site) ->
        ``[..., 3, nh, d_head]``. ``heads``: the heads (``nh`` of them; ``None``: all)."""
        if isinstance(which, str):
            t = which.upper()
            weight, bias = getattr(self, f"W_{t}"), getattr(self, f"b_{t}")
            if heads is not None:
                weight, bias = weight[heads], bias[heads]
            return einops.einsum(x, weight, "... h d, h d e -> ... h e") + bias
        weights = torch.stack([self.W_Q, self.W_K, self.W_V])[which]
        biases = torch.stack([self.b_Q, self.b_K, self.b_V])[which]
        if heads is not None:
            weights, biases = weights[:, heads], biases[:, heads]
        return einops.einsum(x, weights, "... t h d, t h d e -> ... t h e") + biases

    def project_shared(self, x: Tensor, heads: Tensor) -> Tensor:
        """Every site of ``heads`` from one shared input ``x [..., d_model]`` (normalised) in one
        matmul -> ``[..., 3, nh, d_head]``."""
        weights = torch.stack([self.W_Q, self.W_K, self.W_V])[:, heads]  # [3, nh, d, e]
        biases = torch.stack([self.b_Q, self.b_K, self.b_V])[:, heads]  # [3, nh, e]
        w = einops.rearrange(weights, "t h d e -> d (t h e)")
        return torch.nn.functional.linear(x, w.T).unflatten(-1, (3, len(heads), -1)) + biases

    # ------------------------------------------------------------------ 2. mix
    def mix(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
        """``q, k, v [batch, pos, head, d_head] -> z`` (same shape), firing :attr:`INNER_HOOKS`.
        ``allowed``: the model's mask (``None``, ``[pos, pos]`` or ``[batch, pos, pos]`` bool)."""
        raise NotImplementedError

    def mix_at(self, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, queries: Tensor,
               per_example: bool, heads: Tensor | None = None) -> Tensor:
        """*These heads at these positions*: ``z`` at the query positions ``queries [nq]`` only,
        hook-free. ``q [..., nq, nh, e]`` (those queries' projections), ``k, v [..., P, nh, e]``
        (every position's), ``allowed`` the mask's rows of ``queries`` broadcastable to ``[...,
        nh, nq, P]`` (or ``None``); ``per_example``: the mask is per example; ``heads [nh]``:
        which heads they are (``None``: all, in order). -> ``[..., nq, nh, e]``, the same
        numbers as :meth:`mix` there."""
        raise NotImplementedError

    @classmethod
    def fast_plan(cls, cfg: ModelConfig, allowed: Tensor | None, index: Tensor | None, batch: int,
                  n_pos: int) -> Plan:
        """The fast path's hook-free mix for every block of a forward, prepared once (module
        :mod:`~interp_rand.model.fast`): ``plan(q, k, v, scale) -> z``."""
        raise NotImplementedError

    @classmethod
    def fast_table_plan(cls, cfg: ModelConfig, index: Tensor | None, distinct: Tensor, n_pos: int) -> Plan | None:
        """The first block's hook-free mix when the batch's rows are, up to that mix, copies of a
        few distinct rows (the fast path's *table*: one input broadcast over the batch, each row
        with one of ``S`` seeds): ``distinct [batch]`` long, the table row that batch row ``b``
        copies. ``plan(qkv, scale) -> z``: ``qkv [S * pos, 3 h e]`` the table's fused
        projections, ``z [batch * pos, h e]`` every batch row's, the same numbers as
        :meth:`fast_plan`'s plan on the copied rows. ``None`` (the default): the mixer has no
        such form, and the fast path copies the table's rows out before the first block."""
        return None

    @classmethod
    def decode_one(cls, cfg: ModelConfig, q: Tensor, keys: Tensor, values: Tensor, scale: float) -> Tensor | None:
        """One new query over a decoding cache's ``keys, values [t, d_head, batch, head]``
        (``q [batch, 1, head, d_head]``) -> ``z`` the same shape, or ``None``: use the plan."""
        return None

    # ------------------------------------------------------------------ 3. write
    def fused_o(self) -> Tensor:
        """``W_O`` as one matrix ``[(head d_head), d_model]``."""
        return einops.rearrange(self.W_O, "h e d -> (h e) d")

    def head_writes(self, z: Tensor, heads: Tensor | None = None) -> Tensor:
        """``z [..., nh, d_head]`` -> each head's residual write ``[..., nh, d_model]`` (no ``b_O``)."""
        w_o = self.W_O if heads is None else self.W_O[heads]
        return einops.einsum(z, w_o, "... h e, h e d -> ... h d")

    def heads_write(self, z: Tensor, heads: Tensor) -> Tensor:
        """``z [..., nh, d_head]`` of ``heads`` -> the sum of their residual writes ``[...,
        d_model]`` in one matmul (no ``b_O``)."""
        return z.flatten(-2) @ self.W_O[heads].flatten(0, 1)

    def write(self, z: Tensor) -> Tensor:
        """``z [batch, pos, head, d_head]`` -> ``[batch, pos, d_model]``: ``z @ W_O + b_O``
        (``hook_result`` fires per head with ``use_attn_result``)."""
        batch, n_pos = z.shape[:2]
        if self.cfg.use_attn_result:
            result = fire(self.hook_result, self.head_writes(z))
            return result.sum(dim=2) + self.b_O
        # [batch, pos, (head d_head)] @ [(head d_head), d_model]
        return linear(z.reshape(batch, n_pos, -1), self.fused_o(), self.b_O if self.cfg.attn_bias else None)

    # ------------------------------------------------------------------ the hooked forward
    def forward(self, x: Tensor, allowed: Tensor | None) -> Tensor:
        """``x: [batch, pos, d_model]``; ``allowed``: bool ``[pos, pos]`` or ``[batch, pos,
        pos]`` (true where query may read key), ``None`` for every key. -> ``[batch, pos,
        d_model]``."""
        q, k, v = self.project(x)
        q = fire(self.hook_q, q)  # [batch, pos, head, d_head]
        k = fire(self.hook_k, k)
        v = fire(self.hook_v, v)
        return self.write(fire(self.hook_z, self.mix(q, k, v, allowed)))


def capability_hook(model: nn.Module, layer: int, capability: str) -> str | None:
    """The full hook name carrying ``capability`` (:data:`CAPABILITY_NAMES`) of block ``layer``'s
    mixer, or ``None`` where the mixer has no such thing (a recurrence has no pattern). A mixer
    that is not a :class:`Mixer` (a TransformerLens bridge's attention) has TransformerLens's
    ``hook_pattern`` / ``hook_attn_scores`` where its model's ``hook_dict`` holds them."""
    if capability not in CAPABILITY_NAMES:
        raise ValueError(f"unknown mixer capability {capability!r}; capabilities are {CAPABILITY_NAMES}")
    mixer = model.blocks[layer].attn
    hooks = mixer.CAPABILITIES if isinstance(mixer, Mixer) else ATTENTION_CAPABILITIES
    if capability not in hooks:
        return None
    name = hook_name(layer, "attn." + hooks[capability])
    return name if name in model.hook_dict else None


__all__ = ["ATTENTION_CAPABILITIES", "CAPABILITY_NAMES", "Mixer", "Plan", "capability_hook"]
