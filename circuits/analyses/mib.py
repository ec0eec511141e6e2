"""MIB's faithfulness integrals (Mueller et al., *MIB: a Mechanistic Interpretability
Benchmark*, ICML 2025), for sufficiency and for necessity, over a sweep of circuit sizes.

For a circuit ``C`` of the model ``M`` and a metric ``m``, with ``∅`` the empty circuit (every
edge ablated):

- **sufficiency** ``f(C) = (m(C) − m(∅)) / (m(M) − m(∅))``: keep ``C``, ablate every other
  edge. 1 = the circuit alone does what the model does.
- **necessity** ``g(C) = (m(M ∖ C) − m(∅)) / (m(M) − m(∅))``: ablate ``C`` from the full
  model. 0 = without the circuit the model does no better than with nothing.

Both are measured at circuit sizes of :data:`MIB_FRACTIONS` of the graph's edges (0.1 % to
100 %, ``k = floor(fraction · n_edges)`` as MIB does), and integrated by the trapezoid rule over
the fraction (linear axis, MIB's default):

- ``cpr`` = area under ``f`` (higher is better; at most 0.999 on these sizes for ``f ≤ 1``);
- ``cmd`` = area under ``|1 − f|`` (lower is better: the circuits are close to the model at
  every size);
- ``necessity_cpr`` = area under ``g`` and ``necessity_cmd`` = area under ``|g|`` (lower is
  better: removing the top edges removes the behaviour).

:func:`faithfulness_integrals` scores one set of edge scores; :func:`integrals_table` runs every
discovery method under every ablation kind and scores each, in one call.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from circuits.graph.model_graph import ModelGraph
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select
from circuits.interventions.ablation import Ablation
from circuits.analyses.faithfulness import ShareMeter
from circuits.interventions.metrics import Metric, get_metric
from circuits.methods.discovery import discover
from interp_rand.progress import bar

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def trapezoid_area(xs: list[float] | tuple[float, ...], ys: list[float] | tuple[float, ...]) -> float:
    """The trapezoid-rule area under ``ys`` over ``xs`` (``xs`` increasing)."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    return float(sum((x2 - x1) * (y1 + y2) / 2 for x1, x2, y1, y2 in zip(xs, xs[1:], ys, ys[1:])))


@dataclass(frozen=True)
class FaithfulnessIntegrals:
    """Attributes:
    fractions, sizes: the circuit sizes, as fractions of the edges and as edge counts.
    sufficiency, necessity: ``f`` and ``g`` at each size (see the module docstring).
    cpr, cmd, necessity_cpr, necessity_cmd: their integrals over ``fractions``.
    full_metric, empty_metric: ``m(M)`` and ``m(∅)``.
    n_dropped: dangling edges the selection rule dropped at each size.
    settings: method, metric, ablation and selection rule the scores and circuits came from.
    seconds: wall time of scoring (discovery) and of the sweep, when measured by
    :func:`integrals_table`.
    """

    fractions: tuple[float, ...]
    sizes: tuple[int, ...]
    sufficiency: tuple[float, ...]
    necessity: tuple[float, ...]
    cpr: float
    cmd: float
    necessity_cpr: float
    necessity_cmd: float
    full_metric: float
    empty_metric: float
    n_dropped: tuple[int, ...]
    settings: dict[str, Any]
    seconds: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def faithfulness_integrals(
    model: Any,
    scores: EdgeScores,
    clean: Any,
    corrupted: Any = None,
    *,
    metric: str | Metric = "logprob",
    ablation: Ablation | None = None,
    selection: str = "greedy",
    fractions: tuple[float, ...] = MIB_FRACTIONS,
    reference: Any = None,
    meter: ShareMeter | None = None,
    progress: bool = False,
) -> FaithfulnessIntegrals:
    """Sufficiency and necessity of the circuits chosen from ``scores`` (by ``selection``, see
    :mod:`circuits.graph.selection`) at each size of ``fractions``, and their MIB integrals.
    ``ablation`` (default ``resample`` from ``corrupted``) is what ablated edges carry, for the
    circuits and for the empty circuit alike. ``meter``: a :class:`ShareMeter` already measured on
    these pairs (a claim card passes its own, so the full and empty runs are not repeated)."""
    if list(fractions) != sorted(fractions) or not all(0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions {fractions} must increase within (0, 1]")
    ablation = Ablation("resample") if ablation is None else ablation
    metric_fn = get_metric(metric)
    graph: ModelGraph = scores.graph
    if meter is None:
        meter = ShareMeter.of_pairs(model, graph, clean, corrupted, ablation, metric_fn, reference)
    sizes, suff, nec, dropped = [], [], [], []
    for fraction in bar(fractions, desc="faithfulness integrals: circuit sizes", enabled=progress):
        k = int(fraction * graph.n_edges)
        circuit = select(scores, k, selection)
        keep = graph.keep_mask(list(circuit.edges))
        sizes.append(k)
        dropped.append(int(circuit.settings.get("n_dropped", 0)))
        suff.append(meter.share(keep))
        nec.append(meter.necessity(keep))
    xs = list(fractions)
    settings = {**scores.settings, "selection": selection,
                "metric": metric if isinstance(metric, str) else getattr(metric, "__name__", "custom"),
                "ablation": ablation.to_dict()}
    return FaithfulnessIntegrals(
        tuple(xs), tuple(sizes), tuple(suff), tuple(nec),
        cpr=trapezoid_area(xs, suff), cmd=trapezoid_area(xs, [abs(1 - f) for f in suff]),
        necessity_cpr=trapezoid_area(xs, nec), necessity_cmd=trapezoid_area(xs, [abs(g) for g in nec]),
        full_metric=meter.full, empty_metric=meter.empty, n_dropped=tuple(dropped), settings=settings)


def integrals_table(
    model: Any,
    clean: Any,
    corrupted: Any = None,
    *,
    methods: tuple[str, ...] = ("exact", "eap", "eap-ig", "acdc"),
    ablations: tuple[str, ...] = ("resample", "mean", "zero"),
    metric: str | Metric = "logprob",
    selection: str = "greedy",
    fractions: tuple[float, ...] = MIB_FRACTIONS,
    by_position: bool = True,
    options: dict[str, dict[str, Any]] | None = None,
    progress: bool = False,
) -> list[FaithfulnessIntegrals]:
    """:func:`faithfulness_integrals` for every discovery method under every ablation kind (the
    method scores and the circuits are measured under the same ablation), with the seconds
    each took. ``options``: per-method options, e.g. ``{"eap-ig": {"steps": 5}}``."""
    rows = []
    for kind in ablations:
        ablation = Ablation(kind)
        for method in methods:
            start = time.perf_counter()
            scores = discover(model, clean, corrupted, metric=metric, method=method, ablation=ablation,
                              by_position=by_position, **(options or {}).get(method, {}))
            scored = time.perf_counter()
            row = faithfulness_integrals(model, scores, clean, corrupted, metric=metric, ablation=ablation,
                                         selection=selection, fractions=fractions, progress=progress)
            rows.append(FaithfulnessIntegrals(**{**asdict(row), "seconds": {
                "discovery": scored - start, "integrals": time.perf_counter() - scored}}))
    return rows


__all__ = ["MIB_FRACTIONS", "FaithfulnessIntegrals", "faithfulness_integrals", "integrals_table", "trapezoid_area"]
