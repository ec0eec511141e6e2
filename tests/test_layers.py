"""The import direction of the design, checked on the source. Every ``import`` counts: at module
level, inside a function (a lazy import that goes upward is still an upward arrow) and under
``if TYPE_CHECKING`` (a type named from a higher layer is still a dependency). Layers, lowest first:

- the core (``interp_rand`` except its top layer) imports neither ``circuits`` nor ``probes``;
- the core's own order (:data:`CORE_LAYERS`): each *unit* of ``interp_rand`` (a module or
  sub-package directly under it) imports only its own unit and the units of lower layers; the
  units of one layer are independent of each other. Lowest first:

  1. foundations, importing no other unit: ``threads``, ``host_memory`` (what memory the
     machine has now), ``validation``, ``registry``,
     ``defaults``, ``progress``, ``distances``, ``output``, ``run_history``, ``run_names``
     (a run's folder or ``zoo:NAME``), ``variant_names``, ``batch`` (a task's data),
     ``job_runner`` (in process or on Ray), ``verdicts`` (the one verdict rule module, which
     ``circuits`` and ``probes`` both use), ``display`` (how a result shows itself in a notebook);
  2. ``model`` and ``losses`` (loss kinds, decodings, the one bit order);
  3. ``tasks`` (each task names, and may register, its loss kind);
  4. ``evaluation``; 5. ``seeded_evaluation``; 6. ``training`` (the trainer evaluates; the
     q-norm expands over seeds; checkpoints read ``zoo:NAME`` through ``run_names``);
  7. the package's facade (``interp_rand/__init__``, ``from interp_rand import train``),
     ``importers``, ``gridworld``, ``figures``;
  8. ``reproduce``; 9. ``zoo`` (its recipes follow reproduce and the grid world);
  10. ``reports``; 11. ``demo`` (given the command line's entry point, never importing it);
  12. ``cli``;
- no two modules of the packages import each other, directly or round a longer circle;
- ``circuits``: graph <- interventions <- methods <- analyses <- mechanisms <- explain <- draw, each importing only
  the layers below it (and the core); ``probes`` imports the core and never ``circuits``; the
  analyses and drawings of circuits may use ``probes``' estimators (ridge probes, attention
  patterns);
- the top layer (``interp_rand.cli``, ``interp_rand.reports``, ``interp_rand.demo``) imports
  anything, and nothing below it imports it;
- compute never draws: plotly is imported only by drawing modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("interp_rand.cli", "interp_rand.reports", "interp_rand.demo")
CIRCUIT_LAYERS = ("graph", "interventions", "methods", "analyses", "mechanisms", "explain", "draw")
# Modules that draw (plotly): the drawing layer of circuits, the core's figures, the report
# writers and the top layer.
DRAWING = ("circuits.draw", "interp_rand.figures", "probes.report_html") + TOP
# The core's own order, lowest first (see the module doc); "" is the package's own __init__.
CORE_LAYERS = (
    ("threads", "host_memory", "validation", "registry", "defaults", "progress", "distances", "output", "run_history",
     "display", "run_names", "variant_names", "batch", "job_runner", "verdicts"),
    ("model", "losses"),
    ("tasks",),
    ("evaluation",),
    ("seeded_evaluation",),
    ("training",),
    ("", "importers", "gridworld", "figures"),
    ("reproduce",),
    ("zoo",),
    ("reports",),
    ("demo",),
    ("cli",),
)
CORE_LAYER = {unit: level for level, units in enumerate(CORE_LAYERS) for unit in units}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _import_statements(path: Path) -> Iterator[tuple[str | None, list[str]]]:
    """Every import of ``path`` as ``(base, names)``: ``from base import a, b`` (relative ones
    resolved) gives ``(base, ["base.a", "base.b"])``, ``import a.b`` gives ``(None, ["a.b"])``."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield None, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            yield base, [f"{base}.{a.name}" for a in node.names]


def _imports(path: Path) -> set[str]:
    """Every name ``path`` imports, and the module of every ``from`` import."""
    return {name for base, names in _import_statements(path) for name in names + ([base] if base is not None else [])}


SOURCES = sorted(p for pkg in ("interp_rand", "circuits", "probes") for p in (ROOT / pkg).rglob("*.py"))
MODULES = {_module(p) for p in SOURCES}


def _imported_modules(path: Path) -> set[str]:
    """The modules of the packages that ``path`` imports: ``from a import b`` is the module
    ``a.b`` where that is a module, else ``a`` (``b`` is a name in it); ``import a.b.c`` is the
    longest of ``a.b.c``, ``a.b``, ``a`` that is a module."""
    out: set[str] = set()
    for base, names in _import_statements(path):
        for name in names if base is None else [n if n in MODULES else base for n in names]:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def _unit(module: str) -> str:
    """The core unit of an ``interp_rand`` module: its first name under ``interp_rand`` (``""``
    for the package's own ``__init__``)."""
    return module.split(".")[1] if "." in module else ""


