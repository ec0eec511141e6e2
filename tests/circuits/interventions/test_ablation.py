"""Ablations are scoped, and each kind replaces with what it promises."""

import dataclasses

import pytest
import torch

from circuits import Ablation, ModelGraph, Node, ablate_nodes
from circuits.graph.architecture import run_model


def test_scoped_node_ablation_leaves_nothing_behind(model, pairs):
    clean, corrupted = pairs
    with torch.no_grad():
        before = model(clean.inputs)
        with ablate_nodes(model, [Node("head", 1, 0)], Ablation("resample"), clean, corrupted):
            inside = model(clean.inputs)
        after = model(clean.inputs)
    assert torch.equal(before, after)
    assert (inside - before).abs().max() > 1e-4
    assert not model.hook_dict["blocks.1.attn.hook_z"].fwd_hooks


def test_positioned_ablation_touches_only_later_positions(model, pairs):
    clean, _ = pairs
    with torch.no_grad():
        before = model(clean.inputs)
        with ablate_nodes(model, [Node("mlp", 0, position=3)], Ablation("zero"), clean):
            inside = model(clean.inputs)
    assert torch.equal(inside[:, :3], before[:, :3])
    assert (inside[:, 3] - before[:, 3]).abs().max() > 1e-5


def test_mean_ablation_uses_the_reference_mean(model, pairs):
    clean, corrupted = pairs
    graph = ModelGraph.of(model, 6)
    values = Ablation("mean").source_values(model, graph, clean, reference=corrupted)
    _, cache = model.run_with_cache(corrupted.inputs)
    torch.testing.assert_close(values["blocks.1.attn.hook_z"][0], cache["blocks.1.attn.hook_z"].mean(0))
    zero = Ablation("zero").source_values(model, graph, clean)
    assert all(float(v.abs().max()) == 0 for v in zero.values())


def test_input_resample_keeps_seeds_and_moves_every_input(pairs):
    clean, _ = pairs
    clean = dataclasses.replace(clean, seeds=torch.arange(len(clean), dtype=torch.float)[:, None])
    source = Ablation("input-resample", seed=3).source_batch(clean)
    assert torch.equal(source.seeds, clean.seeds)
    # a derangement: every row takes another row's input
    rows = [next(j for j in range(len(clean)) if torch.equal(source.inputs[i], clean.inputs[j])) for i in range(len(clean))]
    assert sorted(rows) == list(range(len(clean)))
    assert Ablation("input-resample", seed=3).source_batch(clean).inputs.equal(source.inputs)  # seeded


def test_ablation_errors_name_the_problem(pairs):
    clean, corrupted = pairs
    with pytest.raises(ValueError, match="kind"):
        Ablation("gaussian")
    with pytest.raises(ValueError, match="seeds"):
        Ablation("seed-resample").source_batch(clean)
    with pytest.raises(ValueError, match="corrupted"):
        Ablation("resample").source_batch(clean)
    with pytest.raises(ValueError, match="same shape"):
        Ablation("resample").source_batch(clean, corrupted.inputs[:, :4])


def test_ablation_runs_on_a_bridge(model, bridge, pairs):
    """A resample ablation of head (0, 1) on the bridge equals the same ablation done by hand
    with TransformerLens hooks (head 1's ``hook_z`` replaced by its value on the corrupted
    inputs), and equals the ablation on our model the bridge was converted from."""
    clean, corrupted = pairs
    name = "blocks.0.attn.hook_z"
    with torch.no_grad():
        before = run_model(bridge, clean.inputs)
        with ablate_nodes(bridge, [Node("head", 0, 1)], Ablation("resample"), clean.inputs, corrupted.inputs):
            inside = run_model(bridge, clean.inputs)
        _, cache = bridge.run_with_cache(corrupted.inputs, names_filter=[name])

        def by_hand(z, hook):
            z = z.clone()
            z[:, :, 1] = cache[name][:, :, 1]  # [batch, pos, head, d_head]
            return z

        expected = bridge.run_with_hooks(clean.inputs, fwd_hooks=[(name, by_hand)])
        expected = getattr(expected, "logits", expected)
        with ablate_nodes(model, [Node("head", 0, 1)], Ablation("resample"), clean.inputs, corrupted.inputs):
            ours = run_model(model, clean.inputs)
        after = run_model(bridge, clean.inputs)
    torch.testing.assert_close(inside, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(inside, ours, atol=1e-4, rtol=1e-4)
    assert torch.equal(after, before)  # scoped: nothing left behind
    assert (inside - before).abs().max() > 1e-3  # the head matters, so the check has teeth
