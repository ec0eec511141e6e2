"""Plotly drawing of a circuit, readable in ten seconds.

Two views side by side: the circuit by position (nodes at their position's band, only the
positions and columns where something happens) and, beside it, the same circuit summed over
positions (one node per component). Every edge is coloured by its signed score on one
diverging scale centred at 0 (:data:`interp_rand.figures.style.DIVERGING`: red helps the
metric, blue hurts it; a colour bar gives the numbers), its width is ``|score|``, its line
style the input it feeds (q dotted, k dashed, v and the rest solid), and hovering anywhere
on it gives its score, its share and what it carries. Negative edges are drawn on top.

Key/value edges carry information from the key's position to every query position that
attends to it (:func:`~circuits.analyses.flow.attention_flow`); each such edge is drawn as a
bundle: one trunk along the key's band, a vertical spine in its own lane just before the
head's column, and one branch into the head at each query position, the branch's opacity
being the mean attention share (attention is opacity and hover, never width). One trunk and
spine per circuit edge, not one diagonal per query, so a row is crossed once per edge.
Heads explained by query/key attribution get arrows from their top contributors and a label
(:mod:`circuits.draw.qk_overlay`). :func:`edge_crossings` counts the crossings inside each
position band from the figure's own data (the drawing's test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from circuits.graph.circuit import Circuit
from circuits.graph.nodes import Edge, Node
from circuits.analyses.flow import FlowEdge, attention_flow
from circuits.draw.layout import Layout
from circuits.draw.qk_overlay import add_qk_overlay, overlay_nodes, overlay_positions
from interp_rand.figures.html_page import write_page
from interp_rand.figures.headline import Headline
from interp_rand.figures.style import DIVERGING, head_name

DASH = {"q": "dot", "k": "dash", "v": "solid"}
FONT = 12  # px, every label
#: A white halo around node labels (CSS text-shadow): a thick edge under a label (an MLP's, where
#: many edges meet) does not hide it.
LABEL_HALO = "0 0 3px white, 0 0 3px white, 0 0 2px white, 0 0 1px white"


def drawn_nodes(flows: list[FlowEdge]) -> set:
    """The nodes the drawn edges touch (a head whose key/value edges all moved to later query
    positions is not drawn at its key position)."""
    return {f.source for f in flows} | {f.dest for f in flows}


def add_nodes(fig: go.Figure, nodes, pos: dict, names: list[str] | None, present=None, name: str = "nodes",
              heads_only: bool = False, **where) -> None:
    """Node markers labelled by component (the y axis names the position); ``present``: names
    drawn black and labelled (default all), the others faint; ``heads_only``: label the heads
    (and the seed, which shares the embed column) only, above them (the column names the others:
    a narrow panel keeps its lines clear)."""
    nodes = sorted(nodes, key=lambda n: pos[n.name])
    shown = {n.name for n in nodes} if present is None else present
    level = {pos[n.name][1] for n in nodes if n.kind != "head"}  # rows edges run along
    fig.add_trace(go.Scatter(
        x=[pos[n.name][0] for n in nodes], y=[pos[n.name][1] for n in nodes], mode="markers+text",
        text=[n.at(None).name if n.name in shown and (n.kind in ("head", "seed") or not heads_only) else "" for n in nodes],
        # beside a head on a row of its own, above-right on a row edges run along (an MLP's)
        textposition="top center" if heads_only else ["middle right" if n.kind == "head" and pos[n.name][1] not in level
                                                      else "top right" for n in nodes],
        textfont={"size": FONT, "shadow": LABEL_HALO}, hoverinfo="text", showlegend=False, name=name,
        cliponaxis=False, customdata=[n.name for n in nodes],
        hovertext=[f"{_named(n, names)}<br>{n.kind}" + ("" if n.name in shown else " (not in this circuit)")
                   for n in nodes],
        marker={"size": 10, "color": "white",
                "line": {"width": 1.5, "color": ["black" if n.name in shown else "lightgrey" for n in nodes]}},
    ), **where)


def _diverging_at(x: float) -> float:
    """Where on :data:`~interp_rand.figures.style.DIVERGING` a score of ``x`` (``score / top``
    in [-1, 1]) is drawn: 0.2 of the scale away from its white middle at the least, so a line
    of a score near 0 stays visible on white (light red or light blue, by its sign)."""
    x = min(1.0, max(-1.0, x))
    return 0.5 + (0.2 + 0.3 * abs(x)) * (-1.0 if x < 0 else 1.0)


def edge_colourscale() -> list[list]:
    """:data:`~interp_rand.figures.style.DIVERGING` without its pale middle (:func:`_diverging_at`):
    score -top .. 0 .. +top maps to 0 .. 0.5 .. 1, light blue meeting light red at 0 (two stops
    at 0.5: plotly's way of a scale that jumps)."""
    ats = [(i / 10, _diverging_at(i / 5 - 1)) for i in range(11)]
    ats.insert(5, (0.5, 1.0 - _diverging_at(0.0)))  # the light blue end of the negative half
    return [[t, sample_colorscale(DIVERGING, [at])[0]] for t, at in ats]


EDGE_SCALE = edge_colourscale()


def score_colour(score: float, top: float) -> str:
    """The colour of a score on :data:`EDGE_SCALE` (``top``: the largest ``|score|``)."""
    return sample_colorscale(DIVERGING, [_diverging_at(score / top)])[0]


def score_width(score: float, top: float) -> float:
    """Line width: ``|score|`` only (1 px for a score near 0, 5 px for the largest)."""
    return 1.0 + 4.0 * min(1.0, abs(score) / top)


@dataclass(frozen=True)
class Stroke:
    """One line of the drawing: ``xs``/``ys`` (``None`` separates pieces), its ``colour``,
    ``width``, ``opacity`` and ``dash``, the ``hover`` text of every point, ``order`` (drawn
    later = on top), the circuit ``edge`` it draws (``None``: a head's attention lane or branch) and
    the names of the nodes it joins (``ends``, the one it is drawn from first: what a click on a
    node highlights; ``lane``: a
    head's attention lane, shared by all of them, which a click lights but does not follow)."""

    xs: tuple
    ys: tuple
    colour: str
    width: float
    opacity: float
    dash: str
    hover: str
    order: tuple = ()
    edge: Edge | None = None
    ends: tuple[str, ...] = ()
    lane: bool = False


#: The colour of a head's attention lane and of what it hands to each query position
#: (attention has no sign: grey, its share as opacity).
ATTENTION = "rgb(110,110,110)"
#: With ``by_head``, each head's lane and branches take one of these instead (none is red or
#: blue, the score's colours), so which head reads which key can be followed by colour.
HEAD_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#66a61e", "#e6ab02", "#a6761d", "#e7298a", "#17becf",
                "#8c564b", "#bcbd22")


