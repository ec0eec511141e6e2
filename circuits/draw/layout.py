"""Layered layout of a circuit: residual-stream order → column, head (and position) → row.

Returns positions only (as networkx layouts do); :mod:`circuits.draw.circuit_figure` draws them.

Columns: the residual-stream columns of :meth:`ModelGraph.column` (embed/seed, an input MLP,
layer ``l``'s heads, its MLP, logits last) that hold a drawn node, one unit apart (an empty
column, e.g. the MLP column of an attention-only model, is dropped). Rows: the head index
(embed, seed, MLP and logits take their own rows), stacked per position for a
position-resolved circuit so each position is a horizontal band; positions without a drawn
node are dropped too, so the bands are the positions where something happens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from circuits.graph.architecture import Architecture
from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node


def node_column(node: Node, arch: Architecture) -> float:
    """The node's residual-stream column (:meth:`ModelGraph.column`)."""
    return ModelGraph.structure(arch).column(node)


def node_row(node: Node, n_heads: int) -> float:
    """Row within one position band of height :func:`band_height`."""
    if node.kind == "head":
        return float(node.head)
    if node.kind == "seed":
        return float(n_heads)
    return (n_heads - 1) / 2


def band_height(n_heads: int) -> float:
    """Rows per position band: the heads, the seed's row and a gap."""
    return n_heads + 1.5


@dataclass(frozen=True)
class Layout:
    """Where the nodes of a drawing go: ``columns`` the residual-stream columns kept (left to
    right, drawn at x = 0, 1, ...), ``positions`` the positions kept (bottom to top, one band
    each; ``(None,)`` for a circuit summed over positions)."""

    arch: Architecture
    columns: tuple[float, ...]
    positions: tuple[int | None, ...]
    compact: bool = True

    @classmethod
    def of(cls, nodes: Iterable[Node], arch: Architecture, extra_positions: Iterable[int] = (),
           compact: bool = True) -> Layout:
        """The layout of ``nodes`` (and a band for each of ``extra_positions``); ``compact=False``
        keeps every column and every position up to the last (x = the residual-stream column,
        band = the position: drawings of different circuits line up)."""
        nodes = list(nodes)
        graph = ModelGraph.structure(arch)
        positions = {n.position for n in nodes if n.position is not None} | set(extra_positions)
        if not compact:
            columns = [c for c, _ in graph.column_labels()]
            positions = set(range(max(positions) + 1)) if positions else positions
        else:
            columns = sorted({node_column(n, arch) for n in nodes} | {graph.column(Node("logits"))})
        return cls(arch, tuple(columns), tuple(sorted(positions)) or (None,), compact)

    def x(self, node: Node) -> float:
        """The node's x: the index of its column among those kept (a column not kept, for an
        overlay's node, goes where it would be inserted); without ``compact``, the column."""
        column = node_column(node, self.arch)
        if not self.compact:
            return float(column)
        if column in self.columns:
            return float(self.columns.index(column))
        below = [i for i, c in enumerate(self.columns) if c < column]
        return (below[-1] if below else -1) + 0.5

    def band(self, position: int | None) -> int:
        """The band index of ``position`` (0 for a node without a position)."""
        if position is None or self.positions == (None,):
            return 0
        if not self.compact:
            return position
        return self.positions.index(position)

    def xy(self, node: Node) -> tuple[float, float]:
        n_heads = self.arch.n_heads
        return self.x(node), node_row(node, n_heads) + self.band(node.position) * band_height(n_heads)

    def centre(self, position: int | None) -> float:
        """The y of a position band's middle (where its axis tick goes)."""
        return (self.arch.n_heads - 1) / 2 + self.band(position) * band_height(self.arch.n_heads)

    def band_range(self, position: int | None) -> tuple[float, float]:
        """The band's y extent: from half a gap below its first row to half a gap above its last."""
        low = self.band(position) * band_height(self.arch.n_heads) - 0.75
        return low, low + band_height(self.arch.n_heads)

    def top(self) -> float:
        return len(self.positions) * band_height(self.arch.n_heads) - 1.5

    def column_ticks(self) -> list[tuple[float, str]]:
        """``(x, label)`` of each kept column (labels from :meth:`ModelGraph.column_labels`)."""
        labels = dict(ModelGraph.structure(self.arch).column_labels())
        return [(float(i) if self.compact else c, labels[c]) for i, c in enumerate(self.columns)]


def layered_layout(circuit: Circuit, nodes: Iterable[Node] | None = None,
                   compact: bool = False) -> dict[str, tuple[float, float]]:
    """``{node name: (x, y)}`` for every node of ``circuit`` (or of ``nodes``) on
    :meth:`Layout.of` those nodes (by default every column and position kept, x the
    residual-stream column: two circuits' layouts line up)."""
    nodes = list(circuit.nodes if nodes is None else nodes)
    layout = Layout.of(nodes, circuit.arch, compact=compact)
    return {n.name: layout.xy(n) for n in nodes}


__all__ = ["Layout", "band_height", "layered_layout", "node_column", "node_row"]
