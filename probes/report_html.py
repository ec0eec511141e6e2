"""Draw a :class:`~probes.report.ReportData` as one HTML page, written by the toolkit's one
page writer (:mod:`interp_rand.figures.html_page`: the output folder's one plotly.js, every
figure a ``div`` that uses it, so the page works offline and stays small).

The page opens with its headline (what was measured, the strongest role against its chance
baseline, the query/key verdict when heads were asked for), figures before their tables, heads
named ``a0.3`` (:func:`interp_rand.figures.style.head_name`), example patterns ticked with the
example's own tokens on both axes, and the run's details last.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots
from torch import Tensor

from interp_rand.figures.headline import Headline
from interp_rand.figures.html_page import page_html, write_page
from interp_rand.figures.style import DIVERGING, SEQUENTIAL, head_name
from probes.report import ReportData
from probes.suite import LEAK_ABSOLUTE, LEAK_MARGIN, LEARNED_MARGIN


def _round(t: Tensor, digits: int = 3) -> list:
    return t.float().mul(10**digits).round().div(10**digits).tolist()


def pattern_scale(*patterns: Tensor) -> dict:
    """One colour scale for every heatmap of ``patterns`` (so compared panels read alike), its
    range from the data: softmax patterns (all >= 0) on ``0 .. max``; signed ones (linear
    attention) on a diverging scale symmetric around 0, ``-max|a| .. max|a|``."""
    low = min(float(p.min()) for p in patterns)
    top = max(float(p.abs().max()) for p in patterns) or 1.0
    if low < -1e-6 * top:
        return {"zmin": -top, "zmax": top, "zmid": 0.0, "colorscale": DIVERGING}
    return {"zmin": 0.0, "zmax": top, "colorscale": SEQUENTIAL}


def pattern_figure(patterns: Tensor, labels: list[str], title: str, *, ticks: list[str] | None = None,
                   scale: dict | None = None) -> go.Figure:
    """``patterns [layer, head, q, k]`` as a grid of heatmaps (layers down, heads across): the
    axes ticked with ``ticks`` (short position names; default ``labels``), ``labels`` in the
    hover text, on ``scale`` (default :func:`pattern_scale` of ``patterns``)."""
    n_layers, n_heads, n_pos = patterns.shape[:3]
    ticks = list(labels if ticks is None else ticks)
    scale = scale or pattern_scale(patterns)
    fig = make_subplots(rows=n_layers, cols=n_heads, horizontal_spacing=0.05, vertical_spacing=0.16 / n_layers + 0.04,
                        subplot_titles=[head_name(l, h) for l in range(n_layers) for h in range(n_heads)])
    hover = [[f"query {labels[q]}<br>key {labels[k]}" for k in range(n_pos)] for q in range(n_pos)]
    for layer in range(n_layers):
        for head in range(n_heads):
            fig.add_trace(go.Heatmap(
                z=_round(patterns[layer, head]), x=list(range(n_pos)), y=list(range(n_pos)), text=hover,
                showscale=(layer == 0 and head == 0), colorbar={"title": {"text": "attention"}, "len": 0.6, "y": 1,
                                                                "yanchor": "top"},
                hovertemplate=f"{head_name(layer, head)}<br>%{{text}}<br>attention %{{z:.3f}}<extra></extra>", **scale,
            ), row=layer + 1, col=head + 1)
    axis = {"tickmode": "array", "tickvals": list(range(n_pos)), "ticktext": ticks, "tickfont": {"size": 11},
            "automargin": True, "showgrid": False}
    fig.update_yaxes(autorange="reversed", **axis)
    fig.update_xaxes(tickangle=-90, **axis)
    for col in range(1, n_heads + 1):
        fig.update_xaxes(title_text="key", row=n_layers, col=col)
    for row in range(1, n_layers + 1):
        fig.update_yaxes(title_text="query", row=row, col=1)
    fig.update_layout(title=title, font={"size": 12}, height=300 * n_layers + 140, width=max(640, 260 * n_heads + 160),
                      margin=dict(l=60, r=40, t=90, b=60))
    return fig


def roles_figure(data: ReportData) -> go.Figure:
    """Role x head heatmap of the scores (sequential scale: they lie in [0, 1]), each role's
    chance baseline (uniform attention) in its row label."""
    roles = list(data.roles.scores)
    first = next(iter(data.roles.scores.values()))
    heads = [head_name(l, h) for l in range(first.shape[0]) for h in range(first.shape[1])]
    z = [_round(data.roles.scores[r].flatten()) for r in roles]
    chance = data.role_chance
    rows = [r if chance.get(r) is None else f"{r} (chance {chance[r]:.2f})" for r in roles]
    fig = go.Figure(go.Heatmap(z=z, x=heads, y=rows, zmin=0, zmax=1, colorscale=SEQUENTIAL,
                               colorbar={"title": {"text": "score"}},
                               hovertemplate="%{y}<br>%{x}<br>score %{z:.3f}<extra></extra>"))
    fig.update_layout(title="head-role scores (0..1; chance = a head attending uniformly)",
                      height=160 + 40 * len(roles), font={"size": 12}, margin=dict(l=20, r=20, t=60, b=40))
    return fig


def probe_layers_figure(data: ReportData) -> go.Figure:
    """Selectivity per hook at each instance's output position: trained (solid) vs random
    init (dotted, the same colour, named "random init" in the legend and the hover), one panel
    per variable. The legend sits under the panels, in rows across the figure's width, and the
    figure grows with it so that no entry is cut off."""
    names = list(data.probe_layers)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names)
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf")
    n_entries, any_random = 0, False
    for i, name in enumerate(names):
        block = data.probe_layers[name]
        hooks = [h.replace("blocks.", "").replace("hook_", "") for h in block["hooks"]]
        for j, (inst, entry) in enumerate(block["instances"].items()):
            colour = palette[j % len(palette)]
            fig.add_trace(go.Scatter(x=hooks, y=[round(v, 3) for v in entry["trained"]], mode="lines+markers",
                                     name=f"{name} {inst}", legendgroup=f"{name} {inst}", line={"color": colour},
                                     hovertemplate=f"{name} {inst} (trained)<br>%{{x}}<br>selectivity %{{y:.3f}}"
                                                   "<extra></extra>"), row=1, col=i + 1)
            n_entries += 1
            if entry["random"] is not None:
                any_random = True
                fig.add_trace(go.Scatter(x=hooks, y=[round(v, 3) for v in entry["random"]], mode="lines",
                                         line={"dash": "dot", "color": colour}, name=f"{name} {inst} random init",
                                         legendgroup=f"{name} {inst}", showlegend=False,
                                         hovertemplate=f"{name} {inst} (random-init model)<br>%{{x}}<br>"
                                                       "selectivity %{y:.3f}<extra></extra>"), row=1, col=i + 1)
    if any_random:  # one legend entry says what the dotted lines are
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"dash": "dot", "color": "#555"},
                                 name="dotted: the same probe on a random-init model"), row=1, col=1)
        n_entries += 1
    width = 1150
    per_row = max(1, width // 230)
    legend_rows = -(-n_entries // per_row)
    fig.update_yaxes(title_text="selectivity", col=1)
    fig.update_layout(title="probe selectivity by layer (solid: trained; dotted: random-init model)",
                      height=380 + 26 * legend_rows, width=width, font={"size": 12},
                      legend={"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top", "entrywidth": 220},
                      margin={"l": 70, "r": 30, "t": 90, "b": 60 + 26 * legend_rows})
    return fig


def qk_attribution_figure(attr, labels: list[str] | None = None, key: int | None = None) -> go.Figure:
    """A :class:`~probes.qk_attribution.QKAttribution` as two annotated heatmaps (query node
    down, key node across; readable without hovering): the mean contributions to the score at
    ``key`` (default: the key the head attends most on average), and the same minus their mean
    over the row's other allowed keys, i.e. what makes the head prefer that key (under softmax a
    term equal at every key changes nothing). ``labels``: the residual stream's position labels."""
    mean_row = attr.mean_pattern
    key = int(mean_row.argmax() if attr.softmax else mean_row.abs().argmax()) if key is None else key
    name = (lambda p: labels[p] if labels and p < len(labels) else f"pos {p}")
    panels = [("score at the key", attr.mean[key]), ("against the other keys", attr.contrast(key))]
    top = max((float(z.nan_to_num().abs().max()) for _, z in panels), default=0.0) or 1.0
    nodes = list(attr.nodes)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=[t for t, _ in panels])
    for col, (title, z) in enumerate(panels, start=1):
        values = _round(z, 2)
        text = [["" if v != v else ("0" if abs(v) < 0.005 else f"{v:.2f}") for v in row] for row in values]
        fig.add_trace(go.Heatmap(z=values, x=nodes, y=nodes, text=text, texttemplate="%{text}",
                                 textfont={"size": 11}, zmin=-top, zmax=top, zmid=0.0, colorscale="RdBu",
                                 showscale=col == 1, colorbar={"title": {"text": "score"}},
                                 hovertemplate="query node %{y}<br>key node %{x}<br>%{z:.3f}<extra></extra>"),
                      row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="query-side node", col=1)
    fig.update_xaxes(title_text="key-side node", tickangle=-45)
    side = 36 * len(nodes) + 160
    fig.update_layout(
        title=(f"{head_name(attr.layer, attr.head)}: query {name(attr.query)} attends key {name(key)} "
               f"(mean attention {float(mean_row[key]):.2f})<br>score split by query node x key node"),
        height=side + 80, width=max(640, 2 * side + 200), font={"size": 12}, margin=dict(l=60, r=40, t=100, b=60))
    return fig


