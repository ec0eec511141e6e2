"""The vocabulary of circuits: frozen :class:`Node` and :class:`Edge`.

A node is a component that writes into the residual stream (token embedding, seed channel,
input MLP, attention head, MLP) or the final read-out (logits), optionally at one
residual-stream position. An edge joins a writer to one *input* of a later component: an
attention head's query, key or value input, an MLP's (or the input MLP's) input, or the logits.
In a model with an input MLP the embedding (and an appended seed) feed only the input MLP
(see :mod:`circuits.graph.architecture`). Position-resolved edges join a writer
at position ``p`` to a reader at the same position ``p`` (the residual stream is per position;
information moves between positions only inside attention heads, through their key and value
inputs), as in TransformerLens 4.x's attribution graph.

    >>> Edge(Node("head", 0, 1), Node("head", 1, 3), "k").name
    'a0.1->a1.3<k>'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NODE_KINDS = ("embed", "seed", "input_mlp", "head", "mlp", "logits")
WRITER_KINDS = ("embed", "seed", "input_mlp", "head", "mlp")
EDGE_INPUTS = ("q", "k", "v", "mlp", "logits")


@dataclass(frozen=True, order=True)
class Node:
    """A graph component.

    Attributes:
        kind: one of ``NODE_KINDS``.
        layer: block index for ``head``/``mlp`` (``None`` for embed, seed, input_mlp, logits).
        head: head index for ``head`` nodes.
        position: residual-stream position, or ``None`` for a node summed over positions.
    """

    kind: str
    layer: int | None = None
    head: int | None = None
    position: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in NODE_KINDS:
            raise ValueError(f"Node.kind={self.kind!r} is not allowed; choose from {NODE_KINDS}")
        needs_layer = self.kind in ("head", "mlp")
        if needs_layer != (self.layer is not None):
            raise ValueError(f"Node kind {self.kind!r} {'needs' if needs_layer else 'takes no'} layer")
        if (self.kind == "head") != (self.head is not None):
            raise ValueError(f"Node kind {self.kind!r} {'needs' if self.kind == 'head' else 'takes no'} head")

    @property
    def name(self) -> str:
        """Short display name: ``embed``, ``seed``, ``input_mlp``, ``a1.3`` (head), ``m0`` (MLP), ``logits``;
        with ``@p`` appended for a position-resolved node."""
        base = {"head": f"a{self.layer}.{self.head}", "mlp": f"m{self.layer}"}.get(self.kind, self.kind)
        return base if self.position is None else f"{base}@{self.position}"

    def at(self, position: int | None) -> Node:
        return Node(self.kind, self.layer, self.head, position)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "layer": self.layer, "head": self.head, "position": self.position}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        return cls(data["kind"], data.get("layer"), data.get("head"), data.get("position"))


@dataclass(frozen=True, order=True)
class Edge:
    """``source`` (a writer) feeds input ``input`` of ``dest``.

    ``input`` is ``q``/``k``/``v`` for a head destination, ``mlp`` for an MLP or the input MLP
    and ``logits`` for the logits node.
    """

    source: Node
    dest: Node
    input: str

    def __post_init__(self) -> None:
        if self.source.kind not in WRITER_KINDS:
            raise ValueError(f"Edge source must be a writer {WRITER_KINDS}; got {self.source.kind!r}")
        allowed = {"head": ("q", "k", "v"), "mlp": ("mlp",), "input_mlp": ("mlp",),
                   "logits": ("logits",)}.get(self.dest.kind)
        if allowed is None:
            raise ValueError(f"Edge dest must be a head, mlp, input_mlp or logits node; got {self.dest.kind!r}")
        if self.input not in allowed:
            raise ValueError(f"Edge into a {self.dest.kind} node takes input {allowed}; got {self.input!r}")
        if self.source.position != self.dest.position:
            raise ValueError(
                f"Edge joins positions {self.source.position} and {self.dest.position}; an edge "
                "stays at one residual-stream position"
            )

    @property
    def name(self) -> str:
        suffix = f"<{self.input}>" if self.dest.kind == "head" else ""
        return f"{self.source.name}->{self.dest.name}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source.to_dict(), "dest": self.dest.to_dict(), "input": self.input}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edge:
        return cls(Node.from_dict(data["source"]), Node.from_dict(data["dest"]), data["input"])


__all__ = ["EDGE_INPUTS", "NODE_KINDS", "WRITER_KINDS", "Edge", "Node"]
