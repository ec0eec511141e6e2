"""One owner for each small fact that used to be copied (issue 14, point 7): the worst-5%
quantile, total variation, capture hooks, the default seed, ``is_int``, the input x seed grid.
Each test pins the owner's convention and that the former copies' users get it."""

from __future__ import annotations

import argparse
import math

import pytest
import torch

from interp_rand.defaults import DEFAULT_SEED
from interp_rand.distances import total_variation
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.capture import capture_into
from interp_rand.seeded_evaluation.metrics import WORST_FRACTION, lower_quantile
from interp_rand.validation import check_int, is_int


# ------------------------------------------------------------------ the worst-5% quantile
def test_one_worst_5pct_quantile():
    from interp_rand.gridworld import evaluation as gridworld_evaluation

    assert gridworld_evaluation.lower_quantile is lower_quantile and WORST_FRACTION == 0.05


def test_lower_quantile_is_torch_lower_interpolation():
    # the README's worst-5% figures (seeded success and grid-world returns alike) use
    # interpolation="lower": the floor(fraction * (n - 1))-th smallest value, one some input attains
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 19, 20, 21, 40, 101, 1000):
        values = torch.randn(n, generator=g)
        for fraction in (0.0, 0.05, 0.1, 0.5, 0.95, 1.0):
            expected = torch.quantile(values, fraction, interpolation="lower").item()
            assert lower_quantile(values, fraction) == expected
            assert lower_quantile(values, fraction) == values.sort().values[math.floor(fraction * (n - 1))].item()


def test_lower_quantile_convention_differs_from_the_others():
    values = torch.arange(31, dtype=torch.float32)  # 0.05 * 30 = 1.5: the conventions part
    assert lower_quantile(values) == 1.0
    assert torch.quantile(values, 0.05, interpolation="linear").item() == 1.5
    assert torch.quantile(values, 0.05, interpolation="nearest").item() == 2.0
    # all entries pooled (a [cells, seeds] grid of returns), the default fraction 5%
    grid = torch.arange(40.0).view(8, 5).flip(0)
    assert lower_quantile(grid) == 1.0  # floor(0.05 * 39) = 1: the second smallest
    with pytest.raises(ValueError, match="fraction"):
        lower_quantile(values, 1.5)
    with pytest.raises(ValueError, match="no inputs"):
        lower_quantile(torch.zeros(0))


# ------------------------------------------------------------------ total variation
def test_one_total_variation():
    from circuits.analyses import randomness

    assert randomness.total_variation is total_variation


def test_total_variation_values_and_the_former_copies_bit_for_bit():
    p, q = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.0, 0.5, 0.5])
    assert total_variation(p, q).item() == 0.5 and total_variation(p, p).item() == 0.0
    g = torch.Generator().manual_seed(1)
    a = torch.rand(4, 3, 7, generator=g).softmax(-1)
    b = torch.rand(4, 3, 7, generator=g).softmax(-1)
    assert total_variation(a, b).shape == (4, 3)
    # the four copies it replaced, exactly as they were written
    assert torch.equal(total_variation(a, b), 0.5 * (a - b).abs().sum(-1))  # circuits randomness, head_roles
    assert torch.equal(total_variation(a, b).double(), 0.5 * (a - b).abs().sum(-1).double())  # probes.symmetry
    profile = torch.rand(9, generator=g, dtype=torch.float64)
    profile = profile / profile.sum()
    assert float(total_variation(profile, 1.0 / 9)) == float(0.5 * (profile - 1.0 / 9).abs().sum())  # stored_set


# ------------------------------------------------------------------ capture hooks
def _model():
    cfg = ModelConfig(d_model=16, n_layers=2, n_heads=2, n_ctx=5, d_vocab=7)
    return HookedTransformer(cfg, seed=3)


def test_capture_into_keeps_what_run_with_cache_keeps():
    model, tokens = _model(), torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(0))
    names = ["hook_embed", "blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern"]
    sink: dict = {}
    hooks = capture_into(sink, names)
    assert [n for n, _ in hooks] == names
    with model.hooks(fwd_hooks=hooks):
        logits = model(tokens)
    _, cache = model.run_with_cache(tokens)
    # the hooks change nothing; a listened-to pattern (or the cache) takes the explicit attention
    # and LayerNorm, the hook-free forward SDPA and F.layer_norm: equal to float rounding
    torch.testing.assert_close(logits, model(tokens), rtol=0, atol=1e-6 * float(logits.abs().max()))
    assert sorted(sink) == sorted(names)
    for n in names:
        torch.testing.assert_close(sink[n], cache[n], rtol=0, atol=1e-6 * max(1.0, float(cache[n].abs().max())))
        assert not sink[n].requires_grad


