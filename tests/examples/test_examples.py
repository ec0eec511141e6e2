"""Run every script in examples/ on the zoo's trained models (its default runs) and check that
the trained models show what each analysis is meant to find.

The bounds leave a margin below what was measured (given in each comment, on the committed zoo
models with the scripts' default sizes, which the tests use: every script analyses its models
in a second or two, so the whole file takes 10-20 s on one thread)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from interp_rand.gridworld.config import GRIDWORLD_CPU

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


def written(path: Path, summary: dict) -> dict:
    """The JSON a script wrote, checked to be the summary it returned."""
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(summary))
    return data


def offline_html(path: Path) -> str:
    html = path.read_text()
    assert "<script src=" not in html  # plotly.js inlined: the figure opens without a network
    return html


def test_every_example_is_tested():
    tested = {"train_and_probe_addition", "find_sorting_circuit", "deterministic_vs_randomized_recall",
              "coloring_symmetry_breaking", "gridworld_exploration_maps", "ground_truth_suite", "custom_mechanism",
              "interchange_carry",  # interchange_carry: tested in tests/probes/test_interchange.py
              "progress_measures", "bring_your_own_model", "length_study"}  # progress_measures: tests/examples/test_progress_measures_example.py
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_train_and_probe_addition(tmp_path):
    summary = written(tmp_path / "probes.json", run_example("train_and_probe_addition", ["--out", str(tmp_path)]))
    assert summary["run"] == "zoo:addition" and summary["n_digits"] == 3
    assert summary["accuracy"] >= 0.99  # measured 1.000 (its card: exact match 1.0 on every input)
    digits, carries = summary["probes"]["digit"], summary["probes"]["carry_in"]
    assert list(digits) == ["place 3", "place 2", "place 1", "place 0"]
    for row in digits.values():
        # at the position that writes the digit, the last residual stream holds it (measured
        # 0.99-1.00) and a random-init model's does not (gaps measured 0.24, 0.55, 0.55, 0.80)
        assert row["accuracy_by_hook"][-1] >= 0.95
        assert row["accuracy_by_hook"][-1] - row["random_accuracy_by_hook"][-1] >= 0.15
        # steering along the probe rewrites the answer (measured 100%), a random direction of the
        # same size does not (measured 0-4%)
        assert row["causal_changed"] >= 0.9 and row["causal_placebo"] <= 0.2
    for place in ("place 3", "place 2", "place 1"):  # no carry comes into place 0
        # measured 1.00 against random init 0.76-0.81 (the majority class is 0.61-0.72)
        trained, random = carries[place]["accuracy_by_hook"][-1], carries[place]["random_accuracy_by_hook"][-1]
        assert trained >= 0.95 and trained - random >= 0.1
    assert offline_html(tmp_path / "probes.html").count("scatter") >= 2


def test_train_and_probe_addition_trains_first(tmp_path):
    summary = run_example("train_and_probe_addition", ["--out", str(tmp_path), "--train", "--n-digits", "1",
                                                       "--steps", "40", "--n-probe", "256"])
    assert summary["run"] == str(tmp_path / "run") and summary["n_digits"] == 1
    assert list((tmp_path / "run" / "checkpoints").glob("step_*"))
    assert 0 <= summary["accuracy"] <= 1 and {"digit", "carry_in", "carry_out"} == set(summary["probes"])


def test_find_sorting_circuit(tmp_path):
    summary = run_example("find_sorting_circuit", ["--out", str(tmp_path)])
    assert summary["accuracy"] >= 0.99  # measured 1.000
    assert summary["n_edges"] == 60 < summary["total_edges"] == 1100
    # 60 of 1,100 edges recover most of the full-vs-corrupted gap: measured 0.929 here, 0.89-0.96
    # on other draws of 16 or 64 pairs; 60 random edges recover nothing (measured 0.000 x 5: they
    # rarely form a path from the input to the logits)
    assert summary["recovered"] >= 0.8
    assert max(summary["random_recovered"]) <= 0.1
    assert summary["curve"][-1][0] == summary["total_edges"]
    assert summary["curve"][-1][1] == pytest.approx(1.0, abs=1e-4)  # every edge kept: the full model
    assert len(json.loads((tmp_path / "circuit.json").read_text())["edges"]) == 60
    page = (tmp_path / "circuit.html").read_text()  # a drawing that loads the folder's one plotly.js
    assert "Plotly.newPlot" in page and "src='plotly.min.js'" in page and (tmp_path / "plotly.min.js").is_file()


def test_deterministic_vs_randomized_recall(tmp_path):
    summary = written(tmp_path / "recall_comparison.json",
                      run_example("deterministic_vs_randomized_recall", ["--out", str(tmp_path)]))
    erm, qnorm = summary["zoo:recall-AE_R"], summary["zoo:recall-Aq_R"]
    # A^E_R is the q-norm at q = 1 (the mean over m shared seeds), A^q_R at q = 100
    assert (erm["q"], qnorm["q"], erm["m_seeds"], qnorm["m_seeds"]) == (1.0, 100.0, 30, 30)
    for s in (erm, qnorm):
        assert 0 <= s["worst_5pct"] <= s["average"] <= 1 and s["seed_usage_per_node"]
    # the randomized model uses its seed: whole-model seed-resample TV measured 0.35 vs 0.018
    assert qnorm["seed_usage_reference"] > 10 * erm["seed_usage_reference"]
    # ... to choose which keys it stores: storage of almost every (input, key) cell depends on
    # the seed (measured 0.97), for ERM only that of its one marginal key (0.04)
    assert qnorm["stored_seed_dependent"] > 0.5 > 0.2 > erm["stored_seed_dependent"]
    assert qnorm["worst_5pct"] > erm["worst_5pct"] + 0.3  # measured 0.547 vs 0.047
    assert offline_html(tmp_path / "recall_comparison.html").count("<div") >= 2


def test_coloring_symmetry_breaking(tmp_path):
    summary = written(tmp_path / "symmetry_breaking.json",
                      run_example("coloring_symmetry_breaking", ["--out", str(tmp_path)]))
    erm, qnorm = summary["zoo:coloring-AE_R"], summary["zoo:coloring-Aq_R"]
    for s in (erm, qnorm):
        assert 0 <= s["mi_colour_rank_bits"] <= s["colour_entropy_bits"] + 1e-9
        assert list(s["change_rate_by_distance"]) == ["0", "1", "2", "3", "4", "5"]  # 10-cycles
        # two masked blocks: a vertex sees two hops; noise further away cannot matter
        far = [r for d, r in s["change_rate_by_distance"].items() if int(d) > s["receptive_field"]]
        assert s["receptive_field"] == 2 and far == [0.0] * 3
    # ERM ignores the noise (measured: MI 0.001 bits, seed usage 0.001, no colour ever changes)
    assert erm["mi_colour_rank_bits"] < 0.01 and erm["seed_usage_reference"] < 0.02
    assert max(erm["change_rate_by_distance"].values()) < 0.01
    # the q-norm model breaks symmetry with it: colour tells the noise rank (measured 0.025 bits
    # against 0.000 for shuffled ranks; the 1-hop rank is only part of its 2-hop rule), and its
    # own, its neighbours' and its 2-hop neighbours' noise change its colour (0.107 / 0.086 / 0.041)
    assert qnorm["mi_colour_rank_bits"] > qnorm["mi_shuffled_bits"] + 0.01
    assert qnorm["seed_usage_reference"] > 0.1  # measured 0.206
    assert min(qnorm["change_rate_by_distance"][d] for d in ("0", "1", "2")) > 0.02
    assert offline_html(tmp_path / "symmetry_breaking.html").count("<div") >= 2


def test_gridworld_exploration_maps(tmp_path):
    summary = written(tmp_path / "exploration_maps.json",
                      run_example("gridworld_exploration_maps", ["--out", str(tmp_path)]))
    erm, worst = summary["zoo:gridworld-AE_R"], summary["zoo:gridworld-Aq_R"]
    for s in (erm, worst):
        grid = s["first_visit_map"]
        # the map has the zoo's grid (GRIDWORLD_CPU, 5x5: a zoo built before the 5x5 grid fails
        # here until 'zoo build' is rerun)
        assert s["size"] == GRIDWORLD_CPU.grid.size
        assert len(grid) == s["size"] and all(len(row) == s["size"] for row in grid)
        assert grid[0][0] is None  # the start cell, and only it
        assert sum(v is None for row in grid for v in row) == 1
        assert all(1 <= v <= s["episode_steps"] + 1 for row in grid for v in row if v is not None)
        assert s["worst_cell"] <= s["average"]
    # At the 5x5 CPU scale (training seed 0) the worst-cell agent spreads its first visits more
    # evenly than ERM (spread of the first-visit times 4.96 vs 6.38, latest cell 24.6 vs 25.9)
    # at a worse average (-34.6 vs -26.6), and its worst cell is no worse than ERM's (-40.6 vs
    # -41.1: a tie at this scale; docs/gridworld.md has both training seeds)
    import statistics

    def spread(s):
        return statistics.pstdev([v for row in s["first_visit_map"] for v in row if v is not None])

    assert spread(worst) < spread(erm) - 0.5
    assert worst["average"] < erm["average"]
    assert worst["worst_cell"] > erm["worst_cell"] - 2
    assert offline_html(tmp_path / "exploration_maps.html").count("heatmap") >= 2


def test_ground_truth_suite(tmp_path):
    # two methods on two planted models keep it to a few seconds (the default runs all of them)
    summary = written(tmp_path / "ground_truth.json", run_example(
        "ground_truth_suite", ["--out", str(tmp_path), "--methods", "exact", "eap", "--models", "sort", "seed-reader"]))
    rows = {(r["model"], r["method"]): r for r in summary["rows"]}
    assert set(rows) == {(m, x) for m in ("sort", "seed-reader") for x in ("exact", "eap")}
    # exact patching ranks every known edge first (measured AUROC 1.000, CPR at the known ranking's)
    assert all(rows[m, "exact"]["auroc"] == 1.0 for m in ("sort", "seed-reader"))
    assert rows["sort", "exact"]["cpr"] == pytest.approx(rows["sort", "exact"]["known_cpr"])
    html = (tmp_path / "ground_truth.html").read_text()
    assert html.count("<tr>") == 4 + 1 + 2 + 1 and "<script" not in html


def test_custom_mechanism(tmp_path):
    summary = written(tmp_path / "mechanism.json", run_example("custom_mechanism", ["--out", str(tmp_path)]))
    # measured: one head alone FAILS (scrubbing 0.869, IIA 0.56-0.86); both heads HOLD every check
    one, both = summary["one head"], summary["both heads"]
    assert one["verdict"] == "fails" and min(c["iia"] for c in one["interchange"]) < 0.9
    assert both["verdict"] == "holds" and both["scrubbing"]["share"]["logprob"] > 0.95
    assert all(c["iia"] > 0.95 and max(c["controls"].values()) < 0.3 for c in both["interchange"])


@pytest.mark.parametrize("name, option, other", [
    ("train_and_probe_addition", "--run", "zoo:sort"),
    ("find_sorting_circuit", "--run", "zoo:addition"),
    ("deterministic_vs_randomized_recall", "--runs", "zoo:coloring-Aq_R"),
    ("coloring_symmetry_breaking", "--runs", "zoo:recall-Aq_R"),
    ("gridworld_exploration_maps", "--runs", "zoo:sort"),
])
def test_examples_refuse_a_model_of_another_task(tmp_path, capsys, name, option, other):
    with pytest.raises(SystemExit):
        run_example(name, ["--out", str(tmp_path), option, other])
    error = capsys.readouterr().err
    assert other in error and "task" in error and "Traceback" not in error
    assert not list(tmp_path.iterdir())  # refused before writing anything


def test_bring_your_own_model(tmp_path):
    """A TransformerBridge trained in plain PyTorch on a task the toolkit does not ship, through a
    TaskSpec: its circuit with the claim card, the attention report and a probe with controls."""
    summary = written(tmp_path / "summary.json", run_example("bring_your_own_model", ["--out", str(tmp_path)]))
    assert summary["accuracy"] >= 0.99  # measured 1.000 after 100 steps
    assert summary["circuit"]["recovered"] >= 0.7  # measured 0.86 with 70 of 660 edges
    assert summary["card"][0].startswith("claim card (model (running-max)") and "HOLDS" in summary["card"][0]
    probe = summary["probe"][0]
    # the maximum is read at the last position (the only one that has seen every token), better than
    # the random-label control (measured 0.36) and than the same probe on a random-init model (0.85)
    assert probe["position"] == 5 and probe["accuracy"] >= 0.95
    assert probe["accuracy"] > probe["control"] + 0.3 and probe["accuracy"] > probe["random_accuracy"]
    for name in ("circuit/circuit.html", "circuit/card.html", "report.html"):
        offline_html(tmp_path / name)


def test_length_study_trains_runs_each_scheme_and_sweeps_recall(tmp_path):
    """A few steps only (the study's own figures are in docs/generalization.md): every sort model
    is trained on lengths 2-8 and run to 24; a model that has not learned its own lengths is said
    to, not given a breaking step; recall's fraction and count agree (count = fraction x N) and
    ERM keeps more keys than A^q_R at N = 12 (zoo figures: 0.944 vs 0.809)."""
    summary = run_example("length_study", ["--out", str(tmp_path), "--only", "sort,recall-zoo", "--steps", "20",
                                           "--n", "32", "--no-mechanism", "--recall-inputs", "64",
                                           "--recall-seeds", "8"])
    assert set(summary["models"]) == {"sort-learned", "sort-alibi"}
    for name, model in summary["models"].items():
        assert model["trained"] == [2, 8] and sorted(map(int, model["exact_match"])) == list(range(2, 25))
        assert (tmp_path / f"gen-{name}" / "generalization.html").exists()
        if model["exact_match"]["8"] < 0.9:
            assert model["extrapolation_factor"] == 0 and "has not learned its own lengths" in model["breaking_step"]
    n12 = summary["recall"]["12"]
    for r in n12.values():
        assert r["count"] == pytest.approx(12 * r["fraction"], abs=0.01)
    assert n12["zoo:recall-AE_R"]["fraction"] > n12["zoo:recall-Aq_R"]["fraction"]
    assert json.loads((tmp_path / "length_study.json").read_text()) == json.loads(json.dumps(summary))
