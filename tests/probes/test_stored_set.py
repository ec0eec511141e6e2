"""Stored-set statistics on hand-made matrices with known answers, and the map of tiny models."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.recall import RecallTask
from probes.activations import logits_of
from probes.stored_set import stored_matrix, stored_set_map, stored_set_stats


def test_everything_stored():
    stats = stored_set_stats(torch.ones(3, 8, 5, dtype=torch.bool))
    assert stats.coverage == [1.0] * 5 and stats.mean_size == 5
    assert stats.coverage_tv == 0 and stats.costorage_gap == 0 and stats.seed_dependent == 0
    assert stats.worst_position_coverage == 1 and stats.size_histogram == [0, 0, 0, 0, 0, 1]


def test_uniform_two_subsets_of_four():
    # one seed per 2-subset of 4 positions: every position stored by half the seeds, every
    # pair by 1/6 of them, against 1/4 for independent storage at rate 1/2
    subsets = list(itertools.combinations(range(4), 2))
    stored = torch.zeros(1, len(subsets), 4, dtype=torch.bool)
    for s, pair in enumerate(subsets):
        stored[0, s, list(pair)] = True
    stats = stored_set_stats(stored)
    assert stats.coverage == [0.5] * 4 and stats.mean_size == 2
    assert stats.coverage_tv == pytest.approx(0.0)
    assert stats.costorage_gap == pytest.approx(0.25 - 1 / 6)
    assert stats.seed_dependent == 1.0 and stats.worst_position_coverage == 0.5
    assert stats.size_histogram == [0, 0, 1, 0, 0]
    assert stats.example_input == 0 and stats.example_map == stored[0].int().tolist()


def test_deterministic_stored_set():
    stored = torch.zeros(2, 6, 4, dtype=torch.bool)
    stored[..., :2] = True  # positions 0 and 1 under every seed, never 2 and 3
    stats = stored_set_stats(stored)
    assert stats.coverage == [1, 1, 0, 0]
    # profile (1/2, 1/2, 0, 0) against uniform 1/4: TV = 0.5 * 4 * 1/4
    assert stats.coverage_tv == pytest.approx(0.5)
    assert stats.seed_dependent == 0 and stats.worst_position_coverage == 0
    assert stats.example_map == [[1, 1, 0, 0]] * 6 and "example_map" not in stats.to_dict(include_map=False)


def test_bit_effect_finds_the_deciding_bit():
    seeds = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]).float()
    stored = torch.ones(1, 4, 3, dtype=torch.bool)
    stored[0, :, 0] = seeds[:, 0].bool()  # position 0 stored iff bit 0 is on
    stats = stored_set_stats(stored, seeds)
    assert stats.bit_effect[0] == [1.0, 0.0, 0.0]
    assert stats.bit_effect[1] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="one row per seed"):
        stored_set_stats(stored, seeds[:3])


def test_bad_shape():
    with pytest.raises(ValueError, match="n_inputs, n_seeds"):
        stored_set_stats(torch.ones(2, 3, 1, dtype=torch.bool))


def tiny_recall(zero_seed: bool) -> tuple[RecallTask, HookedTransformer]:
    task = RecallTask(n_pairs=4, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=16, init="normal", init_range=1.0), seed=1).eval()
    if zero_seed:
        with torch.no_grad():
            model.seed_embed.W_seed.zero_()
    return task, model


def test_stored_matrix_matches_direct_queries_and_chunking():
    task, model = tiny_recall(zero_seed=False)
    batch = task.sample(3, torch.Generator().manual_seed(0))
    key_order, values = batch.metadata["key_order"], batch.metadata["values"]
    seeds = task.all_seeds()
    stored = stored_matrix(model, task, key_order, values, seeds)
    assert stored.shape == (3, 8, 4)
    assert torch.equal(stored, stored_matrix(model, task, key_order, values, seeds, chunk=7))
    for i, s, p in [(0, 0, 0), (2, 5, 3), (1, 7, 1)]:
        one = task.build(key_order[i : i + 1], values[i : i + 1], torch.tensor([p]), seeds[s : s + 1])
        bits = (logits_of(model, one)[0, 4] > 0).long()
        assert bool(stored[i, s, p]) == bool((bits == values[i, p]).all())


def test_zero_seed_model_stores_the_same_set_under_every_seed():
    task, model = tiny_recall(zero_seed=True)
    stats, stored = stored_set_map(model, task, 6, torch.Generator().manual_seed(0))
    assert stats.seed_dependent == 0.0
    assert torch.equal(stored, stored[:, :1].expand_as(stored))
    assert stats.n_seeds == 8 and len(stats.map) == 8
    json.dumps(stats.to_dict())


def test_seeded_random_model_storage_depends_on_the_seed():
    task, model = tiny_recall(zero_seed=False)
    stats, stored = stored_set_map(model, task, 6, torch.Generator().manual_seed(0))
    # by hand: the same 6 inputs, every seed and queried position, straight through the forward
    batch = task.sample(6, torch.Generator().manual_seed(0))
    key_order, values = batch.metadata["key_order"], batch.metadata["values"]
    seeds = task.all_seeds()
    by_hand = torch.zeros(6, len(seeds), 4, dtype=torch.bool)
    with torch.no_grad():
        for s, p in itertools.product(range(len(seeds)), range(4)):
            one = task.build(key_order, values, torch.full((6,), p), seeds[s].expand(6, -1))
            bits = (model(one.inputs, **one.model_kwargs())[:, 4] > 0).long()  # at the query
            by_hand[:, s, p] = (bits == values[:, p]).all(-1)
    assert torch.equal(stored, by_hand)
    varies = by_hand.any(1) & ~by_hand.all(1)  # (input, position) stored under some seeds, not all
    assert stats.seed_dependent == pytest.approx(float(varies.double().mean()))
    # by a stated margin: at least a quarter of the 24 (input, position) cells (13 here) ...
    assert stats.seed_dependent >= 0.25
    # ... against the seed-free control, the same weights with W_seed zeroed: exactly none
    _, control_model = tiny_recall(zero_seed=True)
    control, _ = stored_set_map(control_model, task, 6, torch.Generator().manual_seed(0))
    assert control.seed_dependent == 0.0


def test_stored_set_map_is_for_recall():
    from interp_rand.tasks.coloring import ColoringTask

    with pytest.raises(ValueError, match="key_value_recall .registered: recall.; got 'coloring'"):
        stored_set_map(None, ColoringTask(n_vertices=5), 2, torch.Generator())


def test_the_stored_set_map_applies_to_the_tasks_with_key_value_recall(monkeypatch):
    from interp_rand.tasks import make_task, task_names
    from interp_rand.tasks.base import KEY_VALUE_RECALL
    from probes.stored_set import applies_to

    assert [name for name in task_names() if applies_to(make_task(name))] == ["recall"]
    # the capability decides, not the name: a recall task that no longer declares it is refused
    monkeypatch.setattr(RecallTask, "capabilities", frozenset())
    assert not applies_to(RecallTask(n_pairs=4))
    with pytest.raises(ValueError, match=KEY_VALUE_RECALL):
        stored_set_map(None, RecallTask(n_pairs=4), 2, torch.Generator())


def test_cli_on_a_recall_run_draws_the_stored_set(tmp_path, capsys):
    from interp_rand.cli.main import main
    from interp_rand.training.checkpoint import RunSpec, save_checkpoint
    from interp_rand.training.config import TrainConfig

    task, model = tiny_recall(zero_seed=False)
    spec = RunSpec(task.name, task.config_dict(), model.cfg, TrainConfig())
    save_checkpoint(tmp_path / "run", 1, spec, model.state_dict(), {}, {}, keep=1)
    code = main(["randomness", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--n", "64",
                 "--stored-inputs", "3"])
    assert code == 0 and "stored: coverage TV from uniform" in capsys.readouterr().out
    run = json.loads((tmp_path / "out" / "randomness.json").read_text())["runs"][0]
    assert run["stored_set"]["n_seeds"] == 8 and run["stored_set"]["n_inputs"] == 3
    assert "symmetry" not in run and "stored-set map" in (tmp_path / "out" / "randomness.html").read_text()
