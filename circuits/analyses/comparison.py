"""Compare two circuits of the same architecture (e.g. a deterministic and a randomized run of
one task): align nodes and edges by identity, report shared and unique edges with their scores,
Jaccard overlaps, the rank correlation of shared edge scores and **cross-faithfulness** (A's
circuit measured on B's model and data, and B's on A's). Drawing: :mod:`circuits.draw.comparison_figure`.

    >>> result = compare_circuits(circuit_a, circuit_b, models=(model_a, model_b),
    ...                           data=((clean_a, corrupted_a), (clean_b, corrupted_b)))
    >>> result.jaccard, result.cross["a_on_b"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.interventions.ablation import Ablation
from circuits.graph.circuit import Circuit
from circuits.analyses.agreement import spearman
from circuits.analyses.faithfulness import TINY_GAP, faithfulness
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge
from interp_rand.display import Displayed, bars_svg
from interp_rand.verdicts import Claim, exceeds, inconclusive, meets

# circuit X measured on model/data Y, in this order in `cross`
CROSS_KEYS = ("a_on_a", "b_on_a", "b_on_b", "a_on_b")


@dataclass(frozen=True, repr=False)
class CircuitComparison(Displayed):
    """Two circuits aligned (in a notebook: the overlap against random circuits' and the
    cross-faithfulness; drawn by :func:`circuits.draw.comparison_figure.comparison_figure`).

    Attributes:
    shared: ``(edge, score in A, score in B)`` for edges in both circuits, by ``-|A| - |B|``.
    only_a, only_b: ``(edge, score)`` for edges in one circuit only, by ``-|score|``.
    jaccard: ``|A ∩ B| / |A ∪ B|`` over edges; ``node_jaccard`` the same over nodes.
    spearman: rank correlation of the shared edges' scores (None for fewer than 3 shared
        edges or constant scores).
    cross: recovered share of circuit X on model/data Y for the keys of :data:`CROSS_KEYS`
        (empty when no models were given).
    random_cross: the same for random circuits of X's size on model/data Y (mean over draws;
        empty when no random circuits were asked for): the control of ``cross``.
    total_edges: edges in the full graph (the pool random circuits are drawn from).
    """

    shared: tuple[tuple[Edge, float, float], ...]
    only_a: tuple[tuple[Edge, float], ...]
    only_b: tuple[tuple[Edge, float], ...]
    jaccard: float
    node_jaccard: float
    spearman: float | None
    cross: dict[str, float] = field(default_factory=dict)
    labels: tuple[str, str] = ("A", "B")
    random_cross: dict[str, float] = field(default_factory=dict)
    total_edges: int = 0

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
            "random_cross_faithfulness": dict(self.random_cross),
            "random_jaccard": self.random_jaccard,
            "shared": [{"edge": e.name, "score_a": a, "score_b": b} for e, a, b in self.shared],
            "only_a": [{"edge": e.name, "score": s} for e, s in self.only_a],
            "only_b": [{"edge": e.name, "score": s} for e, s in self.only_b],
        }

    def headline(self) -> str:
        """One line: shared and unique edges, the Jaccard against random circuits', the
        cross-faithfulness."""
        la, lb = self.labels
        random = "" if self.random_jaccard is None else f" (random {self.random_jaccard:.3f})"
        cross = ", ".join(f"{(la, lb)['ab'.index(k[0])]} on {(la, lb)['ab'.index(k[-1])]} {v:.2f}"
                          for k, v in self.cross.items() if k[0] != k[-1])
        return (f"A = {la}, B = {lb}: {len(self.shared)} shared edges, {len(self.only_a)} only in A, "
                f"{len(self.only_b)} only in B; Jaccard {self.jaccard:.3f}{random}"
                + (f"; recovered share {cross}" if cross else ""))

    def lines(self) -> list[str]:
        """The headline, the rank correlation, then the strongest shared and unique edges."""
        rho = "n/a" if self.spearman is None else f"{self.spearman:.3f}"
        out = [self.headline(), f"node Jaccard {self.node_jaccard:.3f}; Spearman of shared scores {rho}"]
        out += [f"shared {e.name}: A {a:+.4f}, B {b:+.4f}" for e, a, b in self.shared[:8]]
        out += [f"only A {e.name}: {s:+.4f}" for e, s in self.only_a[:4]]
        out += [f"only B {e.name}: {s:+.4f}" for e, s in self.only_b[:4]]
        return out

    def small_figure(self) -> str | None:
        """Bars: the edge Jaccard against random circuits', and each cross-faithfulness
        against random circuits of that size."""
        rows = [("edge Jaccard", self.jaccard), ("random circuits' Jaccard", self.random_jaccard)]
        for key, value in self.cross.items():
            label = f"{key[0].upper()}'s circuit on {key[-1].upper()}"
            rows.append((label, value))
            if key in self.random_cross:
                rows.append((f"  random circuits on {key[-1].upper()}", self.random_cross[key]))
        return bars_svg(rows, lo=min(0.0, *(v for _, v in rows if v is not None)), hi=1.0,
                        caption="A, B: " + " vs ".join(self.labels))

    @property
    def random_jaccard(self) -> float | None:
        """The expected edge Jaccard of two random circuits of these sizes from the full graph
        (``None`` when the graph size is unknown): the control of ``jaccard``."""
        n_a, n_b, n = len(self.shared) + len(self.only_a), len(self.shared) + len(self.only_b), self.total_edges
        if n <= 0:
            return None
        both = n_a * n_b / n  # expected intersection of independent uniform draws
        union = n_a + n_b - both
        return both / union if union > 0 else 1.0


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
    n_random: int = 0,
    seed: int = 0,
) -> CircuitComparison:
    """Align ``a`` and ``b`` by edge identity; with ``models=(model_a, model_b)`` and
    ``data=((clean_a, corrupted_a), (clean_b, corrupted_b))`` also measure each circuit on
    both models (each on its own data), all with the same ``metric`` and ``ablation``, and
    ``n_random`` random circuits of each circuit's size on both (drawn with ``seed``)."""
    check_comparable(a, b)
    common = a.edges.keys() & b.edges.keys()
    shared = sorted(((e, a.edges[e], b.edges[e]) for e in common), key=lambda s: (-abs(s[1]) - abs(s[2]), s[0]))
    only_a = sorted(((e, s) for e, s in a.edges.items() if e not in common), key=lambda s: (-abs(s[1]), s[0]))
    only_b = sorted(((e, s) for e, s in b.edges.items() if e not in common), key=lambda s: (-abs(s[1]), s[0]))
    cross: dict[str, float] = {}
    random_cross: dict[str, float] = {}
    if models is not None:
        if data is None:
            raise ValueError("cross-faithfulness needs data=((clean_a, corrupted_a), (clean_b, corrupted_b))")
        circuits, runs = {"a": a, "b": b}, {"a": (models[0], data[0]), "b": (models[1], data[1])}
        for key in CROSS_KEYS:
            model, (clean, corrupted) = runs[key[-1]]
            cross[key] = faithfulness(model, circuits[key[0]], clean, corrupted, metric=metric,
                                      ablation=ablation).recovered
            if n_random:
                generator = torch.Generator().manual_seed(seed + CROSS_KEYS.index(key))
                drawn = [random_circuit(model, clean, len(circuits[key[0]]), circuits[key[0]], generator)
                         for _ in range(n_random)]
                random_cross[key] = sum(faithfulness(model, c, clean, corrupted, metric=metric,
                                                     ablation=ablation).recovered for c in drawn) / n_random
    return CircuitComparison(
        tuple(shared), tuple(only_a), tuple(only_b),
        _jaccard(set(a.edges), set(b.edges)), _jaccard(a.nodes, b.nodes),
        _rank_correlation(shared), cross, labels, random_cross, max(a.total_edges, b.total_edges),
    )


