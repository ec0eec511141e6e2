"""State checked at load: non-finite weights, an optimizer or RNG state of another run, a torn or
damaged ``metrics.jsonl``, an ``init_from`` of another task are each refused (or, for the torn
last record, dropped) with the file and what was wrong named; a resume reproduces the
``metrics.jsonl`` of one uninterrupted run line for line (the running train loss restored)."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from interp_rand.run_history import METRICS_FILE, MetricsError, parse_metrics, read_metrics
from interp_rand.tasks import AdditionTask, SortTask
from interp_rand.training import CheckpointError, TrainConfig, load_checkpoint, train
from interp_rand.training.checkpoint import MODEL_FILE, TRAINER_FILE, latest_checkpoint, step_dir

TASK = SortTask(length=4, vocab=8)


def _config(**changes) -> TrainConfig:
    return TrainConfig(**{**dict(steps=20, batch_size=16, lr=3e-3, warmup_steps=2, eval_every=5, eval_size=32,
                                 checkpoint_every=10, keep_checkpoints=5, seed=1), **changes})


def _train(run_dir, n_layers=1, **changes):
    model = TASK.model_config(d_model=16, n_heads=2, n_layers=n_layers)
    return train(TASK, model, _config(**changes), run_dir, progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 1-layer run of 20 steps (checkpoints 10 and 20) and a 2-layer run of 10, read-only."""
    root = tmp_path_factory.mktemp("state")
    _train(root / "one")
    _train(root / "two", n_layers=2, steps=10)
    return root


@pytest.fixture
def copy(runs, tmp_path):
    def make(name: str):
        shutil.copytree(runs / name, tmp_path / name)
        return tmp_path / name
    return make


def test_a_resume_reproduces_the_metrics_of_one_uninterrupted_run(runs, copy, capsys):
    """20 steps straight against 10 + a resume to 20, whose last metrics record was torn by the
    interruption: the torn record is dropped with a line saying so, and the resumed run's
    metrics.jsonl is byte for byte the straight run's (the running train loss goes on)."""
    run = copy("one")
    shutil.rmtree(step_dir(run, 20))  # interrupted after step 10's checkpoint ...
    lines = (runs / "one" / METRICS_FILE).read_text().splitlines(keepends=True)
    (run / METRICS_FILE).write_text("".join(lines[:3]) + lines[3][:25])  # ... while writing step 15's record
    _train(run)
    assert "dropped its torn last record (line 4" in capsys.readouterr().err
    assert (run / METRICS_FILE).read_text() == (runs / "one" / METRICS_FILE).read_text()
    resumed = [r["train_loss"] for r in read_metrics(run)]
    assert len(resumed) == 4 and len(set(resumed)) == 4


def test_non_finite_weights_are_refused_naming_the_file_and_tensor(copy):
    run = copy("one")
    file = latest_checkpoint(run) / MODEL_FILE
    state = load_file(file)
    state["blocks.0.attn.W_K"][0, 0, 0] = float("inf")
    save_file(state, file)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(run).model()
    assert str(file) in str(err.value) and "blocks.0.attn.W_K" in str(err.value) and "NaN or infinite" in str(err.value)


def test_an_optimizer_state_of_another_model_is_refused(runs, copy):
    run = copy("two")  # a 2-layer run, given the 1-layer run's optimizer (or the reverse)
    shutil.copy(latest_checkpoint(runs / "one") / TRAINER_FILE, latest_checkpoint(run) / TRAINER_FILE)
    with pytest.raises(CheckpointError, match="does not match this run's config"):
        _train(run, n_layers=2)
    run = copy("one")
    shutil.copy(latest_checkpoint(runs / "two") / TRAINER_FILE, latest_checkpoint(run) / TRAINER_FILE)
    with pytest.raises(CheckpointError) as err:
        _train(run, steps=30)
    assert str(latest_checkpoint(run) / TRAINER_FILE) in str(err.value) and "blocks.1." in str(err.value)


def test_a_truncated_generator_state_is_refused(copy):
    run = copy("one")
    file = latest_checkpoint(run) / TRAINER_FILE
    state = load_file(file)
    state["generator"] = torch.tensor([1, 2, 3], dtype=torch.uint8)
    save_file(state, file)
    with pytest.raises(CheckpointError) as err:
        _train(run, steps=30)
    assert str(file) in str(err.value) and "3 uint8 values" in str(err.value)


def test_init_from_a_run_of_another_task_names_the_task(runs, tmp_path):
    task = AdditionTask(n_digits=2)
    model = task.model_config(d_model=16, n_heads=2, n_layers=1)
    with pytest.raises(CheckpointError) as err:
        train(task, model, _config(steps=1, init_from=str(runs / "one")), tmp_path / "r", progress=False)
    message = str(err.value)
    assert "'sort' task (length=4, vocab=8)" in message and "this run trains 'addition'" in message
    assert "ModelConfig(" not in message


@pytest.mark.parametrize("data, what", [
    (b'{"step": 5}\n\xc1\xff\x00garbage\n', "line 2: not UTF-8 text"),
    (b'{"step": 5}\n{"loss": 1.0}\n', "line 2: a record without an integer step"),
    (b'{"step": 5}\n[1, 2, 3]\n', "line 2: a JSON list, not a record"),
    (b'{"step": 5}\n{"step": \n{"step": 10}\n', "line 2: not JSON"),  # torn, but not the last line
    (b'{"step": 5}\nrandom words', "line 2: not JSON"),  # a last line that is no record at all
])
def test_damaged_metrics_name_the_file_line_and_what_is_wrong(data, what):
    with pytest.raises(MetricsError, match=what) as err:
        parse_metrics(data, "RUN/metrics.jsonl")
    assert "RUN/metrics.jsonl" in str(err.value)


def test_only_a_torn_last_record_is_dropped():
    records, torn = parse_metrics(b'{"step": 5}\n{"step": 10, "lo')
    assert records == [{"step": 5}] and "line 2" in torn
    assert parse_metrics(b'{"step": 5}\n{"step": 10}') == ([{"step": 5}, {"step": 10}], None)
