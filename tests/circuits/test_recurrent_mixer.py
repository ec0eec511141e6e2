"""The circuits toolkit on the gated linear recurrence mixer (``attention="recurrent"``),
unchanged: batched and incremental exact patching and the batched ACDC search against their
one-forward-per-edge references, EAP and EAP-IG as the first order of exact patching, the
randomness report and the drawing, on tiny models."""

import dataclasses

import pytest
import torch
from circuit_models import make_model, token_pairs

from circuits import Ablation, ModelGraph, discover, writer_values
from circuits.draw.circuit_figure import circuit_figure
from circuits.interventions.batched_patching import batched_edge_scores
from circuits.interventions.edge_patching import exact_edge_scores
from circuits.interventions.incremental_run import IncrementalRun
from circuits.interventions.metrics import logprob
from circuits.methods.acdc import acdc_scores, acdc_scores_sequential
from interp_rand.model import HookedTransformer
from interp_rand.tasks import make_task

RECURRENT = dict(attention="recurrent", n_layers=2, n_heads=2, d_model=8, n_ctx=4, d_mlp=8)


def _token_case():
    clean, corrupted = token_pairs(n=4, n_pos=4)
    return make_model(**RECURRENT), clean, corrupted


def _recall_case():
    """The recall model's shape: vector inputs, a seed appended before an input MLP, no
    LayerNorm, no positions, attention-only blocks, with the recurrence as its mixer."""
    task = make_task("recall", n_pairs=3, value_bits=2, seed_bits=2)
    model = HookedTransformer(task.model_config(d_model=8, attention="recurrent", d_head=4), seed=0).eval()
    g = torch.Generator().manual_seed(0)
    pairs = task.corrupt(task.sample(6, g), g)
    return model, pairs.clean, pairs.corrupted


CASES = {"tokens": _token_case, "recall": _recall_case}


@pytest.mark.parametrize("by_position", [True, False])
@pytest.mark.parametrize("name", list(CASES))
def test_exact_patching_and_acdc_equal_the_one_edge_references(name, by_position):
    model, clean, corrupted = CASES[name]()
    assert IncrementalRun.supports(model)
    graph = ModelGraph.of(model, clean.inputs.shape[1], by_position)
    replacement = writer_values(model, graph, corrupted)
    reference = exact_edge_scores(model, graph, clean, replacement, logprob)
    assert reference.abs().max() > 1e-3
    for incremental in (True, False):
        fast = batched_edge_scores(model, graph, clean, replacement, logprob, incremental=incremental)
        torch.testing.assert_close(fast, reference, atol=1e-5, rtol=0)
    threshold = float(reference[graph.mask].abs().quantile(0.8))
    sequential = acdc_scores_sequential(model, graph, clean, replacement, logprob, threshold)
    kept = sequential.abs() >= threshold
    assert 0 < int(kept.sum()) < graph.n_edges
    for incremental in (True, False):
        fast = acdc_scores(model, graph, clean, replacement, logprob, threshold, incremental=incremental)
        assert torch.equal(fast.abs() >= threshold, kept)
        torch.testing.assert_close(fast, sequential, atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_eap_and_eap_ig_are_the_first_order_of_exact_patching(method):
    """A tiny corruption (inputs and seeds moved by 1e-4, float64): the gradient methods must
    agree with exact single-edge patching, through the recurrence's gates and state."""
    model, clean, _ = _recall_case()
    model = model.double()
    g = torch.Generator().manual_seed(1)
    clean = dataclasses.replace(clean, inputs=clean.inputs.double(), seeds=clean.seeds.double())
    noise = {k: 1e-4 * torch.randn(getattr(clean, k).shape, generator=g, dtype=torch.float64) for k in ("inputs", "seeds")}
    corrupted = dataclasses.replace(clean, inputs=clean.inputs + noise["inputs"], seeds=clean.seeds + noise["seeds"])
    options = {"steps": 3} if method == "eap-ig" else {}
    scores = discover(model, clean, corrupted, method=method, **options).scores
    exact = discover(model, clean, corrupted, method="exact").scores
    top = float(exact.abs().max())
    assert top > 0
    torch.testing.assert_close(scores, exact, atol=1e-3 * top, rtol=0)


def test_the_drawing_and_the_randomness_report_run_on_it(tmp_path):
    from interp_rand.reports.randomness import randomness_report

    model, clean, corrupted = _recall_case()
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=8)
    assert any(e.dest.kind == "head" for e in circuit.edges)
    fig = circuit_figure(circuit, attention=None)
    assert any(t.mode == "lines" for t in fig.data)
    task = make_task("recall", n_pairs=3, value_bits=2, seed_bits=2)
    report = randomness_report(model=model, task=task, n=32, stored_inputs=2)
    assert set(report.runs[0]["usage"]["score"]) >= {"seed", "input_mlp", "a0.0", "a1.0"}
    assert "model" in report.text()
