"""HookedTransformer.forward_over_seeds: the m-shared-seeds forward, equal to the expanded one."""

import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.seeded_evaluation import expand_over_seeds
from interp_rand.tasks import make_task


def expanded_logits(model, batch, seeds):
    rows = expand_over_seeds(batch, seeds)
    return model(rows.inputs, **rows.model_kwargs()).unflatten(0, (len(batch), len(seeds)))


def check(task, model, n=6, m=5):
    g = torch.Generator().manual_seed(0)
    batch, seeds = task.sample(n, g), task.sample_seeds(m, g)
    fast = model.forward_over_seeds(batch.inputs, seeds, batch.attention_mask)
    assert fast.shape == (n, m, *expanded_logits(model, batch, seeds).shape[2:])
    assert torch.allclose(fast, expanded_logits(model, batch, seeds), atol=1e-6)
    # and the gradient is the same function's
    fast.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expanded_logits(model, batch, seeds).square().sum().backward()
    for a, p in zip(grads, model.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-4, rtol=1e-4)
    return batch, seeds


def test_recall_input_mlp_over_distinct_tokens():
    # append-mode seed into an input MLP: the path that deduplicates tokens
    task = make_task("recall", n_pairs=6)
    check(task, HookedTransformer(task.model_config(), seed=1))


def test_coloring_per_position_seeds_and_custom_mask():
    task = make_task("coloring", n_vertices=6)
    check(task, HookedTransformer(task.model_config(), seed=1))


def test_hooks_see_the_expanded_rows():
    task = make_task("recall", n_pairs=5)
    model = HookedTransformer(task.model_config(), seed=0)
    g = torch.Generator().manual_seed(1)
    batch, seeds = task.sample(3, g), task.sample_seeds(4, g)
    seen = []
    hook = ("input_mlp.hook_post", lambda value, hook: seen.append(value.shape))
    with model.hooks(fwd_hooks=[hook]):
        logits = model.forward_over_seeds(batch.inputs, seeds)
    assert seen == [torch.Size([12, 6, 40])]  # n * m rows, as forward on the expanded batch
    assert torch.allclose(logits, expanded_logits(model, batch, seeds), atol=1e-6)


def test_seed_token_model_falls_back_to_the_expanded_forward():
    cfg = ModelConfig(d_model=16, n_layers=1, n_heads=2, n_ctx=5, d_vocab=7, d_seed=3, seed_mode="token")
    model = HookedTransformer(cfg, seed=0)
    tokens = torch.randint(0, 7, (4, 4))
    seeds = torch.randn(3, 3)
    fast = model.forward_over_seeds(tokens, seeds)
    slow = model(tokens.repeat_interleave(3, 0), seeds.repeat(4, 1)).unflatten(0, (4, 3))
    assert torch.equal(fast, slow)
