"""Hook points that cost nothing when nobody listens: the one rule for "is this hook point live".

A ``HookPoint`` is the identity; calling it still goes through ``nn.Module.__call__``. The model
calls :func:`fire` instead, which calls the hook point only when :func:`listening` says a hook
could act there (a forward, forward-pre, backward or backward-pre hook on it, a replaced
``forward``, or a global module hook), so ``run_with_cache``, ``run_with_hooks``, ``hooks()``
and TransformerLens's patching see every hook point exactly as before. The attention and the
LayerNorm also ask :func:`listening` to choose a cheaper exact computation (SDPA,
``F.layer_norm``) when the hook points only the explicit computation has are silent.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.modules import module as _module


def _global_hooks() -> bool:
    return bool(_module._global_forward_hooks or _module._global_forward_pre_hooks
                or _module._global_backward_hooks or _module._global_backward_pre_hooks)


def listening(point: nn.Module) -> bool:
    """Could calling ``point`` do anything but return its input? True when it carries a
    forward, forward-pre, backward or backward-pre hook, has its ``forward`` replaced on the
    instance, or any global module hook is registered."""
    return bool(point._forward_hooks or point._forward_pre_hooks or point._backward_hooks
                or point._backward_pre_hooks or "forward" in point.__dict__ or _global_hooks())


def fire(point: nn.Module, x: Tensor) -> Tensor:
    """``point(x)`` when :func:`listening`, else ``x`` itself (what an unhooked HookPoint
    returns), without the module call."""
    return point(x) if listening(point) else x


__all__ = ["fire", "listening"]
