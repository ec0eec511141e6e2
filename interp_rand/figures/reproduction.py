"""The reproduction figure: average and worst-5% success of each variant, ours beside the
paper's values (drawing only; the numbers come from :mod:`interp_rand.reproduce`)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

_COLOURS = {"A^E_r0": "#7f7f7f", "A^q_r0": "#bcbd22", "A^E_R": "#1f77b4", "A^q_R": "#d62728",
            "A^q_R (m=1)": "#ff7f0e"}


def reproduction_figure(rows: list[dict[str, Any]], paper: list[dict[str, Any]], x_key: str, title: str) -> go.Figure:
    """``rows``: ours, each ``{"variant", x_key, "average", "worst_5pct", ...}`` (with optional
    ``"{metric}_range": (min, max)`` over training seeds, drawn as error bars); ``paper``: the
    paper's points ``{"variant", x_key, "metric": "average"|"worst_5pct", "value"}``."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("average success", "worst-5% success"))
    in_legend: set[str] = set()

    def first_time(name: str) -> bool:
        new = name not in in_legend
        in_legend.add(name)
        return new

    for col, metric in ((1, "average"), (2, "worst_5pct")):
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r[x_key])
            colour = _COLOURS.get(variant, "#17becf")
            ranges = [r.get(f"{metric}_range") or (r[metric], r[metric]) for r in mine]
            error = {"type": "data", "symmetric": False,
                     "array": [high - r[metric] for r, (_, high) in zip(mine, ranges)],
                     "arrayminus": [r[metric] - low for r, (low, _) in zip(mine, ranges)]}
            fig.add_trace(go.Scatter(
                x=[r[x_key] for r in mine], y=[r[metric] for r in mine], mode="lines+markers", error_y=error,
                name=f"{variant} (ours)", legendgroup=variant, showlegend=first_time(f"{variant} (ours)"),
                line={"color": colour}), row=1, col=col)
            theirs = sorted((p for p in paper if p["variant"] == variant and p["metric"] == metric),
                            key=lambda p: p[x_key])
            if theirs:
                fig.add_trace(go.Scatter(
                    x=[p[x_key] for p in theirs], y=[p["value"] for p in theirs], mode="lines+markers",
                    name=f"{variant} (paper)", legendgroup=variant, showlegend=first_time(f"{variant} (paper)"),
                    line={"color": colour, "dash": "dot"}, marker={"symbol": "circle-open", "size": 10}),
                    row=1, col=col)
    fig.update_yaxes(range=[-0.02, 1.02])
    fig.update_xaxes(title_text=x_key)
    fig.update_layout(template="plotly_white", title=title, height=450, width=1050)
    return fig
