"""The figures of a replay over training checkpoints (drawing only; the table comes from
:func:`interp_rand.reports.dynamics.replay.replay`, as its ``to_dict()`` or ``replay.json``).

- one figure of lines: the run's loss on top (held-out loss from ``metrics.jsonl``, the
  running training loss at each checkpoint and the ``loss/`` quantities), then one panel per small group of quantities
  (``accuracy/``, ``faithfulness/``, ``probe/``...), one line per quantity, the group's
  threshold as a dashed line and each first crossing marked and labelled with its step;
- a heatmap (quantities x checkpoints) for each group with more than :data:`MAX_LINES`
  quantities (edge scores), under the training loss at the same checkpoints, first crossings
  marked;
- a table of every crossing step ("never" when not crossed), readable without hovering, after
  the figures.

The page opens with its headline (the run, how many checkpoints, when exact match and the own
circuit's faithfulness cross their thresholds); its title names the run and the model, never a
file path. Each panel of lines has its own legend beside it (a group has at most
:data:`MAX_LINES` quantities, one colour each), and a heatmap of quantities in [0, 1] (role
scores, shares) uses the sequential scale, a signed one (edge scores) the diverging scale
centred on 0.

Steps are log-spaced for a dynamics schedule, so the lines' step axis is logarithmic when the
steps span two decades or more, and the heatmaps give every checkpoint one column.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_rand.figures.headline import Headline
from interp_rand.figures.html_page import write_page
from interp_rand.figures.style import DIVERGING, SEQUENTIAL

#: A group with more quantities than this is drawn as a heatmap instead of lines.
MAX_LINES = 12
#: Quantities of this group (``loss/held_out``) are drawn with the run's loss, in its panel.
LOSS_GROUP = "loss"


def _train_loss(data: dict[str, Any]) -> list | None:
    """The training loss at each checkpoint (the table's column ``data["train_loss_key"]``)."""
    return data["table"].get(data.get("train_loss_key", ""))


def _groups(data: dict[str, Any]) -> dict[str, list[str]]:
    """Group -> its keys, without the losses (drawn in the loss panel)."""
    groups: dict[str, list[str]] = {}
    for key in data["table"]:
        if key == data.get("train_loss_key") or key.startswith(LOSS_GROUP + "/"):
            continue
        groups.setdefault(key.split("/", 1)[0], []).append(key)
    return groups


def _label(key: str) -> str:
    return key.split("/", 1)[1] if "/" in key else key


def _loss_traces(data: dict[str, Any]) -> list[go.Scatter]:
    traces = []
    held = [(r["step"], r["loss"]) for r in data.get("curve", []) if r.get("loss") is not None]
    if held:
        traces.append(go.Scatter(x=[s for s, _ in held], y=[v for _, v in held], name="held-out loss (metrics.jsonl)",
                                 mode="lines+markers", line={"color": "#d62728"}, legendgroup="loss"))
    train = _train_loss(data)
    if train and any(v is not None for v in train):
        traces.append(go.Scatter(x=data["steps"], y=train, name="training loss at each checkpoint (running mean)",
                                 mode="lines+markers", line={"color": "#1f77b4"}, marker={"size": 4},
                                 legendgroup="loss"))
    for key in data["table"]:
        if key.startswith(LOSS_GROUP + "/"):
            traces.append(go.Scatter(x=data["steps"], y=data["table"][key], name=f"{key} (the replay's examples)",
                                     mode="lines+markers", marker={"size": 4}, line={"color": "#2ca02c"},
                                     legendgroup="loss"))
    return traces


def _loss_axis(traces: list[go.Scatter]) -> dict[str, Any]:
    """A log axis with a label a decade when the losses span a decade or more, else linear (a
    log axis over less than a decade would show no label at all)."""
    values = [v for t in traces for v in (t.y or ()) if v is not None and v > 0]
    if values and max(values) / min(values) >= 10:
        return {"type": "log", "dtick": 1, "exponentformat": "e", "title_text": "loss (log)"}
    return {"title_text": "loss"}


def _log_steps(steps: list[int]) -> bool:
    return len(steps) > 1 and min(steps) > 0 and max(steps) / min(steps) >= 100


def lines_figure(data: dict[str, Any], groups: dict[str, list[str]], title: str) -> go.Figure:
    """The loss panel, then one panel per group in ``groups`` (group -> its keys), each panel
    with its own legend at its right (a colour is used once per panel)."""
    steps, table, crossings = data["steps"], data["table"], data.get("crossings", {})
    thresholds = data.get("thresholds", {})
    names = list(groups)
    fig = make_subplots(rows=1 + len(names), cols=1, shared_xaxes=True, vertical_spacing=0.06 if names else 0.1,
                        subplot_titles=["loss of the run", *[f"{g}/ ({len(groups[g])} quantities)" for g in names]])
    losses = _loss_traces(data)
    for trace in losses:
        trace.legend = "legend"
        fig.add_trace(trace, row=1, col=1)
    fig.update_yaxes(**_loss_axis(losses), row=1, col=1)
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#393b79", "#637939")
    for row, group in enumerate(names, start=2):
        legend = f"legend{row}"
        for i, key in enumerate(groups[group]):
            colour = palette[i % len(palette)]
            fig.add_trace(go.Scatter(x=steps, y=table[key], name=_label(key), mode="lines+markers", marker={"size": 4},
                                     line={"color": colour}, legendgroup=key, legend=legend,
                                     hovertemplate=f"{key}<br>step %{{x}}<br>%{{y:.3g}}<extra></extra>"),
                          row=row, col=1)
            crossing = crossings.get(key, {}).get("step")
            if crossing is not None:
                value = table[key][steps.index(crossing)]
                fig.add_trace(go.Scatter(x=[crossing], y=[value], mode="markers+text", text=[f"{crossing}"],
                                         textposition="bottom right", marker={"symbol": "star", "size": 11,
                                                                          "color": colour},
                                         name=f"{key} crosses at step {crossing}", showlegend=False,
                                         legendgroup=key, legend=legend), row=row, col=1)
        for prefix, threshold in thresholds.items():
            if any(key.startswith(prefix) for key in groups[group]):
                fig.add_hline(y=threshold["value"], line={"dash": "dash", "color": "#555"}, row=row, col=1,
                              annotation_text=f"threshold {threshold['value']:g}", annotation_position="bottom right")
        fig.update_yaxes(title_text=group, row=row, col=1)
    if _log_steps(steps):
        fig.update_xaxes(type="log", dtick=1)  # one label a decade: plotly draws the others at 9 px
    fig.update_xaxes(title_text="training step" + (" (log)" if _log_steps(steps) else ""), row=1 + len(names), col=1)
    legends = {}
    for row in range(1, 2 + len(names)):
        axis = fig.layout["yaxis" if row == 1 else f"yaxis{row}"]
        legends["legend" if row == 1 else f"legend{row}"] = {
            "x": 1.02, "xanchor": "left", "y": axis.domain[1], "yanchor": "top", "font": {"size": 11},
            "tracegroupgap": 2}
    fig.update_layout(template="plotly_white", title=title, height=260 + 260 * len(names), width=1150,
                      font={"size": 12}, margin={"l": 80, "r": 30, "t": 90, "b": 60}, **legends)
    return fig


def unit_interval(values: list) -> bool:
    """Do ``values`` (None skipped) all lie in [0, 1] (role scores, shares): drawn on the
    sequential scale; else (signed, or beyond 1) on the diverging one centred on 0."""
    finite = [v for v in values if v is not None and v == v]
    return bool(finite) and min(finite) >= 0 and max(finite) <= 1


def heatmap_figure(data: dict[str, Any], group: str, keys: list[str], title: str) -> go.Figure:
    """``keys`` x checkpoints of one group, under the training loss at the same checkpoints."""
    steps, table, crossings = data["steps"], data["table"], data.get("crossings", {})
    columns = [str(s) for s in steps]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.2, 0.8], vertical_spacing=0.04,
                        subplot_titles=["training loss at each checkpoint", f"{group}/ over checkpoints"])
    train = _train_loss(data)
    if train:
        trace = go.Scatter(x=columns, y=train, mode="lines+markers", name="training loss (running mean)",
                           line={"color": "#1f77b4"}, marker={"size": 4})
        fig.add_trace(trace, row=1, col=1)
        fig.update_yaxes(**_loss_axis([trace]), row=1, col=1)
    labels = [_label(k) for k in keys]
    z = [table[k] for k in keys]
    scale = {"colorscale": SEQUENTIAL, "zmin": 0, "zmax": 1} if unit_interval([v for row in z for v in row]) \
        else {"colorscale": DIVERGING, "zmid": 0}
    fig.add_trace(go.Heatmap(z=z, x=columns, y=labels, **scale,
                             colorbar={"title": {"text": group, "side": "right"}, "y": 0.4, "len": 0.8},
                             hovertemplate="step %{x}<br>%{y}<br>%{z:.3g}<extra></extra>"), row=2, col=1)
    marked = [(str(crossings[k]["step"]), _label(k)) for k in keys if crossings.get(k, {}).get("step") is not None]
    if marked:
        value = next(crossings[k]["threshold"] for k in keys if k in crossings)
        fig.add_trace(go.Scatter(x=[x for x, _ in marked], y=[y for _, y in marked], mode="markers",
                                 marker={"symbol": "x", "size": 9, "color": "black"},
                                 name=f"first crossing of {value:g}"), row=2, col=1)
    fig.update_xaxes(type="category", title_text="training step (one column per checkpoint)", row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_layout(template="plotly_white", title=title, width=1150, height=300 + 22 * len(keys),
                      font={"size": 12}, legend={"orientation": "h", "x": 0, "y": -0.12},
                      margin={"l": 260, "r": 30, "t": 90, "b": 110})
    return fig


def replay_figures(data: dict[str, Any]) -> list[tuple[str, go.Figure]]:
    """``(div id, figure)`` of a replay: the lines figure, then a heatmap per large group."""
    groups = _groups(data)
    small = {g: keys for g, keys in groups.items() if len(keys) <= MAX_LINES}
    large = {g: keys for g, keys in groups.items() if len(keys) > MAX_LINES}
    run = run_title(data)
    out = [("lines", lines_figure(data, small, f"{run}: quantities over {len(data['steps'])} checkpoints"))]
    for group, keys in large.items():
        out.append((f"heatmap-{group}", heatmap_figure(data, group, keys, f"{run}: {group}/ ({len(keys)} quantities)")))
    return out


def run_title(data: dict[str, Any]) -> str:
    """The run's short name (``zoo:NAME`` or the run folder's name, never a whole path)."""
    from interp_rand.run_names import run_label

    return run_label(data.get("run") or "run")


def headline(data: dict[str, Any]) -> Headline:
    """What the replay measured and when it happened: the first crossing of the held-out exact
    match and of the own circuit's faithfulness (the latter only where the model's own metric
    gap is meaningful: :meth:`~interp_rand.reports.dynamics.view.Threshold.describe`), else how
    many quantities crossed their thresholds. No verdict: a replay times, it does not test."""
    steps, crossings = data["steps"], data.get("crossings", {})
    measured = f"replay of {run_title(data)} over {len(steps)} checkpoints (steps {steps[0]}-{steps[-1]})"
    parts = []
    for key, words in (("accuracy/exact_match", "exact match"), ("faithfulness/own", "own circuit's faithfulness")):
        if key in crossings:
            c = crossings[key]
            parts.append(f"{words} {'>=' if c['rising'] else '<='} {c['threshold']:g} "
                         + ("never" if c["step"] is None else f"at step {c['step']}"))
    if not parts:
        crossed = sum(c["step"] is not None for c in crossings.values())
        parts.append(f"{crossed} of {len(crossings)} quantities cross their thresholds")
    return Headline(measured, "; ".join(parts))


def crossings_table(data: dict[str, Any]) -> str:
    """The crossing step of every thresholded quantity, as an HTML table."""
    rows = []
    for key, c in data.get("crossings", {}).items():
        rule = c.get("rule") or f"{'>=' if c['rising'] else '<='} {c['threshold']:g}"
        settled = "never" if c.get("settled") is None else f"step {c['settled']}"
        rows.append(f"<tr><td class='l'>{html.escape(key)}</td><td class='l'>{html.escape(rule)}</td>"
                    f"<td>{html.escape(c['text'])}</td><td>{settled}</td></tr>")
    if not rows:
        return "<p class='note'>No quantity has a threshold.</p>"
    return ("<div class='scroll'><table><tr><th>quantity</th><th>threshold</th><th>first crossing</th>"
            "<th>stays crossed from</th></tr>" + "".join(rows) + "</table></div>")


def write_replay_page(data: dict[str, Any], path: str | Path) -> Path:
    """The replay's page: its headline, the figures, then what was run and the crossing table."""
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in data.get("seconds", {}).items())
    intro = (f"<p class='note'>{len(data['steps'])} checkpoints (steps {data['steps'][0]} to {data['steps'][-1]}), "
             f"{data.get('n')} examples each (seed {data.get('seed')}). Analyses: "
             f"{html.escape(', '.join(data.get('analyses', [])))}. Time: {html.escape(seconds)}.</p>"
             f"<pre>{html.escape(data.get('command', ''))}</pre>")
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in data.get("notes", []))
    ratios = [f"{prefix} only where |{t['given']['key']}| is at least {t['given']['share']:g} of its value at the "
              f"last checkpoint" for prefix, t in data.get("thresholds", {}).items() if t.get("given")]
    rule = ("<p class='note'>A quantity crosses at the first checkpoint at or past its threshold. A ratio is "
            "judged only where its denominator is meaningfully above zero (before that it is a ratio of two "
            "near-zero numbers): " + html.escape("; ".join(ratios)) + ".</p>") if ratios else ""
    sections: list[Any] = ["<h2>Over training</h2>", *replay_figures(data), "<h2>Run</h2>", intro, notes,
                           "<h2>First crossings</h2>", rule, crossings_table(data)]
    model = f" ({data['model']})" if data.get("model") else ""
    return write_page(path, f"replay of {run_title(data)}{model}", sections, headline=headline(data))


__all__ = ["MAX_LINES", "crossings_table", "headline", "heatmap_figure", "lines_figure", "replay_figures", "run_title",
           "unit_interval", "write_replay_page"]