def head_colours(heads) -> dict[tuple[int, int], str]:
    """``{(layer, head): colour}`` for the ``heads`` whose attention is drawn, in order."""
    return {h: HEAD_COLOURS[i % len(HEAD_COLOURS)] for i, h in enumerate(sorted(heads))}


def _dense(points: list[tuple[float, float]], step: tuple[float, float] = (0.15, 0.7)) -> tuple[list, list]:
    """The polyline through ``points`` with a point at most ``step`` (x, y) apart: about 15 px
    either way (a column is some 100 px wide, a row :data:`ROW_PX`), within plotly's 20 px hover
    distance, so hovering anywhere on the line finds it."""
    xs, ys = [points[0][0]], [points[0][1]]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        n = max(1, math.ceil(max(abs(x1 - x0) / step[0], abs(y1 - y0) / step[1]) - 1e-9))
        for i in range(1, n + 1):
            xs.append(x0 + (x1 - x0) * i / n)
            ys.append(y0 + (y1 - y0) * i / n)
    return xs, ys


def _pieces(*polylines: list[tuple[float, float]]) -> tuple[tuple, tuple]:
    xs, ys = [], []
    for line in polylines:
        if len(line) < 2:
            continue
        px, py = _dense(line)
        xs += [*px, None]
        ys += [*py, None]
    return tuple(xs[:-1]), tuple(ys[:-1])


