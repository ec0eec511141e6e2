"""Tests of checkpoints: round trips, the run-dir/step-folder lookup, RunSpec JSON, clear
errors for missing, truncated, foreign, outdated and mismatched checkpoints, and that loading
never unpickles anything."""

from __future__ import annotations

import dataclasses
import errno
import json
import pickle
import shutil

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

import interp_rand.training.checkpoint as checkpoint_module

from interp_rand.model import HookedTransformer
from interp_rand.tasks import AdditionTask
from interp_rand.training import (
    CheckpointError,
    RunSpec,
    RunWriteError,
    TrainConfig,
    load_checkpoint,
    train,
)
from interp_rand.training.checkpoint import (
    FORMAT,
    META_FILE,
    MODEL_FILE,
    TRAINER_FILE,
    VERSION,
    list_checkpoints,
    save_checkpoint,
    step_dir,
)

TASK = AdditionTask(n_digits=2)
MODEL_CFG = TASK.model_config(d_model=16, n_heads=2, n_layers=1)
TRAIN_CFG = TrainConfig(steps=20, batch_size=32, lr=3e-3, warmup_steps=2, eval_every=10, eval_size=64,
                        checkpoint_every=10, keep_checkpoints=3, seed=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny addition run (checkpoints at 10 and 20) shared read-only by the module."""
    run_dir = tmp_path_factory.mktemp("ckpt") / "run"
    result = train(TASK, MODEL_CFG, TRAIN_CFG, run_dir, progress=False)
    return run_dir, result


@pytest.fixture
def run_copy(trained, tmp_path):
    """A private copy of the trained run, free to damage."""
    run_dir, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def eval_tokens():
    return TASK.sample(8, torch.Generator().manual_seed(11))


# ------------------------------------------------------------------------------ round trip
def test_round_trip_gives_identical_logits(trained):
    run_dir, result = trained
    ckpt = load_checkpoint(run_dir)
    assert ckpt.step == 20
    assert ckpt.path == step_dir(run_dir, 20)
    model = ckpt.model()
    assert not model.training
    batch = eval_tokens()
    with torch.no_grad():
        assert torch.equal(model(batch.inputs), result.model(batch.inputs))
    for name, tensor in result.model.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert ckpt.metrics["exact_match"] == pytest.approx(result.last_eval.exact_match)
    assert "train_loss" in ckpt.metrics


def test_load_accepts_run_dir_or_step_folder(trained):
    run_dir, _ = trained
    assert [p.name for p in list_checkpoints(run_dir)] == ["step_0000010", "step_0000020"]
    older = load_checkpoint(step_dir(run_dir, 10))
    assert older.step == 10 and older.path == step_dir(run_dir, 10)
    assert load_checkpoint(str(run_dir)).step == 20
    w10 = older.model().state_dict()
    w20 = load_checkpoint(run_dir).model().state_dict()
    assert any(not torch.equal(w10[k], w20[k]) for k in w10)


def test_trainer_state_holds_generator_and_adam_moments(trained):
    run_dir, _ = trained
    state = load_checkpoint(run_dir).trainer_state()
    assert state["generator"].dtype == torch.uint8
    assert any(k.startswith("adamw.") and k.endswith(".exp_avg") for k in state)
    assert any(k.endswith(".exp_avg_sq") for k in state)


def test_run_spec_round_trips_through_json(trained):
    run_dir, _ = trained
    spec = RunSpec(TASK.name, TASK.config_dict(), MODEL_CFG, TRAIN_CFG)
    again = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert again.make_task() == TASK
    assert load_checkpoint(run_dir).spec == spec
    meta = json.loads((step_dir(run_dir, 20) / META_FILE).read_text())
    assert meta["format"] == FORMAT and meta["version"] == VERSION and meta["step"] == 20
    assert meta["task"] == {"name": "addition", "config": TASK.config_dict()}


def test_checkpoint_holds_only_safetensors_and_json(trained):
    run_dir, _ = trained
    for folder in list_checkpoints(run_dir):
        names = sorted(p.name for p in folder.iterdir())
        assert names == sorted([MODEL_FILE, TRAINER_FILE, META_FILE])
        assert all(p.suffix in (".safetensors", ".json") for p in folder.iterdir())
    assert not list(run_dir.rglob("*.pt")) and not list(run_dir.rglob("*.pkl"))


def test_loading_never_unpickles(trained, monkeypatch):
    run_dir, _ = trained

    def forbidden(*args, **kwargs):
        raise AssertionError("checkpoint loading must not unpickle")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    ckpt = load_checkpoint(run_dir)
    assert isinstance(ckpt.model(), HookedTransformer)
    assert "generator" in ckpt.trainer_state()


# ------------------------------------------------------------------------------ errors
def test_missing_dir_names_path(tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(CheckpointError, match="does not exist") as err:
        load_checkpoint(missing)
    assert str(missing) in str(err.value)


def test_dir_without_checkpoints(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(tmp_path)
    assert str(tmp_path) in str(err.value)
    assert "neither a checkpoint folder" in str(err.value)


def test_truncated_model_file(run_copy):
    model_file = step_dir(run_copy, 20) / MODEL_FILE
    data = model_file.read_bytes()
    model_file.write_bytes(data[: len(data) // 2])
    ckpt = load_checkpoint(run_copy)
    with pytest.raises(CheckpointError) as err:
        ckpt.model()
    assert str(model_file) in str(err.value)
    assert "not a readable safetensors file" in str(err.value)
    assert "truncated" in str(err.value)


def test_truncated_trainer_file(run_copy):
    trainer_file = step_dir(run_copy, 20) / TRAINER_FILE
    trainer_file.write_bytes(trainer_file.read_bytes()[:5])
    with pytest.raises(CheckpointError, match="not a readable safetensors file") as err:
        load_checkpoint(run_copy).trainer_state()
    assert str(trainer_file) in str(err.value)


@pytest.mark.parametrize("garbage", [b'{"format": "interp-rand/check', b"\xff\xfe\x00\x81 not text"])
def test_garbage_json_names_checkpoint_json(run_copy, garbage):
    meta = step_dir(run_copy, 20) / META_FILE
    meta.write_bytes(garbage)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(run_copy)
    assert str(meta) in str(err.value)


@pytest.mark.parametrize("content", [{"hello": 1}, [1, 2, 3], {"format": "someone-else", "version": 1}])
def test_foreign_json(run_copy, content):
    meta = step_dir(run_copy, 20) / META_FILE
    meta.write_text(json.dumps(content))
    with pytest.raises(CheckpointError, match="is not an interp-rand checkpoint") as err:
        load_checkpoint(run_copy)
    assert str(meta) in str(err.value)


def test_wrong_version(run_copy):
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["version"] = VERSION + 98
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=f"version {VERSION + 98}") as err:
        load_checkpoint(run_copy)
    assert str(meta_path) in str(err.value)


def test_invalid_config_in_json(run_copy):
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["model"]["d_model"] = -4
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="invalid config") as err:
        load_checkpoint(run_copy)
    assert "d_model" in str(err.value)


def test_a_config_edited_over_weights_of_the_same_shapes_is_refused(run_copy):
    """The weights record the model config they were written for: a checkpoint.json edited to
    another config of the same shapes (softmax weights read as linear attention) is refused,
    naming the field, instead of being scored."""
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["model"]["attention"] = "linear"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="attention: checkpoint.json 'linear', the weights' 'softmax'"):
        load_checkpoint(run_copy).model()


def _strip_weights_record(run_dir, step=20):
    """Rewrite model.safetensors without the model config it records (as weights written before
    that record, or by another tool): the forward check is then the only witness."""
    from safetensors.torch import load_file

    path = step_dir(run_dir, step) / MODEL_FILE
    save_file(load_file(path), path)


def test_the_forward_check_catches_an_architecture_edit_the_shapes_cannot_see(run_copy):
    """A checkpoint stores its model's answers on a small fixed batch; the loaded model must give
    them again. softmax weights read as linear attention are refused in one line naming the file,
    the field suspected and the two exact matches; the unedited checkpoint loads."""
    _strip_weights_record(run_copy)
    ckpt = load_checkpoint(run_copy)
    assert ckpt.forward_check["n"] == 64 and len(ckpt.forward_check["answers"].split()) == 64 * (TASK.n_digits + 1)
    import time

    began = time.perf_counter()
    ckpt.model()  # unedited: loads
    assert time.perf_counter() - began < 0.2
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["model"]["attention"] = "linear"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(run_copy).model()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{meta_path} does not describe its weights")
    assert "the field suspected: model.attention (checkpoint.json says 'linear'; 'softmax' gives the stored" in message
    stored = ckpt.forward_check["exact_match"]
    assert f"where {stored:.3f} was stored" in message and "scores exact match " in message


def test_a_checkpoint_without_the_forward_check_loads_as_before(run_copy):
    """Runs written before the check (and the zoo's) have none: they load, unchecked; a check whose
    batch no longer draws the same (the task's sampling changed) is not compared; a malformed
    entry is refused in one line."""
    _strip_weights_record(run_copy)
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    check = meta.pop("forward_check")
    meta["model"]["attention"] = "linear"  # undetectable without a check or the weights' record
    meta_path.write_text(json.dumps(meta))
    assert load_checkpoint(run_copy).forward_check is None
    load_checkpoint(run_copy).model()
    meta["forward_check"] = {**check, "inputs": "0" * 16}  # another batch: nothing to compare
    meta_path.write_text(json.dumps(meta))
    load_checkpoint(run_copy).model()
    meta["forward_check"] = {**check, "n": "64"}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="'forward_check' entry is malformed"):
        load_checkpoint(run_copy)
    for name in ("zoo:sort", "zoo:addition", "zoo:recall-Aq_R", "zoo:coloring-Aq_R"):
        zoo = load_checkpoint(name)
        assert zoo.forward_check is None and zoo.model() is not None


@pytest.mark.parametrize("task, agent, hint", [("gridworld", True, "interp-rand gridworld eval"),
                                               ("nosuchtask", False, "sort")])
def test_a_run_of_no_registered_task_is_named(run_copy, task, agent, hint):
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    meta["task"]["name"] = task
    if agent:  # a PGPE agent's record (AgentRunSpec): its training config is the agent and PGPE settings
        meta["train"] = {"agent": {}, "pgpe": {}}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=f"holds a '{task}' run") as err:
        load_checkpoint(run_copy)
    assert hint in str(err.value)
    assert ("gridworld eval" in str(err.value)) == agent


def test_a_grid_world_agent_is_sent_to_the_agent_loader():
    with pytest.raises(CheckpointError, match="holds a 'gridworld' run") as err:
        load_checkpoint("zoo:gridworld-Aq_R")
    assert "read grid-world agents with `interp-rand gridworld eval`" in str(err.value)


def test_missing_step_in_json(run_copy):
    meta_path = step_dir(run_copy, 20) / META_FILE
    meta = json.loads(meta_path.read_text())
    del meta["step"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="step"):
        load_checkpoint(run_copy)


def test_missing_model_file(run_copy):
    missing = step_dir(run_copy, 20) / MODEL_FILE
    missing.unlink()
    with pytest.raises(CheckpointError, match="is missing") as err:
        load_checkpoint(run_copy)
    assert str(missing) in str(err.value)


def test_weights_only_checkpoint_loads_but_does_not_resume(trained, run_copy):
    """Without trainer.safetensors (the zoo's format) the model loads with the same weights;
    resuming the run is refused by name instead of restarting from step 0."""
    (step_dir(run_copy, 20) / TRAINER_FILE).unlink()
    ckpt = load_checkpoint(run_copy)
    assert torch.equal(ckpt.model()(eval_tokens().inputs), trained[1].model.eval()(eval_tokens().inputs))
    with pytest.raises(CheckpointError, match="weights-only"):
        ckpt.trainer_state()
    with pytest.raises(CheckpointError, match="weights-only"):
        train(TASK, MODEL_CFG, dataclasses.replace(TRAIN_CFG, steps=30), run_copy, progress=False)


def test_tensors_that_do_not_fit_the_config(run_copy):
    other = HookedTransformer(TASK.model_config(d_model=24, n_heads=2, n_layers=1))
    model_file = step_dir(run_copy, 20) / MODEL_FILE
    save_file({k: v.contiguous() for k, v in other.state_dict().items()}, model_file)
    ckpt = load_checkpoint(run_copy)
    with pytest.raises(CheckpointError, match="does not fit") as err:
        ckpt.model()
    message = str(err.value)
    assert str(model_file) in message
    assert "wrong shapes" in message and "embed.W_E" in message


def test_missing_and_unexpected_tensors_are_listed(run_copy):
    state = load_checkpoint(run_copy).model().state_dict()
    state = {k: v.contiguous() for k, v in state.items()}
    removed = "unembed.W_U"
    del state[removed]
    state["extra.weight"] = torch.zeros(2)
    save_file(state, step_dir(run_copy, 20) / MODEL_FILE)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(run_copy).model()
    assert removed in str(err.value) and "extra.weight" in str(err.value)


def test_expected_task_refuses_a_run_of_another_task(trained):
    run_dir, _ = trained
    assert load_checkpoint(run_dir, task="addition").spec.task_name == "addition"
    with pytest.raises(CheckpointError, match=r"is a model of the 'addition' task, not 'sort'") as err:
        load_checkpoint(run_dir, task="sort")
    assert str(run_dir) in str(err.value)


# ------------------------------------------------------------------------------ writes and pruning
def test_pruning_never_deletes_a_checkpoint_of_another_series(trained, tmp_path):
    # Two runs writing one folder with keep=1 (what the run lock now prevents): each prunes only
    # its own series, so neither deletes the other's newest checkpoint.
    _, result = trained
    state = result.model.state_dict()
    mine = RunSpec(TASK.name, TASK.config_dict(), MODEL_CFG, TRAIN_CFG)
    theirs = RunSpec(TASK.name, TASK.config_dict(), MODEL_CFG, dataclasses.replace(TRAIN_CFG, lr=1e-2))
    # a resume may change the bookkeeping settings: still the same series
    mine_resumed = RunSpec(TASK.name, TASK.config_dict(), MODEL_CFG, dataclasses.replace(TRAIN_CFG, steps=99))
    for step, spec in [(10, mine), (15, theirs), (20, mine), (25, theirs), (30, mine_resumed)]:
        save_checkpoint(tmp_path, step, spec, state, {"generator": torch.zeros(1)}, {}, keep=1)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_0000025", "step_0000030"]
    assert load_checkpoint(step_dir(tmp_path, 25)).spec.train_config.lr == 1e-2


def _disk_full(after: int, error):
    """A ``save_file`` that writes ``after`` files, then fails as a full disk does."""
    calls = []

    def save(tensors, path, *args, **kwargs):
        calls.append(path)
        if len(calls) > after:
            raise error
        return save_file(tensors, path, *args, **kwargs)

    return save


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"),
], ids=["OSError", "SafetensorError"])
def test_a_full_disk_is_one_line_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, error):
    monkeypatch.setattr(checkpoint_module, "save_file", _disk_full(after=2, error=error))  # step 10 fits
    with pytest.raises(RunWriteError) as err:
        train(TASK, MODEL_CFG, TRAIN_CFG, tmp_path, progress=False)
    good, lost = step_dir(tmp_path, 10), step_dir(tmp_path, 20)
    assert str(err.value) == (f"could not write checkpoint {lost}: No space left on device (ENOSPC); "
                              f"the last good checkpoint {good} is untouched")
    assert err.value.errno == errno.ENOSPC
    assert list(p.name for p in (tmp_path / "checkpoints").iterdir()) == [good.name]  # no half-written folder
    assert load_checkpoint(tmp_path).step == 10
    monkeypatch.undo()
    assert train(TASK, MODEL_CFG, TRAIN_CFG, tmp_path, progress=False).step == 20  # and it resumes


def test_the_cli_reports_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys):
    from interp_rand.cli.main import main

    monkeypatch.setattr(checkpoint_module, "save_file", _disk_full(after=0, error=OSError(errno.ENOSPC, "full")))
    code = main(["train", "addition", "--n-digits", "2", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
                 "--steps", "2", "--batch-size", "8", "--eval-size", "8", "--quiet", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"interp-rand train: error: could not write checkpoint {step_dir(tmp_path, 2)}: "
                   "No space left on device (ENOSPC); the last good checkpoint (none yet) is untouched\n")


def test_weights_recorded_before_a_config_field_existed_load_with_its_default(run_copy):
    """A field added to ModelConfig after the weights were written is absent from their record:
    it reads as its default (as the checkpoint.json does), not as an edit; a changed field is
    still refused."""
    from safetensors import safe_open

    from interp_rand.training.checkpoint import MODEL_FILE, WEIGHTS_CONFIG_KEY

    path = step_dir(run_copy, 20) / MODEL_FILE
    with safe_open(str(path), "pt") as handle:
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
        record = json.loads(handle.metadata()[WEIGHTS_CONFIG_KEY])
    del record["digit_tokens"]  # written before the field existed
    save_file(tensors, path, metadata={WEIGHTS_CONFIG_KEY: json.dumps(record)})
    load_checkpoint(run_copy).model()
    record["attention"] = "linear"
    save_file(tensors, path, metadata={WEIGHTS_CONFIG_KEY: json.dumps(record)})
    with pytest.raises(CheckpointError, match="attention"):
        load_checkpoint(run_copy).model()


def test_weights_are_written_with_the_users_file_mode(tmp_path):
    """safetensors writes 0o600; the checkpoint's weights get the mode the umask gives every
    other file (the checkpoint.json beside them), so whoever reads one reads the other."""
    import os

    from interp_rand.output.files import file_mode
    from interp_rand.training.checkpoint import MODEL_FILE, write_tensors

    old = os.umask(0o022)
    try:
        path = tmp_path / MODEL_FILE
        write_tensors(path, {"w": torch.zeros(2)})
        assert file_mode() == 0o644 and (path.stat().st_mode & 0o777) == 0o644
    finally:
        os.umask(old)
