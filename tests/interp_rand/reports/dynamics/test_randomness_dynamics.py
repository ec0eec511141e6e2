"""The ``seed_usage`` and ``stored_set`` dynamics analyses on hand-set models whose seed use is
known: the seed reader (one head reads the seed, another reads it into a subspace nothing
reads) and the planted recall model (seed bit 0 decides whether the even or the odd keys are
stored)."""

import dataclasses
import math

import pytest
import torch

from circuits.analyses.planted import recall_model, seed_reader_model, sort_model
from circuits.interventions.ablation import Ablation
from interp_rand.model.transformer import HookedTransformer
from interp_rand.reports.dynamics import randomness
from interp_rand.reports.dynamics.view import DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView
from interp_rand.seeded_evaluation.mixing import deterministic_capacity, mixing_strategies, pairwise_jaccard
from interp_rand.seeded_evaluation.paper_metrics import evaluate_seeded
from probes.stored_set import stored_matrix, stored_set_stats


def _view(planted, model=None, step=0, cache=None):
    return CheckpointView(step=step, checkpoint=None, model=planted.model if model is None else model,
                          task=planted.task, batch=planted.clean, pairs=None, seed=0,
                          cache={} if cache is None else cache)


def _quiet_control(planted):
    """The seed reader with a config whose random initialisation is tiny (N(0, 1e-3)), so the
    random-init control barely moves its outputs: a model that reads the seed is above it."""
    cfg = dataclasses.replace(planted.model.cfg, init="normal", init_range=1e-3)
    model = HookedTransformer(cfg, seed=0)
    model.load_state_dict(planted.model.state_dict())
    return model.eval()


def test_the_seed_reader_is_above_its_control_and_the_unread_head_is_not():
    planted = seed_reader_model(n=64)
    view = _view(planted, _quiet_control(planted))
    measures = DYNAMICS_ANALYSES.get("seed_usage")(view, n_resamples=2)
    # independent: flipping seed bit 0 flips every answer bit (logits +-12), so the reader's
    # score is the share of rows whose resampled seed has another bit 0
    expected = sum(float((Ablation("seed-resample", seed=r).source_batch(planted.clean).seeds[:, 0]
                          != planted.clean.seeds[:, 0]).float().mean()) for r in range(2)) / 2
    for node in ("a0.1", "m0"):  # the reader and the XOR that uses its output
        assert measures[f"seed/{node}"] == pytest.approx(expected, abs=1e-3)
        assert measures[f"seed_above_control/{node}"] > 0.5 * expected
    assert measures["seed/a1.0"] == 0.0 and measures["seed/a0.0"] == 0.0  # unread / never sees the seed
    for node in ("a1.0", "a0.0", "a1.1", "m1"):
        assert measures[f"seed_above_control/{node}"] <= 0
    for node, value in measures.items():
        if node.startswith("seed/"):
            name = node[len("seed/"):]
            assert measures[f"seed_above_control/{name}"] == pytest.approx(value - measures[f"seed_control/{name}"])
    assert measures["seed_model/usage"] == pytest.approx(expected, abs=1e-3)
    assert [t.prefix for t in THRESHOLDS.get("seed_usage")][0] == "seed_above_control/"


def test_the_control_is_measured_once_per_replay(monkeypatch):
    import probes.controls

    calls = []
    real = probes.controls.random_init_like
    monkeypatch.setattr(probes.controls, "random_init_like", lambda model: calls.append(1) or real(model))
    planted = seed_reader_model(n=16)
    cache: dict = {}
    first = randomness.seed_usage(_view(planted, step=1, cache=cache), n_resamples=1)
    second = randomness.seed_usage(_view(planted, step=2, cache=cache), n_resamples=1)
    assert len(calls) == 1
    assert {k: v for k, v in first.items() if "control" in k} == {k: v for k, v in second.items() if "control" in k}


def test_seed_usage_refuses_a_task_without_a_seed_channel():
    with pytest.raises(ValueError, match="seed_usage needs a task with a seed channel.*'sort'"):
        randomness.seed_usage(_view(sort_model(n=8)))


def test_stored_set_equals_the_direct_computation():
    planted = recall_model(n=16)
    cache: dict = {}
    measures = randomness.stored_set(_view(planted, cache=cache), n_inputs=4, eval_seeds=0)
    task, model = planted.task, planted.model
    seeds = task.all_seeds()
    stored = stored_matrix(model, task, planted.clean.metadata["key_order"][:4],
                           planted.clean.metadata["values"][:4], seeds)
    mixing = mixing_strategies(stored, generator=torch.Generator().manual_seed(0))
    stats = stored_set_stats(stored)
    success = evaluate_seeded(task, model, planted.clean, "all", torch.Generator().manual_seed(0))
    assert measures["stored/mean_jaccard_across_seeds"] == pytest.approx(float(pairwise_jaccard(stored).mean()))
    assert measures["stored/capacity"] == pytest.approx(deterministic_capacity(stored))
    assert measures["stored/set_diversity"] == pytest.approx(mixing.set_diversity)
    assert measures["stored/seed_dependent"] == pytest.approx(stats.seed_dependent)
    assert measures["success/worst_5pct"] == pytest.approx(success["worst_5pct"])
    assert measures["success/average"] == pytest.approx(success["average"])
    # the planted rule: each key is stored under the half of the seeds whose bit 0 selects it
    assert measures["stored/union_coverage"] == 1.0 and measures["stored/mixes"] == 1.0
    assert measures["success/worst_5pct"] == pytest.approx(0.5)
    assert math.isnan(measures["stored/change_from_previous"])  # no earlier checkpoint
    again = randomness.stored_set(_view(planted, step=5, cache=cache), n_inputs=4, eval_seeds=0)
    assert again["stored/change_from_previous"] == 0.0  # the same model: the same sets


@pytest.mark.parametrize("planted", [seed_reader_model, sort_model])
def test_stored_set_needs_key_value_recall(planted):
    made = planted(n=8)
    if made.task.name == "recall":  # the seed reader's task is recall: it applies
        assert "stored/capacity" in randomness.stored_set(_view(made), n_inputs=2, n_seeds=8, eval_seeds=4)
    else:
        with pytest.raises(ValueError, match="stored_set analysis needs a task with key_value_recall.*'sort'"):
            randomness.stored_set(_view(made))


def test_first_node_is_the_earliest_crossing():
    crossing = {"seed_above_control/a0.0": 40, "seed_above_control/a1.0": 20, "seed_above_control/m0": None,
                "seed_model/above_control": 10}
    assert randomness.first_node(crossing) == ("a1.0", 20)
    assert randomness.first_node({"seed_above_control/a0.0": None}) is None


def test_first_node_leaves_out_the_seed_channel_itself():
    crossing = {"seed_above_control/seed": 1, "seed_above_control/a0.0": 4}
    assert randomness.first_node(crossing) == ("a0.0", 4)
    assert randomness.first_node(crossing, skip=()) == ("seed", 1)
