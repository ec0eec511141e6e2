"""Smoke-run every script in examples/ with its smallest settings and check what it writes."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, argv: list[str]) -> dict:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    try:
        return module.main(argv)
    finally:
        torch.set_num_threads(threads)  # the scripts pin one thread; leave the session as it was


def test_every_example_is_tested():
    tested = {"train_and_probe_addition", "find_sorting_circuit", "deterministic_vs_randomized_recall",
              "coloring_symmetry_breaking", "gridworld_exploration_maps"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_train_and_probe_addition(tmp_path):
    summary = run_example("train_and_probe_addition", ["--out", str(tmp_path), "--n-digits", "1",
                                                       "--steps", "40", "--n-probe", "256"])
    written = json.loads((tmp_path / "probes.json").read_text())
    assert written["accuracy"] == summary["accuracy"] and 0 <= written["accuracy"] <= 1
    assert {"digit", "carry_out"} <= set(written["probes"])
    for probe in written["probes"].values():
        assert 0 <= probe["best_accuracy"] <= 1 and -1 <= probe["best_selectivity"] <= 1
        assert probe["most_selective_hook"].startswith(("hook_", "blocks."))


def test_find_sorting_circuit(tmp_path):
    summary = run_example("find_sorting_circuit", ["--out", str(tmp_path), "--length", "3", "--vocab", "4",
                                                   "--steps", "40", "--n", "16", "--top-k", "10"])
    assert summary["n_edges"] == 10 < summary["total_edges"]
    assert (tmp_path / "circuit.html").stat().st_size > 1_000_000
    circuit = json.loads((tmp_path / "circuit.json").read_text())
    assert len(circuit["edges"]) == 10
    assert summary["curve"][-1][0] == summary["total_edges"]
    assert summary["curve"][-1][1] == pytest.approx(1.0, abs=1e-4)  # every edge kept: the full model


def test_deterministic_vs_randomized_recall(tmp_path):
    summary = run_example("deterministic_vs_randomized_recall", ["--out", str(tmp_path), "--n-pairs", "3",
                                                                 "--steps", "20", "--m-seeds", "4", "--n-seeds", "8"])
    assert set(summary) == {"erm", "qnorm"}
    for s in summary.values():
        assert 0 <= s["worst_5pct"] <= s["average"] <= 1
        assert 0 <= s["seed_usage_reference"] <= 1 and s["seed_usage_per_node"]
    assert json.loads((tmp_path / "recall_comparison.json").read_text()).keys() == summary.keys()


def test_coloring_symmetry_breaking(tmp_path):
    summary = run_example("coloring_symmetry_breaking", ["--out", str(tmp_path), "--n-vertices", "5",
                                                         "--steps", "20", "--m-seeds", "4"])
    for s in summary.values():
        assert 0 <= s["proper_colouring_average"] <= 1
        assert 0 <= s["mi_colour_rank_bits"] <= s["colour_entropy_bits"] + 1e-9
        assert list(s["change_rate_by_distance"]) == [0, 1, 2]
    assert (tmp_path / "symmetry_breaking.json").exists()


def test_gridworld_exploration_maps(tmp_path):
    summary = run_example("gridworld_exploration_maps", ["--out", str(tmp_path), "--generations", "2",
                                                         "--popsize", "4", "--n-seeds", "8"])
    for s in summary.values():
        grid = s["first_visit_map"]
        assert len(grid) == 3 and sum(v is None for row in grid for v in row) == 1  # the start cell
        assert 1 <= s["n_distinct_routes"] <= 8
        assert s["worst_cell"] <= s["average"]
    html = (tmp_path / "exploration_maps.html").read_text()
    assert "<script src=" not in html and html.count("heatmap") >= 2
