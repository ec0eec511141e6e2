"""Figures of the randomness report (:class:`interp_rand.reports.randomness.RandomnessReport`,
or its JSON ``{"runs": [...], "summary": {...}}``), drawn from its results (so this module
computes nothing): usage score per node, seed fraction of the residual stream per
layer, the recall stored-set map and coverage, the colouring noise-resample effect by ring
distance. :func:`write_randomness_html` writes one self-contained, offline HTML page
(:func:`interp_rand.figures.html_page.write_page`: plotly.js inlined once).

    >>> write_randomness_html(randomness_report("zoo:recall-Aq_R"), "randomness.html")
    >>> write_randomness_html(json.loads(Path("randomness.json").read_text()), "randomness.html")
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp_rand.figures.html_page import write_page


def usage_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Grouped bars: usage score (mean TV) per node, one group per run, the whole-model seed
    resample as the last bar."""
    fig = go.Figure()
    for run in runs:
        usage = run["usage"]
        labels = list(usage["score"]) + ["whole model"]
        values = list(usage["score"].values()) + [usage["reference"]]
        fig.add_trace(go.Bar(x=labels, y=values, name=run["name"],
                             hovertemplate="%{x}: %{y:.4f}<extra>" + html.escape(run["name"]) + "</extra>"))
    fig.update_layout(title="Randomness-usage score per node (mean TV, seed-resample patching)",
                      barmode="group", yaxis_title="mean total variation", height=420)
    return fig


def usage_position_figure(run: dict[str, Any], zmax: float | None = None) -> go.Figure:
    """Heatmap node x position of the per-position usage score of one run, on ``0 .. zmax``
    (give compared runs one ``zmax``; default: this run's largest score)."""
    per = run["usage"]["per_position"]
    nodes = list(per)
    z = [per[n] for n in nodes]
    fig = go.Figure(go.Heatmap(z=z, y=nodes, x=[str(p) for p in range(len(z[0]))], colorscale="Viridis",
                               zmin=0, zmax=zmax, hovertemplate="%{y} @ %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=f"{run['name']}: usage score by node and position", xaxis_title="position",
                      height=120 + 40 * len(nodes))
    return fig


def entry_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Seed fraction of the residual-stream variance per hook (log scale), one line per run."""
    fig = go.Figure()
    for run in runs:
        entry = run["entry"]
        fig.add_trace(go.Scatter(x=entry["hooks"], y=[max(f, 1e-8) for f in entry["seed_fraction"]],
                                 mode="lines+markers", name=run["name"]))
    fig.update_layout(title="Where seed information enters: seed / (seed + input) variance per hook",
                      yaxis_type="log", yaxis_title="seed fraction", height=400)
    return fig


def stored_map_figure(run: dict[str, Any], example: bool = False) -> go.Figure:
    """Heatmap seeds x key positions of the storage rate over inputs (``example``: the 0/1
    stored sets of the most seed-dependent input), seeds sorted by their stored-set pattern
    (so seeds storing the same positions sit together)."""
    stored = run["stored_set"]
    rows = stored["example_map"] if example else stored["map"]
    order = sorted(range(len(rows)), key=lambda i: tuple(-x for x in rows[i]))
    z = [rows[i] for i in order]
    fig = go.Figure(go.Heatmap(z=z, x=[str(p) for p in range(len(rows[0]))], y=list(range(len(z))),
                               customdata=[[order[i]] * len(rows[0]) for i in range(len(z))],
                               colorscale="Blues", zmin=0, zmax=1,
                               hovertemplate="seed %{customdata}<br>position %{x}<br>stored %{z:.3f}<extra></extra>"))
    what = f"input {stored['example_input']} (the most seed-dependent)" if example else "mean over inputs"
    fig.update_layout(title=f"{run['name']}: stored-set map, {what} (rows: seeds, sorted)", xaxis_title="key position",
                      yaxis_title="seed (sorted)", height=600)
    return fig


def coverage_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Per-position coverage bars, one group per run."""
    fig = go.Figure()
    for run in runs:
        cov = run["stored_set"]["coverage"]
        fig.add_trace(go.Bar(x=[str(p) for p in range(len(cov))], y=cov, name=run["name"]))
    fig.update_layout(title="Coverage: fraction of (input, seed) storing each key position", barmode="group",
                      xaxis_title="key position", yaxis_range=[0, 1], height=400)
    return fig


def resample_distance_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Colour-change rate of a vertex when the noise at ring distance d is redrawn."""
    fig = go.Figure()
    for run in runs:
        effect = run["symmetry"]["resample"]
        fig.add_trace(go.Bar(x=effect["distance"], y=effect["change_rate"], name=run["name"]))
    fig.update_layout(title="Colour change when one vertex's noise at ring distance d is redrawn",
                      xaxis_title="ring distance (0 = own noise)", yaxis_title="change rate", barmode="group",
                      height=400)
    return fig


def _as_dict(report: Any) -> dict[str, Any]:
    """The report's JSON form: a ``RandomnessReport`` (its ``to_dict()``) or that dict itself."""
    return report.to_dict() if hasattr(report, "to_dict") else report


def randomness_figures(report: Any) -> list[go.Figure]:
    """Every figure that fits the runs of ``report`` (a ``RandomnessReport`` or ``{"runs": [...]}``)."""
    runs = _as_dict(report)["runs"]
    figs = [usage_figure(runs), entry_figure(runs)]
    per_position = [r for r in runs if r["usage"].get("per_position")]
    # one colour scale for the compared runs' heatmaps (ERM vs randomized read alike)
    top = max((v for r in per_position for row in r["usage"]["per_position"].values() for v in row), default=0) or None
    figs += [usage_position_figure(r, top) for r in per_position]
    stored = [r for r in runs if r.get("stored_set")]
    if stored:
        figs.append(coverage_figure(stored))
        figs += [stored_map_figure(r, example) for r in stored for example in (True, False)]
    symmetric = [r for r in runs if r.get("symmetry")]
    if symmetric:
        figs.append(resample_distance_figure(symmetric))
    return figs


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else html.escape(str(value))


def _summary_table(summary: dict[str, dict[str, Any]]) -> str:
    """Key numbers, one row each, one column per run."""
    if not summary:
        return ""
    names = list(summary)
    keys = list(dict.fromkeys(k for row in summary.values() for k in row))
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join(
        f"<tr><td class='l'>{html.escape(k)}</td>" + "".join(f"<td>{_cell(summary[n].get(k))}</td>" for n in names) + "</tr>"
        for k in keys
    )
    return f"<div class='scroll'><table><tr><th></th>{head}</tr>{body}</table></div>"


def write_randomness_html(report: Any, path: str | Path) -> Path:
    """One self-contained HTML page with the figures and the report's key numbers (``report``: a
    ``RandomnessReport`` or its JSON dict)."""
    report = _as_dict(report)
    intro = ("<h1>The randomness channel</h1><p class='note'>Usage score: mean total variation between "
             "the clean output distribution and the one with a single node's activation taken from the "
             "same input under another seed (0 = the node carries no seed information to the output).</p>")
    sections = [intro, _summary_table(report.get("summary", {})), *randomness_figures(report)]
    return write_page(path, "randomness channel", sections, heading=False)


__all__ = [
    "coverage_figure",
    "entry_figure",
    "randomness_figures",
    "resample_distance_figure",
    "stored_map_figure",
    "usage_figure",
    "usage_position_figure",
    "write_randomness_html",
]
