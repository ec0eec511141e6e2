"""Circuits in the graph JSON of circuit-tracer (Hanna & Piotrowski), which Neuronpedia's graph
viewer reads: one object

    {"metadata": {"slug", "scan", "prompt_tokens", "prompt", ...},
     "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
     "nodes": [{"node_id", "feature", "layer", "ctx_idx", "feature_type", "jsNodeId", "clerp",
                "influence", "activation"}, ...],
     "links": [{"source": node_id, "target": node_id, "weight": score}, ...]}

The schema this module's output is checked against ships beside it
(``circuit_tracer.schema.json``; :func:`check_circuit_tracer`, which also checks what a JSON
Schema cannot: unique node ids, links between listed nodes, positions within the prompt).

Our nodes are components, not transcoder features, so each becomes one graph node named like
circuit-tracer's ``{layer}_{feature}_{position}``:

- the token embedding at ``p``: ``E_{token id}_{p}`` (layer ``E``, type ``embedding``), the seed
  channel ``S_0_{p}`` and the input MLP ``I_0_{p}`` (layer ``E`` too: they come before block 0);
- head ``h`` of block ``l``: ``{l}_{h}_{p}`` (type ``attention head``), block ``l``'s MLP
  ``{l}_{n_heads}_{p}`` (type ``mlp``): one feature index per component of the block;
- the logits: ``{n_layers + 1}_{target id}_{p}`` (type ``logit``), as circuit-tracer numbers them.

A link joins two nodes at one position, as the circuit's edges do (information moves between
positions inside a head; the circuit page draws that with the attention pattern); the scores of
a pair's inputs (q, k, v) add up into its ``weight`` and are listed under ``inputs``. A node's
``influence`` is the cumulative share of the circuit's total ``|score|`` (each node's own share
is the ``|score|`` of its edges in and out, halved), nodes sorted by that share, largest first:
what a viewer's node threshold prunes on. A circuit summed over positions puts every node at
``ctx_idx`` 0. What the format cannot say sits under ``"interp_rand"`` (the architecture and the
circuit's settings).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from circuits.graph.architecture import architecture
from circuits.graph.circuit import Circuit
from circuits.graph.nodes import Node
from interp_rand.output import write_json

#: The JSON Schema of the export (in the repository, beside this module).
SCHEMA_PATH = Path(__file__).with_name("circuit_tracer.schema.json")

FEATURE_TYPES = {"embed": "embedding", "seed": "seed", "input_mlp": "input mlp", "head": "attention head",
                 "mlp": "mlp", "logits": "logit"}


def tracer_node_id(node: Node, n_layers: int, n_heads: int, token_ids: list[int] | None = None,
                   target_ids: list[int] | None = None) -> tuple[str, str, int]:
    """``(node_id, layer, feature)`` of ``node`` in the export (module docstring); a node summed
    over positions sits at 0 and names no token."""
    p = node.position or 0
    if node.position is None:
        token_ids = target_ids = None
    if node.kind == "embed":
        feature = int(token_ids[p]) if token_ids is not None and p < len(token_ids) and token_ids[p] >= 0 else p
        return f"E_{feature}_{p}", "E", feature
    if node.kind == "seed":
        return f"S_0_{p}", "E", 0
    if node.kind == "input_mlp":
        return f"I_0_{p}", "E", 0
    if node.kind == "head":
        return f"{node.layer}_{node.head}_{p}", str(node.layer), int(node.head)
    if node.kind == "mlp":
        return f"{node.layer}_{n_heads}_{p}", str(node.layer), n_heads
    feature = int(target_ids[p]) if target_ids is not None and p < len(target_ids) and target_ids[p] >= 0 else p
    return f"{n_layers + 1}_{feature}_{p}", str(n_layers + 1), feature


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "circuit"


def to_circuit_tracer(model: Any, circuit: Circuit, tokens: list[str], *, token_ids: list[int] | None = None,
                      target_ids: list[int] | None = None, name: str | None = None, scan: str | None = None,
                      node_threshold: float = 0.8) -> dict[str, Any]:
    """The circuit-tracer graph (module docstring) of ``circuit``, a circuit of ``model``, on one
    example: ``tokens`` one string per residual-stream position (a seed token first if the
    model has one), ``token_ids`` and ``target_ids`` its input and target token ids (numbering
    the embedding and logit nodes). ``name``: what the graph is of (``zoo:sort eap-ig``; its
    slug names the graph; default: the circuit's run and method); ``scan``: the model's name
    (default ``interp-rand-{task}``). Refuses a circuit of another architecture than ``model``'s
    (``None``: not checked)."""
    mismatch = [] if model is None else architecture(model).mismatch(circuit.arch)
    if mismatch:
        raise ValueError("the circuit is for another architecture (model vs circuit): " + "; ".join(mismatch))
    arch, settings = circuit.arch, circuit.settings
    tokens = [str(t) for t in tokens]
    positions = [n.position for n in circuit.nodes if n.position is not None]
    if positions and max(positions) >= len(tokens):
        raise ValueError(f"the circuit reaches position {max(positions)}; give one token per position "
                         f"({max(positions) + 1} or more), got {len(tokens)}")
    ids = {n: tracer_node_id(n, arch.n_layers, arch.n_heads, token_ids, target_ids) for n in circuit.nodes}
    own: dict[Node, float] = {n: 0.0 for n in circuit.nodes}
    pairs: dict[tuple[Node, Node], dict[str, float]] = {}
    for edge, score in circuit.edges.items():
        own[edge.source] += abs(score) / 2
        own[edge.dest] += abs(score) / 2
        pairs.setdefault((edge.source, edge.dest), {})[edge.input] = float(score)
    total = sum(own.values()) or 1.0
    order = sorted(circuit.nodes, key=lambda n: (-own[n], n.name))
    influence, running = {}, 0.0
    for n in order:
        running += own[n] / total
        influence[n] = min(1.0, running)
    nodes = []
    for n in order:
        node_id, layer, feature = ids[n]
        p = n.position
        where = "summed over positions" if p is None else f"at {p} ({tokens[p]})"
        entry = {"node_id": node_id, "feature": feature, "layer": layer, "ctx_idx": 0 if p is None else p,
                 "feature_type": FEATURE_TYPES[n.kind], "jsNodeId": node_id, "clerp": f"{n.at(None).name} {where}",
                 "influence": influence[n], "activation": None, "component": n.name}
        if n.kind == "logits":
            entry.update(is_target_logit=True, token_prob=0.0)
        nodes.append(entry)
    links = [{"source": ids[s][0], "target": ids[d][0], "weight": sum(inputs.values()), "inputs": inputs}
             for (s, d), inputs in sorted(pairs.items(), key=lambda kv: (kv[0][0].name, kv[0][1].name))]
    name = name or " ".join(str(settings[k]) for k in ("run", "method") if settings.get(k)) or "circuit"
    return {
        "metadata": {
            "slug": _slug(name), "scan": scan or _slug(f"interp-rand {settings.get('task', 'model')}"),
            "transcoder_list": [], "prompt_tokens": tokens, "prompt": " ".join(tokens),
            "node_threshold": node_threshold, "schema_version": 1,
            "info": {"description": f"{len(circuit)} of {circuit.total_edges} edges of {name}; nodes are components "
                                    "(attention heads, MLPs), not transcoder features",
                     "generator": {"name": "interp-rand", "url": "circuits/graph/tracer_export.py"}},
        },
        "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
        "nodes": nodes,
        "links": links,
        "interp_rand": {"architecture": arch.to_dict(), "settings": settings,
                        "by_position": bool(positions)},
    }


def check_circuit_tracer(data: dict[str, Any]) -> None:
    """Raise ``ValueError`` listing what is wrong with ``data`` as a circuit-tracer graph: what
    the schema (:data:`SCHEMA_PATH`) refuses, duplicate node ids, links to nodes not listed,
    positions beyond the prompt."""
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in jsonschema.Draft7Validator(schema).iter_errors(data)]
    if not problems:
        seen: set[str] = set()
        for n in data["nodes"]:
            if n["node_id"] in seen:
                problems.append(f"nodes: node_id {n['node_id']!r} appears twice")
            seen.add(n["node_id"])
            if n["ctx_idx"] >= len(data["metadata"]["prompt_tokens"]):
                problems.append(f"nodes: {n['node_id']!r} has ctx_idx {n['ctx_idx']}, beyond the "
                                f"{len(data['metadata']['prompt_tokens'])} prompt tokens")
        for i, link in enumerate(data["links"]):
            for end in ("source", "target"):
                if link[end] not in seen:
                    problems.append(f"links/{i}: {end} {link[end]!r} is no node of the graph")
    if problems:
        raise ValueError("not a circuit-tracer graph: " + "; ".join(problems[:10])
                         + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))


def write_circuit_tracer(path: str | Path, model: Any, circuit: Circuit, tokens: list[str], **options: Any) -> Path:
    """Write :func:`to_circuit_tracer` (``options``: its keywords) to ``path``, checked first
    (:func:`check_circuit_tracer`)."""
    data = to_circuit_tracer(model, circuit, tokens, **options)
    check_circuit_tracer(data)
    return write_json(path, data, indent=1)


__all__ = ["FEATURE_TYPES", "SCHEMA_PATH", "check_circuit_tracer", "to_circuit_tracer", "tracer_node_id",
           "write_circuit_tracer"]
