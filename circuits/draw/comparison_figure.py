"""Side-by-side plotly drawing of two compared circuits on one shared layered layout: every node
of either circuit sits at the same place in both panels (nodes absent from a circuit are drawn
faint).

What the marks mean (issue 23): an edge's colour is its signed score on the shared diverging
scale (:data:`interp_rand.figures.style.DIVERGING`, centred on 0, one scale for both panels: red
helps the metric, blue hurts it; a colour bar says so), its width ``|score|``, its dash the
head input it feeds (q dotted, k dashed), and the marker near its middle says whether the other
circuit has it too (a filled circle: in both circuits; a cross: in this circuit only) and
carries the hover (score, share, which circuit). Columns no node of either circuit uses (the
MLP columns of an attention-only model) and positions no node sits at are dropped, so the
height follows the number of rows and the width the window.

    >>> write_comparison_html(a, b, result, "comparison.html", headline=Headline(...), after=[claims_table])
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from circuits.analyses.comparison import CircuitComparison
from circuits.analyses.flow import FlowEdge, attention_flow
from circuits.draw.circuit_figure import DASH, FONT, drawn_nodes
from circuits.draw.layout import layered_layout
from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from interp_rand.figures.html_page import write_page
from interp_rand.figures.style import DIVERGING

#: Marker on an edge's middle: in both circuits, or in this panel's circuit only.
SHARED_SYMBOL, UNIQUE_SYMBOL = "circle", "x"
#: Where along an edge (source 0, destination 1) its marker sits.
MARK_AT = 0.55
#: Pixels per drawn row and the room around the plot (title, panel titles, legend, ticks).
ROW_PX, FRAME_PX = 34, 220
# an edge's line colour never gets lighter than this fraction of the scale's end (the scale's
# middle is white: a line of a small score would vanish on the white background); the marker
# on it carries the exact colour
_MIN_TINT = 0.5


def shared_layout(a: Circuit, b: Circuit) -> dict[str, tuple[float, float]]:
    """Positions of every node of ``a`` or ``b`` (the layered layout of their union)."""
    union = dataclasses.replace(a, edges={**b.edges, **a.edges})
    return layered_layout(union)


def compact_layout(pos: dict[str, tuple[float, float]], nodes) -> tuple[dict[str, tuple[float, float]],
                                                                       list[float], dict[int | None, float]]:
    """``pos`` on the columns and rows the drawn ``nodes`` use only: columns renumbered
    ``0, 1, ...`` in order, rows one apart with a gap of half a row between position bands.
    Returns the new positions, the old column of each new one, and the y of each position's
    band middle (key ``None``: nodes without a position)."""
    nodes = list(nodes)
    columns = sorted({pos[n.name][0] for n in nodes})
    column_index = {c: i for i, c in enumerate(columns)}
    bands = sorted({n.position for n in nodes}, key=lambda p: -1 if p is None else p)
    rows = sorted({(bands.index(n.position), pos[n.name][1]) for n in nodes})
    row_y = {row: i + 0.5 * row[0] for i, row in enumerate(rows)}
    out = {n.name: (float(column_index[pos[n.name][0]]), row_y[bands.index(n.position), pos[n.name][1]])
           for n in nodes}
    centres: dict[int | None, float] = {}
    for band, p in enumerate(bands):
        ys = [y for (b, _), y in row_y.items() if b == band]
        centres[p] = (min(ys) + max(ys)) / 2
    return out, columns, centres


def score_colour(score: float, top: float) -> str:
    """The line colour of ``score`` on :data:`DIVERGING` over ``[-top, top]`` (at least
    :data:`_MIN_TINT` away from its white middle)."""
    t = max(_MIN_TINT, min(1.0, abs(score) / top))
    return sample_colorscale(DIVERGING, [0.5 + (0.5 * t if score >= 0 else -0.5 * t)])[0]


def _width(score: float, top: float) -> float:
    return 1.0 + 5.0 * min(1.0, abs(score) / top)


def _named(node, names: list[str] | None) -> str:
    base = node.at(None).name
    if node.position is None:
        return base
    return f"{base} @ {node.position}" + (f" {names[node.position]}" if names and node.position < len(names) else "")


def _add_panel(fig: go.Figure, flows: list[FlowEdge], pairs: set, pos: dict, top: float, label: str,
               names: list[str] | None, col: int, colorbar: bool) -> None:
    """One circuit's edges: lines grouped by (colour, dash, width) and the markers on their middles."""
    groups: dict[tuple, tuple[list, list]] = {}
    marks: dict[bool, dict[str, list]] = {}
    for f in flows:
        (x0, y0), (x1, y1) = pos[f.source.name], pos[f.dest.name]
        key = (score_colour(f.score, top), DASH.get(f.input, "solid"), round(_width(f.score, top), 1),
               0.9 if f.reaches else 0.35)
        xs, ys = groups.setdefault(key, ([], []))
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        shared = (f.edge.source, f.edge.dest) in pairs
        text = (f"{_named(f.source, names)} → {_named(f.dest, names)} &lt;{f.input}&gt;<br>score {f.score:+.4g}"
                f"<br>{'in both circuits' if shared else 'in ' + label + ' only'}")
        if f.share is not None:
            text += f"<br>mean attention of the query on this key: {f.share:.2f}"
        m = marks.setdefault(shared, {"x": [], "y": [], "score": [], "text": []})
        # the marker sits just past the middle: an edge skipping a column does not put it on
        # that column's node and label (columns are whole numbers apart)
        m["x"].append(x0 + MARK_AT * (x1 - x0))
        m["y"].append(y0 + MARK_AT * (y1 - y0))
        m["score"].append(f.score)
        m["text"].append(text)
    for (colour, dash, width, alpha), (xs, ys) in sorted(groups.items()):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False, opacity=alpha,
                                 line={"width": width, "color": colour, "dash": dash}), row=1, col=col)
    for shared, m in sorted(marks.items()):
        fig.add_trace(go.Scatter(
            x=m["x"], y=m["y"], mode="markers", hovertext=m["text"], hoverinfo="text", showlegend=False,
            name=f"edges {label}",
            marker={"symbol": SHARED_SYMBOL if shared else UNIQUE_SYMBOL, "size": 9 if shared else 10,
                    "color": m["score"], "colorscale": DIVERGING, "cmin": -top, "cmax": top, "cmid": 0,
                    "line": {"width": 1, "color": "#333"},
                    "showscale": colorbar and shared == max(marks),
                    "colorbar": {"title": {"text": "score", "side": "right"}, "thickness": 12, "len": 0.9,
                                 "tickfont": {"size": FONT}}},
        ), row=1, col=col)


