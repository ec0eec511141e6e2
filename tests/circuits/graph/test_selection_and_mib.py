"""Connected circuit selection and MIB's faithfulness integrals."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from circuit_models import N, micro_model, micro_pairs

from circuits import discover, faithfulness
from circuits.analyses.mib import MIB_FRACTIONS, faithfulness_integrals, integrals_table, trapezoid_area
from circuits.graph.nodes import Edge, Node
from circuits.graph.selection import connected_edges, greedy_edges, select
from circuits.interventions.edge_patching import run_with_edges
from circuits.interventions.metrics import evaluate_metric, get_metric
from circuits.methods.discovery import patch_data
from circuits.interventions.ablation import Ablation


def _e(src: Node, dest: Node, inp: str) -> Edge:
    return Edge(src, dest, inp)


EMB3, EMB2, EMB4 = Node("embed", position=3), Node("embed", position=2), Node("embed", position=4)
A00_3, A00_4 = Node("head", 0, 0, 3), Node("head", 0, 0, 4)
A11_4, M0_2, M1_4 = Node("head", 1, 1, 4), Node("mlp", 0, position=2), Node("mlp", 1, position=4)
LOG4 = Node("logits", position=4)


def _on_a_path(edges: list[Edge]) -> set[Edge]:
    """Independent check with networkx: a graph of writer and reader vertices (a reader feeds
    its component at its position, a key/value reader the head at every position); an edge is
    on a path when its writer is reachable from an input and its reader reaches the logits."""
    g = nx.DiGraph()
    positions = {e.source.position for e in edges}
    for e in edges:
        reader = ("reader", e.dest, e.input)
        g.add_edge(("writer", e.source), reader)
        if e.dest.kind == "logits":
            g.add_edge(reader, "LOGITS")
        elif e.dest.kind == "head" and e.input in "kv":
            for p in positions:
                g.add_edge(reader, ("writer", e.dest.at(p)))
        else:
            g.add_edge(reader, ("writer", e.dest))
    inputs = [v for v in g if v != "LOGITS" and v[0] == "writer" and v[1].kind in ("embed", "seed")]
    from_input = set().union(*(nx.descendants(g, v) | {v} for v in inputs)) if inputs else set()
    to_logits = nx.ancestors(g, "LOGITS") if "LOGITS" in g else set()
    return {e for e in edges if ("writer", e.source) in from_input and ("reader", e.dest, e.input) in to_logits}


def test_connected_edges_drop_what_no_input_reaches_and_what_reaches_no_logits():
    kept_k = _e(EMB3, A00_3, "k")           # a key edge at 3 feeds a0.0 at 4 too
    out = _e(A00_4, LOG4, "logits")
    unreached = _e(A11_4, LOG4, "logits")   # nothing feeds a1.1
    dead_end = _e(EMB2, M0_2, "mlp")        # m0@2 writes nowhere kept
    edges = [kept_k, out, unreached, dead_end]
    assert connected_edges(edges) == [kept_k, out]
    assert set(connected_edges(edges)) == _on_a_path(edges)


def test_greedy_grows_from_the_logits():
    into_m1 = _e(EMB4, M1_4, "mlp")
    m1_out = _e(M1_4, LOG4, "logits")
    head_out = _e(A00_4, LOG4, "logits")
    scores = {into_m1: 10.0, m1_out: 1.0, head_out: -2.0}
    assert greedy_edges(scores, 1) == [head_out]          # only logits edges are candidates at first
    assert greedy_edges(scores, 2) == [head_out, m1_out]
    assert greedy_edges(scores, 3) == [head_out, m1_out, into_m1]  # m1 is in: its input edge is a candidate


@pytest.fixture(scope="module")
def micro():
    model = micro_model()
    clean, corrupted = micro_pairs()
    return model, clean, corrupted, discover(model, clean, corrupted, method="eap")


def test_selection_rules_on_the_micro_model(micro):
    model, _, _, scores = micro
    for k in (3, 10, 40):
        top = select(scores, k, "top_k")
        conn = select(scores, k, "connected")
        assert set(conn.edges) == _on_a_path(list(top.edges))
        assert conn.settings["n_dropped"] == len(top) - len(conn)
        greedy = select(scores, k, "greedy")
        assert set(greedy.edges) == _on_a_path(list(greedy.edges))
    known = {"embed@3->a0.0@3<v>", "a0.0@4->a1.0@4<v>", "a1.0@4->logits@4"}
    assert {e.name for e in select(scores, 3, "greedy").edges} == known
    with pytest.raises(ValueError, match="choose from"):
        select(scores, 3, "biggest")


def test_trapezoid_area_matches_numpy():
    xs, ys = list(MIB_FRACTIONS), [0.1, 0.3, 0.2, 0.5, 0.9, 1.0, 1.1, 0.95, 1.0, 1.0]
    assert trapezoid_area(xs, ys) == pytest.approx(float(np.trapezoid(ys, xs)))


def test_integrals_agree_with_faithfulness_and_by_hand_necessity(micro):
    model, clean, corrupted, scores = micro
    result = faithfulness_integrals(model, scores, clean, corrupted, selection="connected")
    assert result.sizes[-1] == scores.graph.n_edges
    assert result.sufficiency[-1] == pytest.approx(1.0, abs=1e-6)   # every edge kept: the model
    assert result.necessity[-1] == pytest.approx(0.0, abs=1e-6)     # every edge ablated: empty
    assert result.cpr == pytest.approx(trapezoid_area(result.fractions, result.sufficiency))
    assert result.cmd == pytest.approx(trapezoid_area(result.fractions, [abs(1 - f) for f in result.sufficiency]))
    i = result.sizes.index(next(k for k in result.sizes if k >= 3))
    circuit = select(scores, result.sizes[i], "connected")
    assert result.sufficiency[i] == pytest.approx(faithfulness(model, circuit, clean, corrupted).recovered, abs=1e-6)
    graph = scores.graph
    repl = patch_data(model, graph, clean, corrupted, Ablation("resample")).replacement
    m = get_metric("logprob")
    keep = graph.keep_mask(list(circuit.edges))
    by_hand = [float(evaluate_metric(m, run_with_edges(model, graph, clean, k, repl), clean))
               for k in (graph.mask & ~keep, graph.mask, torch.zeros_like(graph.mask))]
    assert result.necessity[i] == pytest.approx((by_hand[0] - by_hand[2]) / (by_hand[1] - by_hand[2]), abs=1e-6)
    # the micro model's circuit is three edges: once they are in, the circuit is the model and
    # ablating them removes the behaviour
    assert result.sufficiency[i] > 0.99 and abs(result.necessity[i]) < 0.01


def test_integrals_table_runs_every_method_and_ablation(micro):
    model, clean, corrupted, _ = micro
    rows = integrals_table(model, clean, corrupted, methods=("eap", "exact"), ablations=("resample", "zero"),
                           fractions=(0.01, 0.1, 1.0))
    assert [(r.settings["method"], r.settings["ablation"]["kind"]) for r in rows] == [
        ("eap", "resample"), ("exact", "resample"), ("eap", "zero"), ("exact", "zero")]
    assert all(r.seconds["discovery"] > 0 and r.sufficiency[-1] == pytest.approx(1.0, abs=1e-5) for r in rows)
