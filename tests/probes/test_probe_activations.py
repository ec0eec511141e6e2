import pytest
import torch

from interp_rand import HookedTransformer, make_task
from interp_rand.model.bridge import to_bridge
from probes import collect_activations, residual_hooks


def _addition_model():
    task = make_task("addition", n_digits=2)
    model = HookedTransformer(task.model_config(d_model=32, n_heads=2), seed=1).eval()
    return task, model, task.sample(50, torch.Generator().manual_seed(0))


def test_collects_chosen_hooks_and_positions_in_chunks():
    task, model, batch = _addition_model()
    hooks = residual_hooks(model)
    assert hooks == ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_mid", "blocks.0.hook_resid_post",
                     "blocks.1.hook_resid_mid", "blocks.1.hook_resid_post"]
    acts = collect_activations(model, batch, hooks, positions=[1, 5], batch_size=16)
    _, cache = model.run_with_cache(batch.inputs)
    for h in hooks:
        assert acts[h].shape == (50, 2, 32)
        torch.testing.assert_close(acts[h], cache[h][:, [1, 5]])
    assert acts.metadata["carry_in"].shape == (50, 3)


def test_bridge_gives_the_same_activations():
    task, model, batch = _addition_model()
    ours = collect_activations(model, batch)
    theirs = collect_activations(to_bridge(model), batch)
    for h in ours.values:
        torch.testing.assert_close(ours[h], theirs[h], atol=1e-4, rtol=1e-4)


def test_seed_token_is_skipped():
    task = make_task("recall", n_pairs=4, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=16, seed_mode="token", d_input_mlp=0, n_ctx=6)).eval()
    batch = task.sample(8, torch.Generator().manual_seed(0))
    acts = collect_activations(model, batch, ["blocks.0.hook_resid_post"])
    _, cache = model.run_with_cache(batch.inputs, seeds=batch.seeds)
    torch.testing.assert_close(acts["blocks.0.hook_resid_post"], cache["blocks.0.hook_resid_post"][:, 1:])


def test_bad_hook_and_position_errors_list_what_exists():
    task, model, batch = _addition_model()
    with pytest.raises(ValueError, match=r"no hook point\(s\) \['blocks.7.hook_resid_post'\].*blocks.0.hook_resid_mid"):
        collect_activations(model, batch, ["blocks.7.hook_resid_post"])
    with pytest.raises(ValueError, match="positions must lie in 0..7"):
        collect_activations(model, batch, positions=[8])
    acts = collect_activations(model, batch, ["hook_embed"])
    with pytest.raises(KeyError, match="collected: \\['hook_embed'\\]"):
        acts["blocks.0.hook_resid_pre"]
