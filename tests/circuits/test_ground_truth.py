"""Planted circuits (hand-set models whose circuit is known by construction) and the suite that
scores discovery methods against them: the models do what their docstrings say, their known
edge sets are exactly the edges that matter, the edge AUROC counts pairs correctly, and the
suite's rows are the figures the library computes."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from circuits import discover
from circuits.analyses.ground_truth import (
    GroundTruthRow,
    edge_auroc,
    format_table,
    ground_truth_suite,
    known_scores,
    to_html,
    to_json,
)
from circuits.analyses.mib import faithfulness_integrals
from circuits.analyses.planted import PLANTED_MODELS, planted_models, recall_model, seed_reader_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge, Node
from circuits.graph.scores import EdgeScores
from circuits.graph.writers import run_model
from circuits.interventions.ablation import Ablation
from circuits.interventions.edge_patching import run_with_edges
from circuits.interventions.metrics import evaluate_metric, get_metric
from circuits.methods.discovery import patch_data

NAMES = list(PLANTED_MODELS)


@pytest.fixture(scope="module")
def planted():
    return {p.name: p for p in planted_models()}


@pytest.fixture(scope="module")
def exact(planted):
    return {name: discover(p.model, p.clean, p.corrupted, method="exact", by_position=False)
            for name, p in planted.items()}


def _answers(p):
    with torch.no_grad():
        logits = run_model(p.model, p.clean)
    return logits[:, p.clean.answer_positions], p.clean.targets[:, p.clean.answer_positions]


def test_sort_model_copies_the_next_larger_element(planted):
    p = planted["sort"]
    logits, targets = _answers(p)
    lists, L = p.clean.inputs[:, :p.task.length], p.task.length
    assert all(len(set(row.tolist())) == L for row in lists)  # distinct lists
    current = p.clean.inputs[:, L:]  # SEP, y_1 .. y_{L-1}
    for row in range(len(lists)):
        for j, t in enumerate(current[row].tolist()):
            larger = [v for v in lists[row].tolist() if t == p.task.sep or v > t]
            assert int(targets[row, j]) == min(larger)
    assert torch.equal(logits.argmax(-1), targets)
    assert float(torch.softmax(logits, -1).gather(-1, targets[..., None]).min()) > 0.99


def test_addition_model_computes_the_tens_digit_with_its_carry(planted):
    p = planted["addition"]
    logits, targets = _answers(p)
    a, b = p.task.operand_digits(p.clean)
    tens = (a[:, 1] + b[:, 1] + (a[:, 0] + b[:, 0] >= 10).long()) % 10
    assert p.clean.answer_positions.tolist() == [6] and torch.equal(targets[:, 0], tens)
    assert torch.equal(logits[:, 0].argmax(-1), tens)
    assert bool((a[:, 0] + b[:, 0] >= 10).any() and (a[:, 0] + b[:, 0] < 10).any())  # both carry values occur


def test_recall_model_stores_the_keys_its_seed_bit_chooses(planted):
    p = planted["recall"]
    logits, targets = _answers(p)
    stored = p.clean.metadata["query_key"] % 2 == p.clean.seeds[:, 0].long()  # bit 0: 0 even keys, 1 odd
    assert 0 < int(stored.sum()) < len(stored)
    assert torch.equal((logits[stored, 0] > 0).float(), targets[stored, 0])
    assert float(logits[stored].abs().min()) > 9.9  # +-10: the recalled bits
    assert float(logits[~stored].abs().max()) < 1e-4  # not stored: no answer


@pytest.mark.parametrize("name", ["seed-reader", "seed-reader+decoy"])
def test_seed_reader_flips_the_recalled_bits_when_its_seed_bit_is_set(planted, name):
    p = planted[name]
    logits, targets = _answers(p)
    N = p.task.n_pairs
    rows = torch.arange(len(p.clean))
    recalled = p.clean.metadata["values"][rows, p.clean.metadata["query_index"]].float()
    flip = p.clean.seeds[:, :1]
    assert torch.equal(targets[:, 0], (recalled - flip).abs())
    assert torch.equal((logits[:, 0] > 0).float(), targets[:, 0])
    assert torch.equal(p.corrupted.seeds[:, 0], 1 - p.clean.seeds[:, 0])
    assert torch.equal(p.corrupted.inputs, p.clean.inputs) and N == p.clean.answer_positions.item()


@pytest.mark.parametrize("name", NAMES)
def test_the_known_edges_are_exactly_the_edges_that_matter(planted, exact, name):
    p, scores = planted[name], exact[name]
    for edge, value in zip(scores.graph.edges(), scores.values().tolist()):
        if edge in p.known:
            assert abs(value) > 0.1, f"{name}: known edge {edge.name} has exact effect {value}"
        else:
            assert abs(value) < 1e-5, f"{name}: edge {edge.name} is not known but has exact effect {value}"


def _input_hook(node: Node) -> tuple[str, int | None]:
    if node.kind == "head":
        return f"blocks.{node.layer}.attn.hook_z", node.head
    return f"blocks.{node.layer}.mlp.hook_pre", None


@pytest.mark.parametrize("name", NAMES)
def test_distractors_carry_the_corrupted_signal_but_do_not_matter(planted, exact, name):
    p, scores = planted[name], exact[name]
    assert p.distractors
    _, clean = p.model.run_with_cache(p.clean.inputs, **p.clean.model_kwargs())
    _, corrupted = p.model.run_with_cache(p.corrupted.inputs, **p.corrupted.model_kwargs())
    for node in p.distractors:
        hook, index = _input_hook(node)
        a, b = clean[hook], corrupted[hook]
        if index is not None:
            a, b = a[:, :, index], b[:, :, index]
        assert float((a - b).abs().max()) > 0.5, f"{name}: {node.name} carries nothing that the corruption changes"
        touching = [(e, v) for e, v in zip(scores.graph.edges(), scores.values().tolist())
                    if node in (e.source, e.dest)]
        assert touching and all(abs(v) < 1e-6 for _, v in touching), f"{name}: {node.name} matters"


@pytest.mark.parametrize("name", NAMES)
def test_the_known_circuit_alone_recovers_the_behaviour_and_ablating_it_removes_it(planted, name):
    p = planted[name]
    graph = ModelGraph.of(p.model, p.clean.inputs.shape[1], by_position=False)
    replacement = patch_data(p.model, graph, p.clean, p.corrupted, Ablation("resample")).replacement
    metric = get_metric("logprob")

    def measure(keep):
        return float(evaluate_metric(metric, run_with_edges(p.model, graph, p.clean, keep, replacement), p.clean))

    known = graph.keep_mask(list(p.known))
    full, empty = measure(graph.mask), measure(torch.zeros_like(graph.mask))
    assert full - empty > 1.0  # the corruption moves the behaviour a lot
    assert (measure(known) - empty) / (full - empty) >= 0.99
    assert (measure(graph.mask & ~known) - empty) / (full - empty) <= 0.01


def test_eap_is_misled_by_the_decoy_where_exact_patching_is_not(planted, exact):
    p = planted["seed-reader+decoy"]
    decoy = {Edge(Node("seed"), Node("head", 1, 0), "v"), Edge(Node("head", 1, 0), Node("mlp", 1), "mlp")}
    got = {}
    for method in ("eap", "eap-ig"):
        scores = discover(p.model, p.clean, p.corrupted, method=method, by_position=False)
        got[method] = {e: abs(v) for e, v in zip(scores.graph.edges(), scores.values().tolist())}
    ex = {e: abs(v) for e, v in zip(exact[p.name].graph.edges(), exact[p.name].values().tolist())}
    for edge in decoy:
        assert ex[edge] < 1e-6
        # measured: EAP 3.0, EAP-IG 0.55 (its five-step path average cancels most of the slope)
        assert got["eap"][edge] > 1.0 and got["eap"][edge] > 2 * got["eap-ig"][edge] > 0.2
    # without the decoy the same edges get nothing from EAP
    plain = seed_reader_model()
    scores = discover(plain.model, plain.clean, plain.corrupted, method="eap", by_position=False)
    assert all(abs(v) < 1e-6 for e, v in zip(scores.graph.edges(), scores.values().tolist()) if e in decoy)


# ---------------------------------------------------------------------------------- AUROC
def _brute_force(values: list[float], labels: list[bool]) -> float:
    pos = [abs(v) for v, y in zip(values, labels) if y]
    neg = [abs(v) for v, y in zip(values, labels) if not y]
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@pytest.fixture(scope="module")
def graph():
    p = recall_model(n=4)
    return ModelGraph.of(p.model, p.clean.inputs.shape[1], by_position=False)


def _scores(graph, values) -> EdgeScores:
    scores = torch.zeros(graph.shape)
    scores[graph.mask] = torch.as_tensor(values, dtype=torch.float)
    return EdgeScores(graph, scores)


def test_edge_auroc_matches_a_brute_force_pair_count(graph):
    edges = graph.edges()
    g = torch.Generator().manual_seed(0)
    for trial in range(20):
        values = torch.randint(-3, 4, (len(edges),), generator=g).tolist()  # many ties, both signs
        n_known = int(torch.randint(1, len(edges), (1,), generator=g))
        chosen = torch.randperm(len(edges), generator=g)[:n_known].tolist()
        known = {edges[i] for i in chosen}
        labels = [e in known for e in edges]
        assert edge_auroc(_scores(graph, values), known) == pytest.approx(_brute_force(values, labels), abs=1e-12)


def test_edge_auroc_extremes_and_refusals(graph):
    edges = graph.edges()
    known = set(edges[:3])
    ranked = [1.0 if e in known else 0.0 for e in edges]
    assert edge_auroc(_scores(graph, ranked), known) == 1.0
    assert edge_auroc(_scores(graph, [-v for v in ranked]), known) == 1.0  # |score| ranks
    assert edge_auroc(_scores(graph, [1.0 - v for v in ranked]), known) == 0.0
    assert edge_auroc(_scores(graph, [0.5] * len(edges)), known) == 0.5  # all tied
    with pytest.raises(ValueError, match="known and other"):
        edge_auroc(_scores(graph, ranked), set())
    positioned = ModelGraph(graph.arch, graph.n_positions, by_position=True)
    with pytest.raises(ValueError, match="position-free"):
        edge_auroc(EdgeScores(positioned, torch.zeros(positioned.shape)), known)
    with pytest.raises(ValueError, match="does not have"):
        edge_auroc(_scores(graph, ranked), {Edge(Node("head", 5, 0), Node("logits"), "logits")})


# ---------------------------------------------------------------------------------- the suite
def test_the_suite_on_one_model_with_two_methods(planted):
    p = planted["recall"]
    rows = ground_truth_suite(methods=("exact", "eap"), models=[p])
    assert [(r.model, r.method) for r in rows] == [("recall", "exact"), ("recall", "eap")]
    for row in rows:
        scores = discover(p.model, p.clean, p.corrupted, method=row.method, by_position=False)
        integrals = faithfulness_integrals(p.model, scores, p.clean, p.corrupted, selection="greedy")
        assert row.auroc == pytest.approx(edge_auroc(scores, p.known))
        assert (row.cpr, row.cmd, row.necessity_cmd) == pytest.approx(
            (integrals.cpr, integrals.cmd, integrals.necessity_cmd))
        assert row.seconds > 0 and (row.n_edges, row.n_known) == (scores.graph.n_edges, len(p.known))
    ceiling = faithfulness_integrals(p.model, known_scores(p), p.clean, p.corrupted, selection="greedy")
    assert rows[0].known_cpr == pytest.approx(ceiling.cpr) and 0.5 < ceiling.cpr < 1  # small graph: CPR < 1
    assert rows[0].auroc == 1.0 and rows[0].cpr == pytest.approx(ceiling.cpr)  # exact ranks the known edges first
    # by name too
    assert [r.method for r in ground_truth_suite(methods=("eap",), models=("seed-reader",))] == ["eap"]
    with pytest.raises(ValueError, match="choose from"):
        ground_truth_suite(methods=("eap",), models=("nope",))

    data = json.loads(json.dumps(to_json(rows)))
    assert [GroundTruthRow(**r) for r in data["rows"]] == rows
    html = to_html(rows)
    assert html.count("<tr>") == len(rows) + 1 + 2 + 1  # the rows, their header, the grid and its header
    assert f"{rows[1].auroc:.3f}" in html and "<script" not in html
    text = format_table(rows)
    assert "recall" in text and "exact" in text and f"{rows[0].cpr:.3f}" in text


def test_the_ground_truth_command_prints_and_writes_the_table(tmp_path, capsys):
    from interp_rand.cli.main import main

    assert main(["ground-truth", "--methods", "eap", "exact", "--models", "recall", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "ground_truth.json").read_text())
    assert {(r["method"], r["model"]) for r in data["rows"]} == {("eap", "recall"), ("exact", "recall")}
    printed = capsys.readouterr().out
    assert "AUROC" in printed and "recall" in printed and (tmp_path / "ground_truth.html").stat().st_size > 0