def test_capture_into_detach_clone_and_backward():
    model, tokens = _model(), torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(1))
    name = "blocks.0.hook_resid_mid"
    live: dict = {}
    grads: dict = {}
    with model.hooks(fwd_hooks=capture_into(live, [name], detach=False), bwd_hooks=capture_into(grads, [name])):
        out = model(tokens)
        live[name].retain_grad()
        out.square().sum().backward()
    assert live[name].grad_fn is not None  # detach=False: still in the graph
    assert torch.equal(grads[name], live[name].grad)  # as a backward hook: the gradient there

    kept: dict = {}
    cloned: dict = {}

    def edit_in_place(value, hook):
        value.mul_(0.0)

    with torch.no_grad(), model.hooks(fwd_hooks=capture_into(kept, [name]) + capture_into(cloned, [name], clone=True)
                                      + [(name, edit_in_place)]):
        model(tokens)
    assert kept[name].abs().sum() == 0  # a detached view sees the later in-place edit
    assert cloned[name].abs().sum() > 0  # a clone does not


def test_capture_into_keys_by_the_name_asked_for():
    class FakeHook:
        name = "aliased.module.name"

    sink: dict = {}
    [(name, hook)] = capture_into(sink, ["hook_embed"])
    hook(torch.ones(2), FakeHook())
    assert list(sink) == ["hook_embed"]


# ------------------------------------------------------------------ the default seed
def test_one_default_seed():
    from interp_rand.cli import circuit, compare, evaluate, randomness
    from interp_rand.cli.main import build_parser
    from interp_rand.zoo import build

    assert DEFAULT_SEED == 20_261_130  # changing it changes every default draw: do it on purpose
    assert build.EVAL_SEED == circuit.DEFAULT_SEED == compare.DEFAULT_SEED == randomness.DEFAULT_SEED \
        == evaluate.DEFAULT_EVAL_SEED == DEFAULT_SEED
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name in ("eval", "circuit", "compare", "randomness"):
        assert commands[name].get_default("seed") == DEFAULT_SEED, name


# ------------------------------------------------------------------ is_int
def test_is_int_is_the_tasks_check():
    from interp_rand.tasks import addition, coloring, recall, sort

    for module in (addition, coloring, recall, sort):
        assert module._is_int is is_int
    assert is_int(3) and is_int(-1) and is_int(0)
    assert not any(is_int(v) for v in (True, False, 3.0, "3", None, torch.tensor(3)))
    with pytest.raises(ValueError, match=r"X.n=True must be an integer >= 1"):
        check_int("X", "n", True, 1)
    check_int("X", "n", 1, 1)


# ------------------------------------------------------------------ the input x seed grid
def test_seed_entry_grid_is_the_cores_input_major_grid():
    from circuits.analyses.randomness import _seed_grid
    from interp_rand.seeded_evaluation import expand_over_seeds
    from interp_rand.tasks import make_task

    task = make_task("recall", n_pairs=4)
    g = torch.Generator().manual_seed(0)
    batch, seeds = task.sample(3, g), task.sample_seeds(5, g)
    grid = _seed_grid(task, batch, seeds)
    core = expand_over_seeds(batch, seeds)
    for field in ("inputs", "targets", "loss_mask", "answer_positions", "seeds"):
        assert torch.equal(getattr(grid, field), getattr(core, field)), field
    # row i * S + j: input i, seed j (the former repeat_interleave / repeat copy)
    assert torch.equal(grid.inputs, batch.inputs.repeat_interleave(5, 0))
    assert torch.equal(grid.seeds, seeds.float().repeat(3, 1)) and grid.seeds.dtype == torch.float32


def test_gridworld_cell_seed_grid_is_cell_major():
    from interp_rand.gridworld.agent import cell_seed_grid

    cells = torch.tensor([[0, 1], [1, 0], [1, 1]])
    seeds = torch.arange(8.0).view(4, 2)
    treasure, run_seeds = cell_seed_grid(cells, seeds)
    assert treasure.shape == (12, 2) and run_seeds.shape == (12, 2)
    for c in range(3):
        for j in range(4):
            assert torch.equal(treasure[c * 4 + j], cells[c]) and torch.equal(run_seeds[c * 4 + j], seeds[j])
