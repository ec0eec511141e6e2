"""Every writing command through interp_rand.output (issue 26): a bad output path refused in one
line before any work (a default one too), links never written through, the folder's lock taken,
and Ctrl-C answered with one line naming what was kept and the command that redoes it, with
nothing half-written. The expensive work is replaced by a recorder: these tests assert it never
ran (or what it left)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from interp_rand.cli.main import interrupt_line, main
from interp_rand.output.lock import LOCK_FILE, run_lock

# command -> argv with OUT for the --out folder (each refused at parse time when OUT is a file)
FOLDER_COMMANDS = {
    "eval": ["eval", "zoo:sort", "--out", "OUT"],
    "circuit": ["circuit", "zoo:sort", "--out", "OUT"],
    "compare": ["compare", "zoo:sort", "zoo:sort", "--out", "OUT"],
    "ground-truth": ["ground-truth", "--out", "OUT"],
    "randomness": ["randomness", "zoo:recall-Aq_R", "--out", "OUT"],
    "case-study": ["case-study", "sort", "zoo:sort", "--out", "OUT"],
    "replay": ["replay", "zoo:sort", "--out", "OUT"],
    "qsweep": ["qsweep", "recall", "--out", "OUT"],
    "reproduce": ["reproduce", "recall", "--out", "OUT"],
    "demo": ["demo", "--out", "OUT"],
    "train": ["train", "sort", "--out", "OUT"],
}
FILE_COMMANDS = {"report": ["report", "zoo:sort", "--out", "OUT"], "curve": ["curve", "zoo:sort", "--out", "OUT"]}


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", sorted(FOLDER_COMMANDS))
def test_an_existing_file_as_out_is_refused_in_one_line_before_any_work(command, tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("not a folder")
    code, err = run([a.replace("OUT", str(target)) for a in FOLDER_COMMANDS[command]], capsys)
    assert code == 2 and len(err) == 1 and "afile exists and is not a folder; give a folder (new or existing)" in err[0]
    assert "Errno" not in err[-1] and target.read_text() == "not a folder"


@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
def test_a_linked_output_file_is_refused_before_any_work(command, tmp_path, capsys):
    target = tmp_path / "precious.html"
    target.write_text("keep")
    (tmp_path / "out.html").symlink_to(target)
    code, err = run([a.replace("OUT", str(tmp_path / "out.html")) for a in FILE_COMMANDS[command]], capsys)
    assert code == 2 and "is a symbolic link" in err[-1] and target.read_text() == "keep"


def a_run(folder):
    """A copy of the zoo's sort run at ``folder`` (its checkpoint's metadata; the weights are
    not read before an output is claimed)."""
    from interp_rand.zoo import zoo_path

    shutil.copytree(zoo_path("sort"), folder)
    return folder


@pytest.fixture
def never(monkeypatch):
    """``never(module, name)``: replace an expensive function by one that records a call."""
    calls: list[str] = []

    def patch(module: str, name: str):
        monkeypatch.setattr(f"{module}.{name}", lambda *a, **k: calls.append(name) or pytest.fail(f"{name} ran"))
        return calls

    return patch


def test_a_linked_default_output_is_refused_before_the_evaluation(tmp_path, capsys, never):
    # the issue: an eval.json symlinked elsewhere overwrote its target (after computing everything)
    calls = never("interp_rand.reports.evaluation", "evaluation_report")
    run_dir = a_run(tmp_path / "run")
    target = tmp_path / "elsewhere.json"
    target.write_text("the user's file")
    (run_dir / "eval.json").symlink_to(target)
    code, err = run(["eval", str(run_dir)], capsys)
    assert code == 2 and len(err) == 1 and "eval.json is a symbolic link" in err[0] and "refusing" in err[0]
    assert calls == [] and target.read_text() == "the user's file"


def test_a_zoo_name_cannot_leave_the_zoo(capsys, never):
    import interp_rand.run_names as run_names

    calls = never("interp_rand.reports.evaluation", "evaluation_report")
    up = "../" * 8 + str(run_names.ZOO_DIR).lstrip("/") + "/sort"
    code, err = run(["eval", f"zoo:{up}"], capsys)
    assert code == 2 and len(err) == 1 and "a zoo name is one model's folder name in the zoo" in err[0]
    assert calls == [] and not (run_names.ZOO_DIR / "sort" / "eval.json").exists()


def test_a_second_writer_of_the_output_folder_is_refused_before_any_work(tmp_path, capsys, never):
    calls = never("interp_rand.reports.circuit", "circuit_report")
    with run_lock(tmp_path / "out", command="interp-rand circuit zoo:sort --out out"):
        code, err = run(["circuit", "zoo:sort", "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and len(err) == 1 and "is in use by another writer" in err[0] and calls == []


def test_ctrl_c_names_what_was_kept_and_the_command_that_redoes_it(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "circuit.json").write_text("earlier")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("interp_rand.reports.circuit.circuit_report", interrupted)
    code, err = run(["circuit", "zoo:sort", "--out", str(out)], capsys)
    assert code == 130 and len(err) == 1
    assert err[0].startswith("interp-rand circuit: interrupted by SIGINT after 0 s; ")
    assert f"no circuit.json, circuit.graphml, circuit.dot, circuit.tracer.json, faithfulness.json, circuit.html, " \
           f"card.json, card.html " \
           f"written to {out} (what was there is unchanged)" in err[0]
    assert err[0].endswith(f"redo with: interp-rand circuit zoo:sort --out {out}")
    assert sorted(p.name for p in out.iterdir()) == ["circuit.json"]  # the lock released cleanly: gone
    assert (out / "circuit.json").read_text() == "earlier"


def test_an_interrupted_replay_leaves_no_json_without_its_html(tmp_path, capsys, monkeypatch):
    from interp_rand.reports.dynamics import replay as replay_module

    result = replay_module.Replay(run="r", run_dir="r", steps=[1], checkpoints=["c"], analyses=[], options={},
                                  table={}, thresholds={}, crossings={}, curve=[])
    monkeypatch.setattr(replay_module, "replay", lambda *a, **k: result)
    out = tmp_path / "dyn"
    pages = iter(["<html>first</html>", KeyboardInterrupt])

    def page(data, path):
        text = next(pages)
        if text is KeyboardInterrupt:
            raise KeyboardInterrupt  # Ctrl-C while the figures are drawn, after the table was written
        Path(path).write_text(text)

    monkeypatch.setattr("interp_rand.figures.dynamics_figure.write_replay_page", page)
    assert run(["replay", str(tmp_path), "--out", str(out)], capsys)[0] == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err = run(["replay", str(tmp_path), "--out", str(out), "--n", "64"], capsys)
    assert code == 130 and len(err) == 1 and f"no replay.json, replay.html written to {out}" in err[0]
    assert "redo with: interp-rand replay" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # the earlier pair, whole
    assert json.loads(first["replay.json"])["run"] == "r"


def test_training_interrupted_inside_another_command_resumes_with_that_command(tmp_path):
    from interp_rand.training.interrupts import TrainingInterrupted

    err = TrainingInterrupted(signal.SIGINT, 40, tmp_path / "q1", tmp_path / "q1/checkpoints/step_0000040", saved=True)
    line = interrupt_line("qsweep", ["qsweep", "recall", "--steps", "100", "--no-resume"], err, 3.0)
    assert line.startswith("interp-rand qsweep: interrupted by SIGINT at step 40; saved checkpoint ")
    assert line.endswith("resume with: interp-rand qsweep recall --steps 100")  # a command, not a Python call
    assert "train(" not in line


def test_qsweep_refuses_a_ramp_longer_than_the_run_before_training(tmp_path, capsys, never):
    calls = never("interp_rand.reports.dynamics.qsweep", "measure_run")
    code, err = run(["qsweep", "recall", "--ramp", "--ramp-steps", "100000", "--steps", "20",
                     "--out", str(tmp_path / "q")], capsys)
    assert code == 2 and len(err) == 1 and "ramp_steps must be an integer in [1, steps=20]; got 100000" in err[0]
    assert calls == [] and not (tmp_path / "q").exists()


def test_train_qnorm_on_a_task_without_seeds_is_refused_before_the_progress_bar(tmp_path, capsys):
    code, err = run(["train", "sort", "--objective", "qnorm", "--steps", "5", "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and len(err) == 1  # no progress bar before it
    assert "objective 'qnorm' needs a task with a seed channel; task 'sort' has none" in err[0]
    assert not (tmp_path / "r").exists()  # and no run.lock left


# command -> (argv with OUT for a valid output folder, a file of its output, the expensive call)
CLAIMS = {
    "eval": (["eval", "zoo:sort", "--out", "OUT"], "eval.json", "interp_rand.reports.evaluation.evaluation_report"),
    "circuit": (["circuit", "zoo:sort", "--out", "OUT"], "card.json", "interp_rand.reports.circuit.circuit_report"),
    "compare": (["compare", "zoo:sort", "zoo:sort", "--out", "OUT"], "comparison.json",
                "interp_rand.reports.compare.compare_report"),
    "ground-truth": (["ground-truth", "--out", "OUT"], "ground_truth.html",
                     "circuits.analyses.ground_truth.ground_truth_suite"),
    "randomness": (["randomness", "zoo:recall-Aq_R", "--out", "OUT"], "randomness.html",
                   "interp_rand.reports.randomness.randomness_report"),
    "case-study": (["case-study", "sort", "zoo:sort", "--out", "OUT"], "mechanism.json",
                   "interp_rand.reports.case_study.case_study_report"),
    "replay": (["replay", "zoo:sort", "--out", "OUT"], "replay.html", "interp_rand.reports.dynamics.replay.replay"),
    "qsweep": (["qsweep", "recall", "--out", "OUT"], "qsweep.json", "interp_rand.reports.dynamics.qsweep.q_sweep"),
    "reproduce": (["reproduce", "recall", "--out", "OUT"], "reproduction.md", "interp_rand.reproduce.reproduce"),
    "demo": (["demo", "--out", "OUT"], "index.html", "interp_rand.demo.run_tour"),
    "report": (["report", "OUT"], "report.html", "probes.report.report_from_run"),  # the default: RUN_DIR/report.html
    "curve": (["curve", "OUT"], "training_curve.html", "interp_rand.cli.curve.read_metrics"),
}


@pytest.mark.parametrize("command", sorted(CLAIMS))
def test_every_writing_command_claims_its_output_before_any_work(command, tmp_path, capsys, never):
    # a link at one file of the command's output, in a folder otherwise fine: refused by the
    # command's claim (so every command claims, with its own file names), before the work
    argv, name, expensive = CLAIMS[command]
    calls = never(*expensive.rsplit(".", 1))
    out = tmp_path / "out"
    if argv[1] == "OUT":  # the output is the run's own folder: a run, or it is refused as none first
        a_run(out)
    else:
        out.mkdir()
    target = tmp_path / "target"
    target.write_text("untouched")
    (out / name).symlink_to(target)
    code, err = run([a.replace("OUT", str(out)) for a in argv], capsys)
    assert code == 2 and err[-1].endswith(f"{out / name} is a symbolic link (to {target}); refusing to write through "
                                          "it: remove it or choose another output"), err
    assert calls == [] and target.read_text() == "untouched"
