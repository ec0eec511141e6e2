"""Distances between distributions, one owner each, for every layer to import (the core, the
circuits analyses and the probes alike)."""

from __future__ import annotations

from torch import Tensor


def total_variation(p: Tensor, q: Tensor | float) -> Tensor:
    """``[...]``: the total variation distance ``0.5 * sum |p - q|`` over the last axis.

    ``p`` and ``q`` are distributions along their last axis (answer distributions, attention
    patterns, a coverage profile); ``q`` broadcasts against ``p`` (a float: the uniform value
    ``1 / N``). Computed in the dtype of ``p - q``; a 1-D ``p`` gives a 0-dim tensor."""
    return 0.5 * (p - q).abs().sum(-1)


__all__ = ["total_variation"]