def _add_nodes(fig: go.Figure, nodes, pos: dict, present: set, names: list[str] | None, label: str, col: int) -> None:
    """Node markers; heads labelled above (the column tick names the others); nodes of the
    other circuit only are faint."""
    nodes = sorted(nodes, key=lambda n: pos[n.name])
    fig.add_trace(go.Scatter(
        x=[pos[n.name][0] for n in nodes], y=[pos[n.name][1] for n in nodes], mode="markers+text",
        text=[n.at(None).name if n.kind == "head" and n.name in present else "" for n in nodes],
        textposition="top center", textfont={"size": FONT}, cliponaxis=False, showlegend=False,
        name=f"nodes {label}", hoverinfo="text",
        hovertext=[_named(n, names) + ("" if n.name in present else " (not in this circuit)") for n in nodes],
        marker={"size": 9, "color": "white",
                "line": {"width": 1.5, "color": ["black" if n.name in present else "lightgrey" for n in nodes]}},
    ), row=1, col=col)


def _legend(fig: go.Figure) -> None:
    def entry(name: str, **trace: Any) -> None:
        fig.add_trace(go.Scatter(x=[None], y=[None], name=name, hoverinfo="skip", **trace))

    entry("edge in both circuits", mode="markers", marker={"symbol": SHARED_SYMBOL, "size": 9, "color": "#999",
                                                           "line": {"width": 1, "color": "#333"}})
    entry("edge in this circuit only", mode="markers", marker={"symbol": UNIQUE_SYMBOL, "size": 10, "color": "#999",
                                                               "line": {"width": 1, "color": "#333"}})
    for which in ("q", "k"):
        entry(f"into the head's {which}", mode="lines", line={"color": "grey", "width": 2, "dash": DASH[which]})
    entry("width: |score|", mode="lines", line={"color": "grey", "width": 5})


