"""Faithfulness result: full circuit recovers everything, empty nothing; curve and spread."""

import pytest
import torch

from circuits import Ablation, Circuit, discover, faithfulness, smallest_faithful_circuit


@pytest.fixture(scope="module")
def scores(model, pairs):
    clean, corrupted = pairs
    return discover(model, clean, corrupted, metric="logprob", method="eap-ig", steps=3)


def test_full_and_empty_circuits(model, pairs, scores):
    clean, corrupted = pairs
    full = faithfulness(model, scores.circuit(top_k=scores.graph.n_edges), clean, corrupted)
    assert full.recovered == pytest.approx(1.0, abs=1e-6)
    assert full.n_edges == full.total_edges == scores.graph.n_edges
    empty = faithfulness(model, scores.circuit(top_k=0), clean, corrupted)
    assert empty.recovered == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():
        from circuits.interventions.metrics import logprob

        assert empty.empty_metric == pytest.approx(float(logprob(model(corrupted.inputs), clean)), abs=1e-5)
        assert empty.full_metric == pytest.approx(float(logprob(model(clean.inputs), clean)), abs=1e-6)


def test_curve_and_spread(model, pairs, scores):
    clean, corrupted = pairs
    circuit = scores.circuit(top_k=40)
    result = faithfulness(model, circuit, clean, corrupted, scores=scores, n_resamples=4, seed=1)
    ks = [k for k, _ in result.curve]
    assert ks[0] == 0 and ks[-1] == scores.graph.n_edges and 40 in ks
    curve = dict(result.curve)
    assert curve[0] == pytest.approx(0.0, abs=1e-6) and curve[ks[-1]] == pytest.approx(1.0, abs=1e-6)
    assert curve[40] == pytest.approx(result.recovered, abs=1e-6)
    assert len(result.spread) == 4 and result.spread_std > 0
    assert set(result.to_dict()) >= {"recovered", "curve", "spread", "spread_std", "n_edges"}


def test_mean_ablation_faithfulness(model, pairs):
    clean, _ = pairs
    scores = discover(model, clean, None, metric="logprob", method="eap", ablation=Ablation("mean"))
    best = faithfulness(model, scores.circuit(top_k=60), clean, ablation=Ablation("mean"))
    worst = faithfulness(model, Circuit({}, scores.graph.arch, {"by_position": True}), clean, ablation=Ablation("mean"))
    assert worst.recovered == pytest.approx(0.0, abs=1e-6)
    assert best.recovered > 0.3


@pytest.mark.parametrize("target", [0.6, 0.8, 0.95])
def test_smallest_faithful_circuit_is_the_least_size_that_stays_in_the_band(model, pairs, scores, target):
    clean, corrupted = pairs
    circuit, curve = smallest_faithful_circuit(model, scores, clean, corrupted, target=target)
    sizes = [k for k, _ in curve]
    assert sizes == sorted(sizes) and sizes[-1] == scores.graph.n_edges
    k = circuit.settings["top_k"]  # the size chosen; the connected circuit drops its dangling edges
    assert len(circuit) == k - circuit.settings["n_dropped"]
    assert k in sizes and circuit.settings["size_rule"] == "smallest faithful" and circuit.settings["selection"] == "connected"
    in_band = {size: abs(r - 1) <= 1 - target for size, r in curve}
    assert all(in_band[size] for size in sizes if size >= k)
    smaller = [size for size in sizes if size < k]
    assert not smaller or not in_band[smaller[-1]]  # one size down leaves the band
    # the chosen circuit measured on its own is the curve's value
    assert faithfulness(model, circuit, clean, corrupted).recovered == pytest.approx(dict(curve)[k], abs=1e-5)


def test_a_stricter_target_never_gives_a_smaller_circuit(model, pairs, scores):
    clean, corrupted = pairs
    loose, _ = smallest_faithful_circuit(model, scores, clean, corrupted, target=0.6)
    strict, _ = smallest_faithful_circuit(model, scores, clean, corrupted, target=0.95)
    assert len(strict) >= len(loose) and set(loose.edges) <= set(strict.edges)
    with pytest.raises(ValueError, match="target"):
        smallest_faithful_circuit(model, scores, clean, corrupted, target=0)