def random_circuit(model: Any, clean: Any, k: int, like: Circuit, generator: torch.Generator) -> Circuit:
    """``k`` edges drawn uniformly from ``model``'s graph on ``clean``'s positions (per position
    when ``like`` is), scored 0, with ``like``'s settings."""
    n_pos = (clean if isinstance(clean, torch.Tensor) else clean.inputs).shape[1]
    by_position = bool(like.settings.get("by_position", any(e.source.position is not None for e in like.edges)))
    graph = ModelGraph.of(model, n_pos, by_position)
    edges = graph.mask.nonzero()  # [n_edges, 3] (slot, writer, reader)
    picks = edges[torch.randperm(len(edges), generator=generator)[:k]].tolist()
    return Circuit({graph.edge(*e): 0.0 for e in picks}, graph.arch, {**like.settings, "by_position": by_position},
                   graph.n_edges)


# the shares and overlaps a comparison claim must beat its control by (and be twice it)
SHARE_MARGIN = 0.1
# a circuit "recovers" a behaviour only if it recovers at least half of it
RECOVERY_FLOOR = 0.5
OVERLAP_MARGIN = 0.1
# a rank correlation that counts as "ranking alike"
RANK_MARGIN = 0.5


def comparison_claims(result: CircuitComparison, gaps: tuple[float, float] | None = None,
                      min_gap: float = TINY_GAP) -> list[Claim]:
    """The comparison's claims with their verdicts: the circuits overlap beyond random circuits
    of their sizes; each circuit recovers each run's behaviour beyond random circuits of its
    size; the shared edges' scores rank alike. ``gaps``: how much the corruption moves each
    run's metric (:func:`~circuits.analyses.faithfulness.behaviour_gap` of each run's model on
    its data); a claim about a run whose gap is below ``min_gap`` is inconclusive."""
    la, lb = (f"A ({result.labels[0]})", f"B ({result.labels[1]})")
    claims = [exceeds(f"the circuits of {la} and {lb} share their edges (Jaccard over edges)", result.jaccard,
                      result.random_jaccard, control_label="random circuits of the same sizes",
                      margin=OVERLAP_MARGIN, unavailable="the full graph's size is unknown")]
    for key in CROSS_KEYS:
        if key not in result.cross:
            continue
        circuit, run = (la if key[0] == "a" else lb), (la if key[-1] == "a" else lb)
        claim = exceeds(f"the circuit of {circuit} recovers the behaviour of {run} (recovered share on its model "
                        "and data)",
                        result.cross[key], result.random_cross.get(key),
                        control_label="random circuits of its size", margin=SHARE_MARGIN,
                        floor=RECOVERY_FLOOR, unavailable="no random circuits measured")
        gap = None if gaps is None else gaps[0 if key[-1] == "a" else 1]
        if gap is not None and abs(gap) < min_gap:
            claim = inconclusive(claim, f"the corruption barely moves {run} ({gap:.2g}): its shares are noise")
        claims.append(claim)
    claims.append(exceeds("the shared edges' scores rank alike in both circuits (Spearman)", result.spearman, 0.0,
                          control_label="uncorrelated scores", margin=RANK_MARGIN,
                          unavailable="fewer than 3 shared edges or constant scores"))
    return claims


