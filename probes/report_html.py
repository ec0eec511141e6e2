"""Draw a :class:`~probes.report.ReportData` as one self-contained HTML file: plotly.js is
inlined once in the page head and every figure is a ``div`` that uses it, so the file works
offline and stays small (plotly.js is ~4.7 MB; the figures add little).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots
from torch import Tensor

from probes.report import ReportData

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; } td.l { text-align: left; }
.note { color: #555; font-size: 0.9em; max-width: 60em; }
"""
_CONFIG = {"displaylogo": False, "responsive": True}


def _round(t: Tensor, digits: int = 3) -> list:
    return t.float().mul(10**digits).round().div(10**digits).tolist()


def pattern_figure(patterns: Tensor, labels: list[str], title: str) -> go.Figure:
    """``patterns [layer, head, q, k]`` as a grid of heatmaps (layers down, heads across), the
    positions' labels on the axes and in the hover text."""
    n_layers, n_heads = patterns.shape[:2]
    fig = make_subplots(rows=n_layers, cols=n_heads, horizontal_spacing=0.03, vertical_spacing=0.08,
                        subplot_titles=[f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads)])
    zmax = float(patterns.abs().max()) or 1.0
    for layer in range(n_layers):
        for head in range(n_heads):
            fig.add_trace(go.Heatmap(
                z=_round(patterns[layer, head]), x=list(labels), y=list(labels), colorscale="Blues",
                zmin=0, zmax=zmax, showscale=(layer == 0 and head == 0),
                hovertemplate=f"L{layer}H{head}<br>query %{{y}}<br>key %{{x}}<br>attention %{{z:.3f}}<extra></extra>",
            ), row=layer + 1, col=head + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(title=title, height=260 * n_layers + 80, width=max(600, 230 * n_heads + 100),
                      margin=dict(l=20, r=20, t=80, b=20))
    return fig


def roles_figure(data: ReportData) -> go.Figure:
    """Role x head heatmap of the scores."""
    roles = list(data.roles.scores)
    first = next(iter(data.roles.scores.values()))
    heads = [f"L{l}H{h}" for l in range(first.shape[0]) for h in range(first.shape[1])]
    z = [_round(data.roles.scores[r].flatten()) for r in roles]
    fig = go.Figure(go.Heatmap(z=z, x=heads, y=roles, zmin=0, zmax=1, colorscale="Viridis",
                               hovertemplate="%{y}<br>%{x}<br>score %{z:.3f}<extra></extra>"))
    fig.update_layout(title="head-role scores (0..1)", height=120 + 40 * len(roles), margin=dict(l=20, r=20, t=60, b=20))
    return fig


def probe_layers_figure(data: ReportData) -> go.Figure:
    """Selectivity per hook at each instance's output position: trained (solid) vs random
    init (dotted), one panel per variable."""
    names = list(data.probe_layers)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names)
    for i, name in enumerate(names):
        block = data.probe_layers[name]
        hooks = [h.replace("blocks.", "").replace("hook_", "") for h in block["hooks"]]
        for inst, entry in block["instances"].items():
            fig.add_trace(go.Scatter(x=hooks, y=[round(v, 3) for v in entry["trained"]], mode="lines+markers",
                                     name=f"{name} {inst}", legendgroup=name), row=1, col=i + 1)
            if entry["random"] is not None:
                fig.add_trace(go.Scatter(x=hooks, y=[round(v, 3) for v in entry["random"]], mode="lines",
                                         line=dict(dash="dot"), name=f"{name} {inst} (random init)",
                                         legendgroup=name, showlegend=False), row=1, col=i + 1)
    fig.update_layout(title="probe selectivity by layer (dotted: random-init model)", height=420,
                      width=max(700, 380 * len(names)))
    return fig


def _div(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=_CONFIG)


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            v = row.get(c)
            text = "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
            cells.append(f"<td class='{'' if isinstance(v, float) else 'l'}'>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


_PROBE_COLUMNS = ["variable", "instance", "hook", "position", "accuracy", "control", "selectivity", "majority",
                  "random_accuracy", "random_selectivity", "random_best_selectivity", "causal_hook",
                  "causal_changed", "causal_placebo", "causal_counterfactual"]


def render_html(data: ReportData) -> str:
    """The whole page as one string."""
    parts = [f"<h1>{html.escape(data.title)}</h1>",
             "<pre>" + html.escape(json.dumps(data.info, indent=1, default=str)) + "</pre>"]
    parts.append("<h2>Head roles</h2>")
    parts.append(_table([{"role": r, "template": data.roles.templates[r],
                          "best head": "L{}H{}".format(*data.roles.best(r)[:2]), "score": data.roles.best(r)[2]}
                         for r in data.roles.scores], ["role", "template", "best head", "score"]))
    parts.append(_div(roles_figure(data), "roles"))
    parts.append("<h2>Average attention per head</h2>")
    labels = list(data.position_labels)
    for i, (name, pattern) in enumerate(data.mean_patterns.items()):
        parts.append(_div(pattern_figure(pattern, labels, f"mean pattern: {name}"), f"mean-{i}"))
    parts.append("<h2>Example patterns (chosen by metadata)</h2>")
    for i, ex in enumerate(data.examples):
        parts.append(_div(pattern_figure(ex.pattern, list(ex.labels), ex.title), f"example-{i}"))
    if data.probe_rows:
        parts.append("<h2>Probes</h2><p class='note'>Held-out accuracy on unseen input groups at the most "
                     "selective hook/position; control = the same probe on random-but-fixed labels per input "
                     "type (Hewitt &amp; Liang 2019); selectivity = accuracy - control; random = the same "
                     "probe on a randomly initialised model; causal = share of held-out outputs changed by "
                     "steering along the probe's pattern (placebo: a random direction of equal norm) and "
                     "share that became the answer the new value implies.</p>")
        parts.append(_table(list(data.probe_rows), _PROBE_COLUMNS))
        parts.append(_div(probe_layers_figure(data), "probe-layers"))
    if data.seed_share is not None:
        parts.append("<h2>Seed channel</h2><p class='note'>Share of integrated-gradients attribution "
                     "(captum) that goes to the seed rather than the task input, per output.</p>")
        parts.append(_table([{"output": k, "seed share": v} for k, v in data.seed_share.items()],
                            ["output", "seed share"]))
    parts.append("<p class='note'>computed in " + html.escape(
        ", ".join(f"{k} {v:.1f} s" for k, v in data.seconds.items())) + "</p>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(data.title)}</title><style>{_STYLE}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + "\n".join(parts) + "</body></html>")


def write_report(data: ReportData, path: str | Path) -> Path:
    """Write the page to ``path`` (folders created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path


__all__ = ["pattern_figure", "probe_layers_figure", "render_html", "roles_figure", "write_report"]
