"""The length-generalisation figure (:mod:`circuits.analyses.length_generalization`): its title
is the headline (the extrapolation factor); three panels read without hovering:

1. exact match by length, the trained lengths shaded, the 0.9 bar dashed, lengths not run marked;
2. accuracy per output position by length (a heatmap, the number in each cell), so the output
   that fails first stands out;
3. each head's attention drift from the trained maximum by length (the drift bar dashed), labelled
   at its end, so the head that moves first is named on the figure.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_rand.figures.style import SEQUENTIAL


def generalization_figure(found: Any) -> go.Figure:
    from circuits.analyses.length_generalization import DRIFTS

    scores = sorted(found.scores, key=lambda s: s.length)
    run = [s for s in scores if s.exact_match is not None]
    lo, hi = found.trained
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.09, row_heights=[0.36, 0.34, 0.30],
                        subplot_titles=("exact match by length", "accuracy per output position",
                                        "attention drift from the trained maximum, per head"))
    fig.add_vrect(x0=lo - 0.5, x1=hi + 0.5, fillcolor="#2ca02c", opacity=0.08, line_width=0, row=1, col=1)
    fig.add_trace(go.Scatter(x=[s.length for s in run], y=[s.exact_match for s in run], mode="lines+markers",
                             name="exact match", line=dict(color="#1f77b4")), row=1, col=1)
    skipped = [s for s in scores if s.exact_match is None]
    if skipped:
        fig.add_trace(go.Scatter(x=[s.length for s in skipped], y=[0] * len(skipped), mode="markers",
                                 marker=dict(symbol="x", color="#999"), name="not run",
                                 text=[s.skipped for s in skipped]), row=1, col=1)
    fig.add_hline(y=found.threshold, line_dash="dash", line_color="#d62728", row=1, col=1,
                  annotation_text=f"{found.threshold:g}", annotation_position="top left")
    fig.add_annotation(x=(lo + hi) / 2, y=1.08, text="trained", showarrow=False, row=1, col=1)
    if run:
        width = max(len(s.per_position) for s in run)
        z = [[s.per_position[k] if k < len(s.per_position) else None for s in run] for k in range(width)]
        text = [[f"{v:.2f}" if v is not None else "" for v in row] for row in z]
        fig.add_trace(go.Heatmap(x=[s.length for s in run], y=list(range(width)), z=z, text=text,
                                 texttemplate="%{text}" if width * len(run) <= 400 else None, zmin=0, zmax=1,
                                 colorscale=SEQUENTIAL, showscale=False), row=2, col=1)
    lengths = sorted(found.attention)
    heads = [h.head for h in found.attention.get(found.reference, [])]
    for head in heads:
        ys = [next((h.drift for h in found.attention[L] if h.head == head), None) for L in lengths]
        fig.add_trace(go.Scatter(x=lengths, y=ys, mode="lines+markers", name=head, showlegend=False), row=3, col=1)
        if lengths:
            fig.add_annotation(x=lengths[-1], y=ys[-1], text=head, showarrow=False, xanchor="left", row=3, col=1)
    fig.add_hline(y=DRIFTS, line_dash="dash", line_color="#d62728", row=3, col=1)
    fig.update_yaxes(range=[0, 1.12], title_text="exact match", row=1, col=1)
    fig.update_yaxes(title_text="output position", row=2, col=1)
    fig.update_yaxes(range=[0, 1], title_text="drift (TV)", row=3, col=1)
    fig.update_xaxes(title_text="length", row=3, col=1)
    fig.update_layout(title=found.headline()[:160], height=900, width=900, showlegend=False,
                      margin=dict(t=90, r=80))
    return fig


__all__ = ["generalization_figure"]
