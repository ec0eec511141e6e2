"""examples/tour.ipynb runs, cell by cell, in one namespace (as a kernel would: each cell's
last expression is its result), and each result shows itself: a short repr naming the result,
an HTML view, plotly figures where a figure is asked for. No Jupyter needed: the cells are read
from the notebook's JSON."""

import ast
import json
import time
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "tour.ipynb"


def run_cells(path: Path, cwd: Path, monkeypatch) -> list:
    """Every code cell's result (the value of its last expression, or None), in order."""
    monkeypatch.chdir(cwd)
    namespace: dict = {}
    results = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, str(path), "exec"), namespace)
        results.append(None if last is None else eval(compile(ast.Expression(last.value), str(path), "eval"), namespace))
    return results


def test_the_notebook_runs_and_every_result_shows_itself(tmp_path, monkeypatch):
    import plotly.graph_objects as go

    start = time.perf_counter()
    task, shape, circuit, circuit_figure, found, lengths, lengths_figure, seed = run_cells(
        NOTEBOOK, tmp_path, monkeypatch)
    seconds = time.perf_counter() - start
    assert task.name == "sort" and tuple(shape) == (8, 4, 10, 10)
    for result, kind in ((circuit, "CircuitReport"), (found, "ExplainReport"),
                         (lengths, "GeneralizationReport"), (seed, "RandomnessReport")):
        text, page = repr(result), result._repr_html_()
        assert text.startswith(f"<{kind}: ") and len(text) <= 250  # the headline, not a dump of arrays
        assert page.startswith("<div><b>") and len(page) < 20_000
    assert isinstance(circuit_figure, go.Figure) and isinstance(lengths_figure, go.Figure)
    assert "exact match" in repr(lengths) and found.explanation.chosen is not None
    assert seconds < 120, f"the notebook took {seconds:.0f} s"
