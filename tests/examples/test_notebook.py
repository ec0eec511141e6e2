"""examples/tour.ipynb runs, cell by cell, in one namespace (as a kernel would: each cell's
last expression is its result), each result shows itself (a short repr naming the result, an
HTML view, plotly figures where a figure is asked for), and the outputs stored in the notebook
are still what the code gives: a stored output whose text differs from today's fails the test
(stale outputs). No Jupyter needed: the cells are read from the notebook's JSON.

The stored outputs are written by this file's runner, as a kernel would store them: what a
cell prints (a ``stream``), and its result (an ``execute_result``: ``text/plain``, its repr,
and ``text/html``, its HTML view, where it has one). A plotly figure is stored as one line of
text naming it (its drawing is up to 470 KB of JSON; run the cell to draw it). Refresh them
after a change that moves a result::

    .venv/bin/python tests/examples/test_notebook.py      # rewrites examples/tour.ipynb's outputs
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "tour.ipynb"
REFRESH = ".venv/bin/python tests/examples/test_notebook.py"


def run_cells(path: Path) -> list[tuple[Any, str]]:
    """Every code cell's result (the value of its last expression, or None) and what it printed,
    in order, run in the current folder."""
    namespace: dict = {}
    results = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(tree, str(path), "exec"), namespace)
            value = None if last is None else eval(compile(ast.Expression(last.value), str(path), "eval"), namespace)
        results.append((value, printed.getvalue()))
    return results


def _text(value: Any) -> str:
    """The result's ``text/plain``: its repr; for a plotly figure, one line naming it."""
    import plotly.graph_objects as go

    if isinstance(value, go.Figure):
        title = value.layout.title.text or "untitled"
        return f"<plotly Figure: {title} ({len(value.data)} traces); run the cell to draw it>"
    return repr(value)


def outputs(value: Any, printed: str, count: int) -> list[dict]:
    """The cell's outputs as a kernel stores them (nbformat 4)."""
    import plotly.graph_objects as go

    out: list[dict] = []
    if printed:
        out.append({"output_type": "stream", "name": "stdout", "text": printed.splitlines(keepends=True)})
    if value is not None:
        data = {"text/plain": _text(value).splitlines(keepends=True)}
        if hasattr(value, "_repr_html_") and not isinstance(value, go.Figure):
            data["text/html"] = value._repr_html_().splitlines(keepends=True)
        out.append({"output_type": "execute_result", "execution_count": count, "data": data, "metadata": {}})
    return out


def stored_text(cell: dict) -> tuple[str, str]:
    """What a stored cell printed and its result's text."""
    printed = "".join("".join(o["text"]) for o in cell.get("outputs", []) if o["output_type"] == "stream")
    result = "".join("".join(o["data"]["text/plain"]) for o in cell.get("outputs", [])
                     if o["output_type"] == "execute_result")
    return printed, result


def write_outputs(path: Path, results: list[tuple[Any, str]]) -> None:
    """Store ``results`` as the code cells' outputs."""
    notebook = json.loads(path.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for count, (cell, (value, printed)) in enumerate(zip(code, results), start=1):
        cell["execution_count"] = count
        cell["outputs"] = outputs(value, printed, count)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def test_the_notebook_runs_and_every_result_shows_itself(tmp_path, monkeypatch):
    import plotly.graph_objects as go

    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    results = run_cells(NOTEBOOK)
    seconds = time.perf_counter() - start
    task, shape, circuit, circuit_figure, found, lengths, lengths_figure, seed = (value for value, _ in results)
    assert task.name == "sort" and tuple(shape) == (8, 4, 10, 10)
    for result, kind in ((circuit, "CircuitReport"), (found, "ExplainReport"),
                         (lengths, "GeneralizationReport"), (seed, "RandomnessReport")):
        text, page = repr(result), result._repr_html_()
        assert text.startswith(f"<{kind}: ") and len(text) <= 250  # the headline, not a dump of arrays
        assert page.startswith("<div class='interp-rand-result'") and "<svg" in page and len(page) < 40_000
    for nested in (circuit.circuit, circuit.faithfulness, found.explanation, found.explanation.comparison,
                   *found.explanation.cards.values(), lengths.found):
        assert len(repr(nested)) < 2000 and repr(nested).count("\n") < 10, type(nested).__name__
    assert isinstance(circuit_figure, go.Figure) and isinstance(lengths_figure, go.Figure)
    assert "exact match" in repr(lengths) and found.explanation.chosen is not None
    assert seconds < 120, f"the notebook took {seconds:.0f} s"

    # the stored outputs: every code cell has them, and they are what the code gives now
    code = [cell for cell in json.loads(NOTEBOOK.read_text())["cells"] if cell["cell_type"] == "code"]
    for i, (cell, (value, printed)) in enumerate(zip(code, results), start=1):
        assert cell.get("outputs"), f"code cell {i} has no stored output: run {REFRESH}"
        now = (printed, "" if value is None else _text(value))
        assert stored_text(cell) == now, (f"code cell {i}'s stored output is stale (stored, now): "
                                          f"{stored_text(cell)!r} vs {now!r}; run {REFRESH}")
        if hasattr(value, "_repr_html_") and not isinstance(value, go.Figure):
            assert any("text/html" in o.get("data", {}) for o in cell["outputs"]), f"code cell {i}: no HTML view"


if __name__ == "__main__":  # rewrite the notebook's stored outputs (from the repository root)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import tempfile

    import torch

    torch.set_num_threads(1)
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            results = run_cells(NOTEBOOK)
        finally:
            os.chdir(here)
    write_outputs(NOTEBOOK, results)
    print(f"wrote the outputs of {len(results)} code cells into {NOTEBOOK}", file=sys.stderr)
