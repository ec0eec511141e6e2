"""Training curves of one or more runs as a plotly figure (drawing only; no computation)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots


def training_curves(histories: dict[str, list[dict[str, Any]]]) -> go.Figure:
    """Loss and exact-match against step, one colour per run.

    ``histories``: run label -> evaluation records as written to ``metrics.jsonl`` (``step``,
    ``train_loss``, ``loss``, ``exact_match``).
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=("loss (answer positions)", "exact match (held out)"))
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    for i, (label, records) in enumerate(histories.items()):
        colour = palette[i % len(palette)]
        steps = [r["step"] for r in records]
        fig.add_trace(go.Scatter(x=steps, y=[r["train_loss"] for r in records], name=f"{label} train",
                                 line={"color": colour}), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[r["loss"] for r in records], name=f"{label} held out",
                                 line={"color": colour, "dash": "dot"}), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[r["exact_match"] for r in records], name=f"{label}",
                                 line={"color": colour}, showlegend=False), row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_layout(template="plotly_white", height=420, width=1000)
    return fig