def seed_reads_figure(reads, labels: list[str] | None = None) -> go.Figure:
    """A :class:`~probes.qk_attribution.SeedBitReads` as an annotated heatmap (seed bit down, key
    identity across): how much setting each seed bit moves the query's attention on each key."""
    diff = _round(reads.difference, 3)
    top = max((abs(v) for row in diff for v in row if v == v), default=0.0) or 1.0
    text = [["" if v != v else f"{v:+.2f}" for v in row] for row in diff]
    n_bits, n_keys = len(diff), len(diff[0]) if diff else 0
    fig = go.Figure(go.Heatmap(
        z=diff, x=[f"key {j}" for j in range(n_keys)], y=[f"bit {i}" for i in range(n_bits)], text=text,
        texttemplate="%{text}", textfont={"size": 10}, zmin=-top, zmax=top, zmid=0.0, colorscale="RdBu",
        colorbar={"title": {"text": "set - unset"}},
        hovertemplate="seed %{y}<br>%{x}<br>attention set - unset %{z:.3f}<extra></extra>"))
    name = labels[reads.query] if labels and reads.query < len(labels) else f"pos {reads.query}"
    fig.update_yaxes(autorange="reversed", title_text="seed bit")
    fig.update_xaxes(title_text="key identity (wherever its pair sits)")
    noise = float(reads.control.nan_to_num().abs().max())
    fig.update_layout(title=(f"{head_name(reads.layer, reads.head)} at {name}: attention on each key with the seed bit set "
                             f"minus unset<br>largest |set - unset| {top:.2f}; with the seeds shuffled across "
                             f"examples (control) {noise:.2f}"), height=150 + 26 * n_bits, width=max(640, 160 + 48 * n_keys),
                      font={"size": 12}, margin=dict(l=70, r=40, t=90, b=60))
    return fig


