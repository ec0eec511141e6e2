"""Side-by-side plotly drawing of two compared circuits on one shared layered layout: every node
of either circuit sits at the same place in both panels (nodes absent from a circuit are drawn
faint), shared edges in one colour, edges unique to that circuit in another; one self-contained,
offline HTML file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from circuits.graph.circuit import Circuit
from circuits.analyses.comparison import CircuitComparison
from circuits.draw.circuit_figure import FONT, add_edges, add_legend, add_nodes, column_axis, drawn_nodes, figure_height, position_axis
from circuits.analyses.flow import attention_flow
from circuits.draw.layout import layered_layout
from interp_rand.figures.html_page import write_figure

SHARED_COLOUR = "rgba(40,90,200,{a})"
UNIQUE_COLOUR = "rgba(230,120,20,{a})"


def shared_layout(a: Circuit, b: Circuit) -> dict[str, tuple[float, float]]:
    """Positions of every node of ``a`` or ``b`` (the layered layout of their union)."""
    union = dataclasses.replace(a, edges={**b.edges, **a.edges})
    return layered_layout(union)


def comparison_figure(a: Circuit, b: Circuit, result: CircuitComparison, title: str | None = None, *,
                      attention: tuple | None = None, position_names: list[str] | None = None,
                      min_share: float = 0.1) -> go.Figure:
    """Two panels (A left, B right) on :func:`shared_layout`; ``attention``: each run's mean
    pattern ``[layer, head, q, k]`` (A's, B's) to draw key/value edges between positions (see
    :func:`circuits.draw.circuit_figure.circuit_figure`)."""
    pos = shared_layout(a, b)
    la, lb = result.labels
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.05,
                        subplot_titles=(f"{la}: {len(a)} edges", f"{lb}: {len(b)} edges"))
    flows = [attention_flow(c, None if attention is None else attention[i], min_share) for i, c in enumerate((a, b))]
    nodes = drawn_nodes(flows[0]) | drawn_nodes(flows[1])
    top = max((abs(s) for c in (a, b) for s in c.edges.values()), default=1.0) or 1.0  # one width scale
    for col, (label, other, flow) in enumerate(((la, b, flows[0]), (lb, a, flows[1])), start=1):
        pairs = {(e.source, e.dest) for e in other.edges}
        add_edges(fig, flow, pos, lambda f: SHARED_COLOUR if (f.edge.source, f.edge.dest) in pairs else UNIQUE_COLOUR,
                  top, position_names, name=f"edges {label}", row=1, col=col)
        add_nodes(fig, nodes, pos, position_names, present={n.name for n in drawn_nodes(flow)},
                  name=f"nodes {label}", row=1, col=col)
    add_legend(fig, [("in both circuits", SHARED_COLOUR), ("in this circuit only", UNIQUE_COLOUR)],
               split=attention is not None)
    rho = "n/a" if result.spearman is None else f"{result.spearman:.3f}"
    cross = ", ".join(f"{k} {v:.3f}" for k, v in result.cross.items())
    fig.update_xaxes(**column_axis(a.arch))
    fig.update_yaxes(**position_axis(dataclasses.replace(a, edges={**b.edges, **a.edges}), pos, position_names))
    fig.update_yaxes(title_text="", row=1, col=2)
    n_cols = 2 * a.arch.n_layers + 2
    fig.update_layout(
        title=title or (f"shared {len(result.shared)} (blue), only {la} {len(result.only_a)}, only {lb} "
                        f"{len(result.only_b)} (orange); Jaccard {result.jaccard:.3f}; Spearman of shared {rho}"
                        + (f"<br>recovered share, circuit_on_model: {cross}" if cross else "")),
        plot_bgcolor="white", hovermode="closest", font={"size": FONT}, height=figure_height(pos) + 110,
        width=2 * 140 * n_cols + 200, margin={"l": 80, "r": 30, "t": 110, "b": 120},
        legend={"font": {"size": FONT}, "orientation": "h", "x": 0, "y": -0.04, "yanchor": "top"},
    )
    return fig


def write_comparison_html(a: Circuit, b: Circuit, result: CircuitComparison, path: str | Path,
                          title: str | None = None, **options) -> Path:
    """Write the figure (``options``: :func:`comparison_figure`'s) as one HTML file with
    plotly.js inlined (works offline)."""
    return write_figure(comparison_figure(a, b, result, title, **options), path)


__all__ = ["comparison_figure", "shared_layout", "write_comparison_html"]
