"""Where a position-resolved circuit moves information between positions (computed here, drawn
in :mod:`circuits.draw.circuit_figure`).

An edge into a head's key or value input at position ``p`` (``src@p -> a1.0@p<k>``) stays at
``p`` in the graph, but what it carries reaches the head's *output* at every query position
``q`` that attends to ``p``. :func:`attention_flow` splits each such edge over the head's query
positions that the circuit keeps (``a1.0@q`` writes somewhere), by the share of the query's
attention on key ``p``, averaged over the data: ``src@p -> a1.0@q``. Query edges, MLP and
logits edges stay at their position.

    >>> attention = mean_attention(model, batch)             # [layer, head, q, k]
    >>> [f for f in attention_flow(circuit, attention) if f.source.position != f.dest.position]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from circuits.graph.circuit import Circuit
from circuits.graph.nodes import Edge, Node


@dataclass(frozen=True)
class FlowEdge:
    """One drawn edge: ``source`` at its position feeds input ``input`` of ``dest``, drawn at the
    query position it reaches.

    Attributes:
        edge: the circuit's edge it draws.
        score: the circuit edge's score.
        share: for a split key/value edge, the mean share of the query's attention on the
            source's key position (``None``: not split).
        reaches: False for a key/value edge whose key no kept query position attends to by at
            least the threshold (drawn at its own position, faint).
    """

    edge: Edge
    source: Node
    dest: Node
    input: str
    score: float
    share: float | None = None
    reaches: bool = True


@torch.no_grad()
def mean_attention(model, batch) -> Tensor | None:
    """``[layer, head, query, key]`` attention pattern averaged over ``batch`` at the model's own
    positions (a seed token, if any, is position 0: the positions of the circuit's nodes); ``None``
    for a mixer without a pattern (no ``"pattern"`` capability,
    :func:`~interp_rand.model.mixer.capability_hook`; the gated recurrence), whose key/value
    edges are then drawn unsplit."""
    from probes.attention import attention_patterns

    from interp_rand.model.mixer import capability_hook

    if any(capability_hook(model, layer, "pattern") is None for layer in range(int(model.cfg.n_layers))):
        return None
    return attention_patterns(model, batch).mean(0)


def attention_flow(circuit: Circuit, attention: Tensor | None, min_share: float = 0.1) -> list[FlowEdge]:
    """Every edge of ``circuit`` as drawn: key/value edges split over the query positions that
    attend to their key by a share ``>= min_share`` (``|pattern|`` normalised per query row, so
    signed linear attention works too) where the circuit keeps the head's output; everything
    else as it is. Without ``attention`` (or for a circuit summed over positions) nothing is
    split."""
    writers = {e.source for e in circuit.edges}
    share = None
    if attention is not None:
        a = torch.as_tensor(attention).abs().float()  # [layer, head, q, k]
        share = a / a.sum(-1, keepdim=True).clamp_min(1e-12)
    out: list[FlowEdge] = []
    for edge, score in sorted(circuit.edges.items()):
        dest, p = edge.dest, edge.dest.position
        if share is None or dest.kind != "head" or edge.input not in ("k", "v") or p is None:
            out.append(FlowEdge(edge, edge.source, dest, edge.input, score))
            continue
        row = share[dest.layer, dest.head]  # [q, k]
        reached = [(q, float(row[q, p])) for q in range(row.shape[0])
                   if dest.at(q) in writers and float(row[q, p]) >= min_share]
        if not reached:
            out.append(FlowEdge(edge, edge.source, dest, edge.input, score, reaches=False))
        out += [FlowEdge(edge, edge.source, dest.at(q), edge.input, score, s) for q, s in reached]
    return out


__all__ = ["FlowEdge", "attention_flow", "mean_attention"]
