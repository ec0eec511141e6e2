"""Tests of the ``interp-rand`` command line, called in-process (plus one smoke test of the
installed console script), and of the dataclass -> argparse option builder."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from interp_rand.cli import main
from interp_rand.cli.catalogue import field_docs
from interp_rand.cli.options import add_dataclass_options, collect
from interp_rand.tasks import task_class, task_names
from interp_rand.training import TrainConfig
from interp_rand.training.checkpoint import META_FILE, list_checkpoints




TINY_SORT = ["--length", "4", "--vocab", "8", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
             "--steps", "30", "--batch-size", "32", "--eval-every", "10", "--eval-size", "64",
             "--checkpoint-every", "10", "--quiet"]


@pytest.fixture(scope="module")
def sort_run(tmp_path_factory):
    """``interp-rand train sort ...`` once for the module; returns (run dir, stdout)."""
    out = tmp_path_factory.mktemp("cli") / "sort-run"
    stdout = io.StringIO()  # capsys is function-scoped, so capture by hand
    with contextlib.redirect_stdout(stdout):
        code = main(["train", "sort", *TINY_SORT, "--out", str(out)])
    assert code == 0
    return out, stdout.getvalue()


def run_cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def parse_error(argv, capsys) -> str:
    """The message of an option refused while parsing (exit code 2, before any work)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


# ------------------------------------------------------------------------------ tasks
def test_tasks_lists_every_task_with_options(capsys):
    code, out, _ = run_cli(["tasks"], capsys)
    assert code == 0
    assert set(task_names()) >= {"sort", "addition"}
    for name in task_names():
        cls = task_class(name)
        assert f"{name}: {cls.description}" in out
        for field in dataclasses.fields(cls):
            flag = f"--{field.name.replace('_', '-')}"
            line = next(line for line in out.splitlines() if line.split()[:1] == [flag])
            assert f"default {field.default!r}" in line
    assert re.search(r"--n-digits\s+default 5\s", out)
    assert "--cascade-fraction" in out and "--answer-order" in out
    # the options carry their docstring help
    assert "list length" in out


# ------------------------------------------------------------------------------ train
def test_train_writes_checkpoint_with_given_config(sort_run):
    out, stdout = sort_run
    assert [p.name for p in list_checkpoints(out)][-1] == "step_0000030"
    meta = json.loads((out / "checkpoints" / "step_0000030" / META_FILE).read_text())
    assert meta["task"] == {"name": "sort", "config": {"length": 4, "vocab": 8}}
    assert meta["model"]["d_model"] == 16
    assert meta["model"]["n_heads"] == 2 and meta["model"]["n_layers"] == 1
    assert meta["model"]["d_head"] == 8 and meta["model"]["d_mlp"] == 64  # derived from d_model 16
    assert meta["model"]["d_vocab"] == 9 and meta["model"]["n_ctx"] == 8  # the task decides these
    assert meta["train"]["steps"] == 30 and meta["train"]["batch_size"] == 32
    assert meta["train"]["eval_size"] == 64 and meta["train"]["checkpoint_every"] == 10
    assert meta["train"]["lr"] == TrainConfig().lr  # untouched options keep their defaults
    summary = json.loads(stdout)
    assert summary["step"] == 30 and summary["run_dir"] == str(out)
    assert 0 <= summary["exact_match"] <= 1 and "breakdown" not in summary
    assert (out / "metrics.jsonl").read_text().count("\n") == 3


def test_train_no_resume_refuses_existing_run(sort_run, capsys):
    out, _ = sort_run
    code, _, err = run_cli(["train", "sort", *TINY_SORT, "--out", str(out), "--no-resume"], capsys)
    assert code == 2
    assert "already holds checkpoints" in err


def test_train_resume_with_other_model_is_an_error(sort_run, capsys):
    out, _ = sort_run
    args = [a if a != "16" else "32" for a in TINY_SORT]  # --d-model 32
    code, _, err = run_cli(["train", "sort", *args, "--out", str(out)], capsys)
    assert code == 2
    assert "interp-rand train: error:" in err and "differing sections" in err and '"model"' in err