def edge_strokes(flows: list[FlowEdge], layout: Layout, names: list[str] | None, top: float,
                 by_head: bool = False) -> list[Stroke]:
    """The lines that draw ``flows`` on ``layout`` (module docstring). An edge within one
    position: a straight line. Key/value edges split over query positions: each into its
    head's attention lane (a vertical line just before the head's column) at the key's band,
    the lane, and one grey branch from the lane into the head at each query position that
    attends (opacity: the largest share of attention on a key, hover: every key with its share).
    ``by_head``: each head's lane and branches in its own colour (:func:`head_colours`), not grey."""
    by_edge: dict[Edge, list[FlowEdge]] = {}
    for f in flows:
        by_edge.setdefault(f.edge, []).append(f)
    moved = {e: [f for f in fs if f.share is not None] for e, fs in by_edge.items()}
    moved = {e: fs for e, fs in moved.items() if fs}
    heads = sorted({(e.dest.layer, e.dest.head) for e in moved})
    lane: dict[tuple, float] = {}
    for layer in {l for l, _ in heads}:
        mine = [h for l, h in heads if l == layer]
        column = layout.x(Node("head", layer, 0))
        for i, h in enumerate(mine):
            lane[(layer, h)] = column - 0.14 - 0.36 * i / max(1, len(mine) - 1)
    row = (lambda l, h, p: layout.xy(Node("head", l, h, p))[1])
    colour = head_colours(heads) if by_head else {h: ATTENTION for h in heads}
    out: list[Stroke] = []
    for edge, fs in by_edge.items():
        for f in fs if edge not in moved else [f for f in fs if f.share is None]:
            text = f"{_named(f.source, names)} → {_named(f.dest, names)} &lt;{f.input}&gt;<br>score {f.score:+.4g}"
            if not f.reaches:
                text += "<br>no query position kept in the circuit attends to this key (share < threshold)"
            xs, ys = _pieces([layout.xy(f.source), layout.xy(f.dest)])
            out.append(Stroke(xs, ys, score_colour(f.score, top), score_width(f.score, top),
                              0.9 if f.reaches else 0.3, DASH.get(f.input, "solid"), text, (f.score < 0, abs(f.score)),
                              edge, (f.source.name, f.dest.name)))
        if edge not in moved:
            continue
        split, (l, h) = moved[edge], (edge.dest.layer, edge.dest.head)
        reach = ", ".join(f"{_pos(f.dest, names)} {f.share:.2f}" for f in split)
        text = (f"head {head_name(l, h)} reads position {_pos(edge.source, names)} through its {edge.input} input: "
                f"{_named(edge.source, names)} → {_named(edge.dest.at(None), names)} &lt;{edge.input}&gt;"
                f"<br>score {edge_score(split):+.4g}<br>reaches the head's output at query "
                f"positions (mean attention on this key): {reach}")
        entry = (lane[(l, h)], row(l, h, edge.dest.position) + {"k": -0.15, "v": 0.15}.get(edge.input, 0.0))
        xs, ys = _pieces([layout.xy(edge.source), entry])
        score = edge_score(split)
        out.append(Stroke(xs, ys, score_colour(score, top), score_width(score, top), 0.9,
                          DASH.get(edge.input, "solid"), text, (score < 0, abs(score)), edge,
                          (edge.source.name, edge.dest.name, *(f.dest.name for f in split))))
    for l, h in heads:
        split = [f for e, fs in moved.items() if (e.dest.layer, e.dest.head) == (l, h) for f in fs]
        keys = {f.edge.dest.position for f in split}
        queries: dict[int, list[FlowEdge]] = {}
        for f in split:
            queries.setdefault(f.dest.position, []).append(f)
        ys = [row(l, h, p) + d for p in keys for d in (-0.15, 0.15)] + [row(l, h, q) for q in queries]
        x = lane[(l, h)]
        pairs = sorted({(f.dest.position, f.edge.dest.position, f.share) for f in split})
        text = (f"attention of {head_name(l, h)}: what it reads at a key reaches its output at the query positions "
                "that attend to the key<br>" + "<br>".join(
                    f"head {head_name(l, h)} at query {_token(q, names)} reads key {_token(p, names)}: {s:.2f}"
                    for q, p, s in pairs))
        lx, ly = _pieces([(x, min(ys)), (x, max(ys))])
        ends = {n.name for f in split for n in (f.source, f.dest, f.edge.dest)}
        out.append(Stroke(lx, ly, colour[(l, h)], 2.0, 0.55, "solid", text, (False, -1.0), None, tuple(sorted(ends)),
                          lane=True))
        for q, fs in sorted(queries.items()):
            y = row(l, h, q)
            share = max(f.share for f in fs)
            into = "<br>".join(f"head {head_name(l, h)} reads position {_pos(f.source, names)}: "
                               f"{_named(f.source, names)} &lt;{f.input}&gt; (score {f.score:+.3g}), attention "
                               f"on the key {f.share:.2f}" for f in fs)
            bx, by = _pieces([(x, y), layout.xy(Node("head", l, h, q))])
            ends = (Node("head", l, h, q).name, *sorted({n.name for f in fs for n in (f.source, f.edge.dest)}))
            out.append(Stroke(bx, by, colour[(l, h)], 2.0, 0.3 + 0.65 * share, "solid",
                              f"into {head_name(l, h)} @ {_token(q, names)} through attention:<br>{into}", (False, -0.5),
                              None, ends))
    # weak edges first, negative edges last: on top
    return sorted(out, key=lambda s: s.order)


