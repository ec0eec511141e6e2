"""``interp-rand train --checkpoint-schedule`` and ``interp-rand replay``: a scheduled run trained
from the command line keeps its checkpoints and replays into a table and figures; ``--help``
lists the registered analyses without torch; bad names and runs are refused in one line."""

from __future__ import annotations

import json

import pytest
from test_cli_startup import run_fresh

from interp_rand.cli.main import main
from interp_rand.reports.dynamics.replay import DYNAMICS_ANALYSES, load_replay
from interp_rand.training.checkpoint import list_checkpoints
from interp_rand.training.checkpoint_schedule import scheduled_steps

TRAIN = ["train", "sort", "--length", "4", "--vocab", "8", "--d-model", "16", "--n-layers", "1", "--n-heads", "2",
         "--steps", "12", "--batch-size", "16", "--eval-every", "6", "--eval-size", "32", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli") / "sort-log4"
    assert main([*TRAIN, "--checkpoint-schedule", "log:4", "--out", str(folder)]) == 0
    return folder


def test_train_with_a_schedule_keeps_every_scheduled_checkpoint(run):
    steps = [int(p.name.split("_")[1]) for p in list_checkpoints(run)]
    assert steps == list(scheduled_steps("log:4", 12))


def test_replay_writes_the_table_and_figures(run, tmp_path, capsys):
    out = tmp_path / "replay"
    assert main(["replay", str(run), "--analyses", "accuracy,circuit", "--n", "32", "--seed", "3",
                 "--set", "circuit.top_edges=5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed[: printed.rindex("}") + 1])
    assert summary["checkpoints"] == 4 and summary["analyses"] == ["accuracy", "circuit"]
    data = load_replay(out)
    assert data["n"] == 32 and data["seed"] == 3 and data["options"]["circuit"]["top_edges"] == 5
    assert len([k for k in data["table"] if k.startswith("edge/")]) == 5
    assert data["command"].startswith("interp-rand replay ") and "--set circuit.top_edges=5" in data["command"]
    assert (out / "replay.html").is_file() and f"wrote {out / 'replay.json'}" in printed


def test_replay_help_lists_the_registered_analyses_without_torch():
    code, heavy, out, err = run_fresh(["replay", "--help"])
    assert code == 0, err
    assert heavy == []
    text = " ".join(out.split())
    for entry in DYNAMICS_ANALYSES.entries():
        assert f"{entry.name}: {' '.join(entry.description.split())}" in text
    assert "--checkpoint-schedule log:50" in text


@pytest.mark.parametrize("argv, expected", [
    (["--analyses", "accuracy,nope"], "unknown analyses ['nope']; registered: accuracy"),
    (["--set", "circuit.nope=1"], "circuit has no option 'nope'; its options: method"),
    (["--set", "circuit.size=-1"], "must be an integer >= 0"),
    (["--set", "size=3"], "expected ANALYSIS.OPTION=VALUE"),
    (["--n", "1"], "must be an integer >= 2"),
])
def test_bad_arguments_are_refused_before_any_work(argv, expected):
    code, heavy, out, err = run_fresh(["replay", "runs/none", *argv])
    assert code == 2 and heavy == []
    assert expected in err, err


def test_a_run_with_one_checkpoint_says_how_to_train_with_a_schedule(tmp_path, capsys):
    one = tmp_path / "one"
    assert main([*TRAIN, "--out", str(one)]) == 0
    capsys.readouterr()
    assert main(["replay", str(one), "--analyses", "accuracy", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "has 1 checkpoint(s)" in err and "--checkpoint-schedule log:50" in err


def test_train_refuses_a_bad_schedule(tmp_path, capsys):
    assert main([*TRAIN, "--checkpoint-schedule", "log", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "checkpoint_schedule='log'" in err and "'log:N'" in err
    assert not (tmp_path / "x").exists()