def test_train_unknown_task_lists_choices(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "nope"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "nope" in err and "sort" in err and "addition" in err


def test_train_bad_task_option(tmp_path, capsys):
    argv = ["train", "sort", *TINY_SORT, "--out", str(tmp_path / "x")]
    argv[argv.index("--length") + 1] = "1"
    code, _, err = run_cli(argv, capsys)
    assert code == 2
    assert "length" in err and "interp-rand train: error:" in err
    assert not (tmp_path / "x" / "checkpoints").exists()


def test_train_bad_model_option(tmp_path, capsys):
    code, _, err = run_cli(["train", "sort", "--d-model", "10", "--n-heads", "4", "--quiet",
                            "--out", str(tmp_path / "x")], capsys)
    assert code == 2
    assert "d_model" in err and "n_heads" in err
    assert not (tmp_path / "x").exists()


def test_train_bad_option_type_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "sort", "--steps", "many"])
    assert exit_info.value.code == 2
    assert "--steps" in capsys.readouterr().err


def test_train_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "sort", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    flags = set(re.findall(r"--[a-z][a-z-]*", out))
    assert flags >= {"--length", "--vocab", "--steps", "--d-model", "--n-heads", "--objective", "--out",
                     "--stop-at-exact-match", "--no-resume", "--d-input-mlp"}
    assert not flags & {"--d-vocab", "--d-input", "--d-vocab-out", "--input-kind"}
    assert "task default" not in out  # model options show the task model's own values
    assert re.search(r"--n-ctx N_CTX .*? \(default: 20\)", re.sub(r"\s+", " ", out))  # 2 * length


# ------------------------------------------------------------------------------ eval
def test_eval_writes_eval_json(sort_run, capsys):
    out, _ = sort_run
    code, stdout, _ = run_cli(["eval", str(out), "--n", "200"], capsys)
    assert code == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["n_examples"] == 200
    assert 0 <= report["exact_match"] <= 1
    assert report["task"] == "sort" and report["step"] == 30
    assert len(report["per_position"]) == 4
    assert str(out / "eval.json") in stdout
    # same seed, same numbers; and a step folder works as well as the run dir
    code, _, _ = run_cli(["eval", str(out / "checkpoints" / "step_0000030"), "--n", "200"], capsys)
    assert code == 0
    assert json.loads((out / "eval.json").read_text())["exact_match"] == report["exact_match"]


def test_eval_wrong_task(sort_run, capsys):
    out, _ = sort_run
    code, _, err = run_cli(["eval", str(out), "--task", "addition", "--n", "10"], capsys)
    assert code == 2
    assert "'sort'" in err and "'addition'" in err


def test_eval_missing_dir(tmp_path, capsys):
    missing = tmp_path / "nonexistent"
    code, _, err = run_cli(["eval", str(missing)], capsys)  # refused before any import
    assert code == 2 and str(missing) in err and "interp-rand eval: error:" in err


def test_eval_bad_n(sort_run, capsys):
    out, _ = sort_run
    assert "argument --n: must be an integer >= 1, got 0" in parse_error(["eval", str(out), "--n", "0"], capsys)


def test_eval_seeds_writes_the_seeded_metrics(tmp_path, capsys):
    out = tmp_path / "recall-run"
    code, _, _ = run_cli(["train", "recall", "--n-pairs", "4", "--d-model", "16", "--steps", "3", "--batch-size", "8",
                          "--eval-every", "3", "--eval-size", "8", "--checkpoint-every", "3", "--quiet",
                          "--out", str(out)], capsys)
    assert code == 0
    code, stdout, _ = run_cli(["eval", str(out), "--n", "20", "--seeds", "7"], capsys)
    assert code == 0 and str(out / "seeded_eval.json") in stdout
    summary = json.loads((out / "seeded_eval.json").read_text())
    assert (summary["n_inputs"], summary["n_seeds"], summary["step"]) == (20, 7, 3)
    assert 0 <= summary["worst_5pct"] <= summary["average"] <= 1 and summary["majority_5"] is not None
    assert "argument --seeds: must be an integer >= 1, got 0" in parse_error(["eval", str(out), "--seeds", "0"], capsys)


def test_eval_seeds_needs_a_seeded_task(sort_run, tmp_path, capsys):
    out, _ = sort_run
    code, stdout, err = run_cli(["eval", str(out), "--n", "10", "--seeds", "3", "--out", str(tmp_path / "e")], capsys)
    assert code == 2 and "seed channel" in err and "recall" in err and "coloring" in err
    # refused before evaluating: nothing printed, nothing written
    assert stdout == "" and not (tmp_path / "e").exists()


