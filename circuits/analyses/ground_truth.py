"""Discovery methods scored against circuits known by construction (:mod:`circuits.analyses.planted`).

For each planted model and each method: the method's position-free edge scores
(``discover(..., by_position=False)``), their **edge AUROC** against the known edge set (how
well ``|score|`` ranks the known edges above the others: 1 = every known edge above every
other, 0.5 = chance), MIB's **CPR** and **CMD** (and the necessity CMD) of the circuits chosen
from the scores (:func:`circuits.analyses.mib.faithfulness_integrals`), and the method's
seconds.

    >>> rows = ground_truth_suite(methods=("exact", "eap"), models=("sort",))
    >>> print(format_table(rows))
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from circuits.analyses.mib import MIB_FRACTIONS, faithfulness_integrals
from circuits.analyses.planted import PlantedModel, planted_models
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge
from circuits.graph.scores import EdgeScores
from circuits.methods.discovery import discover

SUITE_METHODS = ("exact", "eap", "eap-ig", "acdc")


def edge_auroc(scores: EdgeScores, known: set[Edge] | frozenset[Edge]) -> float:
    """The probability that a known edge's ``|score|`` exceeds an other edge's (ties count one
    half): the Mann–Whitney ``U`` of the known edges over ``n_known · n_other``, from average
    ranks. ``scores`` must be position-free and ``known`` edges of its graph; both classes must
    be non-empty."""
    graph = scores.graph
    if graph.by_position:
        raise ValueError("edge_auroc needs position-free scores (discover(..., by_position=False))")
    for edge in known:
        graph.index(edge)  # raises naming an edge the graph does not have
    edges = graph.edges()
    labels = torch.tensor([e in known for e in edges])
    n_known, n_other = int(labels.sum()), int((~labels).sum())
    if n_known == 0 or n_other == 0:
        raise ValueError(f"edge AUROC needs known and other edges; got {n_known} known of {len(edges)}")
    values = scores.values().abs().double()
    order = torch.argsort(values, stable=True)
    ranks = torch.empty(len(values), dtype=torch.double)
    ranks[order] = torch.arange(1, len(values) + 1, dtype=torch.double)
    for value in torch.unique(values):  # ties: the average of their ranks
        tied = values == value
        if int(tied.sum()) > 1:
            ranks[tied] = ranks[tied].mean()
    u = float(ranks[labels].sum()) - n_known * (n_known + 1) / 2
    return u / (n_known * n_other)


def known_scores(planted: PlantedModel) -> EdgeScores:
    """Position-free scores that are 1 on the known edges and 0 elsewhere (the oracle ranking)."""
    n_pos = planted.clean.inputs.shape[1]
    graph = ModelGraph.of(planted.model, n_pos, by_position=False)
    return EdgeScores(graph, graph.keep_mask(list(planted.known)).float(), {"method": "known"})


@dataclass(frozen=True)
class GroundTruthRow:
    """One method on one planted model.

    Attributes:
        method, model: names.
        auroc: edge AUROC against the known edges (:func:`edge_auroc`).
        cpr, cmd, necessity_cmd: MIB's integrals (:mod:`circuits.analyses.mib`).
        seconds: the method's wall time (scoring only, not the integrals).
        n_edges, n_known: edges of the position-free graph, and of them known.
        known_cpr, known_cmd: the integrals of the known ranking itself (score 1 on the known
            edges, 0 elsewhere; ties in graph order), a reference for the method's: on a small
            graph MIB's smallest sizes (``floor(fraction * n_edges)``) hold fewer edges than the
            circuit, so even a perfect ranking has ``CPR < 1``. Not a bound: below the circuit's
            size the order *among* the known edges matters too, and a method that puts the
            larger effects first can do better (exact patching on ``addition``).
    """

    method: str
    model: str
    auroc: float
    cpr: float
    cmd: float
    necessity_cmd: float
    seconds: float
    n_edges: int
    n_known: int
    known_cpr: float
    known_cmd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ground_truth_suite(
    methods: tuple[str, ...] = SUITE_METHODS,
    models: tuple[str, ...] | list[PlantedModel] | None = None,
    *,
    metric: str = "logprob",
    selection: str = "greedy",
    fractions: tuple[float, ...] = MIB_FRACTIONS,
    options: dict[str, dict[str, Any]] | None = None,
    progress: bool = False,
) -> list[GroundTruthRow]:
    """Every method of ``methods`` on every planted model (names of
    :data:`~circuits.analyses.planted.PLANTED_MODELS`, or built :class:`PlantedModel`\\ s;
    default: all), with resample ablation from each model's corrupted batch. ``options``:
    per-method options, e.g. ``{"eap-ig": {"steps": 5}}``. Rows: model-major, methods in order."""
    built = planted_models(None if models is None else tuple(m for m in models if isinstance(m, str)))
    if models is not None:
        built_by_name = {p.name: p for p in built}
        built = [m if isinstance(m, PlantedModel) else built_by_name[m] for m in models]
    rows = []
    for planted in built:
        ceiling = faithfulness_integrals(planted.model, known_scores(planted), planted.clean, planted.corrupted,
                                         metric=metric, selection=selection, fractions=fractions)
        for method in methods:
            start = time.perf_counter()
            scores = discover(planted.model, planted.clean, planted.corrupted, metric=metric, method=method,
                              by_position=False, progress=progress, **(options or {}).get(method, {}))
            seconds = time.perf_counter() - start
            integrals = faithfulness_integrals(planted.model, scores, planted.clean, planted.corrupted, metric=metric,
                                               selection=selection, fractions=fractions)
            rows.append(GroundTruthRow(method, planted.name, edge_auroc(scores, planted.known), integrals.cpr,
                                       integrals.cmd, integrals.necessity_cmd, seconds, scores.graph.n_edges,
                                       len(planted.known), ceiling.cpr, ceiling.cmd))
    return rows


COLUMNS = (("auroc", "AUROC"), ("cpr", "CPR"), ("cmd", "CMD"), ("necessity_cmd", "nec. CMD"), ("seconds", "seconds"),
           ("known_cpr", "CPR known"), ("known_cmd", "CMD known"))


def _cells(row: GroundTruthRow) -> list[str]:
    return [f"{getattr(row, key):.3f}" if key != "seconds" else f"{row.seconds:.2f}" for key, _ in COLUMNS]


def format_table(rows: list[GroundTruthRow]) -> str:
    """The rows as a plain-text table (one line per model and method), then AUROC as a
    method × model grid."""
    head = ["model", "method", "edges", "known"] + [label for _, label in COLUMNS]
    body = [[r.model, r.method, str(r.n_edges), str(r.n_known)] + _cells(r) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in enumerate(zip(line, widths)))
             for line in [head] + body]
    methods = list(dict.fromkeys(r.method for r in rows))
    models = list(dict.fromkeys(r.model for r in rows))
    auroc = {(r.method, r.model): r.auroc for r in rows}
    grid_head = ["AUROC"] + models
    grid = [[m] + [f"{auroc[m, model]:.3f}" if (m, model) in auroc else "-" for model in models] for m in methods]
    gw = [max(len(x) for x in col) for col in zip(grid_head, *grid)]
    lines += [""] + ["  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(line, gw)))
                     for line in [grid_head] + grid]
    return "\n".join(lines)


def to_json(rows: list[GroundTruthRow]) -> dict[str, Any]:
    """``{"columns": [...], "rows": [row dicts]}``, ready for ``json.dumps``."""
    return {"columns": [f.name for f in GroundTruthRow.__dataclass_fields__.values()],
            "rows": [r.to_dict() for r in rows]}


#: A method recovers a planted circuit when it ranks every known edge above every other edge
#: (edge AUROC 1, up to float rounding): cutting its scores at the circuit's size gives the circuit.
RECOVERED_AUROC = 1.0 - 1e-9


def recovered(row: GroundTruthRow) -> bool:
    """Whether ``row``'s method ranks every known edge of its planted model first (:data:`RECOVERED_AUROC`)."""
    return row.auroc >= RECOVERED_AUROC


