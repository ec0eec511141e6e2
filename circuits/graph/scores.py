"""Edge scores from a discovery method, and the circuits selected from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge


@dataclass(frozen=True)
class EdgeScores:
    """``scores [n_slots, n_writers, n_readers]`` over ``graph`` (0 off-graph) and the settings.

    Larger ``|score|`` means a more important edge.
    """

    graph: ModelGraph
    scores: Tensor
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if tuple(self.scores.shape) != self.graph.shape:
            raise ValueError(f"scores have shape {tuple(self.scores.shape)}; the graph needs {self.graph.shape}")

    def values(self) -> Tensor:
        """``[n_edges]`` scores of the real edges, in :meth:`ModelGraph.edges` order."""
        return self.scores[self.graph.mask]

    def top_k_mask(self, k: int) -> Tensor:
        """Keep mask of the ``k`` edges with the largest ``|score|`` (ties: index order)."""
        flat = torch.where(self.graph.mask, self.scores.abs(), torch.tensor(-1.0)).flatten()
        keep = torch.zeros(flat.numel(), dtype=torch.bool)
        k = max(0, min(k, self.graph.n_edges))
        keep[torch.sort(flat, descending=True, stable=True).indices[:k]] = True
        return keep.view(self.graph.shape)

    def threshold_mask(self, threshold: float) -> Tensor:
        return self.graph.mask & (self.scores.abs() >= threshold)

    def circuit(self, *, top_k: int | None = None, threshold: float | None = None) -> Circuit:
        """The circuit of the top-``k`` edges or of the edges with ``|score| >= threshold``."""
        if (top_k is None) == (threshold is None):
            raise ValueError("give exactly one of top_k= or threshold=")
        keep = self.top_k_mask(top_k) if top_k is not None else self.threshold_mask(threshold)
        return self.circuit_from_mask(keep, selection={"top_k": top_k, "threshold": threshold})

    def circuit_from_mask(self, keep: Tensor, selection: dict[str, Any] | None = None) -> Circuit:
        keep = keep & self.graph.mask
        edges: dict[Edge, float] = {}
        for slot, w, r in keep.nonzero().tolist():
            edges[self.graph.edge(slot, w, r)] = float(self.scores[slot, w, r])
        settings = {**self.settings, "by_position": self.graph.by_position,
                    "n_positions": self.graph.n_positions, **(selection or {})}
        return Circuit(edges, self.graph.arch, settings, self.graph.n_edges)


__all__ = ["EdgeScores"]