def _core_violation(module: str, imported: str) -> str | None:
    """Why ``module`` (of ``interp_rand``) may not import ``imported`` by :data:`CORE_LAYERS`."""
    if not _within(imported, "interp_rand") or _unit(module) == _unit(imported):
        return None
    unit, other = _unit(module), _unit(imported)
    if unit not in CORE_LAYER or other not in CORE_LAYER:
        return f"{(unit if unit not in CORE_LAYER else other) or 'interp_rand'} has no place in CORE_LAYERS"
    if CORE_LAYER[other] > CORE_LAYER[unit]:
        return (f"{unit or 'interp_rand'} (layer {CORE_LAYER[unit] + 1}) imports the higher {other} "
                f"(layer {CORE_LAYER[other] + 1})")
    if CORE_LAYER[other] == CORE_LAYER[unit]:
        return f"{unit or 'interp_rand'} imports {other or 'interp_rand'}, of its own layer {CORE_LAYER[unit] + 1}"
    return None


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


CORE_SOURCES = [p for p in SOURCES if _within(_module(p), "interp_rand")]


def test_every_core_unit_has_one_place():
    units = {_unit(_module(p)) for p in CORE_SOURCES}
    listed = [unit for units in CORE_LAYERS for unit in units]
    assert len(listed) == len(set(listed)), "a unit is listed twice in CORE_LAYERS"
    unplaced = sorted(units - set(listed))
    assert not unplaced, f"units of interp_rand without a place in CORE_LAYERS: {unplaced}"
    assert not set(listed) - units, f"CORE_LAYERS lists units that do not exist: {sorted(set(listed) - units)}"


@pytest.mark.parametrize("path", CORE_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_follow_its_order(path):
    module = _module(path)
    bad = sorted(f"{i}: {why}" for i in _imported_modules(path) if (why := _core_violation(module, i)))
    assert not bad, f"{module} breaks the core's order: {bad}"


def test_the_facade_names_only_lower_layers():
    """``from interp_rand import train`` imports its module on first use (by name, which the
    source check cannot see): each of those modules is below the facade's layer."""
    import interp_rand

    modules = set(interp_rand._LAZY.values())
    assert modules and all(module in MODULES for module in modules)
    bad = sorted(m for m in modules if CORE_LAYER[_unit(m)] >= CORE_LAYER[""])
    assert not bad, f"the facade interp_rand re-exports modules of its own or a higher layer: {bad}"


def test_no_module_imports_itself_round_a_circle():
    from interp_rand.cli.main import COMMANDS

    graph = nx.DiGraph()
    for path in SOURCES:
        module = _module(path)
        graph.add_edges_from((module, i) for i in _imported_modules(path) if i != module)
    # the command line imports its commands by name, which the source check cannot see
    graph.add_edges_from(("interp_rand.cli.main", f"interp_rand.cli.{name}") for name in COMMANDS)
    circles = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
    assert not circles, f"modules that import each other (directly or round a circle): {circles}"


@pytest.mark.parametrize("module, imported, allowed", [
    ("interp_rand.training.checkpoint", "interp_rand.zoo.location", False),
    ("interp_rand.training.checkpoint", "interp_rand.run_names", True),
    ("interp_rand.losses", "interp_rand.tasks.base", False),
    ("interp_rand.tasks.coloring", "interp_rand.losses", True),
    ("interp_rand.tasks.randomized", "interp_rand.training.config", False),
    ("interp_rand.gridworld.experiment", "interp_rand.reproduce", False),
    ("interp_rand.gridworld.experiment", "interp_rand.zoo.location", False),
    ("interp_rand.importers.run", "interp_rand.gridworld", False),  # one layer: independent
    ("interp_rand.demo", "interp_rand.cli.main", False),
    ("interp_rand.cli.demo", "interp_rand.demo", True),
    ("interp_rand.tasks.base", "interp_rand", False),  # the facade re-exports the trainer
    ("interp_rand.reports.circuit", "interp_rand", True),
    ("interp_rand.zoo.build", "interp_rand.zoo.entries", True),  # inside a unit: the circle test's
    ("interp_rand.newthing", "interp_rand.model", False),  # an unplaced unit is refused
])
def test_the_core_order_refuses_what_it_should(module, imported, allowed):
    assert (_core_violation(module, imported) is None) == allowed


def test_the_tests_mirror_the_packages():
    """Every test folder (but the examples') is the test folder of a package folder."""
    folders = {p.parent.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("test_*.py")}
    folders -= {Path("."), Path("examples")}
    assert folders, "no test folders found"
    missing = sorted(str(f) for f in folders if not (ROOT / f / "__init__.py").exists())
    assert not missing, f"test folders without a package folder of the same path: {missing}"
