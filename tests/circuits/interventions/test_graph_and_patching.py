"""Graph structure, and the invariants of exact edge patching: the full graph reproduces the
model's outputs exactly, the empty circuit is the fully ablated model."""

import dataclasses

import pytest
import torch
from circuit_models import make_model, token_pairs

from circuits import (
    Ablation,
    Edge,
    ModelGraph,
    Node,
    ablate_nodes,
    discover,
    run_with_edges,
    writer_values,
)
from circuits.graph.architecture import run_model


def test_graph_counts_and_round_trip(model):
    graph = ModelGraph.of(model, 6)
    # writers: embed + 2 x (2 heads + MLP) = 7; readers: 2 x (3 x 2 + 1) + logits = 15
    assert graph.shape == (6, 7, 15)
    # per position: layer 0 q/k/v (6 x 1) + mlp0 (1 + 2) + layer 1 q/k/v (6 x 4) + mlp1 (6) + logits (7)
    assert graph.n_edges == 6 * (6 + 3 + 24 + 6 + 7)
    for edge in graph.edges()[::17]:
        assert graph.edge(*graph.index(edge)) == edge
    flat = ModelGraph.of(model, 6, by_position=False)
    assert flat.n_edges == graph.n_edges // 6


def test_bad_edges_and_nodes_are_refused(model):
    graph = ModelGraph.of(model, 6)
    with pytest.raises(ValueError, match="backwards"):
        graph.index(Edge(Node("head", 1, 0, 2), Node("head", 0, 1, 2), "q"))
    with pytest.raises(ValueError, match="does not have"):
        graph.index(Edge(Node("head", 0, 7, 2), Node("logits", position=2), "logits"))
    with pytest.raises(ValueError, match="one residual-stream position"):
        Edge(Node("embed", position=1), Node("logits", position=2), "logits")
    with pytest.raises(ValueError, match="input"):
        Edge(Node("embed"), Node("mlp", 0), "q")
    with pytest.raises(ValueError, match="kind"):
        Node("attention", 0, 0)


@pytest.mark.parametrize("on", ["ours", "bridge"])
@pytest.mark.parametrize("by_position", [True, False])
def test_full_graph_is_exact_and_empty_graph_is_the_corrupted_run(model, bridge, pairs, on, by_position):
    m = model if on == "ours" else bridge
    clean, corrupted = (b.inputs for b in pairs)
    graph = ModelGraph.of(m, 6, by_position)
    replacement = writer_values(m, graph, corrupted)
    with torch.no_grad():
        clean_logits, corrupted_logits = m(clean), m(corrupted)
    assert torch.equal(run_with_edges(m, graph, clean, graph.mask, replacement), clean_logits)
    empty = run_with_edges(m, graph, clean, torch.zeros(graph.shape, dtype=torch.bool), replacement)
    torch.testing.assert_close(empty, corrupted_logits, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(clean_logits, corrupted_logits, atol=1e-3)


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_empty_circuit_equals_the_fully_node_ablated_model(model, pairs, kind):
    clean, _ = pairs
    graph = ModelGraph.of(model, 6)
    ablation = Ablation(kind)
    empty = run_with_edges(model, graph, clean, torch.zeros(graph.shape, dtype=torch.bool),
                           ablation.replacement(model, graph, clean))
    with torch.no_grad(), ablate_nodes(model, [n for n in graph.writers], ablation, clean):
        ablated = run_model(model, clean)
    torch.testing.assert_close(empty, ablated, atol=1e-5, rtol=1e-5)


def test_one_patched_edge_changes_only_what_it_reaches(model, pairs):
    clean, corrupted = pairs
    graph = ModelGraph.of(model, 6)
    replacement = writer_values(model, graph, corrupted)
    keep = graph.mask.clone()
    keep[graph.index(Edge(Node("embed", position=2), Node("head", 1, 0, 2), "v"))] = False
    with torch.no_grad():
        base = model(clean.inputs)
    patched = run_with_edges(model, graph, clean, keep, replacement)
    assert torch.equal(patched[:, :2], base[:, :2])  # causal: earlier positions untouched
    assert (patched[:, 2:] - base[:, 2:]).abs().max() > 1e-5


def test_exact_scores_are_single_edge_patches(model, pairs):
    clean, corrupted = pairs
    scores = discover(model, clean, corrupted, metric="logprob", method="exact", by_position=False)
    graph = scores.graph
    # recompute one edge by hand
    slot, w, r = graph.mask.nonzero()[11].tolist()
    keep = graph.mask.clone()
    keep[slot, w, r] = False
    from circuits.interventions.metrics import logprob

    patched = run_with_edges(model, graph, corrupted, keep, writer_values(model, graph, clean))
    with torch.no_grad():
        base = logprob(model(corrupted.inputs), clean)  # the metric measures the clean answer
    assert scores.scores[slot, w, r] == pytest.approx(float(logprob(patched, clean) - base), abs=1e-6)


@pytest.mark.parametrize("seed_mode", ["add", "token"])
def test_seed_channel_models(seed_mode):
    model = make_model(d_seed=3, seed_mode=seed_mode, n_ctx=7)
    clean, _ = token_pairs()
    g = torch.Generator().manual_seed(5)
    clean = dataclasses.replace(clean, seeds=torch.randn(len(clean), 3, generator=g))
    graph = ModelGraph.of(model, 6)
    assert Node("seed") in graph.writers
    assert graph.n_positions == 6 + (seed_mode == "token")
    ablation = Ablation("seed-resample", seed=1)
    source = ablation.source_batch(clean)
    assert torch.equal(source.inputs, clean.inputs) and not torch.equal(source.seeds, clean.seeds)
    replacement = ablation.replacement(model, graph, clean)
    with torch.no_grad():
        assert torch.equal(run_with_edges(model, graph, clean, graph.mask, replacement), run_model(model, clean))
        empty = run_with_edges(model, graph, clean, torch.zeros(graph.shape, dtype=torch.bool), replacement)
        torch.testing.assert_close(empty, run_model(model, source), atol=1e-5, rtol=1e-5)
    scores = discover(model, clean, None, metric="logprob", method="eap", ablation=ablation)
    seed_edges = scores.scores[:, graph.writer_index(Node("seed"))]
    other_inputs = scores.scores[:, graph.writer_index(Node("embed"))]
    assert seed_edges.abs().sum() > 0  # only the seed differs, so only seed edges start a change
    assert other_inputs.abs().sum() == 0
