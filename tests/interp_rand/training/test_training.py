"""Tests of the training package: the LR schedule, answer-masked losses, config validation,
the objective registry, and the loop itself (it learns, is bitwise reproducible, resumes
exactly, survives a killed run, refuses foreign run directories, stops early, reports
divergence without touching the last good checkpoint, and prunes old checkpoints).

Every run is tiny (sort of 4 values from 8, d_model=16, 1 layer, 2 heads, batch 32)."""

from __future__ import annotations

import json
import math
from typing import ClassVar

import pytest
import torch

import interp_rand.training.objectives as objectives_module
import interp_rand.training.trainer as trainer_module
from interp_rand.evaluation import evaluate
from interp_rand.model import HookedTransformer
from interp_rand.tasks import SortTask
from interp_rand.tasks.base import Batch
from interp_rand.training import (
    CheckpointError,
    TrainConfig,
    TrainingDiverged,
    answer_correct,
    answer_loss,
    load_checkpoint,
    make_objective,
    objective_names,
    train,
)
from interp_rand.training.checkpoint import MODEL_FILE, latest_checkpoint, list_checkpoints, step_dir
from interp_rand.training.objectives import ERM
from interp_rand.training.schedule import warmup_cosine
from interp_rand.run_history import METRICS_FILE




TASK = SortTask(length=4, vocab=8)


def model_cfg(task=TASK, **overrides):
    base = dict(d_model=16, n_heads=2, n_layers=1)
    base.update(overrides)
    return task.model_config(**base)


def train_cfg(**overrides) -> TrainConfig:
    base = dict(steps=40, batch_size=32, lr=3e-3, warmup_steps=5, eval_every=10, eval_size=64,
                checkpoint_every=20, keep_checkpoints=5, seed=0)
    base.update(overrides)
    return TrainConfig(**base)


def run(run_dir, task=TASK, mcfg=None, **overrides):
    return train(task, mcfg or model_cfg(task), train_cfg(**overrides), run_dir, progress=False)


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs"


def metric_steps(run_dir) -> list[int]:
    lines = (run_dir / METRICS_FILE).read_text().splitlines()
    return [json.loads(line)["step"] for line in lines if line.strip()]


# ------------------------------------------------------------------------------ schedule
class TestWarmupCosine:
    KW = dict(peak=2.0, warmup=4, total=20, floor_ratio=0.1)

    def test_linear_warmup(self):
        values = [warmup_cosine(s, **self.KW) for s in range(4)]
        assert values == pytest.approx([0.5, 1.0, 1.5, 2.0])

    def test_peak_at_end_of_warmup_and_floor_at_total(self):
        assert warmup_cosine(3, **self.KW) == pytest.approx(2.0)
        assert warmup_cosine(4, **self.KW) == pytest.approx(2.0)  # cosine starts at the peak
        assert warmup_cosine(20, **self.KW) == pytest.approx(0.2)
        assert warmup_cosine(25, **self.KW) == pytest.approx(0.2)  # clamped beyond total
        # halfway through the cosine: the midpoint of peak and floor
        assert warmup_cosine(12, **self.KW) == pytest.approx(1.1)

    def test_monotone_decreasing_after_warmup(self):
        values = [warmup_cosine(s, **self.KW) for s in range(4, 21)]
        assert all(a > b for a, b in zip(values, values[1:]))
        assert max(warmup_cosine(s, **self.KW) for s in range(30)) == pytest.approx(2.0)

    def test_no_warmup_starts_at_peak(self):
        assert warmup_cosine(0, peak=1.0, warmup=0, total=10, floor_ratio=0.0) == pytest.approx(1.0)
        assert warmup_cosine(10, peak=1.0, warmup=0, total=10, floor_ratio=0.0) == pytest.approx(0.0)


# ------------------------------------------------------------------------------ losses
def ce_batch() -> Batch:
    """2 examples, 4 positions, answers at positions 2 and 3, vocab 3."""
    targets = torch.tensor([[-1, -1, 0, 2], [-1, -1, 1, 1]])
    mask = targets >= 0
    return Batch(inputs=torch.zeros(2, 4, dtype=torch.long), targets=targets, loss_mask=mask,
                 answer_positions=torch.tensor([2, 3]))


def ce_logits() -> torch.Tensor:
    logits = torch.zeros(2, 4, 3)
    logits[0, 2] = torch.tensor([2.0, 0.0, 0.0])  # right (target 0)
    logits[0, 3] = torch.tensor([0.0, 0.0, 1.0])  # right (target 2)
    logits[1, 2] = torch.tensor([3.0, 0.0, 0.0])  # wrong (target 1)
    logits[1, 3] = torch.tensor([0.0, 0.0, 0.0])  # uniform: argmax 0, wrong (target 1)
    return logits


