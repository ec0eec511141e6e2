"""Export of circuits and scores to the EAP-IG / MIB graph JSON, and back."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from circuit_models import make_model, token_pairs

from circuits import discover
from circuits.graph.export import eap_ig_edge_name, from_eap_ig, to_eap_ig, write_eap_ig
from circuits.graph.selection import select


def _eap_ig_edge_names(n_layers: int, n_heads: int) -> set[str]:
    """The edge set of EAP-IG's graph of a sequential (not parallel attn/MLP) transformer, as
    its Graph.from_model builds it: every earlier node feeds each head's q, k, v; the heads of
    the layer join the residual before the MLP; everything feeds the logits."""
    names, residual = set(), ["input"]
    for layer in range(n_layers):
        heads = [f"a{layer}.h{h}" for h in range(n_heads)]
        names |= {f"{u}->{h}<{x}>" for u in residual for h in heads for x in "qkv"}
        residual += heads
        names |= {f"{u}->m{layer}" for u in residual}
        residual.append(f"m{layer}")
    return names | {f"{u}->logits" for u in residual}


@pytest.fixture(scope="module")
def setup():
    model = make_model()
    clean, corrupted = token_pairs()
    return model, clean, corrupted


def test_the_edge_set_is_eap_igs(setup):
    model, clean, corrupted = setup
    scores = discover(model, clean, corrupted, method="eap", by_position=False)
    data = to_eap_ig(model, select(scores, 10), scores)
    assert set(data["edges"]) == _eap_ig_edge_names(2, 2)
    assert data["cfg"] == {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 16}
    assert sum(e["in_graph"] for e in data["edges"].values()) == 10


def test_round_trip_of_a_position_free_circuit(setup, tmp_path):
    model, clean, corrupted = setup
    scores = discover(model, clean, corrupted, method="eap", by_position=False)
    circuit = select(scores, 12, "connected")
    path = write_eap_ig(tmp_path / "graph.json", model, circuit, scores)
    back = from_eap_ig(path, model)
    assert back.edges == pytest.approx(circuit.edges)
    assert set(back.edges) == set(circuit.edges)
    loaded = json.loads(path.read_text())
    assert all(loaded["edges"][eap_ig_edge_name(e)]["score"] == pytest.approx(s) for e, s in circuit.edges.items())


def test_a_position_resolved_circuit_exports_summed_over_positions(setup):
    model, clean, corrupted = setup
    scores = discover(model, clean, corrupted, method="eap")
    circuit = select(scores, 30)
    data = to_eap_ig(model, circuit)
    summed = defaultdict(float)
    for e, s in circuit.edges.items():
        summed[eap_ig_edge_name(e)] += s
    in_graph = {n: e["score"] for n, e in data["edges"].items() if e["in_graph"]}
    assert in_graph == pytest.approx(dict(summed))


def test_reading_refuses_another_shape_and_unknown_edges(setup):
    model, clean, corrupted = setup
    scores = discover(model, clean, corrupted, method="eap", by_position=False)
    data = to_eap_ig(model, select(scores, 5), scores)
    with pytest.raises(ValueError, match="another model shape"):
        from_eap_ig({**data, "cfg": {**data["cfg"], "n_heads": 3}}, model)
    bad = {**data, "edges": {**data["edges"], "a1.h0->a0.h0<q>": {"score": 1.0, "in_graph": True}}}
    with pytest.raises(ValueError, match="does not have"):
        from_eap_ig(bad, model)
    with pytest.raises(ValueError, match="missing key"):
        from_eap_ig({"nodes": {}}, model)
