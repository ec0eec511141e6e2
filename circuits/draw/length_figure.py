"""The length-generalisation figure (:mod:`circuits.analyses.length_generalization`): its title
is the headline (the extrapolation factor); three panels read without hovering:

1. exact match by length, the trained lengths shaded, the 0.9 bar dashed, lengths not run marked;
2. accuracy per output position by length (a heatmap, the number in each cell), so the output
   that fails first stands out;
3. each head's attention drift from the trained maximum by length (the drift bar dashed), the three
   that end furthest labelled at their end, so the head that moves is named on the figure.

With a mechanism checked by length, panel 1 also draws each variable family's mean interchange
accuracy (dotted), beside the exact match it explains.
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
    fig.add_trace(go.Scatter(x=[s.length for s in run], y=[s.exact_match for s in run], mode="lines+markers",
                             name="exact match", line=dict(color="#1f77b4")), row=1, col=1)
    mechanism = getattr(found, "mechanism", None)
    if mechanism is not None and mechanism.iia:  # each variable family's mean IIA, where it was measured
        lengths_m = sorted(mechanism.iia)
        for family in sorted({f for v in mechanism.iia.values() for f in v}):
            xs = [L for L in lengths_m if family in mechanism.iia[L]]
            fig.add_trace(go.Scatter(x=xs, y=[mechanism.iia[L][family] for L in xs], mode="lines+markers",
                                     line=dict(dash="dot", color="#9467bd"), name=f"IIA {family}_k"), row=1, col=1)
            fig.add_annotation(x=xs[-1], y=mechanism.iia[xs[-1]][family], text=f"IIA {family}_k", showarrow=False,
                               xanchor="left", font=dict(color="#9467bd"), row=1, col=1)
    skipped = [s for s in scores if s.exact_match is None]
    if skipped:
        fig.add_trace(go.Scatter(x=[s.length for s in skipped], y=[0] * len(skipped), mode="markers",
                                 marker=dict(symbol="x", color="#999"), name="not run",
                                 text=[s.skipped for s in skipped]), row=1, col=1)
    fig.add_hline(y=found.threshold, line_dash="dash", line_color="#d62728", row=1, col=1,
                  annotation_text=f"{found.threshold:g}", annotation_position="top left")
    fig.add_annotation(x=(lo + hi) / 2, y=1.08, text=f"trained {lo}-{hi}", showarrow=False, row=1, col=1)
    if run:
        width = max(len(s.per_position) for s in run)
        z = [[s.per_position[k] if k < len(s.per_position) else None for s in run] for k in range(width)]
        text = [[f"{v:.2f}" if v is not None else "" for v in row] for row in z]
        fig.add_trace(go.Heatmap(x=[s.length for s in run], y=list(range(width)), z=z, text=text,
                                 texttemplate="%{text}" if width * len(run) <= 400 else None, zmin=0, zmax=1,
                                 colorscale=SEQUENTIAL, showscale=True,
                                 colorbar=dict(title="accuracy", len=0.3, y=0.5, thickness=12)), row=2, col=1)
    lengths = sorted(found.attention)
    heads = [h.head for h in found.attention.get(found.reference, [])]
    drifts = {head: [next((h.drift for h in found.attention[L] if h.head == head), None) for L in lengths]
              for head in heads}
    # label the three heads that end furthest from the trained maximum (all of them overlap near 0)
    labelled = sorted(heads, key=lambda h: -(drifts[h][-1] or 0))[:3] if lengths else []
    for head in heads:
        ys = drifts[head]
        fig.add_trace(go.Scatter(x=lengths, y=ys, mode="lines+markers", name=head, showlegend=False,
                                 opacity=1.0 if head in labelled else 0.35), row=3, col=1)
        if head in labelled:
            fig.add_annotation(x=lengths[-1], y=ys[-1], text=head, showarrow=False, xanchor="left", row=3, col=1)
    fig.add_hline(y=DRIFTS, line_dash="dash", line_color="#d62728", row=3, col=1)
    for row in (1, 3):  # the trained lengths shaded (after the traces: plotly skips an empty subplot)
        fig.add_vrect(x0=lo - 0.5, x1=hi + 0.5, fillcolor="#2ca02c", opacity=0.18, line_width=0, layer="below",
                      row=row, col=1)
    fig.update_yaxes(range=[0, 1.12], title_text="exact match", row=1, col=1)
    fig.update_yaxes(title_text="output position", row=2, col=1)
    fig.update_yaxes(range=[0, 1], title_text="drift (TV)", row=3, col=1)
    fig.update_xaxes(title_text="length", row=3, col=1)
    fig.update_layout(title=found.headline()[:160], height=900, width=900, showlegend=False, template="plotly_white",
                      margin=dict(t=90, r=80))
    return fig


__all__ = ["generalization_figure"]