def test_answer_loss_ce_matches_hand_computation():
    logits, batch = ce_logits(), ce_batch()
    loss = answer_loss(logits, batch, "ce")
    assert loss.shape == (2,)

    def nll(row, target):
        return -torch.log_softmax(row, -1)[target]

    expected0 = (nll(logits[0, 2], 0) + nll(logits[0, 3], 2)) / 2
    expected1 = (nll(logits[1, 2], 1) + nll(logits[1, 3], 1)) / 2
    assert loss[0].item() == pytest.approx(expected0.item())
    assert loss[1].item() == pytest.approx(expected1.item())
    assert loss[1].item() == pytest.approx((math.log(2 + math.exp(3)) - 0.0 + math.log(3)) / 2)


def test_answer_loss_ignores_non_answer_positions():
    logits, batch = ce_logits(), ce_batch()
    before = answer_loss(logits, batch, "ce")
    changed = logits.clone()
    changed[:, :2] = torch.randn(2, 2, 3, generator=torch.Generator().manual_seed(0)) * 50
    assert torch.equal(answer_loss(changed, batch, "ce"), before)
    assert torch.equal(answer_correct(changed, batch, "ce"), answer_correct(logits, batch, "ce"))
    # ...while an answer position does count
    changed[0, 3] = torch.tensor([5.0, 0.0, 0.0])
    assert answer_loss(changed, batch, "ce")[0] > before[0]


def test_answer_correct_ce():
    correct = answer_correct(ce_logits(), ce_batch(), "ce")
    assert correct.tolist() == [[True, True], [False, False]]


def test_answer_loss_and_correct_bce():
    # 2 examples, 3 positions (answer at 1 and 2), 2 output bits
    targets = torch.zeros(2, 3, 2)
    targets[0, 1] = torch.tensor([1.0, 0.0])
    targets[0, 2] = torch.tensor([0.0, 1.0])
    targets[1, 1] = torch.tensor([1.0, 1.0])
    targets[1, 2] = torch.tensor([0.0, 0.0])
    batch = Batch(inputs=torch.zeros(2, 3, dtype=torch.long), targets=targets,
                  loss_mask=torch.tensor([[False, True, True]] * 2), answer_positions=torch.tensor([1, 2]))
    logits = torch.zeros(2, 3, 2)
    logits[0, 1] = torch.tensor([2.0, -2.0])  # both bits right
    logits[0, 2] = torch.tensor([-1.0, 3.0])  # both bits right
    logits[1, 1] = torch.tensor([2.0, -0.5])  # second bit wrong
    logits[1, 2] = torch.tensor([-4.0, -4.0])  # right
    assert answer_correct(logits, batch, "bce").tolist() == [[True, True], [False, True]]

    def bce(x, y):
        return -(y * math.log(1 / (1 + math.exp(-x))) + (1 - y) * math.log(1 - 1 / (1 + math.exp(-x))))

    exp0 = ((bce(2, 1) + bce(-2, 0)) / 2 + (bce(-1, 0) + bce(3, 1)) / 2) / 2
    exp1 = ((bce(2, 1) + bce(-0.5, 1)) / 2 + (bce(-4, 0) + bce(-4, 0)) / 2) / 2
    loss = answer_loss(logits, batch, "bce")
    assert loss.tolist() == pytest.approx([exp0, exp1], rel=1e-5)
    changed = logits.clone()
    changed[:, 0] = 100.0
    assert torch.equal(answer_loss(changed, batch, "bce"), loss)


def test_unknown_loss_kind():
    with pytest.raises(ValueError, match="mse"):
        answer_loss(ce_logits(), ce_batch(), "mse")
    with pytest.raises(ValueError, match="mse"):
        answer_correct(ce_logits(), ce_batch(), "mse")


# ------------------------------------------------------------------------------ config, registry
@pytest.mark.parametrize(
    "field, value",
    [("steps", 0), ("lr", 0.0), ("min_lr_ratio", 2.0), ("stop_at_exact_match", 1.5),
     ("batch_size", True), ("warmup_steps", -1), ("beta2", 1.0)],
)
def test_train_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field}="):
        TrainConfig(**{field: value})


def test_train_config_dict_round_trip_and_unknown_field():
    cfg = train_cfg(stop_at_exact_match=0.9)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 1.0})


