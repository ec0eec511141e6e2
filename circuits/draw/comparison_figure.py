"""Side-by-side plotly drawing of two compared circuits, each panel drawn by the circuit
drawing's own edge drawing (:func:`circuits.draw.circuit_figure.edge_strokes`) on one shared
compact :class:`~circuits.draw.layout.Layout`: every node of either circuit sits at the same
place in both panels (nodes absent from a panel's circuit are drawn faint).

What the marks mean (issue 23), as in the circuit drawing: an edge's colour is its signed score
on one diverging scale for both panels (:data:`~circuits.draw.circuit_figure.EDGE_SCALE`,
centred on 0: red helps the metric, blue hurts it; a colour bar says so), its width ``|score|``,
its dash the head input it feeds (q dotted, k dashed); key/value edges run into their head's
grey attention lane and branch to the query positions that attend to the key. A marker near
the start of each edge says whether the other circuit has it too (a filled circle: in both
circuits; a cross: in this circuit only); hovering anywhere on an edge gives its score, what it
carries and which circuit has it. Columns and positions no drawn node of either circuit uses
are dropped, so the height follows the number of rows and the width the window.

    >>> write_comparison_html(a, b, result, "comparison.html", headline=Headline(...), after=[claims_table])
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from circuits.analyses.comparison import CircuitComparison
from circuits.analyses.flow import attention_flow
from circuits.draw.circuit_figure import (ATTENTION, DASH, EDGE_SCALE, FONT, ROW_PX, Stroke, add_nodes, add_strokes,
                                          drawn_nodes, edge_strokes, layout_axes)
from circuits.draw.layout import Layout
from circuits.graph.circuit import Circuit
from interp_rand.figures.html_page import write_page

#: Marker on an edge: in both circuits, or in this panel's circuit only.
SHARED_SYMBOL, UNIQUE_SYMBOL = "circle", "x"
#: Where along an edge's first piece (its source 0, where it ends or enters its lane 1) its marker sits:
#: past the source's label, and off the middle column of an edge skipping one.
MARK_AT = 0.7
#: The room around the plot in pixels (title, panel titles, column names, legend); each drawn
#: row takes :data:`~circuits.draw.circuit_figure.ROW_PX`.
FRAME_PX = 230


def comparison_layout(flows: tuple[list, list], a: Circuit) -> Layout:
    """The compact layout of the nodes either panel draws (``flows``: each circuit's
    :func:`~circuits.analyses.flow.attention_flow`)."""
    return Layout.of(drawn_nodes(flows[0]) | drawn_nodes(flows[1]), a.arch)


def _largest(circuit: Circuit) -> float:
    """The largest ``|score|`` of the circuit (on the shared scale, a circuit of much smaller
    scores is drawn faint: its panel title says how small)."""
    return max((abs(s) for s in circuit.edges.values()), default=0.0)


def _mark(stroke: Stroke) -> tuple[float, float]:
    """The point :data:`MARK_AT` along the stroke's first piece (strokes are sampled evenly)."""
    xs = list(stroke.xs)
    n = xs.index(None) if None in xs else len(xs)
    i = round(MARK_AT * (n - 1))
    return stroke.xs[i], stroke.ys[i]


def _add_panel(fig: go.Figure, circuit: Circuit, flows: list, other: Circuit, layout: Layout, top: float,
               label: str, names: list[str] | None, col: int, colorbar: bool) -> None:
    """One circuit's strokes (each scored one saying which circuits have its edge) and a marker
    per edge: its symbol shared / this circuit only, its colour the signed score."""
    pairs = {(e.source, e.dest) for e in other.edges}
    strokes, marks = [], {}
    for s in edge_strokes(flows, layout, names, top):
        if s.edge is not None:
            shared = (s.edge.source, s.edge.dest) in pairs
            s = dataclasses.replace(s, hover=s.hover + f"<br>{'in both circuits' if shared else 'in ' + label + ' only'}")
            m = marks.setdefault(shared, {"x": [], "y": [], "score": [], "text": [], "edges": set()})
            if s.edge not in m["edges"]:  # one marker per circuit edge
                m["edges"].add(s.edge)
                x, y = _mark(s)
                m["x"].append(x)
                m["y"].append(y)
                m["score"].append(circuit.edges[s.edge])
                m["text"].append(s.hover)
        strokes.append(s)
    add_strokes(fig, strokes, name=f"edge {label}", row=1, col=col)
    for shared, m in sorted(marks.items()):
        fig.add_trace(go.Scatter(
            x=m["x"], y=m["y"], mode="markers", hovertext=m["text"], hoverinfo="text", showlegend=False,
            name=f"edges {label}", hoverlabel={"namelength": 0},
            marker={"symbol": SHARED_SYMBOL if shared else UNIQUE_SYMBOL, "size": 8 if shared else 9,
                    "color": m["score"], "colorscale": EDGE_SCALE, "cmin": -top, "cmax": top, "cmid": 0,
                    "line": {"width": 1, "color": "#333"},
                    "showscale": colorbar and shared == max(marks),
                    "colorbar": {"title": {"text": "edge score (red helps, blue hurts)", "side": "right"},
                                 "thickness": 12, "len": 0.9, "tickfont": {"size": FONT}}},
        ), row=1, col=col)


