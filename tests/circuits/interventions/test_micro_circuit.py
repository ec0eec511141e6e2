"""A hand-set model with a known two-step circuit is recovered exactly by every method."""

import pytest
import torch
from circuit_models import N, micro_model, micro_pairs

from circuits import Ablation, discover, faithfulness, method_names
from interp_rand.model.bridge import to_bridge

EXPECTED = {
    True: {f"embed@{N - 2}->a0.0@{N - 2}<v>", f"a0.0@{N - 1}->a1.0@{N - 1}<v>", f"a1.0@{N - 1}->logits@{N - 1}"},
    False: {"embed->a0.0<v>", "a0.0->a1.0<v>", "a1.0->logits"},
}


def test_micro_model_computes_the_previous_token():
    model = micro_model()
    clean, corrupted = micro_pairs()
    assert torch.equal(model(clean.inputs)[:, -1].argmax(-1), clean.inputs[:, N - 2])
    assert torch.equal(model(corrupted.inputs)[:, -1].argmax(-1), corrupted.inputs[:, N - 2])


@pytest.mark.parametrize("by_position", [True, False])
@pytest.mark.parametrize("method", ["exact", "eap", "eap-ig", "acdc"])
def test_every_method_recovers_the_circuit_exactly(method, by_position):
    assert set(method_names()) >= {"exact", "eap", "eap-ig", "acdc"}
    model = micro_model()
    clean, corrupted = micro_pairs()
    scores = discover(model, clean, corrupted, metric="logit_diff", method=method, by_position=by_position)
    values = scores.values().abs()
    # exactly three edges matter, and they are the known ones
    assert int((values > 1e-4).sum()) == 3
    circuit = scores.circuit(threshold=1e-4)
    assert {e.name for e in circuit.edges} == EXPECTED[by_position]
    # and the circuit alone reproduces the model
    assert faithfulness(model, circuit, clean, corrupted, metric="logit_diff").recovered == pytest.approx(1.0, abs=1e-5)


def test_micro_circuit_on_a_bridge():
    bridge = to_bridge(micro_model())
    clean, corrupted = micro_pairs()
    scores = discover(bridge, clean.inputs, corrupted.inputs, metric=_last_logit_diff(clean), method="eap")
    assert {e.name for e in scores.circuit(top_k=3).edges} == EXPECTED[True]


def test_zero_ablation_also_finds_the_circuit():
    model = micro_model()
    clean, _ = micro_pairs()
    scores = discover(model, clean, None, metric="logit_diff", method="exact", ablation=Ablation("zero"))
    top = scores.circuit(top_k=3)
    assert {e.name for e in top.edges} == EXPECTED[True]


def _last_logit_diff(batch):
    target = batch.inputs[:, N - 2]

    def metric(logits, _batch):
        last = logits[:, -1]
        correct = last.gather(-1, target[:, None])[:, 0]
        return (correct - (last.sum(-1) - correct) / (last.shape[-1] - 1)).mean()

    return metric
