"""The progress policy (:mod:`interp_rand.progress`): silent unless asked, tqdm on a terminal,
a few plain ``NAME k/N`` lines on stderr otherwise; and the commands that report through it."""

from __future__ import annotations

import argparse
import io
import re
import sys

import pytest

from interp_rand import progress
from interp_rand.cli import main


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_disabled_is_silent(capsys):
    assert list(progress.bar(range(3), desc="x", enabled=False)) == [0, 1, 2]
    with progress.stage("y", enabled=False):
        pass
    progress.note("z", enabled=False)
    assert capsys.readouterr() == ("", "")


def test_lines_off_a_terminal_first_and_last_only(capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 3600.0)
    with progress.scope("case-study sort"):
        assert list(progress.bar(range(50), desc="ablating 50 control sets")) == list(range(50))
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays for results
    lines = err.splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(r"case-study sort: ablating 50 control sets 0/50 \(\d+ s\)", lines[0])
    assert lines[1].startswith("case-study sort: ablating 50 control sets 50/50 ")
    assert "\r" not in err


def test_lines_every_interval(capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    bar = progress.bar(desc="generation", total=3)
    for _ in range(3):
        bar.update()
    bar.close()
    bar.close()  # idempotent
    counts = re.findall(r"generation (\d+)/3", capsys.readouterr().err)
    assert counts == ["0", "1", "2", "3"]


def test_a_terminal_gets_a_tqdm_bar(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress.scope("circuit"):
        bar = progress.bar(range(4), desc="EAP-IG interpolation steps")
        assert type(bar).__name__ == "tqdm"
        list(bar)
    assert "circuit: EAP-IG interpolation steps" in terminal.getvalue() and "4/4" in terminal.getvalue()


def test_stage_and_note(capsys):
    with progress.scope("report"):
        with progress.stage("probes"):
            pass
        progress.note("writing the HTML")
    progress.note("outside")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "report: probes"
    assert re.fullmatch(r"report: probes: done in \d+\.\d s", lines[1])
    assert re.fullmatch(r"report: writing the HTML \[\d+ s\]", lines[2])
    assert lines[3] == "outside"


def test_library_is_quiet_by_default_and_reports_when_asked(capsys):
    import torch

    from circuits import discover, faithfulness
    from interp_rand.training import load_checkpoint

    ckpt = load_checkpoint("zoo:sort")
    task, model = ckpt.spec.make_task(), ckpt.model().eval()
    pairs = task.corrupt(task.sample(8, torch.Generator().manual_seed(0)), torch.Generator().manual_seed(1))
    scores = discover(model, pairs.clean, pairs.corrupted, method="eap-ig", steps=2)
    faithfulness(model, scores.circuit(top_k=5), pairs.clean, pairs.corrupted, scores=scores, n_resamples=2)
    assert capsys.readouterr() == ("", "")
    loud = discover(model, pairs.clean, pairs.corrupted, method="eap-ig", steps=2, progress=True)
    assert torch.equal(loud.scores, scores.scores)  # progress changes nothing else
    faithfulness(model, scores.circuit(top_k=5), pairs.clean, pairs.corrupted, scores=scores, n_resamples=2,
                 progress=True)
    err = capsys.readouterr().err
    assert "scoring 1100 edges (eap-ig, 8 pairs)" in err and "EAP-IG interpolation steps 2/2" in err
    assert "faithfulness: bootstrap resamples 2/2" in err


def test_gridworld_progress_says_k_of_n(capsys):
    from interp_rand.cli.gridworld import _printer

    show = _printer(argparse.Namespace(quiet=False), 300)
    with progress.scope("gridworld compare"):
        show({"generation": 220, "mean_eval": -7.0, "center_fitness": -9.0, "center_worst_cell": -9.0,
              "center_average": -6.5},
             "agent 2 of 3 (A^q_R)")
    err = capsys.readouterr().err
    assert "gridworld compare: agent 2 of 3 (A^q_R): generation 220 of 300: population mean -7.00" in err
    assert _printer(argparse.Namespace(quiet=True), 300) is None


@pytest.mark.parametrize("command", [["circuit", "zoo:sort", "--method", "eap"],
                                     ["compare", "zoo:sort", "zoo:sort"]])
def test_top_k_larger_than_the_graph_is_refused_before_any_work(command, tmp_path, capsys):
    code = main([*command, "--top-k", "100000", "--n", "8", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--top-k=100000: this model has 1100 edges (per position); give 1..1100 or auto" in err
    assert "scoring" not in err and not (tmp_path / "out").exists()


def test_circuit_refuses_a_target_outside_0_1(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:  # refused while parsing
        main(["circuit", "zoo:sort", "--target", "1.5", "--out", str(tmp_path / "out")])
    assert refused.value.code == 2 and "--target: must be a finite number in (0, 1], got 1.5" in capsys.readouterr().err


def test_randomness_checks_both_runs_before_analysing(tmp_path, capsys):
    code = main(["randomness", "zoo:recall-Aq_R", "--compare", "zoo:coloring-Aq_R", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "is a 'coloring' run, not 'recall'" in err
    assert "randomness-usage" not in err and not (tmp_path / "r").exists()
    code = main(["randomness", "zoo:sort", "--out", str(tmp_path / "r")])
    assert code == 2 and "no seed channel" in capsys.readouterr().err


def test_threads_default_and_restored(capsys):
    import torch

    from interp_rand import DEFAULT_THREADS, use_threads
    from interp_rand.cli import build_parser

    assert DEFAULT_THREADS == 1 and build_parser().parse_args(["tasks"]).threads == DEFAULT_THREADS
    before = torch.get_num_threads()
    with use_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads=0 must be an integer >= 1"):
        use_threads(0).__enter__()
