"""The TransformerLens hook-name protocol, written down once.

Every hook point and weight inside a block is named ``blocks.{layer}.{name}`` (``hook_resid_pre``,
``attn.hook_z``, ``mlp.hook_pre``, ``attn.W_Q`` …); :func:`hook_name` is the one place that
format lives. Circuits, probes and the case studies build
their names with it instead of hand-formatting them, so a model that names its blocks
differently needs one change here.

    >>> hook_name(1, "attn.hook_z")
    'blocks.1.attn.hook_z'
    >>> residual_stream(2)
    ['blocks.0.hook_resid_pre', 'blocks.0.hook_resid_mid', 'blocks.0.hook_resid_post', 'blocks.1.hook_resid_mid', 'blocks.1.hook_resid_post']
"""

from __future__ import annotations

from typing import Any


def hook_name(layer: int, name: str) -> str:
    """The TL name of ``name`` (a hook point or a weight, e.g. ``"attn.hook_q"``) in block ``layer``."""
    return f"blocks.{layer}.{name}"


def residual_stream(n_layers: int) -> list[str]:
    """``blocks.0.hook_resid_pre``, then each block's ``hook_resid_mid`` and ``hook_resid_post``:
    the residual stream in forward order."""
    names = [hook_name(0, "hook_resid_pre")]
    for layer in range(n_layers):
        names += [hook_name(layer, "hook_resid_mid"), hook_name(layer, "hook_resid_post")]
    return names


def residual_hooks(model: Any) -> list[str]:
    """:func:`residual_stream` of ``model``, keeping the hook points it has (an attention-only
    block has no ``hook_resid_mid``); ours and a ``TransformerBridge`` alike."""
    return [n for n in residual_stream(int(model.cfg.n_layers)) if n in model.hook_dict]


def seed_offset(model: Any) -> int:
    """Positions a seed token takes before the task's positions in the residual stream (0 or 1;
    0 for a model without the attribute, e.g. a ``TransformerBridge``)."""
    return int(getattr(model.cfg, "seed_offset", 0) or 0)


__all__ = ["hook_name", "residual_hooks", "residual_stream", "seed_offset"]