def headline(rows: list[GroundTruthRow]) -> Any:
    """The page's :class:`~interp_rand.figures.headline.Headline`: per method how many planted
    circuits it recovers (:func:`recovered`); the claim "every method recovers every planted
    circuit" holds or fails, the failing line naming each method's misses (their AUROC is in the grid)."""
    from interp_rand.figures.headline import Headline

    if not rows:
        raise ValueError("the ground-truth headline needs at least one row")
    methods = list(dict.fromkeys(r.method for r in rows))
    n_models = len(dict.fromkeys(r.model for r in rows))
    counts = {m: sum(recovered(r) for r in rows if r.method == m) for m in methods}
    misses = {m: [r for r in rows if r.method == m and not recovered(r)] for m in methods}
    number = " · ".join(f"{m} {counts[m]}/{n_models}" for m in methods)
    failing = None
    if any(misses.values()):
        failing = "not every method recovers every circuit; misses: " + "; ".join(
            f"{m} " + ", ".join(r.model for r in missed) for m, missed in misses.items() if missed)
    return Headline(f"planted circuits recovered (edge AUROC 1: known edges ranked first), of {n_models}", number,
                    "fails" if failing else "holds", failing=failing)


def _tables(rows: list[GroundTruthRow]) -> list[str]:
    """AUROC as a method × model grid (misses in bold), then every row with all its columns."""
    esc = html.escape
    methods = list(dict.fromkeys(r.method for r in rows))
    models = list(dict.fromkeys(r.model for r in rows))
    by_key = {(r.method, r.model): r for r in rows}

    def grid_cell(m: str, model: str) -> str:
        row = by_key.get((m, model))
        if row is None:
            return "<td>-</td>"
        value = f"{row.auroc:.3f}"
        return f"<td>{value}</td>" if recovered(row) else f"<td><b>{value}</b></td>"

    grid_head = "<th>AUROC</th>" + "".join(f"<th>{esc(m)}</th>" for m in models)
    grid = "".join("<tr><th>" + esc(m) + "</th>" + "".join(grid_cell(m, model) for model in models) + "</tr>"
                   for m in methods)
    head = "".join(f"<th>{esc(x)}</th>" for x in ["model", "method", "edges", "known"] + [lbl for _, lbl in COLUMNS])
    body = "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in [r.model, r.method, str(r.n_edges), str(r.n_known)]
                                    + _cells(r)) + "</tr>" for r in rows)
    return [f"<h2>Edge AUROC against the known edges (bold: not recovered)</h2>"
            f"<div class='scroll'><table><tr>{grid_head}</tr>{grid}</table></div>",
            f"<h2>Every method on every planted model</h2><p class='note'>CPR, CMD: MIB's integrals of the "
            f"circuits cut from the scores; CPR/CMD known: those of the known ranking itself (a reference, "
            f"not a bound).</p><div class='scroll'><table><tr>{head}</tr>{body}</table></div>"]


TITLE = "Discovery methods against planted circuits"


def to_html(rows: list[GroundTruthRow], title: str = TITLE) -> str:
    """The page (:func:`interp_rand.figures.html_page.page_html`, no figure, so no plotly.js):
    the :func:`headline` first, then AUROC as a method × model grid and the table of every row
    (plain HTML tables, readable without hovering or a network)."""
    from interp_rand.figures.html_page import page_html

    return page_html(title, _tables(rows), headline=headline(rows))


def write_tables(rows: list[GroundTruthRow], json_path: Any, html_path: Any) -> None:
    """Write :func:`to_json` and the page (:func:`to_html`) of ``rows`` to the two paths (each atomically;
    the CLI stages both with :func:`interp_rand.output.replace_files`)."""
    from interp_rand.figures.html_page import write_page
    from interp_rand.output import write_json

    write_json(json_path, to_json(rows))
    write_page(html_path, TITLE, _tables(rows), headline=headline(rows))


__all__ = ["COLUMNS", "RECOVERED_AUROC", "SUITE_METHODS", "GroundTruthRow", "edge_auroc", "format_table",
           "ground_truth_suite", "headline", "known_scores", "recovered", "to_html", "to_json", "write_tables"]
