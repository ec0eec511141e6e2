"""Faithfulness as a result object: run the model with every edge outside the circuit ablated.

``recovered = (m_circuit − m_empty) / (m_full − m_empty)``: the share of the gap between the
full model (every edge kept; exactly the model's own outputs) and the empty circuit (every edge
ablated; for ``resample`` exactly the corrupted run) that the circuit recovers. Also: the curve
of recovered share against the number of edges kept (top-k by |score|), and the spread of the
recovered share over bootstrap resamples of the data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import Ablation
from circuits.graph.circuit import Circuit
from circuits.graph.architecture import architecture, run_model
from circuits.methods.discovery import patch_data
from circuits.interventions.edge_patching import run_with_edges
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import Metric, evaluate_metric, get_metric
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select
from interp_rand.progress import bar


@dataclass(frozen=True)
class Faithfulness:
    """Attributes:
    recovered: share of the full–empty metric gap the circuit recovers.
    full_metric, empty_metric, circuit_metric: the three metric values.
    n_edges, total_edges: circuit size and full-graph size.
    curve: ``((k, recovered), ...)`` for top-k circuits (empty when no scores were given).
    spread: recovered share on each bootstrap resample of the data.
    """

    recovered: float
    full_metric: float
    empty_metric: float
    circuit_metric: float
    n_edges: int
    total_edges: int
    curve: tuple[tuple[int, float], ...] = ()
    spread: tuple[float, ...] = ()

    @property
    def spread_std(self) -> float:
        return float(torch.tensor(self.spread).std()) if len(self.spread) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "spread_std": self.spread_std}


# Below this clean-vs-corrupted difference of the metric a model's circuit is noise.
TINY_GAP = 1e-2


def behaviour_gap(model: Any, clean: Any, corrupted: Any, metric: str | Metric = "logprob") -> float:
    """The metric on the clean run minus on the corrupted run (both against the clean answers):
    how much the corruption moves the model, the denominator of every faithfulness share (with
    ``resample`` ablation it is :class:`Faithfulness`'s ``full_metric - empty_metric``)."""
    fn = get_metric(metric)
    with torch.no_grad():
        value = fn(run_model(model, clean), clean)
        return float(value - fn(run_model(model, corrupted), clean))


@dataclass(frozen=True)
class ShareMeter:
    """Shares of the full − empty metric gap: the one owner of "run with these edges kept, the
    rest ablated by ``replacement``, and compare with the full model and the empty circuit"
    (faithfulness, MIB's integrals and the claim cards all measure through it).

    ``share(keep) = (m(keep) − m(∅)) / (m(M) − m(∅))``; the sufficiency of a circuit is the
    share of its keep mask, its necessity the share of the full graph without it
    (:meth:`necessity`)."""

    model: Any
    graph: ModelGraph
    batch: Any
    replacement: Tensor
    metric: Metric
    full: float
    empty: float

    @classmethod
    def of(cls, model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, metric: Metric,
           require_gap: bool = True) -> ShareMeter:
        """Measure ``m(M)`` and ``m(∅)``; refuse a zero gap (the share is undefined) unless
        ``require_gap`` is false (a meter used for its metric values and effects only)."""
        def m(keep: Tensor) -> float:
            return float(evaluate_metric(metric, run_with_edges(model, graph, batch, keep, replacement), batch))

        full, empty = m(graph.mask), m(torch.zeros_like(graph.mask))
        if require_gap and full == empty:
            raise ValueError("the full model and the empty circuit give the same metric: the recovered share is "
                             "undefined (choose pairs or an ablation under which the model's behaviour changes)")
        return cls(model, graph, batch, replacement, metric, full, empty)

    @classmethod
    def of_pairs(cls, model: Any, graph: ModelGraph, clean: Any, corrupted: Any, ablation: Ablation, metric: Metric,
                 reference: Any = None, require_gap: bool = True) -> ShareMeter:
        """The meter of ``clean`` with ablated edges carrying what ``ablation`` takes from
        ``corrupted`` (or ``reference`` for mean ablation)."""
        replacement = patch_data(model, graph, clean, corrupted, ablation, reference).replacement
        return cls.of(model, graph, clean, replacement, metric, require_gap)

    def logits(self, keep: Tensor) -> Tensor:
        """The logits of the batch with the edges outside ``keep`` ablated."""
        return run_with_edges(self.model, self.graph, self.batch, keep, self.replacement)

    def metric_of(self, keep: Tensor) -> float:
        return float(evaluate_metric(self.metric, self.logits(keep), self.batch))

    @property
    def gap(self) -> float:
        """``m(M) − m(∅)``: the behaviour every share divides by, in the metric's units."""
        return self.full - self.empty

    def share(self, keep: Tensor) -> float:
        return (self.metric_of(keep) - self.empty) / (self.full - self.empty)

    def necessity(self, keep: Tensor) -> float:
        """The share left when the edges of ``keep`` are ablated from the full model."""
        return self.share(self.graph.mask & ~keep)


def faithfulness(
    model: Any,
    circuit: Circuit,
    clean: Any,
    corrupted: Any = None,
    *,
    metric: str | Metric = "logprob",
    ablation: Ablation | None = None,
    reference: Any = None,
    scores: EdgeScores | None = None,
    curve_sizes: list[int] | None = None,
    n_resamples: int = 0,
    seed: int = 0,
    selection: str = "top_k",
    progress: bool = False,
) -> Faithfulness:
    """Measure ``circuit`` on ``clean`` with everything outside it ablated by ``ablation``.

    Args:
        scores: edge scores for the faithfulness curve (top-k circuits for ``curve_sizes``,
            default about 12 sizes from 0 to every edge).
        n_resamples: bootstrap resamples of the examples for ``spread`` (seeded by ``seed``).
        selection: how the curve's circuits are chosen from ``scores``
            (:data:`circuits.graph.selection.SELECTION_RULES`; ``connected`` drops dangling edges).
        progress: report the curve and the resamples on stderr (:mod:`interp_rand.progress`).
    """
    mismatch = architecture(model).mismatch(circuit.arch)
    if mismatch:
        raise ValueError("the circuit is for another architecture (model vs circuit): " + "; ".join(mismatch))
    ablation = Ablation("resample") if ablation is None else ablation
    metric_fn = get_metric(metric)
    n_pos = (clean if isinstance(clean, Tensor) else clean.inputs).shape[1]
    by_position = bool(circuit.settings.get("by_position", any(e.source.position is not None for e in circuit.edges)))
    graph = ModelGraph.of(model, n_pos, by_position)
    keep = graph.keep_mask(list(circuit.edges))
    meter = ShareMeter.of_pairs(model, graph, clean, corrupted, ablation, metric_fn, reference)
    full, empty, inside = meter.full, meter.empty, meter.metric_of(keep)
    recovered = (inside - empty) / (full - empty)

    curve: list[tuple[int, float]] = []
    if scores is not None:
        if scores.graph != graph:
            raise ValueError("the scores belong to another graph than the circuit")
        n = graph.n_edges
        sizes = curve_sizes or sorted({round(n * f) for f in (0, .01, .02, .05, .1, .2, .3, .5, .7, 1)} | {len(circuit)})
        for k in bar(sizes, desc="faithfulness curve: circuit sizes", enabled=progress):
            curve.append((k, meter.share(graph.keep_mask(list(select(scores, k, selection).edges)))))

    spread: list[float] = []
    generator = torch.Generator().manual_seed(seed)
    for _ in bar(range(n_resamples), desc="faithfulness: bootstrap resamples", enabled=progress and n_resamples > 0):
        rows = torch.randint(len(clean), (len(clean),), generator=generator)
        sub_clean = clean[rows]
        sub_corrupted = None if corrupted is None else corrupted[rows]
        sub = ShareMeter.of_pairs(model, graph, sub_clean, sub_corrupted, ablation, metric_fn, reference)
        spread.append(sub.share(keep))
    return Faithfulness(recovered, full, empty, inside, len(circuit), graph.n_edges, tuple(curve), tuple(spread))


# Circuit sizes tried by `smallest_faithful_circuit` (plus every edge).
CANDIDATE_SIZES = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 50, 80, 100, 150, 200, 300, 500, 800, 1000, 1500, 2000, 3000,
                   5000)


