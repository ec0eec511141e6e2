"""Learning-rate schedule: linear warm-up, then cosine annealing to a floor."""

from __future__ import annotations

import math


def warmup_cosine(step: int, *, peak: float, warmup: int, total: int, floor_ratio: float) -> float:
    """The learning rate for optimiser step ``step`` (0-based).

    Rises linearly from ``peak / warmup`` to ``peak`` over ``warmup`` steps, then follows a
    half cosine down to ``peak * floor_ratio`` at ``total``.

    >>> warmup_cosine(0, peak=1.0, warmup=10, total=100, floor_ratio=0.1)
    0.1
    >>> round(warmup_cosine(100, peak=1.0, warmup=10, total=100, floor_ratio=0.1), 6)
    0.1
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    floor = peak * floor_ratio
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
