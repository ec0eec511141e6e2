"""The q sweep and ramp on a tiny colouring scale: one run folder per q, a table with every q,
finished runs skipped on a second call, the ramp replayed with the exponent at each step, bad
q values and tasks refused (library and command line)."""

import dataclasses
import json

import pytest

import interp_rand.training
from interp_rand.cli.main import main
from interp_rand.reports.dynamics import qsweep
from interp_rand.tasks.coloring import COLORING_CPU
from interp_rand.training.checkpoint import list_checkpoints
from interp_rand.training.checkpoint_schedule import scheduled_steps

TINY = dataclasses.replace(COLORING_CPU, steps=6, batch_size=8, warmup_steps=1, m_seeds=2, eval_seeds=6)
SMALL = dict(scale=TINY, n=32, eval_inputs=32)


def test_sweep_writes_a_folder_per_q_and_skips_finished_runs(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    result = qsweep.q_sweep("coloring", (4, 1), out, ramp=True, ramp_checkpoints=3, **SMALL)
    assert [row["q"] for row in result.rows] == [1.0, 4.0]  # ascending
    for q in ("q1", "q4"):
        assert (out / q / qsweep.RESULT_FILE).exists() and list_checkpoints(out / q)
    for row in result.rows:
        assert row["skipped"] is False and row["step"] == TINY.steps
        config = json.loads((out / f"q{row['q']:g}" / qsweep.RESULT_FILE).read_text())["settings"]["train"]
        assert config["q"] == row["q"] and config["steps"] == TINY.steps and config["objective"] == "qnorm"
        assert any(k.startswith("seed_above_control/") for k in row["measures"])
        assert 0 <= row["evaluation"]["worst_5pct"] <= row["evaluation"]["average"] <= 1
        assert any("stored_set skipped" in note and "'coloring'" in note for note in row["notes"])
    assert set(result.summary["worst_5pct_by_q"]) == {"1", "4"}
    # the ramp: 3 checkpoints, the exponent q ** (step / steps) at each
    replay = result.ramp["replay"]
    steps = scheduled_steps("log:3", TINY.steps)  # the ramp keeps its log-spaced checkpoints
    assert [r["step"] for r in replay] == list(steps) and len(steps) == 3
    assert [r["q_at_step"] for r in replay] == pytest.approx([4 ** (s / TINY.steps) for s in steps])
    assert any("ramp" in d for d in result.departures)
    json_path, html_path = result.write(out)
    table = json.loads(json_path.read_text())
    assert [row["q"] for row in table["rows"]] == [1.0, 4.0] and "settings" not in table["rows"][0]
    assert "plotly" in html_path.read_text()

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(interp_rand.training, "train", no_training)
    again = qsweep.q_sweep("coloring", (1, 4), out, ramp=True, ramp_checkpoints=3, **SMALL)
    assert all(row["skipped"] for row in again.rows)
    assert [r["measures"] for r in again.rows] == [r["measures"] for r in result.rows]


def test_crossing_first_and_sustained():
    assert qsweep.crossing([1, 2, 4, 8], [0.1, -0.1, 0.2, 0.3], 0.0) == {"first": 1, "sustained": 4}
    assert qsweep.crossing([1, 2], [0.1, -0.1], 0.0) == {"first": 1, "sustained": None}
    assert qsweep.crossing([1, 2], [float("nan"), 0.5], 0.0) == {"first": 2, "sustained": 2}
    assert qsweep.crossing([1, 2], [0.5, 0.1], 0.2, rising=False) == {"first": 2, "sustained": 2}


@pytest.mark.parametrize("qs, message", [((0.5, 2), "finite number >= 1"), ((2, 2), "repeat"),
                                         ((), "at least one"), ((float("inf"),), "finite")])
def test_bad_q_values_are_refused(qs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        qsweep.q_sweep("coloring", qs, tmp_path, **SMALL)
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_a_task_without_an_experiment_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"randomized experiment \(one of \['coloring', 'recall'\]\); got 'sort'"):
        qsweep.q_sweep("sort", (1, 2), tmp_path)


def test_cli_refuses_bad_q_while_parsing(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["qsweep", "coloring", "--qs", "1,0", "--out", "/nonexistent"])
    assert refused.value.code == 2 and "every q must be a finite number in [1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        main(["qsweep", "sort"])
    assert refused.value.code == 2 and "invalid choice: 'sort'" in capsys.readouterr().err


def test_cli_runs_the_sweep_and_records_the_steps_departure(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["qsweep", "coloring", "--qs", "1,2", "--steps", "2", "--n", "16", "--eval-inputs", "16",
                 "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "steps 2 instead of the recipe's 4000" in printed and "wrote" in printed
    table = json.loads((out / "qsweep.json").read_text())
    assert [row["q"] for row in table["rows"]] == [1.0, 2.0] and table["steps"] == 2
    assert table["command"].startswith("interp-rand qsweep coloring --qs 1,2 --steps 2")