def _legend(fig: go.Figure, attention: bool) -> None:
    def entry(name: str, **trace: Any) -> None:
        fig.add_trace(go.Scatter(x=[None], y=[None], name=name, hoverinfo="skip", **trace))

    marker = {"color": "#999", "line": {"width": 1, "color": "#333"}}
    entry("edge in both circuits", mode="markers", marker={"symbol": SHARED_SYMBOL, "size": 8, **marker})
    entry("edge in this circuit only", mode="markers", marker={"symbol": UNIQUE_SYMBOL, "size": 9, **marker})
    for which in ("q", "k"):
        entry(f"into the head's {which}", mode="lines", line={"color": "grey", "width": 2, "dash": DASH[which]})
    entry("width: |score|", mode="lines", line={"color": "grey", "width": 5})
    if attention:
        entry("grey: a head's attention, key → query", mode="lines", opacity=0.6,
              line={"color": ATTENTION, "width": 2})


def comparison_figure(a: Circuit, b: Circuit, result: CircuitComparison, title: str | None = None, *,
                      attention: tuple | None = None, position_names: list[str] | None = None,
                      min_share: float = 0.1) -> go.Figure:
    """Two panels (A left, B right) on the shared :func:`comparison_layout`; ``attention``: each
    run's mean pattern ``[layer, head, q, k]`` (A's, B's) to draw key/value edges from the key's
    position to the query positions (:func:`circuits.analyses.flow.attention_flow`)."""
    la, lb = result.labels
    flows = tuple(attention_flow(c, None if attention is None else attention[i], min_share)
                  for i, c in enumerate((a, b)))
    layout = comparison_layout(flows, a)
    top = max((abs(s) for c in (a, b) for s in c.edges.values()), default=1.0) or 1.0  # one scale for both
    nodes = drawn_nodes(flows[0]) | drawn_nodes(flows[1])
    where = {n.name: layout.xy(n) for n in nodes}
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[f"{label}: {len(c)} edges, {len(only)} only here, largest |score| {_largest(c):.2g}"
                                        for label, c, only in ((la, a, result.only_a), (lb, b, result.only_b))])
    for col, (label, circuit, other, flow) in enumerate(((la, a, b, flows[0]), (lb, b, a, flows[1])), start=1):
        _add_panel(fig, circuit, flow, other, layout, top, label, position_names, col, colorbar=col == 2)
        add_nodes(fig, nodes, where, position_names, present={n.name for n in drawn_nodes(flow)},
                  name=f"nodes {label}", heads_only=True, row=1, col=col)
    split = any(f.share is not None for flow in flows for f in flow)
    _legend(fig, split)
    xaxis, yaxis = layout_axes(layout, position_names)
    fig.update_xaxes(**xaxis)
    fig.update_yaxes(**yaxis)
    fig.update_yaxes(title_text="", row=1, col=2)
    rho = "n/a" if result.spearman is None else f"{result.spearman:.3f}"
    height = FRAME_PX + ROW_PX * int(round(layout.top() + 2))
    fig.update_layout(
        title={"text": title or (f"{la} vs {lb}: {len(result.shared)} shared edges, Jaccard {result.jaccard:.3f}, "
                                 f"Spearman of shared scores {rho}"), "x": 0, "xref": "paper", "font": {"size": 14},
               "y": 1 - 14 / height, "yanchor": "top"},
        plot_bgcolor="white", hovermode="closest", font={"size": FONT}, height=height, autosize=True,
        margin={"l": 70, "r": 20, "t": 110, "b": 70},
        legend={"font": {"size": FONT}, "orientation": "h", "x": 0, "xanchor": "left", "yref": "container",
                "y": 0.0, "yanchor": "bottom"},
    )
    for note in fig.layout.annotations:  # the panel titles: above the column names
        note.update(yshift=40, font={"size": FONT + 1})
    return fig


def write_comparison_html(a: Circuit, b: Circuit, result: CircuitComparison, path: str | Path,
                          title: str | None = None, *, headline: Any = None, after: list | tuple = (),
                          **options) -> Path:
    """Write the page: the ``headline`` first, the figure (``options``: :func:`comparison_figure`'s),
    then the sections ``after`` it (HTML strings: the claims, tables)."""
    fig = comparison_figure(a, b, result, title, **options)
    la, lb = result.labels
    return write_page(path, f"{la} vs {lb}: circuit comparison", [fig, *after], heading=False, headline=headline)


__all__ = ["FRAME_PX", "MARK_AT", "SHARED_SYMBOL", "UNIQUE_SYMBOL", "comparison_figure", "comparison_layout",
           "write_comparison_html"]