def qk_table_rows(data: ReportData) -> list[dict]:
    """One row per head of the query/key attribution section: its top contributors and the
    patching check against random other contributors."""
    rows = []
    for attr, check in data.qk:
        d = check.to_dict()
        rows.append({"head": head_name(attr.layer, attr.head), "query": attr.query, "top 3": ", ".join(check.top),
                     "top change": d["top_change"], "random mean": d["random_mean"], "random max": d["random_max"],
                     "draws": d["n_draws"], "verdict": d["verdict"], "sum error": f"{attr.max_error:.1e}"})
    return rows


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
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>"


# the random-init control sits beside each probe's accuracy, with the verdict it gives
_PROBE_COLUMNS = ["variable", "instance", "hook", "position", "accuracy", "random_accuracy", "learned", "control",
                  "selectivity", "majority", "token_lookup", "leaks_skipped", "random_selectivity",
                  "random_best_selectivity", "causal_hook", "causal_changed", "causal_placebo",
                  "causal_counterfactual"]


def token_ticks(labels: list[str]) -> list[str]:
    """An example's axis ticks: each position's name and the token it holds (``x3: 7``), the
    labels without their leading index (``"3 x3: 7"`` -> ``"x3: 7"``, ``"2 +: +"`` -> ``"+"``)."""
    ticks = []
    for label in labels:
        first, _, rest = label.partition(" ")
        label = rest if first.isdigit() and rest else label
        name, sep, token = label.partition(": ")
        ticks.append(name if sep and token == name else label)  # "+: +" -> "+"
    return ticks