def seed_comparison_claims(result: CircuitComparison, gaps: tuple[float, float], min_gap: float) -> list[Claim]:
    """The claims of a randomized-vs-ERM comparison on *seed* pairs (the same inputs under two
    seeds, each model's own answers as targets), stated as the expected finding, so that HOLDS
    means the difference was found and FAILS that it was not: A's seed moves its answer beyond
    B's (behaviour gaps, metric units, :func:`interp_rand.verdicts.exceeds` with margin
    ``min_gap``); A's seed reaches its answer through its circuit (the circuit recovers A's seed
    behaviour beyond random circuits of its size); B's seed does not reach its answer (B's gap
    at most ``min_gap``: its seed circuit is noise). The two circuits' overlap and rank
    agreement stay numbers: on seed pairs nothing predicts them."""
    la, lb = (f"A ({result.labels[0]})", f"B ({result.labels[1]})")
    gap_a, gap_b = abs(gaps[0]), abs(gaps[1])
    recovers = exceeds(f"the seed of {la} reaches its answer through its circuit (recovered share of its seed "
                       "behaviour)", result.cross.get("a_on_a"), result.random_cross.get("a_on_a"),
                       control_label="random circuits of its size", margin=SHARE_MARGIN, floor=RECOVERY_FLOOR,
                       unavailable="no random circuits measured")
    if gap_a < min_gap:
        recovers = inconclusive(recovers, f"the seed barely moves {la} ({gap_a:.2g}): its shares are noise")
    return [
        exceeds(f"the seed of {la} moves its answer beyond the seed of {lb} (behaviour gap on seed pairs)", gap_a,
                gap_b, control_label=lb, margin=min_gap),
        recovers,
        meets(f"the seed of {lb} does not reach its answer (behaviour gap on seed pairs)", gap_b, min_gap,
              side="at most", control=gap_a, control_label=la, value_name="gap"),
    ]


__all__ = ["CROSS_KEYS", "CircuitComparison", "check_comparable", "compare_circuits", "comparison_claims",
           "seed_comparison_claims",
           "random_circuit"]
