"""Figures of the case studies (plotly) and their offline HTML page: the circuit drawing from
:mod:`circuits.draw.circuit_figure` and the ablation figures, on one page
(:func:`interp_rand.figures.html_page.write_page`: plotly.js inlined once)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp_rand.reports.case_studies.carry import CarryStudy
from interp_rand.reports.case_studies.sorting import SortStudy
from circuits.draw.circuit_figure import circuit_figure
from interp_rand.figures.html_page import write_page


def carry_ablation_figure(study: CarryStudy) -> go.Figure:
    """Digit accuracy (carry / no carry / cascade >= 2) intact, with the carry components
    carry-removed, with random same-position components carry-removed (each draw a dot), and
    with plain mean ablation."""
    groups = ("carry", "no_carry", "cascade")
    labels = ["carry_in = 1", "carry_in = 0", "cascade >= 2"]
    fig = go.Figure()
    rows = [("intact", [study.baseline]), ("carry components, carry removed", [study.removed]),
            ("random components, carry removed", list(study.controls)),
            ("carry components, mean-ablated", [study.mean_ablated]),
            ("random components, mean-ablated", list(study.mean_controls))]
    for name, accs in rows:
        values = [sum(getattr(a, g) for a in accs) / len(accs) for g in groups]
        fig.add_trace(go.Bar(name=name, x=labels, y=values, text=[f"{v:.3f}" for v in values],
                             textposition="outside"))
    fig.update_layout(barmode="group", title="Carry case study: answer-digit accuracy under ablation",
                      yaxis={"title": "accuracy", "range": [0, 1.1]}, plot_bgcolor="white", height=480)
    return fig


def sort_ablation_figure(study: SortStudy) -> go.Figure:
    """Accuracy per output position: intact, next-element heads ablated, random heads ablated
    (mean, and each draw faint)."""
    x = [f"y{k + 1}" for k in range(len(study.baseline))]
    fig = go.Figure()
    for draw, heads in zip(study.controls, study.control_heads):
        fig.add_trace(go.Scatter(x=x, y=draw.tolist(), mode="lines", line={"color": "rgba(150,150,150,0.35)"},
                                 name="random heads: " + ", ".join(n.name for n in heads), showlegend=False))
    fig.add_trace(go.Scatter(x=x, y=study.baseline.tolist(), mode="lines+markers", name="intact"))
    fig.add_trace(go.Scatter(x=x, y=study.ablated.tolist(), mode="lines+markers",
                             name="next-element heads ablated (" + ", ".join(n.name for n in study.heads) + ")"))
    if len(study.controls):
        fig.add_trace(go.Scatter(x=x, y=study.controls.mean(0).tolist(), mode="lines+markers",
                                 name="random heads ablated (mean)"))
    fig.update_layout(title="Sort case study: accuracy per output position (mean ablation)",
                      yaxis={"title": "accuracy", "range": [0, 1.05]}, xaxis={"title": "output position"},
                      plot_bgcolor="white", height=450)
    return fig


def role_score_figure(study: SortStudy) -> go.Figure:
    """Heatmap of the ``next_larger`` score per head, with the chance and random-init levels."""
    scores = study.role_scores
    fig = go.Figure(go.Heatmap(
        z=scores.tolist(), x=[f"head {h}" for h in range(scores.shape[1])],
        y=[f"layer {l}" for l in range(scores.shape[0])], colorscale="Blues", zmin=0, zmax=1,
        text=[[f"{v:.3f}" for v in row] for row in scores.tolist()], texttemplate="%{text}"))
    fig.update_layout(title=f"next_larger role score per head (uniform attention {study.chance_score:.3f}, "
                      f"random-init best {study.random_init_best:.3f})", height=300)
    return fig


def write_case_study_html(path: str | Path, title: str, claims: list[str], figures: list[go.Figure]) -> Path:
    """One self-contained HTML page: the printed claims, then each figure (plotly.js once)."""
    claim_list = "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in claims) + "</ul>"
    return write_page(path, title, [claim_list, *figures])


def study_figures(study: Any) -> list[go.Figure]:
    """The figures of a study: its circuit, then its ablation (and role) figures."""
    if isinstance(study, CarryStudy):
        return [circuit_figure(study.circuit, "carry-flip circuit (EAP)"), carry_ablation_figure(study)]
    return [circuit_figure(study.circuit, "sort circuit (EAP)"), role_score_figure(study), sort_ablation_figure(study)]


__all__ = ["carry_ablation_figure", "role_score_figure", "sort_ablation_figure", "study_figures",
           "write_case_study_html"]
