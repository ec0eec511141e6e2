"""Export of a circuit to the circuit-tracer / Neuronpedia graph JSON, checked against the
schema shipped with it (circuits/graph/circuit_tracer.schema.json) and the links' ends."""

from __future__ import annotations

import copy
import json

import pytest
from circuit_models import make_model

from circuits import discover
from circuits.graph.selection import select
from circuits.graph.tracer_export import (SCHEMA_PATH, check_circuit_tracer, to_circuit_tracer, tracer_node_id,
                                          write_circuit_tracer)


@pytest.fixture(scope="module")
def graph(model, pairs):
    clean, corrupted = pairs
    circuit = select(discover(model, clean, corrupted, method="eap"), 30)
    tokens = [str(int(t)) for t in clean.inputs[0]]
    data = to_circuit_tracer(model, circuit, tokens, token_ids=[int(t) for t in clean.inputs[0]],
                             target_ids=[int(t) for t in clean.targets[0]], name="tiny eap")
    return circuit, tokens, data


def test_the_export_passes_its_schema_and_keeps_every_node_and_score(graph):
    circuit, tokens, data = graph
    check_circuit_tracer(data)
    assert json.loads(SCHEMA_PATH.read_text())["required"] == ["metadata", "qParams", "nodes", "links"]
    meta = data["metadata"]
    assert meta["prompt_tokens"] == tokens and meta["slug"] == "tiny-eap" and meta["prompt"] == " ".join(tokens)
    assert len(data["nodes"]) == len(circuit.nodes)
    assert {n["component"] for n in data["nodes"]} == {n.name for n in circuit.nodes}
    assert sum(link["weight"] for link in data["links"]) == pytest.approx(sum(circuit.edges.values()))
    assert sum(len(link["inputs"]) for link in data["links"]) == len(circuit)  # each edge once, by its input
    # nodes by their share, largest first: influence climbs to 1
    influence = [n["influence"] for n in data["nodes"]]
    assert influence == sorted(influence) and influence[-1] == pytest.approx(1.0)
    by_kind = {n["feature_type"] for n in data["nodes"]}
    assert {"embedding", "logit"} <= by_kind and by_kind <= {"embedding", "attention head", "mlp", "logit"}
    for n in data["nodes"]:
        assert tokens[n["ctx_idx"]] in n["clerp"]  # the label names the example's token


def test_node_ids_follow_circuit_tracers_layer_feature_position():
    from circuits import Node

    assert tracer_node_id(Node("embed", position=3), 2, 4, token_ids=[0, 0, 0, 7]) == ("E_7_3", "E", 7)
    assert tracer_node_id(Node("head", 1, 2, 3), 2, 4) == ("1_2_3", "1", 2)
    assert tracer_node_id(Node("mlp", 1, position=3), 2, 4) == ("1_4_3", "1", 4)  # after the block's heads
    assert tracer_node_id(Node("logits", position=3), 2, 4, target_ids=[-1, -1, -1, 5]) == ("3_5_3", "3", 5)
    assert tracer_node_id(Node("embed"), 2, 4, token_ids=[7]) == ("E_0_0", "E", 0)  # summed: no token of its own


def test_a_circuit_summed_over_positions_exports_at_position_zero(model, pairs):
    clean, corrupted = pairs
    circuit = select(discover(model, clean, corrupted, method="eap", by_position=False), 10)
    data = to_circuit_tracer(model, circuit, ["3", "1", "4", "1", "5", "9"], token_ids=[3, 1, 4, 1, 5, 9])
    check_circuit_tracer(data)
    assert {n["ctx_idx"] for n in data["nodes"]} == {0} and data["interp_rand"]["by_position"] is False
    assert all("summed over positions" in n["clerp"] for n in data["nodes"])


@pytest.mark.parametrize("breakage, says", [
    (lambda d: d["links"].append({"source": d["nodes"][0]["node_id"], "target": "9_9_9", "weight": 1.0}),
     "'9_9_9' is no node"),
    (lambda d: d["nodes"][0].pop("clerp"), "'clerp' is a required property"),
    (lambda d: d["metadata"].pop("prompt_tokens"), "'prompt_tokens' is a required property"),
    (lambda d: d.pop("qParams"), "'qParams' is a required property"),
    (lambda d: d["links"][0].update(weight="0.5"), "is not of type 'number'"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "appears twice"),
    (lambda d: d["nodes"][0].update(ctx_idx=len(d["metadata"]["prompt_tokens"])), "beyond the"),
])
def test_a_broken_graph_is_refused(graph, breakage, says):
    _, _, data = graph
    broken = copy.deepcopy(data)
    breakage(broken)
    with pytest.raises(ValueError, match="not a circuit-tracer graph") as err:
        check_circuit_tracer(broken)
    assert says in str(err.value)


def test_the_writer_refuses_another_model_and_too_few_tokens(graph, tmp_path):
    circuit, tokens, _ = graph
    with pytest.raises(ValueError, match="another architecture"):
        to_circuit_tracer(make_model(n_heads=4), circuit, tokens)
    with pytest.raises(ValueError, match="one token per position"):
        to_circuit_tracer(make_model(), circuit, tokens[:2])
    path = write_circuit_tracer(tmp_path / "g.json", make_model(), circuit, tokens)
    check_circuit_tracer(json.loads(path.read_text()))
