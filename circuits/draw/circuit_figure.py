"""Plotly drawing of a circuit, readable without hovering: colour = score sign (blue helps the
metric, red hurts), line style = the input fed (q dotted, k dashed, v and the rest solid),
width = |score|, or for key/value edges split over query positions by
:func:`~circuits.analyses.flow.attention_flow`, the mean attention from the query to the source's key
position (so information moving between positions is drawn as edges between position bands).
Positions are named by token on the y axis, layers on the x axis, and a legend says all this;
saved as one self-contained, offline HTML file. Heads explained by query/key attribution get
arrows from their top contributors and a label (:mod:`circuits.draw.qk_overlay`).
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from circuits.graph.architecture import Architecture
from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.analyses.flow import FlowEdge, attention_flow
from circuits.draw.layout import layered_layout, position_centre
from circuits.draw.qk_overlay import add_qk_overlay, overlay_positions
from interp_rand.figures.html_page import write_figure

POSITIVE, NEGATIVE = "rgba(40,90,200,{a})", "rgba(210,50,50,{a})"
DASH = {"q": "dot", "k": "dash", "v": "solid"}
FONT = 12  # px, every label
_WIDTH_BINS = 6  # edges are grouped into this many width classes (one trace each)


def edge_width(flow: FlowEdge, top: float) -> float:
    """Line width: the attention share for a split key/value edge, else ``|score| / top``."""
    weight = flow.share if flow.share is not None else abs(flow.score) / top
    return 0.75 + 1.5 * min(_WIDTH_BINS - 1, int(_WIDTH_BINS * weight))


def add_edges(fig: go.Figure, flows: list[FlowEdge], pos: dict, colour, top: float, names: list[str] | None,
              name: str = "edges", **where) -> None:
    """Lines for ``flows`` (one trace per colour, dash and width class) and invisible midpoint
    markers carrying the hover text; ``colour(flow) -> rgba template``; ``where``: subplot."""
    groups: dict[tuple, tuple[list, list]] = {}
    mid_x, mid_y, mid_text = [], [], []
    for f in flows:
        u, v = f.source.name, f.dest.name
        alpha = 0.65 if f.reaches else 0.25
        key = (colour(f).format(a=alpha), DASH.get(f.input, "solid"), edge_width(f, top))
        xs, ys = groups.setdefault(key, ([], []))
        (x0, y0), (x1, y1) = pos[u], pos[v]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mid_x.append((x0 + x1) / 2)
        mid_y.append((y0 + y1) / 2)
        text = f"{_named(f.source, names)} → {_named(f.dest, names)} &lt;{f.input}&gt;<br>score {f.score:+.4g}"
        if f.share is not None:
            text += f"<br>mean attention of query {_pos(f.dest, names)} on key {_pos(f.source, names)}: {f.share:.2f}"
        elif not f.reaches:
            text += "<br>no query position kept in the circuit attends to this key (share < threshold)"
        mid_text.append(text)
    for (rgba, dash, width), (xs, ys) in sorted(groups.items()):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line={"width": width, "color": rgba, "dash": dash}), **where)
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker={"size": 8, "opacity": 0.0},
                             hovertext=mid_text, hoverinfo="text", showlegend=False, name=name), **where)


def drawn_nodes(flows: list[FlowEdge]) -> set:
    """The nodes the drawn edges touch (a head whose key/value edges all moved to later query
    positions is not drawn at its key position)."""
    return {f.source for f in flows} | {f.dest for f in flows}


def add_nodes(fig: go.Figure, nodes, pos: dict, names: list[str] | None, present=None, name: str = "nodes",
              **where) -> None:
    """Node markers labelled by component (the y axis names the position); ``present``: names
    drawn black and labelled (default all), the others faint."""
    nodes = sorted(nodes, key=lambda n: pos[n.name])
    shown = {n.name for n in nodes} if present is None else present
    fig.add_trace(go.Scatter(
        x=[pos[n.name][0] for n in nodes], y=[pos[n.name][1] for n in nodes], mode="markers+text",
        text=[n.at(None).name if n.name in shown else "" for n in nodes], textposition="middle right",
        textfont={"size": FONT}, hoverinfo="text", showlegend=False, name=name, cliponaxis=False,
        hovertext=[f"{_named(n, names)}<br>{n.kind}" + ("" if n.name in shown else " (not in this circuit)")
                   for n in nodes],
        marker={"size": 10, "color": "white",
                "line": {"width": 1.5, "color": ["black" if n.name in shown else "lightgrey" for n in nodes]}},
    ), **where)


def add_legend(fig: go.Figure, colours: list[tuple[str, str]], split: bool) -> None:
    """Legend-only traces: what colour, line style and width mean."""
    def entry(name, **line):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=name, line=line, hoverinfo="skip"))

    for name, rgba in colours:
        entry(name, color=rgba.format(a=0.8), width=3)
    for which, dash in DASH.items():
        entry(f"into the head's {which}", color="grey", width=2, dash=dash)
    entry("thin → thick: |score|" + ("; k, v: mean attention<br>from the query position to the key"
                                    if split else ""), color="grey", width=6)


def column_axis(arch: Architecture | int) -> dict:
    """X axis: one tick per residual-stream column (:meth:`ModelGraph.column_labels`), where
    :func:`~circuits.draw.layout.layered_layout` puts the nodes. ``arch`` may be a number of
    layers (a model without seed channel or input MLP)."""
    if isinstance(arch, int):
        arch = Architecture(arch, 1, False, False, 0)
    columns = ModelGraph.structure(arch).column_labels()
    # room on the right for the last column's labels (logits@...)
    return {"showgrid": False, "zeroline": False, "tickmode": "array", "tickvals": [c for c, _ in columns],
            "ticktext": [label for _, label in columns], "range": [-0.4, columns[-1][0] + 0.8],
            "tickfont": {"size": FONT}}


def position_axis(circuit: Circuit, pos: dict, names: list[str] | None, extra: set[int] = frozenset()) -> dict:
    """Y axis: one tick per position band, named by token (``3 SEP``); heads without positions.
    ``extra``: positions to name besides the circuit's (where an overlay draws)."""
    axis = {"showgrid": False, "zeroline": False, "tickfont": {"size": FONT}, "automargin": True}
    positions = {n.position for n in circuit.nodes if n.position is not None}
    positions = sorted(positions | set(extra) if positions else positions)
    if not positions:
        return {**axis, "title": "head"}
    top = max(y for _, y in pos.values())
    return {**axis, "title": "position", "tickmode": "array",
            "tickvals": [position_centre(p, circuit.arch.n_heads) for p in positions],
            "ticktext": [_pos_name(p, names) for p in positions], "range": [-1, top + 1]}


