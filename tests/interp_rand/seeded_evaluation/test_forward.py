"""The core's one way to run a model on a batch (``interp_rand.seeded_evaluation.forward``): ours
with seeds and masks, a ``TransformerBridge`` with token ids only, scoped forward hooks."""

from __future__ import annotations

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.bridge import to_bridge
from interp_rand.seeded_evaluation.forward import logits_of, model_args
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.sort import SortTask


def test_our_model_gets_the_seeds_and_the_mask():
    task = ColoringTask(n_vertices=6)
    model = HookedTransformer(task.model_config(d_model=16), seed=0).eval()
    batch = task.sample(8, torch.Generator().manual_seed(0))
    args, kwargs = model_args(model, batch)
    assert args[0] is batch.inputs and set(kwargs) == {"seeds", "attention_mask"}
    with torch.no_grad():
        expected = model(batch.inputs, seeds=batch.seeds, attention_mask=batch.attention_mask)
        torch.testing.assert_close(logits_of(model, batch), expected, rtol=0, atol=0)
        # other seeds, other logits: the seeds did reach the model
        redrawn = task.with_seeds(batch, task.sample_seeds(8, torch.Generator().manual_seed(1)))
        assert (logits_of(model, redrawn) - expected).abs().max() > 1e-4


def test_scoped_hooks_act_inside_and_leave_nothing_behind():
    task = SortTask(length=3, vocab=5)
    model = HookedTransformer(task.model_config(d_model=16, n_heads=2), seed=0).eval()
    batch = task.sample(4, torch.Generator().manual_seed(0))
    name = "blocks.1.hook_resid_post"
    with torch.no_grad():
        clean = logits_of(model, batch)
        zeroed = logits_of(model, batch, [(name, lambda x, hook: torch.zeros_like(x))])
        after = logits_of(model, batch)
    # the residual stream zeroed before the unembedding: every position's logits are the bias alone
    torch.testing.assert_close(zeroed, model.unembed.b_U.expand_as(zeroed).clone())
    assert torch.equal(after, clean) and not model.hook_dict[name].fwd_hooks


def test_a_bridge_takes_token_ids_only():
    cfg = ModelConfig(d_model=16, n_heads=2, n_layers=2, n_ctx=8, d_vocab=7)
    ours = HookedTransformer(cfg, seed=0).eval()
    bridge = to_bridge(ours)
    task = SortTask(length=3, vocab=5)
    batch = task.sample(3, torch.Generator().manual_seed(0))
    assert model_args(bridge, batch) == ((batch.inputs,), {})
    with torch.no_grad():
        torch.testing.assert_close(logits_of(bridge, batch), logits_of(ours, batch), atol=1e-5, rtol=1e-5)
    seeded = ColoringTask(n_vertices=4).sample(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="token ids only"):
        model_args(bridge, seeded)


def test_probes_and_the_moved_analyses_share_it():
    import probes.activations
    import probes.symmetry
    from interp_rand.seeded_evaluation import symmetry_rule

    assert probes.activations.logits_of is logits_of and probes.activations.model_args is model_args
    assert probes.symmetry.logits_of is logits_of and symmetry_rule.logits_of is logits_of