def _role_rows(data: ReportData) -> list[dict]:
    """One row per role: its best head and score, the chance baseline (uniform attention) and
    how far the best head is above it."""
    rows = []
    for role in data.roles.scores:
        layer, head, score = data.roles.best(role)
        chance = data.role_chance.get(role)
        rows.append({"role": role, "template": data.roles.templates[role], "best head": head_name(layer, head),
                     "score": score, "chance (uniform attention)": chance,
                     "above chance": None if chance is None else score - chance})
    return rows


def headline(data: ReportData) -> Headline:
    """What the page measured and its number: the role whose best head is furthest above its
    chance baseline; a verdict only when the report tested something (the query/key patching
    check of the heads asked for: HOLDS when every head's holds, else FAILS naming the heads)."""
    first = next(iter(data.roles.scores.values()))
    run = data.title.split(": ", 1)[-1]
    measured = f"attention of {run}'s {first.shape[0] * first.shape[1]} heads ({first.shape[0]} layers)"
    rows = [r for r in _role_rows(data) if r["above chance"] is not None]
    if rows:
        top = max(rows, key=lambda r: r["above chance"])
        number = (f"strongest role {top['role']}: {top['best head']} scores {top['score']:.2f} "
                  f"(uniform attention {top['chance (uniform attention)']:.2f})")
    else:
        role = next(iter(data.roles.scores))
        layer, head, score = data.roles.best(role)
        number = f"{role}: {head_name(layer, head)} scores {score:.2f}"
    if not data.qk:
        return Headline(measured, number)
    failing = [head_name(attr.layer, attr.head) for attr, check in data.qk if check.to_dict()["verdict"] != "holds"]
    if failing:
        return Headline(measured, number, "fails", failing=f"query/key patching check fails for {', '.join(failing)}")
    return Headline(measured, number, "holds")


