"""The q sweep's page (drawing only; the numbers come from
:mod:`interp_rand.reports.dynamics.qsweep`): seed use per node above its random-init control,
the whole model's seed use and its control, and the average and worst-5% success against q
(log axis); recall adds the stored-set statistics. The q ramp's replay is drawn against the
training step, with the exponent at each step on a second axis."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_rand.figures.html_page import write_page

_STORED = ("stored/mean_jaccard_across_seeds", "stored/set_diversity", "stored/mixes", "stored/union_coverage")


def _series(rows: list[dict[str, Any]], prefix: str) -> dict[str, list[float | None]]:
    """``{key without prefix: [value per row]}`` for the measures keys starting with ``prefix``."""
    keys = list(dict.fromkeys(k for row in rows for k in row["measures"] if k.startswith(prefix)))
    return {k[len(prefix):]: [row["measures"].get(k) for row in rows] for k in keys}


def sweep_figure(result: dict[str, Any]) -> go.Figure:
    """Against q: seed use above control per node, the whole model's use and control, and the
    success (plus the stored set for recall)."""
    rows = result["rows"]
    qs = [row["q"] for row in rows]
    stored = any(k in rows[0]["measures"] for k in _STORED) if rows else False
    titles = ["seed use above random-init control, per node", "whole-model seed use", "success over seeds"]
    if stored:
        titles.append("stored set across seeds")
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    for node, values in _series(rows, "seed_above_control/").items():
        fig.add_trace(go.Scatter(x=qs, y=values, mode="lines+markers", name=node, legendgroup="node"), row=1, col=1)
    fig.add_hline(y=0, line={"color": "#999", "dash": "dot"}, row=1, col=1)
    for key, label in (("seed_model/usage", "trained"), ("seed_model/control", "random-init control")):
        fig.add_trace(go.Scatter(x=qs, y=[row["measures"].get(key) for row in rows], mode="lines+markers",
                                 name=f"whole model, {label}", legendgroup="whole"), row=1, col=2)
    for key, label in (("average", "average"), ("worst_5pct", "worst-5%")):
        fig.add_trace(go.Scatter(x=qs, y=[row["evaluation"][key] for row in rows], mode="lines+markers",
                                 name=label, legendgroup="success"), row=1, col=3)
    if stored:
        for key in _STORED:
            fig.add_trace(go.Scatter(x=qs, y=[row["measures"].get(key) for row in rows], mode="lines+markers",
                                     name=key.split("/", 1)[1], legendgroup="stored"), row=1, col=4)
    fig.update_xaxes(type="log", title_text="q")
    fig.update_layout(template="plotly_white", height=430, width=380 * len(titles) + 200,
                      title=f"{result['task']}: the q sweep at {result['steps']} steps")
    return fig


def ramp_figure(ramp: dict[str, Any], task: str) -> go.Figure:
    """The ramp's replay against the step: seed use above control per node, success and the
    stored set, and the exponent q at each step (right axis)."""
    rows = ramp["replay"]
    steps = [row["step"] for row in rows]
    fig = make_subplots(rows=1, cols=2, specs=[[{"secondary_y": True}, {"secondary_y": True}]],
                        subplot_titles=("seed use above control, per node", "success and stored set"))
    for node, values in _series(rows, "seed_above_control/").items():
        fig.add_trace(go.Scatter(x=steps, y=values, mode="lines+markers", name=node, legendgroup="node"),
                      row=1, col=1)
    fig.add_hline(y=0, line={"color": "#999", "dash": "dot"}, row=1, col=1)
    for key in ("success/average", "success/worst_5pct", *_STORED):
        values = [row["measures"].get(key) for row in rows]
        if any(v is not None for v in values):
            fig.add_trace(go.Scatter(x=steps, y=values, mode="lines+markers", name=key), row=1, col=2)
    for col in (1, 2):
        fig.add_trace(go.Scatter(x=steps, y=[row["q_at_step"] for row in rows], mode="lines", name="q at step",
                                 line={"color": "#bbb", "dash": "dash"}, showlegend=col == 1, legendgroup="q"),
                      row=1, col=col, secondary_y=True)
        fig.update_yaxes(type="log", title_text="q", secondary_y=True, row=1, col=col)
    fig.update_xaxes(title_text="step")
    fig.update_layout(template="plotly_white", height=450, width=1250,
                      title=f"{task}: the q ramp, 1 to {ramp['summary']['q']:g} over {ramp['summary']['ramp_steps']} steps")
    return fig


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else html.escape(str(value))


def _table(result: dict[str, Any]) -> str:
    head = "<tr><th>q</th><th>average</th><th>worst-5%</th><th>seed use</th><th>control</th><th>run</th></tr>"
    body = "".join(
        f"<tr><td>{row['q']:g}</td><td>{_cell(row['evaluation']['average'])}</td>"
        f"<td>{_cell(row['evaluation']['worst_5pct'])}</td><td>{_cell(row['measures'].get('seed_model/usage'))}</td>"
        f"<td>{_cell(row['measures'].get('seed_model/control'))}</td><td class='l'>{html.escape(row['run_dir'])}</td></tr>"
        for row in result["rows"])
    return f"<div class='scroll'><table>{head}{body}</table></div>"


def write_qsweep_page(result: dict[str, Any], path: str | Path) -> Path:
    """``qsweep.html``: the summary lines, the table, the sweep figure and (if run) the ramp's."""
    s = result["summary"]["seed_above_control"]
    first = result["summary"]["first_node"]
    notes = [f"seed use above its random-init control from q = {_cell(s['first_q'])} (first) / "
             f"{_cell(s['sustained_q'])} (from there on); first node: "
             f"{html.escape(first['node']) + ' at q = ' + _cell(first['at']) if first else 'none'}",
             "departures: " + html.escape("; ".join(result["departures"]) or "none")]
    if result.get("command"):
        notes.append(f"made by: <code>{html.escape(result['command'])}</code>")
    sections: list[Any] = ["".join(f"<p class='note'>{n}</p>" for n in notes), _table(result), sweep_figure(result)]
    if result.get("ramp"):
        r = result["ramp"]["summary"]
        sections.append(f"<p class='note'>ramp: seed use above control from step {_cell(r['seed_step'])} "
                        f"(q {_cell(r['seed_q'])}); {html.escape(str(r.get('stored_vs_worst') or ''))}</p>")
        sections.append(ramp_figure(result["ramp"], result["task"]))
    return write_page(path, f"{result['task']}: the q transition", sections)


__all__ = ["ramp_figure", "sweep_figure", "write_qsweep_page"]
