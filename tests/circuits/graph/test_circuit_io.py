"""Circuit objects: networkx graph, JSON round trip, GraphML and DOT export, architecture checks."""

import pickle

import networkx as nx
import pytest
from circuit_models import make_model

from circuits import Circuit, discover


@pytest.fixture(scope="module")
def circuit(model, pairs):
    clean, corrupted = pairs
    return discover(model, clean, corrupted, metric="logprob", method="eap").circuit(top_k=12)


def test_circuit_graph_carries_scores(circuit):
    g = circuit.graph
    assert isinstance(g, nx.DiGraph)
    assert len(circuit) == 12 and circuit.total_edges == 276
    assert sum(d["score"] for _, _, d in g.edges(data=True)) == pytest.approx(sum(circuit.edges.values()), abs=1e-6)
    for edge in circuit.edges:
        assert g.has_edge(edge.source.name, edge.dest.name)
        assert edge.input in g.edges[edge.source.name, edge.dest.name]["inputs"]
    assert circuit.settings["method"] == "eap" and circuit.settings["ablation"]["kind"] == "resample"


def test_json_round_trip(circuit, model, tmp_path):
    path = circuit.save(tmp_path / "c.json")
    loaded = Circuit.load(path, model)
    assert loaded.edges == circuit.edges
    assert loaded.arch == circuit.arch and loaded.settings == circuit.settings


def test_loading_into_another_architecture_names_the_mismatch(circuit, tmp_path):
    path = circuit.save(tmp_path / "c.json")
    with pytest.raises(ValueError, match="n_layers=3 vs 2"):
        Circuit.load(path, make_model(n_layers=3))
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a circuit file"):
        Circuit.load(tmp_path / "x.json")


def test_graphml_and_dot(circuit, tmp_path):
    back = nx.read_graphml(circuit.write_graphml(tmp_path / "c.graphml"))
    assert set(back.nodes) == set(circuit.graph.nodes)
    assert back.number_of_edges() == circuit.graph.number_of_edges()
    dot = circuit.write_dot(tmp_path / "c.dot").read_text()
    assert dot.startswith("digraph") and dot.count("->") == circuit.graph.number_of_edges()


@pytest.mark.parametrize("content, named", [
    (pickle.dumps({"edges": []}), "binary, not UTF-8 text"),  # a pickle is refused unread
    (b'{"format": ', "not JSON"),
    (b"[1, 2]", "a JSON list"),
])
def test_a_file_that_is_not_a_circuit_is_named_with_what_is_wrong(tmp_path, content, named):
    path = tmp_path / "c.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=named) as err:
        Circuit.load(path)
    assert str(path) in str(err.value)


def test_a_damaged_circuit_file_is_named(circuit, tmp_path):
    import json

    data = circuit.to_dict()
    del data["edges"][0]["score"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="a damaged circuit file") as err:
        Circuit.load(path)
    assert str(path) in str(err.value)
