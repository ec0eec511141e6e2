"""Seed-channel attribution with captum on hand-built recall models: one that cannot read its
seed (as an ERM model that learned to ignore it), and ones whose output is driven by the seed."""

import pytest
import torch

from interp_rand import HookedTransformer, make_task
from interp_rand.model.bridge import to_bridge
from probes.attribution import hook_attribution, input_attribution, seed_attribution


def _recall():
    task = make_task("recall", n_pairs=4, value_bits=2, seed_bits=3)
    # TransformerLens's scaled attention and N(0, 0.2) init: the tests scale W_E / W_seed up by
    # 5-20x, which the paper's unscaled two-layer linear attention would raise to the 9th power
    model = HookedTransformer(task.model_config(d_model=16, use_attn_scale=True, init="normal"), seed=0).eval()
    return task, model, task.sample(12, torch.Generator().manual_seed(0))


def _scaled(model, input_scale: float, seed_scale: float):
    with torch.no_grad():
        model.embed.W_E.mul_(input_scale)
        model.seed_embed.W_seed.mul_(seed_scale)
    return model


def test_a_model_that_ignores_its_seed_gets_no_seed_attribution():
    task, model, batch = _recall()
    _scaled(model, 1.0, 0.0)  # the seed projection is zero: the output cannot depend on the seed
    attr = seed_attribution(model, task, batch)
    assert attr.outputs == ("pos 4 bit 0", "pos 4 bit 1")
    assert attr.seed_attribution.abs().max() < 1e-7
    assert attr.input_attribution.min() > 0
    assert attr.mean_share < 1e-6


def test_a_model_whose_output_is_a_function_of_the_seed_gets_a_large_share():
    task, model, batch = _recall()
    _scaled(model, 0.0, 1.0)  # the task input is invisible: the output is a function of the seed
    assert seed_attribution(model, task, batch).mean_share > 0.99
    task, model, batch = _recall()
    _scaled(model, 0.05, 5.0)  # input still read, but the seed dominates
    share = seed_attribution(model, task, batch).seed_share
    assert share.shape == (12, 2) and share.min() >= 0 and share.max() <= 1
    assert share.mean() > 0.7


def test_seed_share_grows_with_the_seed_weight_and_ig_is_complete():
    shares = []
    for seed_scale in (0.1, 1.0, 10.0):
        task, model, batch = _recall()
        attr = seed_attribution(model, task, _scaled(model, 1.0, seed_scale) and batch)
        shares.append(attr.mean_share)
        assert attr.delta.abs().max() < 0.05  # IG completeness with 32 steps
    assert shares[0] < shares[1] < shares[2]


def test_a_model_without_a_seed_channel_is_refused():
    task = make_task("addition", n_digits=2)
    model = HookedTransformer(task.model_config(d_model=16, n_heads=2), seed=0).eval()
    with pytest.raises(ValueError, match="no seed channel"):
        seed_attribution(model, task, task.sample(4, torch.Generator().manual_seed(0)))


def test_input_and_layer_attribution_on_ours_and_a_bridge():
    task = make_task("addition", n_digits=2)
    model = HookedTransformer(task.model_config(d_model=32, n_heads=2), seed=0).eval()
    bridge = to_bridge(model)
    batch = task.sample(6, torch.Generator().manual_seed(0))
    (ours,) = input_attribution(model, task, batch, output=1)
    (theirs,) = input_attribution(bridge, task, batch, output=1)
    assert ours.shape == (6, 8)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-3)
    # resid_pre/post: on a bridge, hook_resid_mid is ln2's input hook, which the residual skip
    # bypasses, so layer IG there only interpolates the MLP branch (see hook_attribution)
    for method in ("layer_conductance", "layer_integrated_gradients"):
        a = hook_attribution(model, task, batch, "blocks.1.hook_resid_pre", method, output=1)
        b = hook_attribution(bridge, task, batch, "blocks.1.hook_resid_pre", method, output=1)
        assert a.shape == (6, 8)
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
        # a causal model's output at position 10 (place 1's digit) gets nothing from later positions
        pos = int(batch.answer_positions[1])
        assert a[:, pos + 1:].abs().max() < 1e-6 and a[:, : pos + 1].abs().sum() > 0
    with pytest.raises(ValueError, match="method='shap' is not allowed"):
        hook_attribution(model, task, batch, "blocks.1.hook_resid_mid", "shap")
    with pytest.raises(ValueError, match="no hook point"):
        hook_attribution(model, task, batch, "blocks.9.hook_resid_mid")