def edge_score(flows: list[FlowEdge]) -> float:
    return flows[0].score


def add_strokes(fig: go.Figure, strokes: list[Stroke], name: str = "edge", **where) -> None:
    """One trace per stroke (its colour, width, dash and opacity), hover on every point; the
    nodes it joins in ``meta["ends"]`` (what the page's click handler reads)."""
    for s in strokes:
        fig.add_trace(go.Scatter(
            x=list(s.xs), y=list(s.ys), mode="lines", showlegend=False, name=name, opacity=s.opacity,
            meta={"ends": list(s.ends), "lane": s.lane},
            line={"width": s.width, "color": s.colour, "dash": s.dash},
            hovertext=[s.hover] * len(s.xs), hoverinfo="text", hoverlabel={"namelength": 0}), **where)


#: A readable drawing: at most this many pairs of edge segments cross inside one position band
#: (:func:`edge_crossings`; the circuit and comparison drawings' tests hold them to it).
MAX_CROSSINGS_PER_BAND = 20


def edge_crossings(fig: go.Figure, bands: list[tuple[str, float, float]], xaxis: str = "x") -> dict[str, int]:
    """Per position band ``(name, y_low, y_high)``: how many pairs of edge segments of
    different edge lines (the figure's line traces on ``xaxis``) cross properly inside the band
    (touching at a node or running along the same line is no crossing; a segment drawn twice
    counts once). Read from the figure's data, so any circuit drawing can be measured."""
    segments: list[tuple[int, float, float, float, float]] = []
    seen = set()
    for t, trace in enumerate(fig.data):
        if trace.mode != "lines" or trace.x is None or (trace.xaxis or "x") != xaxis:
            continue
        for (x0, y0), (x1, y1) in _straight_pieces(list(trace.x), list(trace.y)):
            key = tuple(sorted([(round(x0, 6), round(y0, 6)), (round(x1, 6), round(y1, 6))]))
            if key[0] == key[1] or key in seen:
                continue
            seen.add(key)
            segments.append((t, *key[0], *key[1]))
    counts = {name: 0 for name, _, _ in bands}
    eps = 1e-9
    for i, (ta, ax0, ay0, ax1, ay1) in enumerate(segments):
        for tb, bx0, by0, bx1, by1 in segments[i + 1:]:
            if ta == tb or max(ax0, ax1) < min(bx0, bx1) or max(bx0, bx1) < min(ax0, ax1) \
                    or max(ay0, ay1) < min(by0, by1) or max(by0, by1) < min(ay0, ay1):
                continue
            dax, day, dbx, dby = ax1 - ax0, ay1 - ay0, bx1 - bx0, by1 - by0
            den = dax * dby - day * dbx
            if abs(den) < eps:
                continue  # parallel or along the same line
            u = ((bx0 - ax0) * dby - (by0 - ay0) * dbx) / den
            v = ((bx0 - ax0) * day - (by0 - ay0) * dax) / den
            if not (eps < u < 1 - eps and eps < v < 1 - eps):
                continue  # they meet at an end (a node, or where a line continues) or not at all
            y = ay0 + u * day
            for name, low, high in bands:
                if low <= y < high:
                    counts[name] += 1
    return counts