def test_make_objective_unknown_lists_registered():
    with pytest.raises(ValueError) as err:
        make_objective(TrainConfig(objective="nope"))
    assert "'nope'" in str(err.value)
    assert "erm" in str(err.value)
    assert isinstance(make_objective(TrainConfig(objective="erm")), ERM)


# ------------------------------------------------------------------------------ the loop
def test_training_learns_sort(tmp_path):
    cfg = train_cfg(steps=200, warmup_steps=10, eval_every=50, eval_size=256, checkpoint_every=200)
    mcfg = model_cfg()
    eval_batch = TASK.sample(cfg.eval_size, torch.Generator().manual_seed(cfg.seed + trainer_module._EVAL_SEED_OFFSET))
    initial = evaluate(HookedTransformer(mcfg, seed=cfg.seed), TASK, eval_batch).exact_match

    result = train(TASK, mcfg, cfg, tmp_path / "run", progress=False)

    final = result.last_eval.exact_match
    assert result.step == 200
    assert [r["step"] for r in result.history] == [16, 32, 50, 100, 150, 200]  # early evaluations, then every 50
    assert final >= 0.5, f"exact match only {final:.3f} after 200 steps"
    assert final > initial + 0.3, (initial, final)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    # The returned model is the trained one, in eval mode, and matches the result's numbers.
    assert not result.model.training
    assert evaluate(result.model, TASK, eval_batch).exact_match == pytest.approx(final)
    assert load_checkpoint(tmp_path / "run").step == 200


def test_same_seed_is_bitwise_reproducible(tmp_path):
    a = run(tmp_path / "a", steps=20, checkpoint_every=20)
    b = run(tmp_path / "b", steps=20, checkpoint_every=20)
    c = run(tmp_path / "c", steps=20, checkpoint_every=20, seed=1)
    assert_same_weights(a.model.state_dict(), b.model.state_dict())
    assert a.history == b.history
    sa, sc = a.model.state_dict(), c.model.state_dict()
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    # the checkpoints on disk hold the same weights too
    assert_same_weights(load_checkpoint(tmp_path / "a").model().state_dict(),
                        load_checkpoint(tmp_path / "b").model().state_dict())


def test_resume_equals_straight_through(tmp_path):
    # With warmup_steps >= 20 the learning rate of steps 0..19 does not depend on ``steps``, so
    # the 20-step first leg follows the same schedule as the first 20 steps of the 40-step run.
    # (After warm-up the cosine depends on ``steps``, so a run extended later would differ.)
    kw = dict(warmup_steps=20, checkpoint_every=20, eval_every=10)
    a = run(tmp_path / "a", steps=40, **kw)
    first = run(tmp_path / "b", steps=20, **kw)
    assert first.step == 20
    b = run(tmp_path / "b", steps=40, **kw)
    assert b.step == 40
    assert_same_weights(a.model.state_dict(), b.model.state_dict())
    steps = metric_steps(tmp_path / "b")
    assert steps == [10, 20, 30, 40]
    assert len(steps) == len(set(steps))
    assert [r["step"] for r in b.history] == [10, 20, 30, 40]
    assert b.history[-1]["exact_match"] == a.history[-1]["exact_match"]


class _Killed(Exception):
    pass


def test_killed_run_resumes_from_last_checkpoint(tmp_path, monkeypatch):
    kw = dict(steps=40, checkpoint_every=10, eval_every=5)
    straight = run(tmp_path / "straight", **kw)

    real = trainer_module.warmup_cosine

    def dies_at_25(step, **schedule):
        if step == 25:  # steps 1..25 done, checkpoint 20 written, 25 evaluated
            raise _Killed
        return real(step, **schedule)

    monkeypatch.setattr(trainer_module, "warmup_cosine", dies_at_25)
    killed_dir = tmp_path / "killed"
    with pytest.raises(_Killed):
        run(killed_dir, **kw)
    monkeypatch.setattr(trainer_module, "warmup_cosine", real)
    assert latest_checkpoint(killed_dir) == step_dir(killed_dir, 20)
    assert metric_steps(killed_dir)[-1] == 25
    # a write killed half way leaves a temporary folder behind
    stray = killed_dir / "checkpoints" / ".tmp-step_0000030-abc123"
    stray.mkdir()
    (stray / MODEL_FILE).write_bytes(b"\x00" * 10)

    resumed = run(killed_dir, **kw)

    assert resumed.step == 40
    assert_same_weights(straight.model.state_dict(), resumed.model.state_dict())
    assert metric_steps(killed_dir) == list(range(5, 45, 5))
    # line for line the uninterrupted run's, the running train loss included (restored from step 20)
    assert (killed_dir / METRICS_FILE).read_text() == (tmp_path / "straight" / METRICS_FILE).read_text()
    assert [p.name for p in list_checkpoints(killed_dir)] == [f"step_{s:07d}" for s in (10, 20, 30, 40)]
    assert load_checkpoint(killed_dir).step == 40


