"""One writer per run folder: a second writer (another process, or this one) is refused with
the holder named; a dead holder's lock is taken over and said so; a clean release leaves
nothing to report; train() and the grid world's run_variant both hold the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp_rand.gridworld.config import AgentConfig, GridConfig, GridworldScale, PGPEConfig
from interp_rand.gridworld.experiment import run_variant
from interp_rand.tasks import SortTask
from interp_rand.training import RunLocked, RunWriteError, TrainConfig, load_checkpoint, run_lock, train
from interp_rand.training.checkpoint import list_checkpoints
from interp_rand.output.lock import LOCK_FILE

REPO = Path(__file__).resolve().parents[3]
TASK = SortTask(length=4, vocab=8)
TINY_GRID = GridworldScale(
    grid=GridConfig(size=2, episode_steps=3),
    agent=AgentConfig(d_model=8, n_layers=1, n_heads=2, d_head=4),
    pgpe=PGPEConfig(popsize=2, generations=1, m_seeds=1, eval_seeds=2),
)
# Takes the lock, says so on stdout, then holds it until stdin closes (or it is killed).
_HOLDER = """
import sys
from interp_rand.output.lock import run_lock
with run_lock(sys.argv[1], command="holder-for-test"):
    print("locked", flush=True)
    sys.stdin.read()
"""


def tiny_train(run_dir, **overrides):
    cfg = dict(steps=10, batch_size=16, eval_every=10, eval_size=32, checkpoint_every=10, seed=0)
    cfg.update(overrides)
    return train(TASK, TASK.model_config(d_model=16, n_heads=2, n_layers=1), TrainConfig(**cfg), run_dir,
                 progress=False)


def start_holder(run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert holder.stdout.readline().strip() == "locked"
    return holder


@pytest.mark.slow  # a second Python process (seconds to import torch)
def test_another_process_is_refused_while_it_holds_the_lock_then_its_lock_is_taken_over_when_killed(
        tmp_path, capsys):
    run_dir = tmp_path / "run"
    holder = start_holder(run_dir)
    try:
        recorded = json.loads((run_dir / LOCK_FILE).read_text())
        assert recorded["pid"] == holder.pid and recorded["command"] == "holder-for-test"
        with pytest.raises(RunLocked) as err:
            tiny_train(run_dir)
        message = str(err.value)
        assert f"pid {holder.pid}" in message and f"since {recorded['started']}" in message
        assert "holder-for-test" in message and "\n" not in message
        assert err.value.holder["pid"] == holder.pid
        assert not list_checkpoints(run_dir) and not (run_dir / "metrics.jsonl").exists()
        # the grid world's training is refused too, before it trains
        with pytest.raises(RunLocked, match=f"pid {holder.pid}"):
            run_variant(TINY_GRID, run_dir)
        assert not list_checkpoints(run_dir)
    finally:
        holder.kill()  # SIGKILL: no chance to release the lock cleanly
        holder.wait()
    capsys.readouterr()
    result = tiny_train(run_dir)
    assert result.step == 10 and load_checkpoint(run_dir).step == 10
    notice = capsys.readouterr().err
    assert f"previous writer pid {holder.pid}" in notice and "is gone" in notice and "lock taken over" in notice


def test_a_cleanly_released_lock_is_taken_without_a_notice(tmp_path):
    with run_lock(tmp_path, command="first"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["command"] == "first"
    assert not (tmp_path / LOCK_FILE).exists()  # a clean release leaves no run.lock
    said = []
    with run_lock(tmp_path, notify=said.append) as me:
        assert me["pid"] == os.getpid()
    assert said == []


def test_stale_lock_of_a_dead_pid_is_taken_over_and_reported(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": "host-a", "started": "2025-01-31 14:02:11",
                                                 "command": "interp-rand train sort"}))
    said = []
    with run_lock(run_dir, command="me", notify=said.append) as me:
        assert json.loads((run_dir / LOCK_FILE).read_text()) == me
        assert me["pid"] == os.getpid() and me["command"] == "me"
    assert len(said) == 1
    assert f"pid {dead.pid} on host-a since 2025-01-31 14:02:11" in said[0] and "lock taken over" in said[0]
    assert not (run_dir / LOCK_FILE).exists()  # released: the next writer has nothing to report


def test_the_same_process_cannot_hold_a_run_folder_twice(tmp_path):
    with run_lock(tmp_path / "run"):
        with pytest.raises(RunLocked, match=r"pid \d+ \(this process\)"):
            with run_lock(tmp_path / "run"):
                pass
    with run_lock(tmp_path / "run"):  # and the refused attempt did not break the lock
        pass


def test_the_lock_is_released_when_training_fails(tmp_path):
    tiny_train(tmp_path, steps=10)
    with pytest.raises(Exception, match="different run"):
        tiny_train(tmp_path, steps=20, lr=1e-2)
    with run_lock(tmp_path, notify=pytest.fail):
        pass


def test_a_folder_that_cannot_be_created_is_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(RunWriteError) as err:
        tiny_train(tmp_path / "file" / "run")
    message = str(err.value)
    assert message.startswith(f"could not create the run folder {tmp_path / 'file' / 'run'}: Not a directory")
    assert "\n" not in message
    if Path("/proc/self").exists():
        with pytest.raises(RunWriteError, match=r"^could not create the run folder /proc/x: .*in /proc$"):
            tiny_train("/proc/x")


def test_a_symlinked_run_lock_is_refused_and_its_target_untouched(tmp_path):
    # the issue: a run.lock symlinked to a user's file left that file empty after train
    users = tmp_path / "thesis.txt"
    users.write_text("three years of work")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK_FILE).symlink_to(users)
    with pytest.raises(OSError) as err:
        tiny_train(run_dir)
    message = str(err.value)
    assert f"{run_dir / LOCK_FILE} is a symbolic link (to {users}); refusing to write through it" in message
    assert "\n" not in message and users.read_text() == "three years of work"
    assert not list_checkpoints(run_dir)  # refused before training


def test_a_lock_file_deleted_between_its_open_and_its_lock_is_opened_again(tmp_path, monkeypatch):
    """The race a delete-on-release lock must survive: a writer opens run.lock, its holder then
    releases (deleting it) and a third writer creates the next one. The first writer's lock on
    the deleted file must not count: it sees run.lock name another file and locks that one."""
    import interp_rand.output.lock as lock

    real_open, calls = os.open, []

    def open_then_replaced(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        calls.append(fd)
        if len(calls) == 1:  # between this open and the flock: deleted and created anew
            os.unlink(path)
            real_open(path, os.O_RDWR | os.O_CREAT, 0o666)
        return fd

    monkeypatch.setattr(lock.os, "open", open_then_replaced)
    with run_lock(tmp_path, command="me"):
        assert len(calls) == 2  # opened again: the file the path names
        assert json.loads((tmp_path / LOCK_FILE).read_text())["command"] == "me"
    assert not (tmp_path / LOCK_FILE).exists()