def _straight_pieces(xs: list, ys: list) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The straight pieces of a polyline (``None`` separating lines): consecutive collinear
    segments merged, so the points a line is sampled at are no ends."""
    out: list = []
    line: list[tuple[float, float]] = []
    for x, y in [*zip(xs, ys), (None, None)]:
        if x is None or y is None:
            pieces: list = []
            for a, b in zip(line, line[1:]):
                if pieces and _collinear(pieces[-1][0], a, b):
                    pieces[-1] = (pieces[-1][0], b)
                elif a != b:
                    pieces.append((a, b))
            out += pieces
            line = []
        else:
            line.append((float(x), float(y)))
    return out


def _collinear(a, b, c) -> bool:
    return abs((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])) < 1e-9


def figure_bands(fig: go.Figure, yaxis: str = "yaxis") -> list[tuple[str, float, float]]:
    """The position bands of a circuit figure, from its y axis ticks (a band reaches halfway to
    its neighbours'; one band for a drawing without position ticks)."""
    axis = fig.layout[yaxis]
    if not axis.tickvals:
        return [("all", float("-inf"), float("inf"))]
    ticks = sorted(zip(axis.tickvals, axis.ticktext))
    out = []
    for i, (v, name) in enumerate(ticks):
        low = (ticks[i - 1][0] + v) / 2 if i else float("-inf")
        high = (ticks[i + 1][0] + v) / 2 if i + 1 < len(ticks) else float("inf")
        out.append((str(name), low, high))
    return out


def component_circuit(circuit: Circuit) -> Circuit:
    """``circuit`` summed over positions: one edge per (source, destination, input) component,
    its score the sum of the edge's scores at every position."""
    edges: dict[Edge, float] = {}
    for e, s in circuit.edges.items():
        key = Edge(e.source.at(None), e.dest.at(None), e.input)
        edges[key] = edges.get(key, 0.0) + s
    return Circuit(edges, circuit.arch, {**circuit.settings, "by_position": False}, circuit.total_edges)


def layout_axes(layout: Layout, names: list[str] | None) -> tuple[dict, dict]:
    """The x axis (the kept columns, named on top) and y axis (the kept positions, named by
    token) of a drawing on ``layout``."""
    ticks = layout.column_ticks()
    x = {"showgrid": False, "zeroline": False, "tickmode": "array", "tickvals": [v for v, _ in ticks],
         "ticktext": [t for _, t in ticks], "range": [-0.4, len(ticks) - 1 + 0.75], "tickfont": {"size": FONT},
         "side": "top", "fixedrange": False}
    y = {"showgrid": False, "zeroline": False, "tickfont": {"size": FONT}, "automargin": True}
    if layout.positions == (None,):
        y.update(showticklabels=False, range=[-1, layout.top() + 1])
    else:
        y.update(title={"text": "position", "standoff": 4}, tickmode="array",
                 tickvals=[layout.centre(p) for p in layout.positions],
                 ticktext=[_token(p, names) for p in layout.positions], range=[-1, layout.top() + 1])
    return x, y


def figure_layout(circuit: Circuit, flows: list[FlowEdge], qk=()) -> Layout:
    """The layout :func:`circuit_figure` draws ``flows`` (of ``circuit``) and the overlay ``qk`` on."""
    by_position = any(n.position is not None for n in circuit.nodes)
    return Layout.of(drawn_nodes(flows) | overlay_nodes(qk, by_position), circuit.arch,
                     overlay_positions(qk) if by_position else ())


ROW_PX = 21  # px per layout row: labels of neighbouring heads do not overlap


def circuit_figure(circuit: Circuit, title: str | None = None, *, attention=None,
                   position_names: list[str] | None = None, min_share: float = 0.1, qk=(),
                   components: bool = True, by_head: bool = True) -> go.Figure:
    """A plotly figure of ``circuit`` (module docstring), its width following the window.

    ``attention``: ``[layer, head, q, k]`` mean pattern (:func:`~circuits.analyses.flow.mean_attention`)
    to draw key/value edges from the key's position to the query positions; ``position_names``:
    one name per position (with a seed token first if the model has one), for the axis and
    hover; ``qk``: pairs ``(QKAttribution, QKPatchCheck)`` (:func:`probes.qk_attribution.explain_heads`)
    drawn by :func:`~circuits.draw.qk_overlay.add_qk_overlay`; ``components``: for a
    position-resolved circuit, the view summed over positions beside it; ``by_head`` (default
    on: every page that draws a circuit, the circuit page and the case studies', colours its
    heads so): each head's attention lane and branches in its own colour (:func:`head_colours`),
    named in the legend (grey with ``by_head=False``).
    """
    by_position = any(n.position is not None for n in circuit.nodes)
    flows = attention_flow(circuit, attention, min_share)
    nodes = drawn_nodes(flows)
    layout = figure_layout(circuit, flows, qk)
    top = max((abs(s) for s in circuit.edges.values()), default=1.0) or 1.0
    height = max(380, 150 + int(ROW_PX * (layout.top() + 2)))
    side = components and by_position
    lanes = sorted({(f.dest.layer, f.dest.head) for f in flows if f.share is not None})
    # the legend's height: q, k, v, width, then the attention's line(s): one per head with by_head
    legend_px = 19 * (4 + ((len(lanes) if by_head else 2) if attention is not None and by_position else 0)) + 10
    if side:
        summed = component_circuit(circuit)
        comp_layout = Layout.of(summed.nodes, circuit.arch)
        comp_top = max((abs(s) for s in summed.edges.values()), default=1.0) or 1.0
        comp_px = 90 + ROW_PX * (comp_layout.top() + 2)
        # room beside the view by position for the summed view, the legend and the colour bar below it
        height = max(height, int(140 + comp_px + 30 + legend_px + 90))
        fig = make_subplots(rows=1, cols=2, column_widths=[0.66, 0.34], horizontal_spacing=0.05,
                            subplot_titles=("by position", "summed over positions"))
        add_strokes(fig, edge_strokes(attention_flow(summed, None), comp_layout, None, comp_top),
                    name="edge (summed)", row=1, col=2)
        add_nodes(fig, summed.nodes, {n.name: comp_layout.xy(n) for n in summed.nodes}, None,
                  name="nodes (summed)", row=1, col=2)
        paper = height - 140  # the plot area's height in px (the margins' 110 + 30 off)
        low = max(0.25, 1 - comp_px / paper)
        x2, y2 = layout_axes(comp_layout, None)
        fig.update_layout(xaxis2=x2, yaxis2={**y2, "domain": [low, 1.0]})
        legend = {"x": 0.7, "xanchor": "left", "y": low - 0.06, "yanchor": "top"}
        bar = {"x": 0.7, "xanchor": "left", "y": low - 0.06 - (legend_px + 30) / paper, "yanchor": "top",
               "orientation": "h", "len": 0.28, "thickness": 12}
        where = {"row": 1, "col": 1}
    else:
        fig = go.Figure()
        legend = {"orientation": "h", "x": 0, "y": -0.02, "yanchor": "top"}
        bar = {"x": 1.0, "xanchor": "left", "len": min(1.0, 300 / height), "y": 1, "yanchor": "top", "thickness": 12}
        where = {}
    add_strokes(fig, edge_strokes(flows, layout, position_names, top, by_head), **where)
    add_nodes(fig, nodes, {n.name: layout.xy(n) for n in nodes}, position_names, **where)
    # the colour bar: the score scale (summed scores beside use their own top, said in the hover)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                             marker={"colorscale": EDGE_SCALE, "cmin": -top, "cmax": top, "color": [0.0],
                                     "showscale": True,
                                     "colorbar": {**bar, "title": {"text": "edge score (red helps, blue hurts)",
                                                                   "side": "top"},
                                                  "tickfont": {"size": FONT}}}), **where)
    for which, dash in DASH.items():
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"into the head's {which}",
                                 line={"color": "grey", "width": 2, "dash": dash}, hoverinfo="skip"), **where)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="width: |score|",
                             line={"color": "grey", "width": 5}, hoverinfo="skip"), **where)
    if attention is not None and by_position and by_head:
        for (l, h), c in head_colours(lanes).items():
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", opacity=0.8, line={"color": c, "width": 3},
                                     name=f"{head_name(l, h)} reads key → query", hoverinfo="skip"), **where)
    elif attention is not None and by_position:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", opacity=0.6, line={"color": ATTENTION, "width": 2},
                                 name="grey: a head's attention, key → query<br>(faint: attends the key little)",
                                 hoverinfo="skip"), **where)
    add_qk_overlay(fig, qk, layout, position_names)
    xaxis, yaxis = layout_axes(layout, position_names)
    settings = circuit.settings
    fig.update_layout(
        title={"text": title or f"{settings.get('method', 'circuit')}: {len(circuit)} of {circuit.total_edges} edges",
               "x": 0, "xanchor": "left", "y": 1 - 14 / height, "yanchor": "top"},
        plot_bgcolor="white", hovermode="closest", font={"size": FONT}, height=height, autosize=True,
        margin={"l": 70, "r": 20 if side else 90, "t": 110, "b": 30 if side else 110},
        legend={"font": {"size": FONT}, **legend}, xaxis=xaxis, yaxis=yaxis,
    )
    for a in fig.layout.annotations:  # the subplot titles: below the column names, left
        if a.text in ("by position", "summed over positions"):
            a.update(y=1.0, yshift=40, font={"size": FONT + 1})
    return fig