def test_resume_refuses_another_model(tmp_path):
    run(tmp_path, steps=10, checkpoint_every=10)
    with pytest.raises(CheckpointError) as err:
        run(tmp_path, steps=20, checkpoint_every=10, mcfg=model_cfg(d_model=24))
    message = str(err.value)
    assert "differing sections" in message
    assert '"model"' in message and '"task"' not in message and '"train"' not in message
    assert "step_0000010" in message


def test_init_from_starts_from_another_runs_weights(tmp_path):
    source = run(tmp_path / "source", steps=20, checkpoint_every=20)
    # one step at a negligible rate: the weights are the source's (a fresh init would differ)
    tuned = run(tmp_path / "tuned", steps=1, lr=1e-12, warmup_steps=0, weight_decay=0.0,
                init_from=str(tmp_path / "source"))
    fresh = run(tmp_path / "fresh", steps=1, lr=1e-12, warmup_steps=0, weight_decay=0.0)
    for name, weight in source.model.state_dict().items():
        torch.testing.assert_close(tuned.model.state_dict()[name], weight, rtol=0, atol=1e-9)
    assert not torch.equal(fresh.model.state_dict()["unembed.W_U"], source.model.state_dict()["unembed.W_U"])
    with pytest.raises(CheckpointError, match="init_from"):
        run(tmp_path / "wider", steps=1, mcfg=model_cfg(d_model=24), init_from=str(tmp_path / "source"))
    with pytest.raises(CheckpointError, match="nowhere"):
        run(tmp_path / "missing", steps=1, init_from=str(tmp_path / "nowhere"))


def test_resume_refuses_another_task_config(tmp_path):
    run(tmp_path, steps=10, checkpoint_every=10)
    # same model config (built from the original task, and still fitting), different task settings
    with pytest.raises(CheckpointError) as err:
        run(tmp_path, task=SortTask(length=3, vocab=8), mcfg=model_cfg(), steps=20, checkpoint_every=10)
    message = str(err.value)
    assert '"task"' in message and '"model"' not in message


def test_a_model_that_does_not_fit_the_task_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="d_vocab=9"):
        run(tmp_path, task=SortTask(length=4, vocab=7), mcfg=model_cfg(), steps=5)
    assert not list_checkpoints(tmp_path)


def test_resume_refuses_other_training_settings_but_allows_more_steps(tmp_path):
    run(tmp_path, steps=10, checkpoint_every=10)
    with pytest.raises(CheckpointError, match='"train"'):
        run(tmp_path, steps=20, checkpoint_every=10, lr=1e-2)
    assert run(tmp_path, steps=20, checkpoint_every=10, stop_at_exact_match=1.0).step == 20


def test_no_resume_refuses_existing_checkpoints(tmp_path):
    run(tmp_path, steps=10, checkpoint_every=10)
    with pytest.raises(CheckpointError, match="already holds checkpoints"):
        train(TASK, model_cfg(), train_cfg(steps=20), tmp_path, resume=False, progress=False)
    assert load_checkpoint(tmp_path).step == 10
    # an empty folder is fine with resume=False
    assert train(TASK, model_cfg(), train_cfg(steps=5, checkpoint_every=5), tmp_path / "fresh",
                 resume=False, progress=False).step == 5


def test_stop_at_exact_match_stops_early_with_checkpoint(tmp_path):
    result = run(tmp_path, steps=400, warmup_steps=10, eval_every=25, eval_size=128,
                 checkpoint_every=1000, stop_at_exact_match=0.5)
    assert 0 < result.step < 400
    assert result.step % 25 == 0
    assert result.last_eval.exact_match >= 0.5
    assert [p.name for p in list_checkpoints(tmp_path)] == [step_dir(tmp_path, result.step).name]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.step == result.step
    assert ckpt.metrics["exact_match"] == pytest.approx(result.last_eval.exact_match)
    assert_same_weights(ckpt.model().state_dict(), result.model.state_dict())
    # the evaluation before the last one was below the threshold (it really stopped at the first)
    assert all(r["exact_match"] < 0.5 for r in result.history[:-1])
    # running it again finds the target reached and trains no further
    again = run(tmp_path, steps=400, warmup_steps=10, eval_every=25, eval_size=128,
                checkpoint_every=1000, stop_at_exact_match=0.5)
    assert again.step == result.step
    assert_same_weights(again.model.state_dict(), result.model.state_dict())
    assert metric_steps(tmp_path) == [r["step"] for r in result.history]