def test_threads_option_is_validated_and_restored(capsys):
    before = torch.get_num_threads()
    code, out, _ = run_cli(["--threads", "1", "tasks"], capsys)
    assert code == 0 and "sort:" in out and torch.get_num_threads() == before
    assert "argument --threads: must be an integer >= 1, got 0" in parse_error(["--threads", "0", "tasks"], capsys)


def test_console_script_help():
    script = Path(sys.executable).parent / "interp-rand"
    assert script.exists(), script
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for command in ("train", "eval", "tasks", "demo"):
        assert command in done.stdout


# ------------------------------------------------------------------------------ options
@dataclass(frozen=True)
class Toy:
    """A toy config.

    Attributes:
        x: an integer
            that spans two lines.
        rate, other: a float and a
            second float.
        flag: a switch.
        maybe: an optional integer.
    """

    x: int = 1
    rate: float = 0.5
    other: float = 2.0
    flag: bool = True
    maybe: int | None = 7


def toy_parser(**kwargs) -> tuple[argparse.ArgumentParser, list[str]]:
    parser = argparse.ArgumentParser(prog="toy")
    names = add_dataclass_options(parser, Toy, **kwargs)
    return parser, names


def test_field_docs():
    docs = field_docs(Toy)
    assert docs["x"] == "an integer that spans two lines."
    assert docs["rate"] == docs["other"] == "a float and a second float."
    assert docs["flag"] == "a switch."
    assert field_docs(TrainConfig)["beta2"].startswith("AdamW's decay rate of the squared")
    assert field_docs(int) == {}


def test_dataclass_options_parse_types():
    parser, names = toy_parser()
    assert names == ["x", "rate", "other", "flag", "maybe"]
    args = parser.parse_args(["--x", "3", "--rate", "0.25", "--no-flag", "--maybe", "none"])
    values = collect(args, names)
    assert values == {"x": 3, "rate": 0.25, "other": 2.0, "flag": False, "maybe": None}
    assert type(values["x"]) is int and type(values["rate"]) is float
    assert Toy(**values) == Toy(x=3, rate=0.25, flag=False, maybe=None)
    args = parser.parse_args(["--flag", "--maybe", "12"])
    assert collect(args, names) == {"x": 1, "rate": 0.5, "other": 2.0, "flag": True, "maybe": 12}
    assert collect(parser.parse_args(["--maybe", "None"]), ["maybe"]) == {"maybe": None}


def test_dataclass_options_bad_value():
    parser, _ = toy_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--x", "3.5"])


def test_dataclass_options_without_defaults_collects_only_given():
    parser, names = toy_parser(keep_default=False)
    args = parser.parse_args(["--x", "3", "--no-flag"])
    assert collect(args, names) == {"x": 3, "flag": False}
    assert collect(parser.parse_args([]), names) == {}


def test_dataclass_options_skip_defaults_and_choices(capsys):
    parser, names = toy_parser(skip=("other",), defaults={"x": 9}, choices={"maybe": (1, 2)})
    assert "other" not in names
    assert collect(parser.parse_args([]), names)["x"] == 9
    with pytest.raises(SystemExit):
        parser.parse_args(["--maybe", "3"])
    capsys.readouterr()
    parser.print_help()
    help_text = capsys.readouterr().out
    assert "--other" not in help_text
    assert "an integer that spans two lines. (default: 9)" in " ".join(help_text.split())


def test_every_train_option_has_its_own_help_and_the_tasks_real_default():
    """No option shares a copied help sentence or lacks one; model options show the value the
    task's own model has, not a placeholder."""
    import argparse

    from interp_rand.cli.main import build_parser
    from interp_rand.tasks import make_task

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    per_task = next(a for a in commands.choices["train"]._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("sort", "recall"):
        helps = {a.option_strings[0][2:]: a.help for a in per_task.choices[name]._actions
                 if a.option_strings and a.option_strings[0] != "-h"}
        docs = [h.rsplit(" (default: ", 1)[0] for h in helps.values()]
        assert all(docs) and len(set(docs)) == len(docs), sorted(d for d in docs if docs.count(d) > 1)
        assert not any("task default" in h for h in helps.values())
        for option in ("d-model", "n-layers", "n-heads", "d-head", "n-ctx", "act-fn", "eps", "beta1", "adam-eps"):
            assert len(helps[option].rsplit(" (default: ", 1)[0]) > 10, option
        model = make_task(name).model_config()
        for field in ("d_model", "n_heads", "d_head", "n_ctx", "d_mlp"):
            assert helps[field.replace("_", "-")].endswith(f"(default: {getattr(model, field)})"), field
