"""The training curve of one run: loss, held-out exact match and learning rate against step
(drawing only; the records are read from the run's ``metrics.jsonl`` by ``interp-rand curve``),
and the headline its page opens with, which says plainly when the recorded curve starts late
(:func:`starts_late`: the model had learned the task before its first evaluation, so the
learning phase is not on the curve)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_rand.figures.headline import Headline

#: The recorded curve starts late when its first evaluation's exact match is already at least
#: this share of the best recorded one (and at least :data:`LATE_FLOOR`): the task was learned
#: before the first record.
LATE_SHARE = 0.9
LATE_FLOOR = 0.5

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
    # no fixed width: the figure follows the window (PLOTLY_CONFIG's responsive), never scrolls sideways
    fig.update_layout(template="plotly_white", title=title, font={"size": 12}, height=440,
                      legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
                      margin={"l": 70, "r": 30, "t": 90, "b": 110})
    return fig


def starts_late(records: list[dict[str, Any]]) -> str | None:
    """Why the recorded curve starts late (a sentence), or None: its first evaluation's held-out
    exact match is already >= :data:`LATE_SHARE` of the best recorded one and >=
    :data:`LATE_FLOOR`, so the model learned the task before anything was recorded."""
    scored = [r for r in records if isinstance(r.get("exact_match"), (int, float))]
    if len(scored) < 1:
        return None
    first, best = scored[0], max(r["exact_match"] for r in scored)
    if first["exact_match"] >= max(LATE_FLOOR, LATE_SHARE * best):
        return (f"the recorded curve starts late: its first evaluation (step {first['step']}) is already at exact "
                f"match {first['exact_match']:.3f}, so the learning phase before it is not recorded")
    return None


def curve_headline(records: list[dict[str, Any]], label: str) -> Headline:
    """The curve page's headline: the run's last held-out exact match (or loss), how many
    evaluations from which step, and :func:`starts_late`'s sentence when it does. No verdict."""
    if not records:
        raise ValueError("no records to draw: the run's metrics.jsonl is empty")
    last = records[-1]
    if isinstance(last.get("exact_match"), (int, float)):
        number = f"held-out exact match {last['exact_match']:.4f} at step {last['step']}"
    elif isinstance(last.get("loss"), (int, float)):
        number = f"held-out loss {last['loss']:.3g} at step {last['step']}"
    else:
        number = f"last step {last['step']}"
    number += f" · {len(records)} evaluations from step {records[0]['step']}"
    return Headline(f"training curve of {label}", number, failing=starts_late(records))


__all__ = ["LATE_FLOOR", "LATE_SHARE", "curve_headline", "starts_late", "training_curve_figure"]