class _NanAtStep15:
    """ERM, except the loss of the 15th call (step 15) is NaN."""

    name: ClassVar[str] = "test-training-nan-at-15"
    description: ClassVar[str] = "test only"
    snapshot: ClassVar[dict] = {}

    def __init__(self, config):
        self.calls = 0
        self.erm = ERM(config)

    def __call__(self, model, task, batch, generator, step=0):
        self.calls += 1
        loss = self.erm(model, task, batch, generator)
        if self.calls == 15:
            # the bytes of the last good checkpoint just before the divergence
            path = latest_checkpoint(self.snapshot["run_dir"])
            self.snapshot["path"] = path
            self.snapshot["bytes"] = (path / MODEL_FILE).read_bytes()
            return loss * float("nan")
        return loss


def test_nan_loss_raises_and_keeps_last_good_checkpoint(tmp_path):
    _NanAtStep15.snapshot.clear()
    _NanAtStep15.snapshot["run_dir"] = tmp_path
    # registered for this block only, so the test objective does not outlive the test
    with objectives_module.OBJECTIVES.temporarily(_NanAtStep15.name, _NanAtStep15, description="test only"):
        assert _NanAtStep15.name in objective_names()
        with pytest.raises(TrainingDiverged) as err:
            run(tmp_path, steps=40, checkpoint_every=10, objective=_NanAtStep15.name)
    assert _NanAtStep15.name not in objective_names()
    message = str(err.value)
    assert "step 15" in message
    assert "step_0000010" in message
    good = step_dir(tmp_path, 10)
    assert _NanAtStep15.snapshot["path"] == good
    assert [p.name for p in list_checkpoints(tmp_path)] == [good.name]
    assert (good / MODEL_FILE).read_bytes() == _NanAtStep15.snapshot["bytes"]
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.step == 10
    model = ckpt.model()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_keep_checkpoints_prunes_old_ones(tmp_path):
    run(tmp_path, steps=50, checkpoint_every=10, keep_checkpoints=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_0000040", "step_0000050"]
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / "checkpoints").iterdir())


def test_a_symlinked_metrics_file_is_refused_on_resume_and_its_target_untouched(tmp_path):
    # the issue: a symlinked metrics.jsonl lost a line of its target on resume
    run(tmp_path / "run", steps=20)
    metrics = tmp_path / "run" / METRICS_FILE
    target = tmp_path / "mine.jsonl"
    target.write_bytes(metrics.read_bytes() + b'{"step": 999}\n')  # a later line resume would drop
    before = target.read_bytes()
    metrics.unlink()
    metrics.symlink_to(target)
    with pytest.raises(OSError, match=rf"{METRICS_FILE} is a symbolic link \(to .*mine.jsonl\); refusing"):
        run(tmp_path / "run", steps=40)
    assert target.read_bytes() == before and metrics.is_symlink()


def test_early_log_spaced_evaluations_record_the_learning_phase_and_do_not_stop_the_run(tmp_path):
    """Besides every eval_every steps, a run is evaluated at 16, 32, 64, ... below eval_every, so
    its curve shows the learning phase; the stop rule is judged only on the regular cadence, so
    an early evaluation past stop_at_exact_match does not end the run (zoo recipes stop where
    they did)."""
    from interp_rand.training.trainer import EARLY_EVAL_FROM, is_eval_step

    cfg = TrainConfig(steps=300, eval_every=250)
    assert [s for s in range(1, 301) if is_eval_step(s, cfg)] == [16, 32, 64, 128, 250, 300]
    assert EARLY_EVAL_FROM == 16
    assert [s for s in range(1, 41) if is_eval_step(s, TrainConfig(steps=40, eval_every=10))] == [10, 20, 30, 40]
    result = run(tmp_path / "early", task=SortTask(length=2, vocab=3), steps=60, eval_every=50,
                 stop_at_exact_match=1e-6, lr=3e-3)
    assert metric_steps(tmp_path / "early") == [16, 32, 50]
    assert result.history[0]["exact_match"] >= 1e-6  # the early evaluation was past the stop rule ...
    assert result.step == 50  # ... and the run stopped at the regular evaluation after it