def smallest_faithful_circuit(
    model: Any,
    scores: EdgeScores,
    clean: Any,
    corrupted: Any = None,
    *,
    metric: str | Metric = "logprob",
    ablation: Ablation | None = None,
    target: float = 0.8,
    reference: Any = None,
    selection: str = "connected",
    progress: bool = False,
) -> tuple[Circuit, tuple[tuple[int, float], ...]]:
    """The smallest top-k circuit of ``scores`` that recovers the model's behaviour: the least
    ``k`` (from :data:`CANDIDATE_SIZES` and every edge) whose recovered share of the full vs.
    empty gap, and that of every larger ``k`` tried, lies within ``1 ± (1 - target)``. The
    second value is the faithfulness curve the choice was read from (``(k, recovered)``).

    Requiring every larger size to stay within the band skips a lucky small circuit before a
    dip; when the full-vs-empty gap is tiny the curve is noise and the answer is every edge
    that scores non-zero (or all of them). ``selection`` chooses each size's circuit
    (default ``connected``: the top-k edges without those on no input -> logits path; ``top_k``
    is the rule before dangling edges were dropped)."""
    if not 0 < target <= 1:
        raise ValueError(f"target={target!r} must lie in (0, 1]")
    n = scores.graph.n_edges
    sizes = sorted({k for k in CANDIDATE_SIZES if k < n} | {n})
    curve = faithfulness(model, scores.circuit(top_k=n), clean, corrupted, metric=metric, ablation=ablation,
                         reference=reference, scores=scores, curve_sizes=sizes, selection=selection,
                         progress=progress).curve
    band = 1 - target
    chosen = n
    for k, recovered in reversed(curve):
        if abs(recovered - 1) > band:
            break
        chosen = k
    circuit = select(scores, chosen, selection)
    return replace(circuit, settings={**circuit.settings, "size_rule": "smallest faithful", "target": target}), curve


__all__ = ["CANDIDATE_SIZES", "TINY_GAP", "Faithfulness", "behaviour_gap", "faithfulness", "smallest_faithful_circuit"]
