"""Safe stops: SIGINT/SIGTERM end training after the current step with a checkpoint at that
step, resuming to the same weights as a run that was never stopped; the CLI exits 130/143 with
one line and no traceback; a second signal stops at once without a new checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import interp_rand.training.trainer as trainer_module
from interp_rand.tasks import SortTask
from interp_rand.training import RunLocked, TrainConfig, TrainingInterrupted, load_checkpoint, train
from interp_rand.training.checkpoint import MODEL_FILE, list_checkpoints, step_dir

REPO = Path(__file__).resolve().parents[3]
TASK = SortTask(length=4, vocab=8)
MODEL = dict(d_model=16, n_heads=2, n_layers=1)
CLI_STEPS = 150
CLI_ARGS = ["train", "sort", "--length", "4", "--vocab", "8", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
            "--steps", str(CLI_STEPS), "--batch-size", "16", "--eval-every", "5", "--eval-size", "32",
            "--checkpoint-every", "1000", "--quiet"]


@pytest.fixture(autouse=True)
def _sigint_as_in_a_terminal():
    """A test run started in the background (``make test &``, some CI launchers) inherits SIGINT
    ignored, and training keeps an ignored signal ignored; these tests are about a terminal's
    Ctrl-C, so SIGINT gets Python's default handler for each test."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def run(run_dir, **overrides):
    cfg = dict(steps=40, batch_size=32, lr=3e-3, warmup_steps=5, eval_every=10, eval_size=64,
               checkpoint_every=20, keep_checkpoints=5, seed=0)
    cfg.update(overrides)
    return train(TASK, TASK.model_config(**MODEL), TrainConfig(**cfg), run_dir, progress=False)


def signal_at(monkeypatch, at_step: int, *signums: int) -> None:
    """Send ``signums`` to this process while step ``at_step + 1`` is being taken."""
    real = trainer_module.warmup_cosine

    def schedule(step, **kw):
        if step == at_step:
            for signum in signums:
                signal.raise_signal(signum)
        return real(step, **kw)

    monkeypatch.setattr(trainer_module, "warmup_cosine", schedule)


def test_sigterm_saves_the_current_step_and_resumes_to_the_same_weights(tmp_path, monkeypatch):
    straight = run(tmp_path / "straight")
    before = signal.getsignal(signal.SIGTERM)
    signal_at(monkeypatch, 25, signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as err:
        run(tmp_path / "stopped")
    stop = err.value
    assert (stop.step, stop.signal_name, stop.exit_code, stop.saved) == (26, "SIGTERM", 143, True)
    assert stop.checkpoint == step_dir(tmp_path / "stopped", 26)
    assert "interrupted by SIGTERM at step 26" in str(stop) and "run_dir=" in str(stop)
    assert signal.getsignal(signal.SIGTERM) is before  # the handler did not outlive the run
    assert load_checkpoint(tmp_path / "stopped").step == 26
    monkeypatch.undo()
    resumed = run(tmp_path / "stopped")
    assert resumed.resumed_from == step_dir(tmp_path / "stopped", 26) and resumed.step == 40
    assert ((tmp_path / "stopped" / "checkpoints" / "step_0000040" / MODEL_FILE).read_bytes()
            == (tmp_path / "straight" / "checkpoints" / "step_0000040" / MODEL_FILE).read_bytes())
    assert straight.step == 40


def test_a_second_signal_stops_at_once_keeping_the_last_checkpoint(tmp_path, monkeypatch):
    signal_at(monkeypatch, 25, signal.SIGINT, signal.SIGINT)
    with pytest.raises(TrainingInterrupted) as err:
        run(tmp_path)
    assert err.value.saved is False and err.value.exit_code == 130
    assert err.value.checkpoint == step_dir(tmp_path, 20)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_0000020"]


def test_a_resume_says_where_it_resumes_from(tmp_path, capsys):
    run(tmp_path, steps=20)
    capsys.readouterr()
    run(tmp_path, steps=40)
    assert capsys.readouterr().err.strip() == (
        f"resuming {tmp_path} from step 20 ({step_dir(tmp_path, 20)}); training to step 40")


@pytest.mark.slow  # a training subprocess (seconds to import torch)
def test_ctrl_c_of_the_cli_saves_exits_130_without_traceback_and_resumes_bitwise(tmp_path):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from interp_rand.cli import main; sys.exit(main(sys.argv[1:]))",
         *CLI_ARGS, "--out", str(stopped)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        # as in a terminal: a job started from a non-interactive shell would inherit SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not (stopped / "metrics.jsonl").exists() or not (stopped / "metrics.jsonl").read_text():
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.01)
        with pytest.raises(RunLocked, match=f"pid {child.pid}"):  # a second writer, while it trains
            train(TASK, TASK.model_config(**MODEL), TrainConfig(steps=5), stopped, progress=False)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    step = load_checkpoint(stopped).step
    assert 0 < step < CLI_STEPS
    assert lines[0].startswith(f"interp-rand train: interrupted by SIGINT at step {step}; saved checkpoint ")
    assert lines[0].endswith(f"resume with: interp-rand {' '.join(CLI_ARGS)} --out {stopped}")
    assert json.loads((stopped / "metrics.jsonl").read_text().splitlines()[-1])["step"] <= step

    # the command's settings, in Python (the CLI's defaults for the rest)
    cli_config = TrainConfig(steps=CLI_STEPS, batch_size=16, eval_every=5, eval_size=32, checkpoint_every=1000)
    resumed = train(TASK, TASK.model_config(**MODEL), cli_config, stopped, progress=False)
    assert resumed.resumed_from == step_dir(stopped, step) and resumed.step == CLI_STEPS
    train(TASK, TASK.model_config(**MODEL), cli_config, straight, progress=False)
    final = f"checkpoints/step_{CLI_STEPS:07d}/{MODEL_FILE}"
    assert (stopped / final).read_bytes() == (straight / final).read_bytes()
