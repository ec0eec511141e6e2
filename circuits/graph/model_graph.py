"""The full computational graph of a model: every writer, every reader input, every edge.

Writers (residual-stream order): ``embed``, ``seed`` (if the model has a seed channel),
``input_mlp`` (if it has an input MLP), then per layer its heads and its MLP. Readers: the input
MLP's input (if any), per layer the q, k and v inputs of every head and the MLP input, then the
logits. A writer feeds a reader when it comes earlier in the residual stream (a layer's heads
feed that layer's MLP), except around an input MLP: the input MLP reads exactly the embedding
(and an appended seed), and those feed nothing else (:mod:`circuits.graph.architecture`). Edge scores are held as a dense tensor
``[n_positions or 1, n_writers, n_readers]`` (zero where no edge exists): fast to compute with,
and turned into :class:`~circuits.graph.nodes.Edge` objects only at the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import Architecture, architecture
from circuits.graph.nodes import Edge, Node


@dataclass(frozen=True)
class ModelGraph:
    """Writers, readers and the edge structure of one architecture.

    Attributes:
        arch: the model's :class:`Architecture`.
        n_positions: residual-stream length (including a seed token).
        by_position: edges resolved per position (else each edge spans every position).
    """

    arch: Architecture
    n_positions: int
    by_position: bool = True

    @classmethod
    def of(cls, model: Any, n_positions: int, by_position: bool = True) -> ModelGraph:
        return cls(architecture(model), n_positions + architecture(model).seed_offset, by_position)

    # ------------------------------------------------------------------ structure
    @cached_property
    def writers(self) -> list[Node]:
        out = [Node("embed")] + ([Node("seed")] if self.arch.has_seed else [])
        out += [Node("input_mlp")] if self.arch.has_input_mlp else []
        for layer in range(self.arch.n_layers):
            out += [Node("head", layer, h) for h in range(self.arch.n_heads)]
            if not self.arch.attn_only:
                out.append(Node("mlp", layer))
        return out

    @cached_property
    def readers(self) -> list[tuple[Node, str]]:
        out: list[tuple[Node, str]] = [(Node("input_mlp"), "mlp")] if self.arch.has_input_mlp else []
        for layer in range(self.arch.n_layers):
            for which in "qkv":
                out += [(Node("head", layer, h), which) for h in range(self.arch.n_heads)]
            if not self.arch.attn_only:
                out.append((Node("mlp", layer), "mlp"))
        out.append((Node("logits"), "logits"))
        return out

    @cached_property
    def input_mlp_sources(self) -> tuple[str, ...]:
        """Kinds of the writers that feed the input MLP, and only it (none without one)."""
        if not self.arch.has_input_mlp:
            return ()
        return ("embed", "seed") if self.arch.seed_append else ("embed",)

    def _order(self, node: Node, reading: bool) -> float:
        """Residual-stream order: a writer feeds readers of larger order."""
        if node.kind in ("embed", "seed"):
            return -1.0
        if node.kind == "input_mlp":
            return -0.75 if reading else -0.5
        if node.kind == "logits":
            return float(self.arch.n_layers)
        # a head reads at l, writes at l + 0.25; an MLP reads at l + 0.5, writes at l + 0.75
        return node.layer + (0.0 if reading else 0.25) + (0.5 if node.kind == "mlp" else 0.0)

    @cached_property
    def valid(self) -> Tensor:
        """``[n_writers, n_readers]`` bool: which writer feeds which reader."""
        w = torch.tensor([self._order(n, False) for n in self.writers])
        r = torch.tensor([self._order(n, True) for n, _ in self.readers])
        into_input_mlp = torch.tensor([n.kind in self.input_mlp_sources for n in self.writers])
        reads_input_mlp = torch.tensor([n.kind == "input_mlp" for n, _ in self.readers])
        # the input MLP's sources feed it and nothing else; it reads nothing else
        return (w[:, None] < r[None, :]) & (into_input_mlp[:, None] == reads_input_mlp[None, :])

    @property
    def n_slots(self) -> int:
        """Number of position slots of the score tensor."""
        return self.n_positions if self.by_position else 1

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.n_slots, len(self.writers), len(self.readers))

    @cached_property
    def mask(self) -> Tensor:
        """``[n_slots, n_writers, n_readers]`` bool, true on real edges."""
        return self.valid[None].expand(self.shape).clone()

    @property
    def n_edges(self) -> int:
        return int(self.mask.sum())

    def writer_index(self, node: Node) -> int:
        return self.writers.index(node.at(None))

    def reader_index(self, node: Node, which: str) -> int:
        return self.readers.index((node.at(None), which))

    # ------------------------------------------------------------------ edges <-> indices
    def edge(self, slot: int, w: int, r: int) -> Edge:
        pos = slot if self.by_position else None
        node, which = self.readers[r]
        return Edge(self.writers[w].at(pos), node.at(pos), which)

    def index(self, edge: Edge) -> tuple[int, int, int]:
        if self.by_position != (edge.source.position is not None):
            raise ValueError(
                f"edge {edge.name} is {'not ' if self.by_position else ''}position-resolved but "
                f"the graph is{'' if self.by_position else ' not'}"
            )
        slot = edge.source.position if self.by_position else 0
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"edge {edge.name}: position {slot} outside [0, {self.n_slots})")
        try:
            w, r = self.writer_index(edge.source), self.reader_index(edge.dest, edge.input)
        except ValueError:
            raise ValueError(f"edge {edge.name} names a component this model does not have") from None
        if not self.valid[w, r]:
            if edge.source.kind in self.input_mlp_sources:
                raise ValueError(f"edge {edge.name}: {edge.source.kind} reaches the residual stream only through the input MLP")
            if edge.dest.kind == "input_mlp":
                raise ValueError(f"edge {edge.name}: the input MLP reads only {' and '.join(self.input_mlp_sources)}")
            raise ValueError(f"edge {edge.name} goes backwards in the residual stream")
        return slot, w, r

    def edges(self, keep: Tensor | None = None) -> list[Edge]:
        """The edges where ``keep`` (default: all real edges) is true, in index order."""
        keep = self.mask if keep is None else keep & self.mask
        return [self.edge(*map(int, idx)) for idx in keep.nonzero()]

    def keep_mask(self, edges: list[Edge]) -> Tensor:
        keep = torch.zeros(self.shape, dtype=torch.bool)
        for edge in edges:
            keep[self.index(edge)] = True
        return keep


__all__ = ["ModelGraph"]
