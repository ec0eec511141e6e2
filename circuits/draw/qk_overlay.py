"""Why a head of a circuit attends where it does, drawn on the circuit itself.

For each explained head (a :class:`~probes.qk_attribution.QKAttribution` at one query position
with its :class:`~probes.qk_attribution.QKPatchCheck`) the drawing gets:

- an arrow from each of the head's top contributors to the head at the query position: a
  query-side contributor (``q:m0``) drawn from that node at the query position, a key-side one
  (``k:pos``) from that node at the key the head attends most; purple for the query side, green
  for the key side, wider for a larger contribution, the source marked and named in its colour.
  Contributors that are not nodes of the drawing (the positional embedding ``pos``, the
  attention output biases ``b_O``) get no arrow and are named in the label only;
- a label beside the head, readable without hovering: the key it attends (and how much), its
  top contributors with their importance, and the patching check's verdict (top contributors
  removed against random ones).

Positions are the residual stream's (a seed token, if any, is 0), as the circuit's nodes use.
Only the attribution objects' attributes are read here (drawing never computes); a
contributor's node comes from its :class:`~probes.qk_attribution.Contributor`'s part (kind,
layer, head), never from its name.
"""

from __future__ import annotations

import plotly.graph_objects as go

from circuits.graph.nodes import WRITER_KINDS, Node
from circuits.draw.layout import Layout
from probes.qk_attribution import Part

SIDE_COLOUR = {"q": "rgba(130,60,170,0.85)", "k": "rgba(30,140,80,0.85)"}
SIDE_TEXT = {"q": "query side", "k": "key side"}


def contributor_node(part: Part, position: int | None) -> Node | None:
    """The drawing's node for a contributor's part (:class:`~probes.qk_attribution.Part`: its
    kind, layer and head, as the attribution made it) at ``position``; ``None`` for one that is
    no node of the graph (``pos``, ``b_O``, ``bias``)."""
    if part.kind not in WRITER_KINDS:
        return None
    return Node(part.kind, part.layer, part.head, position)


def node_xy(node: Node, layout: Layout) -> tuple[float, float]:
    """Where ``layout`` puts ``node`` (whether or not it is in the circuit); on the layout of a
    circuit summed over positions, without its position."""
    return layout.xy(node.at(None) if layout.positions == (None,) else node)


def attended_key(attr) -> int:
    """The key the head attends most at the query, averaged over examples (largest |pattern|
    for linear attention)."""
    row = attr.mean_pattern
    return int(row.argmax() if attr.softmax else row.abs().argmax())


def head_label(attr, check, key: int, names: list[str] | None, top: list[str],
               importance: dict[str, float]) -> str:
    """The text beside the head: attended key, ``top`` contributors with their ``importance``,
    patching verdict."""
    name = (lambda p: f"{p} {names[p]}" if names is not None and p < len(names) else str(p))
    lines = [f"<b>why a{attr.layer}.{attr.head} @ {name(attr.query)} attends {name(key)}</b> "
             f"(mean attention {float(attr.mean_pattern[key]):.2f})"]
    lines += [f"{SIDE_TEXT[c.side]}: {c.part} ({importance[c]:.2f})" for c in top]
    if check is not None:
        lines.append(f"top {len(check.top)} removed: pattern moves {check.top_change:.2f} vs "
                     f"{check.random_mean:.2f} random: <b>{check.verdict}</b>")
    return "<br>".join(lines)


def overlay_positions(qk) -> set[int]:
    """The positions the overlay draws at: each explained head's query and attended key."""
    return {p for attr, _ in qk for p in (attr.query, attended_key(attr))}


def _drawn(attr, check, k: int) -> list[tuple[str, Node | None]]:
    """The contributors drawn for one head (the check's top, else the attribution's top ``k``),
    each with its node (``None``: no node of the graph)."""
    key = attended_key(attr)
    top = list(check.top) if check is not None else attr.top(k)
    return [(c, contributor_node(c.part, attr.query if c.side == "q" else key)) for c in top]


def overlay_nodes(qk, by_position: bool = True, k: int = 3) -> set[Node]:
    """The nodes the overlay draws at (each explained head at its query, its contributors), so
    the drawing's layout keeps their columns and positions."""
    out = set()
    for attr, check in qk:
        out.add(Node("head", attr.layer, attr.head, attr.query))
        out |= {n for _, n in _drawn(attr, check, k) if n is not None}
    return out if by_position else {n.at(None) for n in out}


def add_qk_overlay(fig: go.Figure, qk, layout: Layout, names: list[str] | None = None, k: int = 3) -> None:
    """Draw ``qk`` (pairs ``(attribution, patching check or None)``) on ``fig``, a circuit figure
    drawn on ``layout`` (module docstring); the layout should hold :func:`overlay_nodes` and
    :func:`overlay_positions` too."""
    for attr, check in qk:
        key = attended_key(attr)
        head = Node("head", attr.layer, attr.head, attr.query)
        hx, hy = node_xy(head, layout)
        importance = attr.importance()
        drawn = _drawn(attr, check, k)
        top = [c for c, _ in drawn]
        largest = max((importance[c] for c in top), default=0.0) or 1.0
        for contributor, source in drawn:
            side = contributor.side
            if source is None:
                continue
            sx, sy = node_xy(source, layout)
            fig.add_trace(go.Scatter(x=[sx], y=[sy], mode="markers+text", text=[source.at(None).name],
                                     textposition="bottom center", textfont={"size": 11, "color": SIDE_COLOUR[side]},
                                     showlegend=False, hoverinfo="skip", cliponaxis=False,
                                     marker={"size": 8, "color": SIDE_COLOUR[side]}))
            fig.add_annotation(x=hx, y=hy, ax=sx, ay=sy, xref="x", yref="y", axref="x", ayref="y", text="",
                               showarrow=True, arrowhead=2, arrowsize=1.2, standoff=6, startstandoff=6,
                               arrowwidth=1 + 3 * importance[contributor] / largest,
                               arrowcolor=SIDE_COLOUR[side])
        fig.add_trace(go.Scatter(x=[hx], y=[hy], mode="markers", showlegend=False, hoverinfo="skip",
                                 marker={"size": 16, "color": "rgba(0,0,0,0)",
                                         "line": {"width": 2, "color": SIDE_COLOUR["q"]}}))
        fig.add_annotation(x=hx, y=hy, xref="x", yref="y", text=head_label(attr, check, key, names, top, importance),
                           showarrow=False, xanchor="left", yanchor="bottom", xshift=12, yshift=8, align="left",
                           font={"size": 11}, bgcolor="rgba(255,255,255,0.85)", bordercolor="grey")
    if qk:
        for side, colour in SIDE_COLOUR.items():
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": colour, "width": 3},
                                     name=f"why the head attends: {SIDE_TEXT[side]} contributor"))


__all__ = ["SIDE_COLOUR", "add_qk_overlay", "attended_key", "contributor_node", "head_label", "node_xy",
           "overlay_nodes", "overlay_positions"]
