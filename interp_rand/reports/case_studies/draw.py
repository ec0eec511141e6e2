"""Figures of the case studies (plotly) and their offline HTML page: the circuit drawing from
:mod:`circuits.draw.circuit_figure` (with the attention flow: key/value edges reach the query
positions that attend to the key, so no part of the drawing is an island; positions named by
the task's tokens) and the ablation figures, on one page
(:func:`interp_rand.figures.html_page.write_page`, after its headline)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp_rand.reports.case_studies.carry import CarryStudy
from interp_rand.reports.case_studies.sorting import SortStudy
from circuits.draw.circuit_figure import circuit_figure
from interp_rand.figures.headline import Headline
from interp_rand.figures.html_page import write_page
from interp_rand.figures.style import SEQUENTIAL, verdict_colour


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
        y=[f"layer {l}" for l in range(scores.shape[0])], colorscale=SEQUENTIAL, zmin=0, zmax=1,
        text=[[f"{v:.3f}" for v in row] for row in scores.tolist()], texttemplate="%{text}"))
    fig.update_layout(title=f"next_larger role score per head (uniform attention {study.chance_score:.3f}, "
                      f"random-init best {study.random_init_best:.3f})", height=300)
    return fig


_VERDICT_WORD = re.compile(r"\b(HOLDS|FAILS|INCONCLUSIVE)\b")


def claim_item(line: str) -> str:
    """A claim line as a list item, its verdict word coloured (a line without one plain)."""
    text = html.escape(line)
    found = _VERDICT_WORD.search(text)
    if found is None:
        return f"<li>{text}</li>"
    colour = verdict_colour(found.group(1))
    word = f"<b style='color:{colour}'>{found.group(1)}</b>"
    return f"<li>{text[:found.start()]}{word}{text[found.end():]}</li>"


def write_case_study_html(path: str | Path, title: str, claims: list[str], figures: list[go.Figure],
                          headline: Headline | None = None) -> Path:
    """One HTML page: the ``headline``, each figure, then the printed claims (verdicts coloured)."""
    claim_list = "<ul>" + "".join(claim_item(c) for c in claims) + "</ul>"
    return write_page(path, title, [*figures, claim_list], headline=headline)


def study_circuit_figure(study: Any, title: str) -> go.Figure:
    """The study's circuit with its attention flow (each head in its own colour, as on the
    circuit page: :func:`~circuits.draw.circuit_figure.circuit_figure`'s default) and the task's
    position names."""
    names = list(study.position_names) or None
    return circuit_figure(study.circuit, f"{title}: {len(study.circuit)} of {study.circuit.total_edges} edges",
                          attention=study.attention, position_names=names)


def study_figures(study: Any) -> list[go.Figure]:
    """The figures of a study: its circuit, then its ablation (and role) figures."""
    if isinstance(study, CarryStudy):
        return [study_circuit_figure(study, "carry-flip circuit (EAP)"), carry_ablation_figure(study)]
    return [study_circuit_figure(study, "sort circuit (EAP)"), role_score_figure(study), sort_ablation_figure(study)]


__all__ = ["carry_ablation_figure", "claim_item", "role_score_figure", "sort_ablation_figure", "study_circuit_figure",
           "study_figures", "write_case_study_html"]
