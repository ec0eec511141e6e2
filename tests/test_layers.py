"""The import direction of the design, checked on the source (every ``import``, at module level
or inside a function). Layers, lowest first:

- the core (``interp_rand`` except its top layer) imports neither ``circuits`` nor ``probes``;
- ``circuits``: graph <- interventions <- methods <- analyses <- mechanisms <- draw, each importing only
  the layers below it (and the core); ``probes`` imports the core and never ``circuits``; the
  analyses and drawings of circuits may use ``probes``' estimators (ridge probes, attention
  patterns);
- the top layer (``interp_rand.cli``, ``interp_rand.reports``, ``interp_rand.demo``) imports
  anything, and nothing below it imports it;
- compute never draws: plotly is imported only by drawing modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("interp_rand.cli", "interp_rand.reports", "interp_rand.demo")
CIRCUIT_LAYERS = ("graph", "interventions", "methods", "analyses", "mechanisms", "draw")
# Modules that draw (plotly): the drawing layer of circuits, the core's figures, the report
# writers and the top layer.
DRAWING = ("circuits.draw", "interp_rand.figures", "probes.report_html") + TOP


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(name: str) -> tuple[str, int]:
    if any(_within(name, t) for t in TOP):
        return "top", 0
    if _within(name, "circuits"):
        parts = name.split(".")
        return "circuits", (CIRCUIT_LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in CIRCUIT_LAYERS
                            else len(CIRCUIT_LAYERS))  # the package's own __init__ re-exports all
    if _within(name, "probes"):
        return "probes", 0
    return "core", 0


def _violations(module: str, imported: str) -> str | None:
    kind, level = _layer(module)
    ikind, ilevel = _layer(imported)
    if ikind == "top" and kind != "top":
        return "imports the top layer"
    if kind == "core" and ikind in ("circuits", "probes"):
        return f"the core imports {ikind}"
    if kind == "probes" and ikind == "circuits":
        return "probes imports circuits"
    if kind == "circuits" and ikind == "circuits" and ilevel > level:
        return f"circuits layer {CIRCUIT_LAYERS[level] if level < len(CIRCUIT_LAYERS) else '__init__'} imports a higher layer"
    if kind == "circuits" and ikind == "probes" and level < CIRCUIT_LAYERS.index("analyses"):
        return "circuits below the analyses imports probes"
    if _within(imported, "plotly") and not any(_within(module, d) for d in DRAWING):
        return "compute imports plotly"
    return None


SOURCES = sorted(p for pkg in ("interp_rand", "circuits", "probes") for p in (ROOT / pkg).rglob("*.py"))


def test_every_package_file_is_checked():
    assert len(SOURCES) > 50
    assert {_layer(_module(p))[0] for p in SOURCES} == {"core", "circuits", "probes", "top"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path):
    module = _module(path)
    bad = sorted(f"{i}: {why}" for i in _imports(path) if (why := _violations(module, i)))
    assert not bad, f"{module} breaks the import direction: {bad}"


@pytest.mark.parametrize("module, imported, allowed", [
    ("circuits.graph.nodes", "circuits.interventions.ablation", False),
    ("circuits.methods.acdc", "circuits.interventions.ablation", True),
    ("interp_rand.tasks.sort", "circuits", False),
    ("probes.suite", "circuits.graph", False),
    ("interp_rand.cli.circuit", "probes", True),
    ("circuits.interventions.ablation", "plotly.graph_objects", False),
    ("circuits.analyses.flow", "interp_rand.reports.case_studies", False),
])
def test_the_rule_itself_refuses_what_it_should(module, imported, allowed):
    assert (_violations(module, imported) is None) == allowed


def test_the_tests_mirror_the_packages():
    """Every test folder (but the examples') is the test folder of a package folder."""
    folders = {p.parent.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("test_*.py")}
    folders -= {Path("."), Path("examples")}
    assert folders, "no test folders found"
    missing = sorted(str(f) for f in folders if not (ROOT / f / "__init__.py").exists())
    assert not missing, f"test folders without a package folder of the same path: {missing}"
