"""Choosing a circuit from edge scores: by name, so that every result says which rule made it.

- ``top_k``: the ``k`` edges of largest ``|score|``, whether or not they connect (the rule
  before connected selection; kept by name, since published figures used it).
- ``connected``: the same top-``k`` edges, then every edge that lies on no input -> logits
  path is dropped (MIB's pruning): an edge stays when its writer is reached from the embedding
  or the seed channel through kept edges and the component it feeds reaches the logits through
  kept edges. The circuit says how many edges it dropped.
- ``greedy``: MIB's greedy growth from the logits: repeatedly add the largest-``|score|`` edge
  into the logits or into a component already in the circuit (so every edge added has a path
  to the logits), ``k`` times, then drop edges not reached from an input.

How information moves between positions: an edge into a head's query (or an MLP's input) at
position ``p`` feeds that component at ``p``; an edge into a head's key or value at ``p``
feeds the head's output at *every* position (attention reads keys from other positions; which
queries do depends on the mask, so every position is assumed, the conservative choice: it may
keep an edge that a causal mask makes useless, never drops a useful one).

    >>> circuit = select(scores, 20, "connected")
    >>> circuit.settings["n_dropped"]
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

from circuits.graph.circuit import Circuit
from circuits.graph.nodes import Edge, Node

if TYPE_CHECKING:
    from circuits.graph.scores import EdgeScores

SELECTION_RULES = ("top_k", "connected", "greedy")
INPUT_KINDS = ("embed", "seed")
_LOGITS = Node("logits")


def fed_components(edge: Edge, writers: set[Node]) -> set[Node]:
    """The writers among ``writers`` whose output ``edge`` feeds (the logits node for a logits
    edge): the head or MLP at the edge's position, or for a key/value edge the head at every
    position."""
    dest = edge.dest
    if dest.kind == "logits":
        return {_LOGITS}
    if dest.kind == "head" and edge.input in ("k", "v"):
        return {w for w in writers if w.kind == "head" and (w.layer, w.head) == (dest.layer, dest.head)}
    return {dest}


def connected_edges(edges: list[Edge]) -> list[Edge]:
    """The edges of ``edges`` on some input -> logits path through ``edges`` (order kept)."""
    writers = {e.source for e in edges}
    feeds = {e: fed_components(e, writers) for e in edges}
    reached = {w for w in writers if w.kind in INPUT_KINDS}
    useful = {_LOGITS}
    changed = True
    while changed:  # fixpoint: at most (depth of the graph) sweeps
        changed = False
        for e in edges:
            if e.source in reached:
                new = feeds[e] - reached
                if new:
                    reached |= new
                    changed = True
            if feeds[e] & useful and e.source not in useful:
                useful.add(e.source)
                changed = True
    return [e for e in edges if e.source in reached and feeds[e] & useful]


def prune(circuit: Circuit) -> Circuit:
    """``circuit`` without its dangling edges; ``settings["n_dropped"]`` counts them."""
    kept = connected_edges(list(circuit.edges))
    edges = {e: circuit.edges[e] for e in kept}
    dropped = len(circuit.edges) - len(edges)
    return replace(circuit, edges=edges, settings={**circuit.settings, "n_dropped": dropped})


def greedy_edges(scores: dict[Edge, float], k: int) -> list[Edge]:
    """MIB's greedy growth: ``k`` edges, each the largest-``|score|`` edge into the logits or
    into a component already chosen (ties: the given order)."""
    writers = {e.source for e in scores}
    into: dict[Node, list[tuple[float, int, Edge]]] = defaultdict(list)
    order = {e: i for i, e in enumerate(scores)}
    for e, s in scores.items():
        for w in fed_components(e, writers):
            into[w].append((-abs(s), order[e], e))
    heap = list(into[_LOGITS])
    heapq.heapify(heap)
    chosen: list[Edge] = []
    taken: set[Edge] = set()
    in_circuit = {_LOGITS}
    while heap and len(chosen) < k:
        _, _, e = heapq.heappop(heap)
        if e in taken:
            continue
        taken.add(e)
        chosen.append(e)
        if e.source not in in_circuit:
            in_circuit.add(e.source)
            for item in into[e.source]:
                if item[2] not in taken:
                    heapq.heappush(heap, item)
    return chosen


def select(scores: EdgeScores, k: int, rule: str = "top_k") -> Circuit:
    """The circuit of (at most) ``k`` edges chosen from ``scores`` by ``rule`` (one of
    :data:`SELECTION_RULES`); its settings name the rule and, for ``connected`` and ``greedy``,
    how many chosen edges were dropped as dangling (``n_dropped``)."""
    if rule not in SELECTION_RULES:
        raise ValueError(f"selection rule {rule!r} is unknown; choose from {SELECTION_RULES}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k={k!r} must be a non-negative integer (the number of edges)")
    if rule == "greedy":
        every = scores.circuit(top_k=scores.graph.n_edges)
        chosen = greedy_edges(every.edges, k)
        circuit = replace(every, edges={e: every.edges[e] for e in chosen})
    else:
        circuit = scores.circuit(top_k=k)
    if rule != "top_k":
        circuit = prune(circuit)
    return replace(circuit, settings={**circuit.settings, "selection": rule, "top_k": k})


__all__ = ["INPUT_KINDS", "SELECTION_RULES", "connected_edges", "fed_components", "greedy_edges", "prune", "select"]