#: The ``div`` id of the drawing on the circuit page (its click handler's target).
FIGURE_ID = "circuit"


def write_circuit_html(circuit: Circuit, path: str | Path, title: str | None = None,
                       headline: Headline | None = None, **options) -> Path:
    """Write the figure (``options``: :func:`circuit_figure`'s) as
    a page of its own, after its ``headline``, with the click-to-highlight handler and the node
    table under it (:mod:`circuits.draw.interactive`; a page loading its folder's plotly.min.js:
    works offline)."""
    import re

    from circuits.draw.interactive import highlight_script, node_table

    fig = circuit_figure(circuit, title, **options)
    text = title or fig.layout.title.text
    sections = [(FIGURE_ID, fig), highlight_script(FIGURE_ID), node_table(circuit, options.get("position_names"))]
    return write_page(path, re.sub(r"<[^>]+>", "", text), sections, heading=False, headline=headline)


def _pos_name(p: int, names: list[str] | None) -> str:
    return f"{p} {names[p]}" if names is not None and p < len(names) else str(p)


def _token(p: int, names: list[str] | None) -> str:
    """A position's axis label: the task's name for it (``y0``, ``SEP``), else its number."""
    return names[p] if names is not None and p < len(names) else str(p)


def _pos(node, names) -> str:
    return "-" if node.position is None else _pos_name(node.position, names)


def _named(node, names) -> str:
    base = node.at(None).name
    return base if node.position is None else f"{base} @ {_pos_name(node.position, names)}"


__all__ = ["ATTENTION", "EDGE_SCALE", "FIGURE_ID", "HEAD_COLOURS", "head_colours", "MAX_CROSSINGS_PER_BAND", "ROW_PX", "Stroke", "add_nodes", "add_strokes", "circuit_figure", "component_circuit",
           "drawn_nodes", "edge_crossings", "edge_strokes", "figure_bands", "figure_layout", "layout_axes", "score_colour",
           "score_width", "write_circuit_html"]
