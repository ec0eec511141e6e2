"""First-visit-time maps of grid-world agents side by side (drawing only; the maps come from
``interp_rand.gridworld.evaluation``). A flat map means every cell is found equally early on
average over seeds (a randomized explorer); a steep one follows a single route."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots


def first_visit_figure(maps: dict[str, list[list[float | None]]], episode_steps: int,
                       title: str = "first-visit step per treasure cell (mean over seeds)") -> go.Figure:
    """One heatmap per agent, ``maps``: label -> ``[size][size]`` (row ``y``, column ``x``,
    ``None`` at the start cell), drawn with ``y`` upwards and one shared colour scale
    ``[1, episode_steps + 1]`` (``episode_steps + 1``: never visited in episode 1)."""
    if not maps:
        raise ValueError("maps is empty: give at least one agent's first-visit map")
    labels = list(maps)
    fig = make_subplots(rows=1, cols=len(labels), subplot_titles=labels, horizontal_spacing=0.08)
    for col, label in enumerate(labels, start=1):
        grid_map = maps[label]
        size = len(grid_map)
        text = [["start" if v is None else f"{v:.1f}" for v in row] for row in grid_map]
        fig.add_trace(go.Heatmap(
            z=grid_map, x=list(range(size)), y=list(range(size)), text=text, texttemplate="%{text}",
            zmin=1, zmax=episode_steps + 1, colorscale="Viridis", showscale=col == len(labels),
            colorbar={"title": "step"}, hovertemplate="x=%{x}, y=%{y}: %{z:.2f}<extra>" + label + "</extra>",
        ), row=1, col=col)
        fig.update_xaxes(title_text="x", constrain="domain", row=1, col=col)
        fig.update_yaxes(title_text="y", scaleanchor=f"x{col if col > 1 else ''}", row=1, col=col)
    fig.update_layout(template="plotly_white", title=title, height=430, width=420 * len(labels) + 80)
    return fig


__all__ = ["first_visit_figure"]
