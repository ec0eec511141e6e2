"""examples/progress_measures.py on a tiny addition run that kept its checkpoints (the zoo's
models keep only their last one): the table it prints and writes, measured again directly."""

import json

import pytest
import torch

from test_examples import run_example
from interp_rand.reports.dynamics import open_view
from interp_rand.reports.dynamics.progress import addition_progress
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train
from interp_rand.training.checkpoint import list_checkpoints


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("progress") / "run"
    task = make_task("addition", n_digits=2)
    train(task, task.model_config(d_model=32, n_layers=1, n_heads=2),
          TrainConfig(steps=40, batch_size=32, lr=3e-3, warmup_steps=2, eval_every=10, eval_size=64,
                      checkpoint_every=10, keep_checkpoints=10), run, progress=False)
    return run


def test_progress_measures_on_a_kept_run(tiny_run, tmp_path, capsys):
    summary = run_example("progress_measures", ["--run", str(tiny_run), "--out", str(tmp_path),
                                                "--checkpoints", "3", "--n", "64"])
    assert json.loads((tmp_path / "progress.json").read_text()) == json.loads(json.dumps(summary))
    steps = [row["step"] for row in summary["table"]]
    assert steps[0] == 10 and steps[-1] == 40 and len(steps) == 3  # first and last kept, log-spaced between
    # the last row is what the analysis gives on that checkpoint's view (same examples: seed 1)
    direct = addition_progress(open_view(list_checkpoints(tiny_run)[-1], n=64, seed=1))
    assert summary["table"][-1] == pytest.approx({"step": 40, **direct})
    assert all(0 <= v <= 1 for row in summary["table"] for k, v in row.items() if k != "step")
    keys = [c["key"] for c in summary["crossings"]]
    assert {"subtask/base_add", "subtask/use_carry", "role/carry_source@best"} <= set(keys)
    for c in summary["crossings"]:
        assert c["step"] is None or c["step"] in steps
        assert c["vs_accuracy"] in ("before", "same step", "after", "never crosses")
    printed = capsys.readouterr().out
    assert "crosses at" in printed and "role/carry_source@best" in printed


def test_progress_measures_refuses_a_run_without_kept_checkpoints(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run_example("progress_measures", ["--run", str(tmp_path), "--out", str(tmp_path / "out")])
    assert "0 checkpoint(s); the replay needs a run that kept several" in capsys.readouterr().err
