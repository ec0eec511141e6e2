"""Circuits in the graph format of the EAP-IG library (Hanna et al.), which the MIB circuit
track reads and writes: one JSON object

    {"cfg": {"n_layers", "n_heads", "parallel_attn_mlp", "d_model"},
     "nodes": {"input": {"in_graph": true}, "a0.h1": {...}, "m0": {...}, "logits": {...}},
     "edges": {"input->a0.h1<q>": {"score": 0.3, "in_graph": true}, "a0.h1->m0": {...}, ...}}

Node names there: ``input`` (the embedding), ``a{layer}.h{head}``, ``m{layer}``, ``logits``;
an edge into a head names the input ``<q>``, ``<k>`` or ``<v>``. The format has no positions
and no seed channel or input MLP, so an export

- sums a position-resolved circuit's scores over positions (an edge is in the graph when it is
  at any position), as our position-free circuits do;
- folds the token embedding, the seed channel and the input MLP into ``input`` (their scores
  add up), and leaves out edges into the input MLP (inside ``input`` there);
- keeps what the format cannot say under the extra key ``"interp_rand"`` (the architecture,
  the settings, and the folded edges), which other readers ignore.

:func:`from_eap_ig` reads such a file back as a position-free :class:`Circuit` of a model
(``input`` becomes the embedding): a round trip of a position-free circuit of a model without
seed channel or input MLP gives back the same edges and scores.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from circuits.graph.architecture import architecture
from circuits.graph.circuit import Circuit
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge, Node
from circuits.graph.scores import EdgeScores
from interp_rand.output import write_json

FOLDED_INTO_INPUT = ("embed", "seed", "input_mlp")


def eap_ig_node_name(node: Node) -> str:
    """The EAP-IG name of ``node`` (positions dropped; embedding, seed and input MLP are ``input``)."""
    if node.kind in FOLDED_INTO_INPUT:
        return "input"
    if node.kind == "head":
        return f"a{node.layer}.h{node.head}"
    if node.kind == "mlp":
        return f"m{node.layer}"
    return "logits"


def eap_ig_edge_name(edge: Edge) -> str | None:
    """The EAP-IG name of ``edge``, or ``None`` for an edge inside ``input`` (into the input MLP)."""
    if edge.dest.kind == "input_mlp":
        return None
    suffix = f"<{edge.input}>" if edge.dest.kind == "head" else ""
    return f"{eap_ig_node_name(edge.source)}->{eap_ig_node_name(edge.dest)}{suffix}"


def to_eap_ig(model: Any, circuit: Circuit, scores: EdgeScores | None = None) -> dict[str, Any]:
    """The EAP-IG graph of ``model`` with ``circuit``'s edges in the graph. With ``scores``,
    every edge of the model's graph carries its score (summed over positions); without, the
    edges outside the circuit score 0."""
    cfg = model.cfg
    graph = ModelGraph.of(model, int(circuit.settings.get("n_positions", 1) or 1), by_position=False)
    every = scores.circuit(top_k=scores.graph.n_edges).edges if scores is not None else circuit.edges
    names = {e: eap_ig_edge_name(e) for e in graph.edges()}
    total: dict[str, float] = defaultdict(float)
    in_graph: set[str] = set()
    folded: list[dict[str, Any]] = []
    for source, chosen in ((every, False), (circuit.edges, True)):
        for edge, score in source.items():
            name = eap_ig_edge_name(edge)
            if name is None:
                if chosen:
                    folded.append({**edge.to_dict(), "score": score})
                continue
            if chosen:
                in_graph.add(name)
                if scores is None:
                    total[name] += score
            elif scores is not None:
                total[name] += score
    edges = {name: {"score": float(total.get(name, 0.0)), "in_graph": name in in_graph}
             for name in dict.fromkeys(n for n in names.values() if n is not None)}
    nodes = {"input": {"in_graph": True}}
    for edge in graph.edges():
        for node in (edge.source, edge.dest):
            name = eap_ig_node_name(node)
            nodes.setdefault(name, {"in_graph": False})
    for name in in_graph:
        parent, child = name.split("<")[0].split("->")
        nodes[parent]["in_graph"] = nodes[child]["in_graph"] = True
    nodes["logits"] = {"in_graph": True}
    return {
        "cfg": {"n_layers": int(cfg.n_layers), "n_heads": int(cfg.n_heads), "parallel_attn_mlp": False,
                "d_model": int(cfg.d_model)},
        "nodes": nodes,
        "edges": edges,
        "interp_rand": {"architecture": circuit.arch.to_dict(), "settings": circuit.settings,
                        "folded_into_input": folded},
    }


def write_eap_ig(path: str | Path, model: Any, circuit: Circuit, scores: EdgeScores | None = None) -> Path:
    return write_json(path, to_eap_ig(model, circuit, scores), indent=1)


def from_eap_ig(data: dict[str, Any] | str | Path, model: Any) -> Circuit:
    """The position-free circuit of ``model`` in an EAP-IG graph (a dict or a JSON file): the
    edges with ``in_graph`` true and their scores. Refuses a graph of another shape (layers,
    heads, width) or an edge the model's graph does not have."""
    if not isinstance(data, dict):
        data = json.loads(Path(data).read_text())
    missing = [k for k in ("cfg", "nodes", "edges") if k not in data]
    if missing:
        raise ValueError(f"not an EAP-IG graph: missing key(s) {missing} (expected cfg, nodes, edges)")
    cfg = model.cfg
    want = {"n_layers": int(cfg.n_layers), "n_heads": int(cfg.n_heads), "d_model": int(cfg.d_model)}
    differ = {k: (data["cfg"].get(k), v) for k, v in want.items() if data["cfg"].get(k) != v}
    if differ:
        raise ValueError(f"the graph is for another model shape (file, model): {differ}")
    graph = ModelGraph.of(model, 1, by_position=False)
    by_name: dict[str, Edge] = {}
    for edge in graph.edges():
        name = eap_ig_edge_name(edge)
        if name is not None and edge.source.kind in ("embed", "head", "mlp", "input_mlp"):
            # ``input`` reads back as the node the model's later components read: the input MLP
            # when there is one, else the embedding
            by_name.setdefault(name, edge)
            if edge.source.kind == "input_mlp":
                by_name[name] = edge
    unknown = [n for n, e in data["edges"].items() if e.get("in_graph") and n not in by_name]
    if unknown:
        raise ValueError(f"the graph has edges this model does not have: {sorted(unknown)[:5]}")
    edges = {by_name[n]: float(e["score"]) for n, e in data["edges"].items() if e.get("in_graph")}
    settings = {**data.get("interp_rand", {}).get("settings", {}), "by_position": False, "source": "eap-ig graph"}
    return Circuit(edges, architecture(model), settings, graph.n_edges)


__all__ = ["eap_ig_edge_name", "eap_ig_node_name", "from_eap_ig", "to_eap_ig", "write_eap_ig"]
