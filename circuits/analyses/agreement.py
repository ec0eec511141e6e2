"""Compare edge scores: rank correlation and top-k agreement (method vs method, model vs model)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def average_ranks(values: Tensor) -> Tensor:
    """Ranks ``0..n-1`` with ties given their average rank (as ``scipy.stats.rankdata - 1``)."""
    order = torch.argsort(values, stable=True)
    sorted_values = values[order]
    ranks = torch.empty(len(values), dtype=torch.float64)
    start = 0
    n = len(values)
    while start < n:
        end = start
        while end + 1 < n and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2
        start = end + 1
    return ranks


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation of two score vectors (ties averaged)."""
    if a.shape != b.shape:
        raise ValueError(f"score vectors differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")
    return pearson(average_ranks(a), average_ranks(b))


def pearson(a: Tensor, b: Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1])


def top_k_overlap(a: Tensor, b: Tensor, k: int = 20) -> float:
    """Share of the ``k`` largest-``|score|`` entries of ``a`` that are also among ``b``'s."""
    top_a = set(torch.argsort(a.abs(), descending=True, stable=True)[:k].tolist())
    top_b = set(torch.argsort(b.abs(), descending=True, stable=True)[:k].tolist())
    return len(top_a & top_b) / max(1, min(k, len(a)))


@dataclass(frozen=True)
class Agreement:
    spearman: float
    pearson: float
    top_k: int
    top_k_overlap: float


def agreement(a: Tensor, b: Tensor, k: int = 20) -> Agreement:
    """Spearman of signed scores, Pearson, and top-``k`` overlap by ``|score|``."""
    return Agreement(spearman(a, b), pearson(a, b), k, top_k_overlap(a, b, k))


__all__ = ["Agreement", "agreement", "average_ranks", "pearson", "spearman", "top_k_overlap"]