def _sections(data: ReportData) -> list:
    """The page's sections (HTML strings and ``(div id, figure)``), after its headline."""
    parts: list = ["<h2>Head roles</h2>", ("roles", roles_figure(data))]
    parts.append("<p class='note'>chance: the score of a head that spreads its attention evenly over every key "
                 "it may see; a role score means something only well above it.</p>")
    parts.append(_table(_role_rows(data), ["role", "template", "best head", "score", "chance (uniform attention)",
                                           "above chance"]))
    parts.append("<h2>Average attention per head</h2>")
    labels, names = list(data.position_labels), list(data.position_names)
    shared = pattern_scale(*data.mean_patterns.values())
    for i, (name, pattern) in enumerate(data.mean_patterns.items()):
        parts.append((f"mean-{i}", pattern_figure(pattern, labels, f"mean pattern: {name}", ticks=names,
                                                  scale=shared)))
    parts.append("<h2>Example patterns (chosen by metadata)</h2><p class='note'>Each example's own tokens on both "
                 "axes (position: token).</p>")
    if data.examples:
        shared = pattern_scale(*(ex.pattern for ex in data.examples))
    for i, ex in enumerate(data.examples):
        parts.append((f"example-{i}", pattern_figure(ex.pattern, list(ex.labels), ex.title,
                                                     ticks=token_ticks(list(ex.labels)), scale=shared)))
    if data.probe_rows:
        parts.append("<h2>Probes</h2><p class='note'>Held-out accuracy on unseen input groups at the most "
                     "selective hook/position; control = the same probe on random-but-fixed labels per input "
                     "type (Hewitt &amp; Liang 2019); selectivity = accuracy - control; random_accuracy = the same "
                     "probe on a randomly initialised model at the same hook and position (learned: "
                     f"the trained model's probe beats it by {LEARNED_MARGIN}); token_lookup = a lookup from the "
                     "input token at that position to the label (fitted on the training groups, scored on the "
                     f"held-out ones); leaks_skipped = positions where that lookup reaches {LEAK_ABSOLUTE} or "
                     f"comes within {LEAK_MARGIN} of the best probe there (teacher forcing: the token is the "
                     "answer), never selected; causal = share of held-out outputs changed by "
                     "steering along the probe's pattern (placebo: a random direction of equal norm) and "
                     "share that became the answer the new value implies.</p>")
        parts.append(("probe-layers", probe_layers_figure(data)))
        parts.append(_table(list(data.probe_rows), _PROBE_COLUMNS))
    if data.seed_share is not None:
        parts.append("<h2>Seed channel</h2><p class='note'>Share of integrated-gradients attribution "
                     "(captum) that goes to the seed rather than the task input, per output.</p>")
        parts.append(_table([{"output": k, "seed share": v} for k, v in data.seed_share.items()],
                            ["output", "seed share"]))
    if data.qk:
        parts.append("<h2>Why heads attend where they do (query/key attribution)</h2><p class='note'>Each head's "
                     "pre-softmax score at one query, split exactly into query-side node x key-side node terms "
                     "(LayerNorm linearised at its frozen per-position scale; the terms sum to the model's "
                     "score within 1e-4). Patching check: the top 3 contributors (a node on the query or key "
                     "side) removed from the head's q/k input only, against random sets of 3 other "
                     "contributors; change = total variation of the head's pattern row, mean over examples. "
                     "Holds when the top change is >= random + 0.05 and >= twice it.</p>")
        offset = len(data.examples[0].labels) - len(names) if data.examples else 0
        stream = (["seed"] * offset) + names
        for i, (attr, _) in enumerate(data.qk):
            parts.append((f"qk-{i}", qk_attribution_figure(attr, stream)))
        if data.qk_seed_reads:
            parts.append("<p class='note'>Which keys each head reads under which seed bits: the query's mean "
                         "attention weight (absolute value for linear attention) on the pair holding each key "
                         "identity, among examples with the seed bit set minus those with it unset.</p>")
        for i, reads in enumerate(data.qk_seed_reads):
            parts.append((f"qk-seed-{i}", seed_reads_figure(reads, stream)))
        parts.append(_table(qk_table_rows(data), ["head", "query", "top 3", "top change", "random mean",
                                                  "random max", "draws", "verdict", "sum error"]))
    parts.append("<h2>Run</h2><details><summary>what was analysed (run, checkpoint, task config)</summary><pre>"
                 + html.escape(json.dumps(data.info, indent=1, default=str)) + "</pre></details>")
    parts.append("<p class='note'>computed in " + html.escape(
        ", ".join(f"{k} {v:.1f} s" for k, v in data.seconds.items())) + "</p>")
    return parts


def render_html(data: ReportData) -> str:
    """The whole page as one string."""
    return page_html(data.title, _sections(data), headline=headline(data))


def write_report(data: ReportData, path: str | Path) -> Path:
    """Write the page to ``path`` (folders created); return the path."""
    return write_page(path, data.title, _sections(data), headline=headline(data))


__all__ = ["headline", "pattern_figure", "pattern_scale", "probe_layers_figure", "qk_attribution_figure", "qk_table_rows",
           "render_html", "roles_figure", "seed_reads_figure", "token_ticks", "write_report"]
