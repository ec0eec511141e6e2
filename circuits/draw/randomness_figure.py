"""Figures of the randomness report (:class:`interp_rand.reports.randomness.RandomnessReport`,
or its JSON ``{"runs": [...], "summary": {...}, "claims": [...]}``), drawn from its results (so
this module computes nothing): usage score per node of every run beside the random-init
control, seed fraction of the residual stream per layer, the recall stored-set map and
coverage, the colouring noise-resample effect by ring distance. :func:`write_randomness_html`
writes the page (:func:`interp_rand.figures.html_page.write_page`): the headline first (the
first run's seed usage against the compared run's and the random-init control, the task's key
number, one verdict over the claims), the figures, then the claims and the key numbers.

    >>> write_randomness_html(randomness_report("zoo:recall-Aq_R"), "randomness.html")
    >>> write_randomness_html(json.loads(Path("randomness.json").read_text()), "randomness.html")
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp_rand.figures.headline import Headline
from interp_rand.figures.html_page import write_page
from interp_rand.figures.style import SEQUENTIAL

FONT = 12
#: The trained runs' bars (A^q_R first), and the random-init control's (grey, hatched).
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b")
CONTROL_COLOUR = "#9e9e9e"


def _colour(k: int) -> str:
    """The colour of the ``k``-th run on every figure of the page."""
    return RUN_COLOURS[k % len(RUN_COLOURS)]


def run_role(run: dict[str, Any]) -> str:
    """What a run is, for labels: ``A^q_R, q = 100`` (the q-norm objective, q > 1), ``ERM`` (mean
    loss, or q = 1), ``r0 only`` appended for a model trained on the fixed seed."""
    objective, q = run.get("objective"), run.get("q")
    if objective == "erm" or (objective == "qnorm" and q is not None and float(q) == 1.0):
        role = "ERM"
    elif objective == "qnorm" and q is not None:
        role = f"A^q_R, q = {float(q):g}"
    else:
        role = objective or ""
    if run.get("seed_source") == "fixed":
        role = f"{role}, r0 only" if role else "r0 only"
    return role


def run_label(run: dict[str, Any]) -> str:
    """``zoo:recall-Aq_R (A^q_R, q = 100, step 6000)``: the run's name and what it is."""
    parts = [x for x in (run_role(run), None if run.get("step") is None else f"step {run['step']}") if x]
    return f"{run['name']} ({', '.join(parts)})" if parts else run["name"]


