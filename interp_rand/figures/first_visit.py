"""First-visit-time maps of grid-world agents side by side (drawing only; the maps come from
``interp_rand.gridworld.evaluation``). A flat map means every cell is found equally early on
average over seeds (a randomized explorer); a steep one follows a single route."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots


def grid_maps_figure(maps: dict[str, list[list[float | None]]], *, zmin: float, zmax: float, title: str,
                     colorbar: str, fmt: str = "{:.1f}", colorscale: str = "Viridis",
                     marks: dict[str, tuple[int, int, str]] | None = None) -> go.Figure:
    """One heatmap per agent, ``maps``: label -> ``[size][size]`` (row ``y``, column ``x``,
    ``None`` at the start cell), drawn with ``y`` upwards on one shared colour scale
    ``[zmin, zmax]``, each cell's value written in it (``fmt``); ``marks``: label -> ``(x, y,
    text)`` a cell outlined and named (the worst treasure cell)."""
    if not maps:
        raise ValueError("maps is empty: give at least one agent's map")
    labels = list(maps)
    fig = make_subplots(rows=1, cols=len(labels), subplot_titles=labels, horizontal_spacing=0.08)
    for col, label in enumerate(labels, start=1):
        grid_map = maps[label]
        size = len(grid_map)
        text = [["start" if v is None else fmt.format(v) for v in row] for row in grid_map]
        fig.add_trace(go.Heatmap(
            z=grid_map, x=list(range(size)), y=list(range(size)), text=text, texttemplate="%{text}",
            zmin=zmin, zmax=zmax, colorscale=colorscale, showscale=col == len(labels),
            colorbar={"title": colorbar}, hovertemplate="x=%{x}, y=%{y}: %{z:.2f}<extra>" + label + "</extra>",
        ), row=1, col=col)
        if marks and label in marks:
            x, y, note = marks[label]
            axis = "" if col == 1 else str(col)
            fig.add_shape(type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5, xref=f"x{axis}", yref=f"y{axis}",
                          line={"color": "#d62728", "width": 3})
            fig.add_annotation(x=x, y=y + 0.32, text=note, showarrow=False, xref=f"x{axis}", yref=f"y{axis}",
                               font={"color": "#d62728", "size": 11})
        fig.update_xaxes(title_text="x", constrain="domain", row=1, col=col)
        fig.update_yaxes(title_text="y", scaleanchor=f"x{col if col > 1 else ''}", row=1, col=col)
    fig.update_layout(template="plotly_white", title=title, height=430, width=420 * len(labels) + 80)
    return fig


def first_visit_figure(maps: dict[str, list[list[float | None]]], episode_steps: int,
                       title: str = "first-visit step per treasure cell (mean over seeds)") -> go.Figure:
    """:func:`grid_maps_figure` of first-visit steps on ``[1, episode_steps + 1]``
    (``episode_steps + 1``: never visited in episode 1)."""
    return grid_maps_figure(maps, zmin=1, zmax=episode_steps + 1, title=title, colorbar="step")


__all__ = ["first_visit_figure", "grid_maps_figure"]
