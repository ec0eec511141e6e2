"""Circuit objects: networkx graph, JSON round trip, GraphML and DOT export, architecture checks."""

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
