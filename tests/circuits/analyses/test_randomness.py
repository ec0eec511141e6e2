"""Randomness-usage score and seed entry on hand-built models whose answer is known."""

from __future__ import annotations

import json

import pytest
import torch
from seeded_models import recall_model, seed_path_model

from circuits.analyses.randomness import (
    answer_distribution,
    randomness_usage,
    seed_entry,
    total_variation,
)

# The hand-built seed path (seeded_models.seed_path_model) moves the colour distribution by far
# more than this (mean TV ~0.3 on uniform noise); nodes off the path score exactly 0.
ON_PATH_BOUND = 0.05


def test_bce_answer_distribution_is_the_product_of_bits():
    logits = torch.tensor([[[2.0, -1.0]]])  # one position, two bits
    p = answer_distribution(logits, torch.tensor([0]), "bce")[0, 0]
    a, b = torch.sigmoid(torch.tensor(2.0)), torch.sigmoid(torch.tensor(-1.0))
    expected = torch.stack([(1 - a) * (1 - b), (1 - a) * b, a * (1 - b), a * b])  # 00 01 10 11
    assert torch.allclose(p, expected, atol=1e-6) and abs(float(p.sum()) - 1) < 1e-6
    assert float(total_variation(p, p)) == 0.0


def test_zero_seed_weights_score_exactly_zero_everywhere():
    task, model = recall_model(zero_seed=True)
    batch = task.sample(64, torch.Generator().manual_seed(0))
    usage = randomness_usage(model, batch, task.loss_kind, per_position=True)
    assert set(usage.score) == {"embed", "seed", "input_mlp", "a0.0", "a1.0"}
    assert all(v == 0.0 for v in usage.score.values()) and usage.reference == 0.0
    assert all(v == 0.0 for v in usage.flip.values()) and usage.reference_flip == 0.0
    assert all(v is None for v in usage.share.values())
    assert all(x == 0.0 for row in usage.per_position.values() for x in row)
    entry = seed_entry(model, task, task.sample(8, torch.Generator().manual_seed(1)), task.all_seeds())
    assert entry.entry is None and max(entry.seed_fraction) == 0.0
    assert entry.hooks[-1] == "logits"


def test_recall_seed_enters_only_through_the_input_mlp():
    task, model = recall_model(zero_seed=False)
    batch = task.sample(64, torch.Generator().manual_seed(0))
    usage = randomness_usage(model, batch, task.loss_kind)
    # seed_mode="append": the seed reaches the residual stream only through the input MLP
    assert usage.score["embed"] == 0.0
    assert usage.reference > 0
    assert usage.score["seed"] == pytest.approx(usage.reference, abs=1e-6)
    assert usage.score["input_mlp"] == pytest.approx(usage.reference, abs=1e-6)
    assert usage.share["seed"] == pytest.approx(1.0, abs=1e-4)
    entry = seed_entry(model, task, task.sample(8, torch.Generator().manual_seed(1)), task.all_seeds(),
                       probe_batch=task.sample(256, torch.Generator().manual_seed(2)),
                       generator=torch.Generator().manual_seed(3))
    assert entry.entry == "blocks.0.hook_resid_pre" and 0 < entry.seed_fraction[0] < 1
    assert len(entry.probe_accuracy) == 3 and all(0 <= a <= 1 for a in entry.probe_accuracy)
    json.dumps(usage.to_dict()), json.dumps(entry.to_dict())


def test_hand_built_seed_path_scores_on_the_path_and_zero_off_it():
    task, model = seed_path_model()
    batch = task.sample(512, torch.Generator().manual_seed(0))
    usage = randomness_usage(model, batch, task.loss_kind, per_position=True)
    assert list(usage.score) == ["embed", "seed", "a0.0", "a0.1"]  # every writer, in forward order
    assert usage.reference > ON_PATH_BOUND
    assert usage.score["seed"] == pytest.approx(usage.reference, abs=1e-6)
    assert usage.score["a0.0"] > ON_PATH_BOUND and usage.flip["a0.0"] > ON_PATH_BOUND
    assert usage.score["a0.1"] == 0.0 and usage.score["embed"] == 0.0
    # one block: a head's write at position p reaches only the logits at p, so per-position
    # effects (each averaged over all N answer positions) add up to the all-position effect
    assert sum(usage.per_position["a0.0"]) == pytest.approx(usage.score["a0.0"], rel=1e-4)
    assert max(usage.per_position["a0.1"]) == 0.0


def test_seed_entry_of_the_hand_built_path():
    task, model = seed_path_model()
    g = torch.Generator().manual_seed(0)
    entry = seed_entry(model, task, task.sample(16, g), task.sample_seeds(16, g))
    assert entry.hooks == ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post", "logits"]
    # colouring tokens are the vertex ids of every cycle: at resid_pre only the noise varies
    assert entry.seed_fraction[0] == pytest.approx(1.0) and entry.entry == "blocks.0.hook_resid_pre"
    _, zero = seed_path_model(zero_seed=True)
    assert seed_entry(zero, task, task.sample(16, g), task.sample_seeds(16, g)).entry is None


