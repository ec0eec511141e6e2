"""Hooks that capture activations: the one owner of the "store this hook's value" closure.

Every analysis that keeps hook values (circuits' writers, attribution, patching and randomness
analyses; probes' attribution) takes its hooks from :func:`capture_into`, so a change to how
values are kept (detached, cloned, keyed by name) is made once. The hooks speak the
TransformerLens protocol (``hook(value, hook)``), so they work as forward or backward hooks of
``model.hooks`` / ``run_with_hooks`` on our model and on a ``TransformerBridge`` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torch import Tensor

Hook = Callable[[Tensor, Any], None]


def capture_into(
    sink: dict[str, Tensor], names: Iterable[str], *, detach: bool = True, clone: bool = False
) -> list[tuple[str, Hook]]:
    """``[(name, hook)]`` hooks, one per hook name in ``names``, that store the value passing
    that hook point in ``sink[name]`` (the last pass wins).

    Keyed by the name asked for, not by ``hook.name``: a bridge reports its aliased module's
    name there. ``detach`` (default) keeps the value out of the autograd graph; ``clone``
    copies it, so a later in-place edit of the activation does not reach ``sink``. A hook
    returns ``None``: the model's activation passes unchanged.
    """

    def make(name: str) -> Hook:
        def hook(value: Tensor, hook: Any) -> None:
            kept = value.detach() if detach else value
            sink[name] = kept.clone() if clone else kept

        return hook

    return [(name, make(name)) for name in names]


__all__ = ["Hook", "capture_into"]
