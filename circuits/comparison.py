"""Compare two circuits of the same architecture (e.g. a deterministic and a randomized run of
one task): align nodes and edges by identity, report shared and unique edges with their scores,
Jaccard overlaps, the rank correlation of shared edge scores and **cross-faithfulness** (A's
circuit measured on B's model and data, and B's on A's). Drawing: :mod:`circuits.comparison_draw`.

    >>> result = compare_circuits(circuit_a, circuit_b, models=(model_a, model_b),
    ...                           data=((clean_a, corrupted_a), (clean_b, corrupted_b)))
    >>> result.jaccard, result.cross["a_on_b"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.ablation import Ablation
from circuits.circuit import Circuit
from circuits.compare import spearman
from circuits.faithfulness import faithfulness
from circuits.nodes import Edge

# circuit X measured on model/data Y, in this order in `cross`
CROSS_KEYS = ("a_on_a", "b_on_a", "b_on_b", "a_on_b")


@dataclass(frozen=True)
class CircuitComparison:
    """Attributes:
    shared: ``(edge, score in A, score in B)`` for edges in both circuits, by ``-|A| - |B|``.
    only_a, only_b: ``(edge, score)`` for edges in one circuit only, by ``-|score|``.
    jaccard: ``|A ∩ B| / |A ∪ B|`` over edges; ``node_jaccard`` the same over nodes.
    spearman: rank correlation of the shared edges' scores (None for fewer than 3 shared
        edges or constant scores).
    cross: recovered share of circuit X on model/data Y for the keys of :data:`CROSS_KEYS`
        (empty when no models were given).
    """

    shared: tuple[tuple[Edge, float, float], ...]
    only_a: tuple[tuple[Edge, float], ...]
    only_b: tuple[tuple[Edge, float], ...]
    jaccard: float
    node_jaccard: float
    spearman: float | None
    cross: dict[str, float] = field(default_factory=dict)
    labels: tuple[str, str] = ("A", "B")

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "n_shared": len(self.shared),
            "n_only_a": len(self.only_a),
            "n_only_b": len(self.only_b),
            "jaccard": self.jaccard,
            "node_jaccard": self.node_jaccard,
            "spearman_shared": self.spearman,
            "cross_faithfulness": dict(self.cross),
            "shared": [{"edge": e.name, "score_a": a, "score_b": b} for e, a, b in self.shared],
            "only_a": [{"edge": e.name, "score": s} for e, s in self.only_a],
            "only_b": [{"edge": e.name, "score": s} for e, s in self.only_b],
        }


def check_comparable(a: Circuit, b: Circuit) -> None:
    """Raise naming what differs when two circuits cannot be aligned edge by edge."""
    mismatch = a.arch.mismatch(b.arch)
    if mismatch:
        raise ValueError("the circuits belong to different architectures (A vs B): " + "; ".join(mismatch))
    for key in ("task", "by_position", "n_positions"):
        va, vb = a.settings.get(key), b.settings.get(key)
        if va is not None and vb is not None and va != vb:
            raise ValueError(f"the circuits differ in {key}: {va!r} vs {vb!r}")


def _jaccard(x: set, y: set) -> float:
    union = x | y
    return len(x & y) / len(union) if union else 1.0


def _rank_correlation(shared: list[tuple[Edge, float, float]]) -> float | None:
    if len(shared) < 3:
        return None
    value = spearman(torch.tensor([s[1] for s in shared]), torch.tensor([s[2] for s in shared]))
    return None if math.isnan(value) else value


def compare_circuits(
    a: Circuit,
    b: Circuit,
    *,
    models: tuple[Any, Any] | None = None,
    data: tuple[tuple[Any, Any], tuple[Any, Any]] | None = None,
    metric: str = "logprob",
    ablation: Ablation | None = None,
    labels: tuple[str, str] = ("A", "B"),
) -> CircuitComparison:
    """Align ``a`` and ``b`` by edge identity; with ``models=(model_a, model_b)`` and
    ``data=((clean_a, corrupted_a), (clean_b, corrupted_b))`` also measure each circuit on
    both models (each on its own data), all with the same ``metric`` and ``ablation``."""
    check_comparable(a, b)
    common = a.edges.keys() & b.edges.keys()
    shared = sorted(((e, a.edges[e], b.edges[e]) for e in common), key=lambda s: (-abs(s[1]) - abs(s[2]), s[0]))
    only_a = sorted(((e, s) for e, s in a.edges.items() if e not in common), key=lambda s: (-abs(s[1]), s[0]))
    only_b = sorted(((e, s) for e, s in b.edges.items() if e not in common), key=lambda s: (-abs(s[1]), s[0]))
    cross: dict[str, float] = {}
    if models is not None:
        if data is None:
            raise ValueError("cross-faithfulness needs data=((clean_a, corrupted_a), (clean_b, corrupted_b))")
        circuits, runs = {"a": a, "b": b}, {"a": (models[0], data[0]), "b": (models[1], data[1])}
        for key in CROSS_KEYS:
            model, (clean, corrupted) = runs[key[-1]]
            cross[key] = faithfulness(model, circuits[key[0]], clean, corrupted, metric=metric,
                                      ablation=ablation).recovered
    return CircuitComparison(
        tuple(shared), tuple(only_a), tuple(only_b),
        _jaccard(set(a.edges), set(b.edges)), _jaccard(a.nodes, b.nodes),
        _rank_correlation(shared), cross, labels,
    )


__all__ = ["CROSS_KEYS", "CircuitComparison", "check_comparable", "compare_circuits"]
