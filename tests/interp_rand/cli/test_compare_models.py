"""``compare`` with ``--model-a``/``--model-b``: two models of different tasks are refused in one
line, as two runs are, whether both are functions or one is a run (issue 38, item 5)."""

from __future__ import annotations

import pytest

from interp_rand.cli import main

FUNCTIONS = (
    "from interp_rand import HookedTransformer, make_task\n"
    "def _of(task):\n"
    "    return HookedTransformer(task.model_config(d_model=16, n_layers=1, n_heads=2)), task\n"
    "def sort4():\n    return _of(make_task('sort', length=4, vocab=6))\n"
    "def addition():\n    return _of(make_task('addition', n_digits=2))\n"
)


@pytest.mark.parametrize("argv, said", [
    (["--model-a", "twotasks:sort4", "--model-b", "twotasks:addition"],
     "--model-a solves 'sort'"),
    (["--model-a", "twotasks:addition", "zoo:sort"], "the runs are of different tasks: 'addition' vs 'sort'"),
])
def test_compare_refuses_models_of_different_tasks(argv, said, tmp_path, capsys, monkeypatch):
    (tmp_path / "twotasks.py").write_text(FUNCTIONS)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "c"
    assert main(["--threads", "1", "compare", *argv, "--n", "8", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not any(out.iterdir()) if out.exists() else True
