"""The API reference (`make api`, issue 38 item 1): pdoc renders the modules' docstrings; here
two modules, with the Makefile's settings, in about a second. The whole reference (249 modules,
about 25 s) is what `make api` builds into docs/api/, which git ignores."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_renders_the_docstrings(tmp_path):
    pytest.importorskip("pdoc", reason="pdoc is in the [test] extra: pip install -e '.[test]'")
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", show_source=False)
    pdoc.pdoc("interp_rand.display", "circuits.graph.circuit", output_directory=tmp_path)
    circuit = (tmp_path / "circuits" / "graph" / "circuit.html").read_text()
    display = (tmp_path / "interp_rand" / "display.html").read_text()
    assert "Scored edges of one model architecture" in circuit and "Graphviz DOT text" in circuit
    assert "How a result shows itself in a notebook" in display and "One row per claim" in display
    # a reST role becomes a link to the module it names
    assert 'href="../draw/circuit_figure.html#circuit_figure"' in circuit or "circuit_figure()" in circuit


def test_make_api_builds_every_module_into_an_ignored_folder():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^api: \$\(STAMP\)$", makefile, flags=re.M) and "API_DIR := docs/api" in makefile
    if (ROOT / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", "docs/api/index.html"], cwd=ROOT)
        assert ignored.returncode == 0, "docs/api/ must be git-ignored"
