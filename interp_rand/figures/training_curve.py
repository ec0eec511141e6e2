"""The training curve of one run: loss, held-out exact match and learning rate against step
(drawing only; the records are read from the run's ``metrics.jsonl`` by ``interp-rand curve``)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

# (record key, trace name, panel) in the order drawn; a key no record has is left out
_SERIES = (("train_loss", "training loss", 1), ("loss", "held-out loss", 1),
           ("exact_match", "held-out exact match", 2), ("lr", "learning rate", 3))
_PANELS = ("loss (answer positions)", "exact match (held out)", "learning rate")


def training_curve_figure(records: list[dict[str, Any]], title: str) -> go.Figure:
    """Three panels over ``step``: training and held-out loss (log scale), held-out exact match
    (0..1) and the learning rate; ``records``: ``metrics.jsonl``'s lines (``step`` and any of
    ``train_loss``, ``loss``, ``exact_match``, ``lr``)."""
    if not records:
        raise ValueError("no records to draw: the run's metrics.jsonl is empty")
    fig = make_subplots(rows=1, cols=3, subplot_titles=_PANELS, horizontal_spacing=0.08)
    colours = {"train_loss": "#1f77b4", "loss": "#d62728", "exact_match": "#2ca02c", "lr": "#7f7f7f"}
    for key, name, col in _SERIES:
        points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if not points:
            continue
        fig.add_trace(go.Scatter(x=[s for s, _ in points], y=[v for _, v in points], name=name,
                                 mode="lines+markers" if len(points) < 30 else "lines",
                                 line={"color": colours[key]}), row=1, col=col)
    losses = [r[k] for r in records for k in ("train_loss", "loss") if r.get(k) is not None and r[k] > 0]
    if losses and max(losses) / min(losses) >= 10:
        # one label a decade: plotly draws the in-between labels of a log axis at 9 px
        fig.update_yaxes(type="log", dtick=1, exponentformat="e", title_text="loss (log)", row=1, col=1)
    else:  # less than a decade: a log axis with a label a decade would have no label at all
        fig.update_yaxes(title_text="loss", row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], title_text="exact match", row=1, col=2)
    fig.update_yaxes(title_text="lr", exponentformat="e", row=1, col=3)
    fig.update_xaxes(title_text="step")
    fig.update_layout(template="plotly_white", title=title, font={"size": 12}, height=440, width=1250,
                      legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
                      margin={"l": 70, "r": 30, "t": 90, "b": 110})
    return fig


__all__ = ["training_curve_figure"]