def figure_height(pos: dict) -> int:
    # about 24 px per row, so labels of neighbouring heads do not overlap
    return max(480, 200 + 24 * int(max((y for _, y in pos.values()), default=0) + 2))


def circuit_figure(circuit: Circuit, title: str | None = None, *, attention=None,
                   position_names: list[str] | None = None, min_share: float = 0.1, qk=()) -> go.Figure:
    """A plotly figure of ``circuit`` on :func:`~circuits.draw.layout.layered_layout`.

    ``attention``: ``[layer, head, q, k]`` mean pattern (:func:`~circuits.analyses.flow.mean_attention`)
    to draw key/value edges between positions; ``position_names``: one name per position (with
    a seed token first if the model has one), for the axis and hover; ``qk``: pairs
    ``(QKAttribution, QKPatchCheck)`` (:func:`probes.qk_attribution.explain_heads`) drawn on the
    circuit by :func:`~circuits.draw.qk_overlay.add_qk_overlay`: why those heads attend where they do.
    """
    pos = layered_layout(circuit)
    flows = attention_flow(circuit, attention, min_share)
    top = max((abs(s) for s in circuit.edges.values()), default=1.0) or 1.0
    fig = go.Figure()
    add_edges(fig, flows, pos, lambda f: POSITIVE if f.score >= 0 else NEGATIVE, top, position_names)
    add_nodes(fig, drawn_nodes(flows), pos, position_names)
    add_legend(fig, [("score > 0: helps the metric", POSITIVE), ("score < 0: hurts it", NEGATIVE)],
               split=attention is not None)
    add_qk_overlay(fig, qk, circuit.arch, any(n.position is not None for n in circuit.nodes), position_names)
    # the overlay's query and key positions get a band (and a tick) even when no circuit node is there
    extra = overlay_positions(qk)
    pos_for_axis = {**pos, **{f"qk@{p}": (0.0, position_centre(p, circuit.arch.n_heads)) for p in extra}}
    settings = circuit.settings
    n_cols = int(ModelGraph.structure(circuit.arch).column(Node("logits"))) + 1  # the logits' column is the last
    fig.update_layout(
        title=title or f"{settings.get('method', 'circuit')}: {len(circuit)} of {circuit.total_edges} edges",
        plot_bgcolor="white", hovermode="closest", font={"size": FONT}, height=figure_height(pos_for_axis),
        width=170 * n_cols + 420, margin={"l": 80, "r": 30, "t": 80, "b": 50},
        legend={"font": {"size": FONT}}, xaxis=column_axis(circuit.arch),
        yaxis=position_axis(circuit, pos_for_axis, position_names, extra),
    )
    return fig


def write_circuit_html(circuit: Circuit, path: str | Path, title: str | None = None, **options) -> Path:
    """Write the figure (``options``: :func:`circuit_figure`'s) as one HTML file with plotly.js
    inlined once (works offline)."""
    return write_figure(circuit_figure(circuit, title, **options), path)


def _pos_name(p: int, names: list[str] | None) -> str:
    return f"{p} {names[p]}" if names is not None and p < len(names) else str(p)


def _pos(node, names) -> str:
    return "-" if node.position is None else _pos_name(node.position, names)


def _named(node, names) -> str:
    base = node.at(None).name
    return base if node.position is None else f"{base} @ {_pos_name(node.position, names)}"


__all__ = ["add_edges", "add_legend", "add_nodes", "circuit_figure", "column_axis", "drawn_nodes", "edge_width", "position_axis",
           "write_circuit_html"]