def comparison_figure(a: Circuit, b: Circuit, result: CircuitComparison, title: str | None = None, *,
                      attention: tuple | None = None, position_names: list[str] | None = None,
                      min_share: float = 0.1) -> go.Figure:
    """Two panels (A left, B right) on the compacted :func:`shared_layout`; ``attention``: each
    run's mean pattern ``[layer, head, q, k]`` (A's, B's) to draw key/value edges between
    positions (:func:`circuits.analyses.flow.attention_flow`)."""
    la, lb = result.labels
    flows = [attention_flow(c, None if attention is None else attention[i], min_share) for i, c in enumerate((a, b))]
    nodes = drawn_nodes(flows[0]) | drawn_nodes(flows[1])
    pos, columns, centres = compact_layout(shared_layout(a, b), nodes)
    top = max((abs(s) for c in (a, b) for s in c.edges.values()), default=1.0) or 1.0  # one scale for both
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=(f"{la}: {len(a)} edges, {len(result.only_a)} only here",
                                        f"{lb}: {len(b)} edges, {len(result.only_b)} only here"))
    for col, (label, other, flow) in enumerate(((la, b, flows[0]), (lb, a, flows[1])), start=1):
        pairs = {(e.source, e.dest) for e in other.edges}
        _add_panel(fig, flow, pairs, pos, top, label, position_names, col, colorbar=col == 2)
        _add_nodes(fig, nodes, pos, {n.name for n in drawn_nodes(flow)}, position_names, label, col)
    _legend(fig)
    labels = dict(ModelGraph.structure(a.arch).column_labels())
    fig.update_xaxes(showgrid=False, zeroline=False, tickmode="array", tickvals=list(range(len(columns))),
                     ticktext=[labels.get(c, str(c)) for c in columns], tickfont={"size": FONT},
                     range=[-0.5, len(columns) - 0.5])
    n_rows = len({y for _, y in pos.values()})
    span = max((y for _, y in pos.values()), default=0.0)
    bands = [p for p in centres if p is not None]
    yaxis: dict[str, Any] = {"showgrid": False, "zeroline": False, "tickfont": {"size": FONT}, "automargin": True,
                             "range": [-0.7, span + 0.7]}  # position 0 at the bottom, as in circuit_figure
    if bands:
        yaxis.update(tickmode="array", tickvals=[centres[p] for p in bands],
                     ticktext=[f"{p} {position_names[p]}" if position_names and p < len(position_names) else str(p)
                               for p in bands], title_text="position")
        for below, above in zip(bands, bands[1:]):  # a faint line between neighbouring position bands
            low = max(pos[n.name][1] for n in nodes if n.position == below)
            high = min(pos[n.name][1] for n in nodes if n.position == above)
            fig.add_hline(y=(low + high) / 2, line={"color": "#e4e4e4", "width": 1}, layer="below")
    else:
        yaxis.update(showticklabels=False)
    fig.update_yaxes(**yaxis)
    fig.update_yaxes(title_text="", row=1, col=2)
    rho = "n/a" if result.spearman is None else f"{result.spearman:.3f}"
    fig.update_layout(
        title={"text": title or (f"{la} vs {lb}: {len(result.shared)} shared edges, Jaccard {result.jaccard:.3f}, "
                                 f"Spearman of shared scores {rho}"), "x": 0, "xref": "paper", "font": {"size": 14}},
        plot_bgcolor="white", hovermode="closest", font={"size": FONT}, height=FRAME_PX + ROW_PX * n_rows,
        margin={"l": 70, "r": 20, "t": 90, "b": 80},
        legend={"font": {"size": FONT}, "orientation": "h", "x": 0, "xanchor": "left", "yref": "container",
                "y": 0.0, "yanchor": "bottom"},
    )
    return fig


def write_comparison_html(a: Circuit, b: Circuit, result: CircuitComparison, path: str | Path,
                          title: str | None = None, *, headline: Any = None, after: list | tuple = (),
                          **options) -> Path:
    """Write the page: the ``headline`` first, the figure (``options``: :func:`comparison_figure`'s),
    then the sections ``after`` it (HTML strings: the claims, tables)."""
    fig = comparison_figure(a, b, result, title, **options)
    la, lb = result.labels
    return write_page(path, f"{la} vs {lb}: circuit comparison", [fig, *after], heading=False, headline=headline)


__all__ = ["comparison_figure", "compact_layout", "score_colour", "shared_layout", "write_comparison_html"]