def test_usage_needs_seeds():
    task, model = seed_path_model()
    batch = task.sample(4, torch.Generator().manual_seed(0))
    import dataclasses

    with pytest.raises(ValueError, match="seeds"):
        randomness_usage(model, dataclasses.replace(batch, seeds=None), task.loss_kind)
    with pytest.raises(ValueError, match="n_resamples"):
        randomness_usage(model, batch, task.loss_kind, n_resamples=0)


def test_cli_writes_json_and_html_and_compares(tmp_path, capsys):
    from interp_rand.cli.main import main
    from interp_rand.training.checkpoint import RunSpec, save_checkpoint
    from interp_rand.training.config import TrainConfig

    runs = []
    for name, zero in (("seeded", False), ("zero", True)):
        task, model = seed_path_model(zero_seed=zero)
        spec = RunSpec(task.name, task.config_dict(), model.cfg, TrainConfig())
        save_checkpoint(tmp_path / name, 1, spec, model.state_dict(), {}, {}, keep=1)
        runs.append(tmp_path / name)
    out = tmp_path / "out"
    code = main(["randomness", str(runs[0]), "--compare", str(runs[1]), "--out", str(out), "--n", "64"])
    stdout = capsys.readouterr().out
    assert code == 0 and "usage a0.0" in stdout and "colour change, noise at distance 2" in stdout
    report = json.loads((out / "randomness.json").read_text())
    seeded, zero = report["runs"]
    assert seeded["usage"]["score"]["a0.0"] > ON_PATH_BOUND and zero["usage"]["reference"] == 0.0
    assert seeded["symmetry"]["resample"]["change_rate"][2] == 0.0
    # the seed-bit probes' random-init control: one accuracy per probed hook, each a rate
    controls = seeded["random_init"]["seed_probe"]
    assert len(controls) == len(seeded["entry"]["probe_accuracy"]) and all(0 <= a <= 1 for a in controls)
    assert "random-init control" in stdout
    assert report["summary"]["zero"]["seed enters at"] is None
    page = (out / "randomness.html").read_text()
    assert page.count("Plotly.newPlot") >= 5 and "stored-set" not in page
    with pytest.raises(SystemExit) as refused:  # refused while parsing, before any work
        main(["randomness", str(runs[0]), "--out", str(out), "--n", "1"])
    assert refused.value.code == 2 and "--n: must be an integer >= 2, got 1" in capsys.readouterr().err


@pytest.mark.parametrize("build", [seed_path_model, recall_model], ids=["coloring", "recall"])
def test_seed_pairs_target_the_models_own_answers_and_move_only_the_seed(build):
    from circuits import get_metric, seed_pairs
    from circuits.graph.architecture import run_model

    task, model = build(zero_seed=False)
    batch = task.sample(64, torch.Generator().manual_seed(0))
    pairs = seed_pairs(model, task, batch, torch.Generator().manual_seed(1))
    assert torch.equal(pairs.clean.inputs, pairs.corrupted.inputs)
    assert torch.equal(pairs.clean.targets, pairs.corrupted.targets)
    assert not torch.equal(pairs.clean.seeds, pairs.corrupted.seeds)
    clean_logits = run_model(model, pairs.clean)[:, batch.answer_positions]
    answers = pairs.clean.targets[:, batch.answer_positions]
    if answers.dtype.is_floating_point:  # recall's bits: the model's own sign
        assert torch.equal(answers, (clean_logits > 0).to(answers.dtype))
    else:
        assert torch.equal(answers, clean_logits.argmax(-1))
    logprob = get_metric("logprob")
    with torch.no_grad():
        clean = logprob(run_model(model, pairs.clean), pairs.clean)
        gap = float(clean - logprob(run_model(model, pairs.corrupted), pairs.clean))
    assert gap > 0  # the model's own answer is its most likely one; another seed moves off it

    # a model whose seed weights are zero: a new seed changes nothing
    task, blind = build(zero_seed=True)
    pairs = seed_pairs(blind, task, batch, torch.Generator().manual_seed(1))
    assert torch.equal(run_model(blind, pairs.clean), run_model(blind, pairs.corrupted))


def test_seed_pairs_refuse_a_task_without_seeds():
    from circuits import seed_pairs
    from interp_rand.model import HookedTransformer
    from interp_rand.tasks import make_task

    task = make_task("sort", length=3, vocab=4)
    model = HookedTransformer(task.model_config(d_model=16, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match="seed channel"):
        seed_pairs(model, task, task.sample(4, torch.Generator().manual_seed(0)), torch.Generator())
