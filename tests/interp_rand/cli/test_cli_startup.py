"""The command line's start-up: ``--help``, ``tasks``, ``zoo list`` and argument errors answer
without importing torch (checked in a fresh interpreter's ``sys.modules``, not by timing), and
the catalogue they read equals what the registries say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interp_rand.cli import catalogue

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "transformer_lens", "interp_rand.tasks.base", "interp_rand.training.trainer", "circuits", "probes",
         "numpy", "plotly")
# Runs main(argv) in a fresh interpreter, then reports its exit code and the heavy modules loaded.
SCRIPT = """
import json, sys
from interp_rand.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}),
      file=sys.stderr)
"""


def run_fresh(argv: list[str]) -> tuple[int, list[str], str, str]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    *err, report = done.stderr.strip().splitlines()
    result = json.loads(report)
    return result["code"], result["heavy"], done.stdout, "\n".join(err)


@pytest.mark.parametrize("argv, code, expected", [
    (["--help"], 0, ["train", "circuit", "case-study", "zoo", "--threads"]),
    (["tasks"], 0, ["sort:", "--n-digits", "default 5"]),
    (["zoo", "list"], 0, ["addition", "coloring-Aq_R", "built"]),
    (["train", "--help"], 0, ["sort", "addition", "recall", "coloring"]),
    (["train", "sort", "--help"], 0, ["--length", "--objective", "--d-model"]),
    (["circuit", "--help"], 0, ["eap-ig", "acdc", "--top-k"]),
    (["report", "--help"], 0, ["--n-examples"]),
    (["nope"], 2, ["invalid choice: 'nope'", "train"]),
    (["train", "sortt"], 2, ["invalid choice: 'sortt'", "sort"]),
    (["eval", "runs/x", "--task", "sortt"], 2, ["invalid choice: 'sortt'", "addition"]),
    (["circuit", "zoo:sort", "--out", "x", "--method", "nope"], 2, ["invalid choice: 'nope'", "eap-ig"]),
    (["zoo", "build", "nope"], 2, ["invalid choice: 'nope'", "sort"]),
    (["eval", "zoo:sort", "--n", "0"], 2, ["--n: must be an integer >= 1, got 0"]),
])
def test_light_commands_do_not_import_torch(argv, code, expected):
    got, heavy, out, err = run_fresh(argv)
    assert got == code, err
    assert heavy == [], f"{argv} imported {heavy}"
    for text in expected:
        assert text in out + err, (text, out + err)


def test_a_real_command_does_import_torch(tmp_path):
    """The check above can fail: a command that loads a model loads torch (here it then refuses
    the model: another task; an --out that cannot be written is refused before any import)."""
    code, heavy, out, _ = run_fresh(["eval", "zoo:sort", "--n", "10", "--task", "addition", "--out", str(tmp_path)])
    assert code == 2 and "torch" in heavy
    code, heavy, out, _ = run_fresh(["eval", "zoo:sort", "--n", "10", "--out", "/dev/null/x"])
    assert code == 2 and heavy == []


def test_import_interp_rand_is_light_and_the_api_still_works():
    script = ("import sys, interp_rand; assert 'torch' not in sys.modules, 'eager'; "
              "from interp_rand import make_task, train, TrainConfig, HookedTransformer, zoo; "
              "assert 'torch' in sys.modules; print(make_task('sort', length=3).name, TrainConfig().steps, "
              "interp_rand.task_names(), sorted(interp_rand.__all__) == interp_rand.__all__)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["sort", "3000"] and "True" in done.stdout


def test_unknown_attribute_of_interp_rand():
    import interp_rand

    with pytest.raises(AttributeError, match="nope"):
        interp_rand.nope  # noqa: B018


def test_catalogue_matches_the_registries():
    assert catalogue.generate() == catalogue.load(), (
        "interp_rand/cli/catalogue.json is out of date: run `python -m interp_rand.cli.catalogue`")


def test_catalogue_task_names_and_options_are_the_registry_s():
    from interp_rand.tasks import task_class, task_names
    from interp_rand.training import TrainConfig

    assert catalogue.task_names() == task_names()
    for name in task_names():
        assert catalogue.task_description(name) == task_class(name).description
    steps = next(s for s in catalogue.config_options("TrainConfig") if s.name == "steps")
    assert (steps.type, steps.default, steps.optional) == ("int", TrainConfig().steps, False)
    init_from = next(s for s in catalogue.config_options("TrainConfig") if s.name == "init_from")
    assert (init_from.type, init_from.optional) == ("str", True)


def test_option_specs_refuse_a_type_the_cli_cannot_parse():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Bad:
        sizes: tuple = (1, 2)

    with pytest.raises(TypeError, match="Bad.sizes"):
        catalogue.option_specs(Bad)


def test_pyproject_ships_the_catalogue():
    assert '"interp_rand.cli" = ["catalogue.json"]' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("argv, expected", [
    (["eval", "zoo:nope"], "no zoo model 'nope'"),
    (["report", "zoo:nope", "--out", "x"], "no zoo model 'nope'"),
    (["case-study", "carry", "zoo:nope", "--out", "x"], "no zoo model 'nope'"),
    (["gridworld", "eval", "zoo:nope"], "no zoo model 'nope'"),
    (["eval", "tests"], "RUN_DIR tests is neither a checkpoint folder"),
    (["circuit", "README.md", "--out", "x"], "RUN_DIR README.md is neither a checkpoint folder"),
    (["compare", "zoo:sort", "tests", "--out", "x"], "RUN_B tests is neither a checkpoint folder"),
    (["compare", "--model-a", "no_such_module_x:f", "--model-b", "os:getcwd", "--out", "x"],
     "cannot import 'no_such_module_x'"),
    (["eval", "--model", "no_such_file.py:f", "--out", "x"], "no file no_such_file.py"),
    # a function the module's source plainly does not define (read, not run)
    (["eval", "--model", "json:no_such_fn", "--out", "x"], "json has no function 'no_such_fn'"),
    (["eval", "--model", "examples/find_sorting_circuit.py:nope", "--out", "x"],
     "examples/find_sorting_circuit.py has no function 'nope'"),
])
def test_file_errors_are_refused_before_torch(argv, expected):
    """A run or model file that is not there (or is no run) is refused in one line before the
    heavy imports (issue 38: it took 7-12 s, the imports first)."""
    got, heavy, out, err = run_fresh(argv)
    assert got == 2 and heavy == [], (argv, heavy, err)
    assert expected in err and len(err.strip().splitlines()) == 1, err


def test_a_function_is_looked_for_in_the_source_without_running_it(tmp_path):
    """The early check reads the user's source: it refuses only where no top-level statement can
    bind the name, and lets the importer decide wherever it cannot tell."""
    from interp_rand.cli.main import _defines

    source = tmp_path / "m.py"
    cases = {"def f(): pass": True, "async def f(): pass": True, "class f: pass": True, "f = lambda: 1": True,
             "from os import getcwd as f": True, "import f": True, "from os import *": True,
             "def __getattr__(name): pass": True, "if True:\n    def f(): pass": True,
             "globals()['f'] = print": True, "def g(): pass\nx = 1": False, "def g():\n    f = 1": False,
             "'f'": False, "def (: broken": True}
    for text, defines in cases.items():
        source.write_text(text)
        assert _defines(str(source), "f") is defines, text


@pytest.mark.parametrize("argv, expected", [
    (["eval", "--model", "os:getcwd"], "--model needs --out"),
    (["eval", "--model", "no_such_module_x:f"], "--model needs --out"),
    (["report", "--model", "os:getcwd"], "--model needs --out"),
    (["eval"], "give RUN_DIR or --model MODULE:FUNCTION"),
    (["eval", "zoo:sort", "--model", "os:getcwd", "--out", "x"], "give RUN_DIR or --model MODULE:FUNCTION, not both"),
    (["circuit", "--out", "x"], "give RUN_DIR or --model MODULE:FUNCTION"),
    (["randomness", "zoo:sort", "--model", "os:getcwd", "--out", "x"], "not both"),
    (["explain", "--out", "x"], "give RUN_DIR or --model"),
    (["generalization", "--out", "x"], "give RUN_DIR or --model"),
    (["compare", "--model-b", "os:getcwd", "--out", "x"], "give RUN_A or --model-a"),
    (["compare", "zoo:sort", "zoo:sort", "--model-a", "os:getcwd", "--out", "x"], "1 run folder(s) too many"),
])
def test_argument_rules_are_refused_before_torch(argv, expected):
    """A run and --model both or neither, and --model without --out where the output would go
    into the run folder, are refused in one line before the heavy imports (the commands'
    ``check_args``; issue 38: ``eval --model M:F`` without --out took 8 s, the imports first)."""
    got, heavy, out, err = run_fresh(argv)
    assert got == 2 and heavy == [], (argv, heavy, err)
    assert expected in err and len(err.strip().splitlines()) == 1, err


USER_FN = "def build():\n    return helper()\n\ndef helper():\n    raise ZeroDivisionError('inside the user code')\n"


def test_user_function_error_is_one_line_and_its_traceback_only_under_debug(tmp_path, capsys):
    from interp_rand.cli.main import main  # in process: what is printed does not depend on a fresh start

    (tmp_path / "mine.py").write_text(USER_FN)
    target = f"{tmp_path / 'mine.py'}:build"
    code, err = main(["eval", "--model", target, "--out", str(tmp_path / "a")]), capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{target} raised ZeroDivisionError: inside the user code" in err and "Traceback" not in err
    code, err = main(["--debug", "eval", "--model", target, "--out", str(tmp_path / "b")]), capsys.readouterr().err
    assert code == 2 and err.splitlines()[0].endswith("raised ZeroDivisionError: inside the user code"), err
    assert "Traceback" in err and "in helper" in err and "mine.py" in err  # the user's own frames
