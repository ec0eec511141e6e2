"""Bad input gives errors that name what does not match."""

import pytest
from circuit_models import make_model

from circuits import Circuit, discover, faithfulness, patch_sweep


def test_non_scalar_metric(model, pairs):
    clean, corrupted = pairs
    with pytest.raises(ValueError, match=r"scalar tensor; got \(8,\)"):
        discover(model, clean, corrupted, metric=lambda logits, batch: logits[:, -1, 0], method="eap")


def test_mismatched_clean_and_corrupted(model, pairs):
    clean, corrupted = pairs
    with pytest.raises(ValueError, match=r"same shape; got \(8, 6\) and \(8, 5\)"):
        discover(model, clean.inputs, corrupted.inputs[:, :5], metric=lambda l, b: l.mean(), method="eap")
    with pytest.raises(ValueError, match="same shape"):
        patch_sweep(model, clean, corrupted[:4], "logprob")


def test_unknown_names(model, pairs):
    clean, corrupted = pairs
    attn_only = make_model(attn_only=True)
    with pytest.raises(ValueError, match=r"no hook point\(s\) \['blocks.0.hook_mlp_out'"):
        patch_sweep(attn_only, clean, corrupted, "logprob", "mlp_out")
    with pytest.raises(ValueError, match="activation='scores'"):
        patch_sweep(model, clean, corrupted, "logprob", "scores")
    with pytest.raises(ValueError, match="unknown discovery method 'sae'"):
        discover(model, clean, corrupted, method="sae")
    with pytest.raises(ValueError, match="unknown metric 'acc'"):
        discover(model, clean, corrupted, metric="acc")


def test_model_without_the_hook_protocol(pairs):
    clean, corrupted = pairs
    with pytest.raises(ValueError, match="hook-name protocol"):
        discover(_Bare(), clean, corrupted)


class _Bare:
    cfg = None
    hook_dict: tuple = ()


def test_circuit_from_another_architecture(model, pairs):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=5)
    other = make_model(n_heads=4)
    with pytest.raises(ValueError, match="n_heads=4 vs 2"):
        faithfulness(other, circuit, clean, corrupted)
    foreign = Circuit(circuit.edges, circuit.arch, {**circuit.settings, "by_position": False})
    with pytest.raises(ValueError, match="position-resolved"):
        faithfulness(model, foreign, clean, corrupted)
