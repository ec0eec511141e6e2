"""Layered layout of a circuit: residual-stream order → column, head (and position) → row.

Returns positions only (as networkx layouts do); :mod:`circuits.draw.circuit_figure` draws them.

Columns: the residual-stream columns of :meth:`ModelGraph.column` (embed/seed 0, an input MLP
0.5, layer ``l``'s heads ``2l + 1``, its MLP ``2l + 2``, logits last). Rows:
the head index (embed, seed, MLP and logits take their own rows), stacked per position for a
position-resolved circuit so each position is a horizontal band.
"""

from __future__ import annotations

from circuits.graph.architecture import Architecture
from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node


def node_column(node: Node, arch: Architecture) -> float:
    """The node's column: its residual-stream column (:meth:`ModelGraph.column`)."""
    return ModelGraph.structure(arch).column(node)


def node_row(node: Node, n_heads: int) -> float:
    """Row within one position band of height ``n_heads + 1``."""
    if node.kind == "head":
        return float(node.head)
    if node.kind == "seed":
        return float(n_heads)
    return (n_heads - 1) / 2


def band_height(n_heads: int) -> float:
    """Rows per position band: the heads, the seed's row and a gap."""
    return n_heads + 1.5


def position_centre(position: int, n_heads: int) -> float:
    """The y of a position band's middle (where its axis tick goes)."""
    return (n_heads - 1) / 2 + position * band_height(n_heads)


def layered_layout(circuit: Circuit) -> dict[str, tuple[float, float]]:
    """``{node name: (x, y)}`` for every node of ``circuit.graph``."""
    graph, n_heads = ModelGraph.structure(circuit.arch), circuit.arch.n_heads
    out: dict[str, tuple[float, float]] = {}
    for node in circuit.nodes:
        y = node_row(node, n_heads) + (node.position or 0) * band_height(n_heads)
        out[node.name] = (float(graph.column(node)), y)
    return out


__all__ = ["band_height", "layered_layout", "node_column", "node_row", "position_centre"]