def _controls(runs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The random-init controls to draw: one per distinct control (the compared runs of one
    architecture share theirs)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for run in runs:
        control = run.get("random_init")
        if control is not None and all(control["score"] != c["score"] or control["reference"] != c["reference"]
                                       for _, c in out):
            out.append((run["name"], control))
    return out


def usage_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Grouped bars: usage score (mean TV) per node, the whole-model seed resample as the last
    group; one bar per run (A^q_R, ERM, ...) and the random-init control beside them, each bar
    labelled with its value (so an ERM bar of 0.0008 is readable)."""
    fig = go.Figure()
    controls = _controls(runs)
    series = [(run_label(run), run["usage"]["score"], run["usage"]["reference"], None) for run in runs]
    series += [(("random init" if len(controls) == 1 else f"random init of {name}"), c["score"], c["reference"],
                CONTROL_COLOUR) for name, c in controls]
    for k, (name, score, reference, colour) in enumerate(series):
        labels = list(score) + ["whole model"]
        values = list(score.values()) + [reference]
        fig.add_trace(go.Bar(x=labels, y=values, name=name, texttemplate="%{y:.2g}", textposition="outside",
                             textfont={"size": FONT}, cliponaxis=False,
                             marker={"color": colour or _colour(k),
                                     "pattern": {"shape": "/" if colour else ""}},
                             hovertemplate="%{x}: %{y:.4f}<extra>" + html.escape(name) + "</extra>"))
    top = max((v for _, score, ref, _ in series for v in [*score.values(), ref]), default=0.0)
    names = " vs ".join([run_label(r) for r in runs] + ["random init"])
    fig.update_layout(title={"text": f"Seed usage per node (hatched: random-init control)<br>{html.escape(names)}",
                             "font": {"size": 14}},
                      barmode="group", yaxis_title="mean total variation", height=440, font={"size": FONT},
                      yaxis_range=[0, 1.15 * top if top > 0 else 1], uniformtext={"minsize": FONT, "mode": "show"},
                      legend={"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top", "font": {"size": FONT}},
                      margin={"t": 80, "b": 110})
    return fig


def usage_position_figure(run: dict[str, Any], zmax: float | None = None) -> go.Figure:
    """Heatmap node x position of the per-position usage score of one run, on ``0 .. zmax``
    (give compared runs one ``zmax``; default: this run's largest score)."""
    per = run["usage"]["per_position"]
    nodes = list(per)
    z = [per[n] for n in nodes]
    fig = go.Figure(go.Heatmap(z=z, y=nodes, x=[str(p) for p in range(len(z[0]))], colorscale=SEQUENTIAL,
                               zmin=0, zmax=zmax, hovertemplate="%{y} @ %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=f"{run['name']}: usage score by node and position", xaxis_title="position",
                      height=120 + 40 * len(nodes), font={"size": FONT})
    return fig


def entry_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Seed fraction of the residual-stream variance per hook (log scale), one line per run."""
    fig = go.Figure()
    for k, run in enumerate(runs):
        entry = run["entry"]
        fig.add_trace(go.Scatter(x=entry["hooks"], y=[max(f, 1e-8) for f in entry["seed_fraction"]],
                                 mode="lines+markers", name=run["name"], line={"color": _colour(k)}))
    fig.update_layout(title="Where seed information enters: seed / (seed + input) variance per hook",
                      yaxis_type="log", yaxis_dtick=1, yaxis_title="seed fraction", height=400, font={"size": FONT})
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
                      yaxis_title="seed (sorted)", height=600, font={"size": FONT})
    return fig


def coverage_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Per-position coverage bars, one group per run."""
    fig = go.Figure()
    for k, run in enumerate(runs):
        cov = run["stored_set"]["coverage"]
        fig.add_trace(go.Bar(x=[str(p) for p in range(len(cov))], y=cov, name=run["name"],
                             marker={"color": _colour(k)}))
    fig.update_layout(title="Coverage: fraction of (input, seed) storing each key position", barmode="group",
                      xaxis_title="key position", yaxis_range=[0, 1], height=400, font={"size": FONT})
    return fig


def resample_distance_figure(runs: list[dict[str, Any]]) -> go.Figure:
    """Colour-change rate of a vertex when the noise at ring distance d is redrawn."""
    fig = go.Figure()
    for k, run in enumerate(runs):
        effect = run["symmetry"]["resample"]
        fig.add_trace(go.Bar(x=effect["distance"], y=effect["change_rate"], name=run["name"],
                             marker={"color": _colour(k)}))
    fig.update_layout(title="Colour change when one vertex's noise at ring distance d is redrawn",
                      xaxis_title="ring distance (0 = own noise)", yaxis_title="change rate", barmode="group",
                      height=400, font={"size": FONT})
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


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2g}" if abs(value) < 0.01 else f"{value:.3f}"


def randomness_headline(report: Any) -> Headline:
    """What the page opens with: the first run's whole-model seed usage against the compared
    run's (ERM) and the random-init control, the task's key number (recall: set diversity),
    and one verdict over the report's claims naming the first that fails."""
    from interp_rand.figures.headline import overall_verdict

    report = _as_dict(report)
    runs, claims = report["runs"], report.get("claims", [])
    first = runs[0]
    names = [f"{r['name']} ({run_role(r)})" if run_role(r) else r["name"] for r in runs]
    if all("decides" in r for r in runs):  # what the seed decides: use for the task
        measured = "how often the seed decides success (right under one seed, wrong under another) of " + " vs ".join(
            names + ["random init"])
        number = " vs ".join([_number(r["decides"]["decides"]) for r in runs]
                             + [_number(first["random_init"]["decides"]["decides"])])
    else:
        measured = "seed usage (whole model, mean TV) of " + " vs ".join(names + ["random init"])
        number = " vs ".join([_number(r["usage"]["reference"]) for r in runs] + [_number(first["random_init"]["reference"])])
    mixes = [r.get("mechanism", {}).get("mixing") for r in runs]
    if mixes[0] is not None:
        diversity = " vs ".join("n/a" if m["set_diversity"] is None else f"{m['set_diversity']:.2f}"
                                for m in mixes if m is not None)
        number += f" · {'mixes' if mixes[0]['mixes'] else 'does not mix'} strategies: set diversity {diversity}"
    rule = first.get("mechanism", {}).get("rule")
    if rule is not None:
        number += f" · agreement with the classical rule {rule['agreement']:.2f} vs {rule['agreement_shuffled']:.2f} shuffled"
    failing = next((c for c in claims if c["verdict"] == "fails"), None) or next(
        (c for c in claims if c["verdict"] == "inconclusive"), None)
    why = None
    if failing is not None:
        why = (f"{failing['verdict']}: {failing['claim']} ({_number(failing['value'])} vs {failing['control_label']} "
               f"{_number(failing['control'])})")
    return Headline(measured, number, overall_verdict(claims), failing=why)


def _claims_table(claims: list[dict[str, Any]]) -> str:
    from interp_rand.figures.style import verdict_colour

    if not claims:
        return ""
    rows = "".join(
        f"<tr><td class='l'>{html.escape(c['claim'])}</td><td style='color:{verdict_colour(c['verdict'])}'>"
        f"<b>{c['verdict'].upper()}</b></td><td>{_cell(c['value'])}</td><td>{_cell(c['control'])}</td>"
        f"<td class='l'>{html.escape(c['control_label'])}</td><td class='l'>{html.escape(c['reason'])}</td></tr>"
        for c in claims)
    return ("<h2>Claims</h2><div class='scroll'><table><tr><th style='text-align:left'>claim</th><th>verdict</th><th>value</th><th>control</th>"
            f"<th>control is</th><th>why not</th></tr>{rows}</table></div>")


def write_randomness_html(report: Any, path: str | Path) -> Path:
    """The page (``report``: a ``RandomnessReport`` or its JSON dict): the headline, the
    figures (seed usage of every run beside the random-init control first), the algorithm the
    claims test (recall's key codes) where there is one, then the claims and the key numbers."""
    report = _as_dict(report)
    runs = report["runs"]
    note = ("<p class='note'>What the seed decides (the headline): the probability that the model is right under "
            "one seed and wrong under another for the same input; 0 means the seed decides nothing, and a network "
            "that passes its seed through but is rarely right scores near 0, so it measures use for the task. "
            "Usage score (the figure): mean total variation between the clean output distribution and the one "
            "with a single node's activation taken from the same input under another seed (0 = the node carries "
            "no seed information to the output): where the seed flows, which a random network also shows. Random "
            "init: the first run's architecture with fresh random weights, its seed use by accident.</p>")
    title = "randomness channel: " + " vs ".join(run_label(r) for r in runs)
    algorithm = report.get("algorithm")
    pseudocode = ([f"<h2>The algorithm the claims test</h2><pre>{html.escape(algorithm)}</pre>"] if algorithm else [])
    sections = [*randomness_figures(report), note, *pseudocode, _claims_table(report.get("claims", [])),
                "<h2>Key numbers</h2>" + _summary_table(report.get("summary", {}))]
    return write_page(path, title, sections, heading=False, headline=randomness_headline(report))


__all__ = [
    "coverage_figure",
    "entry_figure",
    "randomness_figures",
    "randomness_headline",
    "resample_distance_figure",
    "run_label",
    "run_role",
    "stored_map_figure",
    "usage_figure",
    "usage_position_figure",
    "write_randomness_html",
]
