"""Checkpoint schedules: the steps of each kind, refused specs, the trainer writing exactly the
scheduled checkpoints, and scheduled runs keeping all of them."""

from __future__ import annotations

import pytest

from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train
from interp_rand.training.checkpoint import BOOKKEEPING_FIELDS, list_checkpoints, series_key
from interp_rand.training.checkpoint_schedule import is_checkpoint_step, keeps_all, parse_schedule, scheduled_steps


def test_log_schedule_is_dense_early_then_log_spaced_and_ends_at_the_last_step():
    steps = scheduled_steps("log:50", 3000)
    assert len(steps) == 50
    assert steps[0] == 1 and steps[-1] == 3000
    assert all(b > a for a, b in zip(steps, steps[1:]))
    # dense early: the first checkpoints are consecutive steps
    assert steps[:5] == (1, 2, 3, 4, 5)
    # log-spaced after: once past the dense start, consecutive ratios stay near the one ratio
    # that spans the remaining range (computed here independently of the schedule's loop)
    start = next(i for i, (a, b) in enumerate(zip(steps, steps[1:])) if b - a > 1)
    ratio = (3000 / steps[start]) ** (1 / (len(steps) - 1 - start))
    for a, b in zip(steps[start + 5:], steps[start + 6:]):  # skip the rounding-dominated first few
        assert abs(b / a - ratio) < 0.05, (a, b, ratio)
    # half the checkpoints lie in the first tenth of training at most 1/20 of the way
    assert steps[25] < 3000 / 20


def test_even_and_every_schedules():
    assert scheduled_steps("even:4", 10) == (2, 5, 8, 10)
    every = scheduled_steps("every", 10, 3)
    assert every == tuple(s for s in range(1, 11) if s % 3 == 0 or s == 10)
    # more checkpoints asked than there are steps: every step, once
    assert scheduled_steps("log:50", 7) == tuple(range(1, 8))
    assert scheduled_steps("even:50", 7) == tuple(range(1, 8))


@pytest.mark.parametrize("spec,steps", [("log:2", 100), ("log:10", 10), ("log:13", 1000), ("log:200", 3000),
                                        ("even:3", 3), ("log:5", 6)])
def test_schedules_are_strictly_increasing_and_complete(spec, steps):
    got = scheduled_steps(spec, steps)
    assert got[-1] == steps and got[0] >= 1
    assert all(b > a for a, b in zip(got, got[1:]))
    assert len(got) == min(int(spec.split(":")[1]), steps)


def test_the_trainer_question_matches_the_step_list():
    for config in (TrainConfig(steps=300, checkpoint_schedule="log:12"),
                   TrainConfig(steps=300, checkpoint_every=70)):
        expected = scheduled_steps(config.checkpoint_schedule, config.steps, config.checkpoint_every)
        assert tuple(s for s in range(1, config.steps + 1) if is_checkpoint_step(config, s)) == expected
    # the every schedule is the trainer's old condition
    config = TrainConfig(steps=300, checkpoint_every=70)
    assert all(is_checkpoint_step(config, s) == (s % 70 == 0 or s == 300) for s in range(1, 301))


@pytest.mark.parametrize("spec", ["log", "log:1", "log:x", "log:-3", "sometimes", "every:3", "even:", 5, None])
def test_bad_specs_are_refused_naming_what_is_allowed(spec):
    with pytest.raises(ValueError) as caught:
        parse_schedule(spec)
    message = str(caught.value)
    assert repr(spec) in message and "'log:N'" in message or "N must be >= 2" in message
    with pytest.raises(ValueError, match="checkpoint_schedule"):
        TrainConfig(checkpoint_schedule=spec)


def test_the_schedule_is_bookkeeping_and_only_every_prunes():
    assert "checkpoint_schedule" in BOOKKEEPING_FIELDS
    a = {"task": {}, "model": {}, "train": TrainConfig(checkpoint_schedule="every").to_dict()}
    b = {"task": {}, "model": {}, "train": TrainConfig(checkpoint_schedule="log:50").to_dict()}
    assert series_key(a) == series_key(b)  # a resume may change the schedule
    assert not keeps_all("every") and keeps_all("log:50") and keeps_all("even:5")


TASK = make_task("sort", length=4, vocab=8)
MODEL = TASK.model_config(d_model=16, n_layers=1, n_heads=2)


def _steps(run) -> list[int]:
    return [int(p.name.split("_")[1]) for p in list_checkpoints(run)]


def test_a_scheduled_run_keeps_every_scheduled_checkpoint(tmp_path):
    config = TrainConfig(steps=30, batch_size=16, lr=3e-3, warmup_steps=2, eval_every=10, eval_size=32,
                         keep_checkpoints=1, checkpoint_schedule="log:6")
    train(TASK, MODEL, config, tmp_path / "log", progress=False)
    assert _steps(tmp_path / "log") == list(scheduled_steps("log:6", 30))
    # the control: the every schedule with the same keep_checkpoints prunes to one
    every = TrainConfig(steps=30, batch_size=16, lr=3e-3, warmup_steps=2, eval_every=10, eval_size=32,
                        keep_checkpoints=1, checkpoint_every=5)
    train(TASK, MODEL, every, tmp_path / "every", progress=False)
    assert _steps(tmp_path / "every") == [30]


def test_a_run_stopped_early_keeps_its_last_step(tmp_path):
    config = TrainConfig(steps=40, batch_size=16, lr=3e-3, warmup_steps=2, eval_every=7, eval_size=32,
                         checkpoint_schedule="log:5", stop_at_exact_match=1e-6)  # stops at the first exact match
    result = train(TASK, MODEL, config, tmp_path / "run", progress=False)
    assert result.step < 40 and result.step % 7 == 0  # it did stop early, at an evaluation
    got = _steps(tmp_path / "run")
    assert got == [s for s in scheduled_steps("log:5", 40) if s < result.step] + [result.step]
