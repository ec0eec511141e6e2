"""Every report the CLI prints is one library call in :mod:`interp_rand.reports`: the Python
call returns what the command writes and prints, and the pieces the commands share (the run's
inputs, the behaviour gap, the seeded evaluation) have one owner each."""

from __future__ import annotations

import json
import re

import pytest
import torch

from interp_rand.cli.main import main
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask
from interp_rand.tasks.sort import SortTask
from interp_rand.training.checkpoint import RunSpec, save_checkpoint
from interp_rand.training.config import TrainConfig


def save(path, task, model, **train):
    spec = RunSpec(task.name, task.config_dict(), model.cfg, TrainConfig(**train))
    save_checkpoint(path, 1, spec, model.state_dict(), {}, {}, keep=1)
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Tiny untrained runs: sort, a seeded and a fixed-seed recall pair, and a colouring run."""
    root = tmp_path_factory.mktemp("report-runs")
    sort = SortTask(length=4, vocab=8)
    recall = RecallTask(n_pairs=4, value_bits=2, seed_bits=3)
    coloring = ColoringTask(n_vertices=6)
    return {
        "sort": save(root / "sort", sort, HookedTransformer(sort.model_config(d_model=16, n_heads=2, n_layers=1),
                                                            seed=0)),
        "recall": save(root / "recall", recall, HookedTransformer(recall.model_config(d_model=16, init_range=1.0),
                                                                  seed=1)),
        "recall-r0": save(root / "recall-r0", recall,
                          HookedTransformer(recall.model_config(d_model=16, init_range=1.0), seed=2),
                          seed_source="fixed"),
        "coloring": save(root / "coloring", coloring, HookedTransformer(coloring.model_config(), seed=0)),
    }


def cli(argv, capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


# ------------------------------------------------------------------ shared pieces


def test_load_run_inputs_is_load_sample_fix_seeds_corrupt(runs):
    from interp_rand.reports.inputs import load_run_inputs
    from interp_rand.training.checkpoint import load_checkpoint

    got = load_run_inputs(runs["recall-r0"], 16, seed=5, pairs="task")
    task = load_checkpoint(runs["recall-r0"]).spec.make_task()
    generator = torch.Generator().manual_seed(5)
    batch = task.sample(16, generator)
    assert torch.equal(got.batch.inputs, batch.inputs)
    # a fixed-seed run is given its r0, as in training; a fresh-seed run keeps the drawn seeds
    assert not torch.equal(batch.seeds, got.batch.seeds)
    assert (got.batch.seeds == task.fixed_seed()).all()
    assert torch.equal(load_run_inputs(runs["recall"], 16, seed=5, pairs=None).batch.seeds, batch.seeds)
    pairs = task.corrupt(got.batch, generator)
    assert torch.equal(got.pairs.corrupted.inputs, pairs.corrupted.inputs)
    assert load_run_inputs(runs["recall"], 4, seed=5, pairs=None).pairs is None
    with pytest.raises(ValueError, match="pairs='bogus'"):
        load_run_inputs(runs["recall"], 4, seed=5, pairs="bogus")


def test_behaviour_gap_is_the_full_minus_empty_metric_of_resample_faithfulness(runs):
    from circuits import Ablation, discover, faithfulness
    from circuits.analyses.faithfulness import behaviour_gap
    from interp_rand.reports.inputs import load_run_inputs

    inputs = load_run_inputs(runs["sort"], 32, seed=0)
    clean, corrupted = inputs.pairs.clean, inputs.pairs.corrupted
    gap = behaviour_gap(inputs.model, clean, corrupted, "logprob")
    assert gap != 0
    circuit = discover(inputs.model, clean, corrupted, method="eap").circuit(top_k=3)
    result = faithfulness(inputs.model, circuit, clean, corrupted, ablation=Ablation("resample"))
    assert result.full_metric - result.empty_metric == pytest.approx(gap, abs=1e-5)
    # no corruption, no gap
    assert behaviour_gap(inputs.model, clean, clean, "logprob") == 0.0


def test_evaluate_seeded_has_one_owner():
    import interp_rand.reproduce as reproduce
    from interp_rand.seeded_evaluation import evaluate_seeded
    from interp_rand.seeded_evaluation.paper_metrics import evaluate_seeded as owner

    assert reproduce.evaluate_seeded is owner is evaluate_seeded
    assert owner.__module__ == "interp_rand.seeded_evaluation.paper_metrics"


# ------------------------------------------------------------------ one call per command


def test_randomness_report_is_what_the_command_writes_and_prints(runs, tmp_path, capsys):
    from circuits.draw.randomness_figure import write_randomness_html
    from interp_rand.reports.randomness import RandomnessReport, randomness_report

    out = tmp_path / "cli"
    stdout = cli(["randomness", runs["recall"], "--compare", runs["recall-r0"], "--out", str(out), "--n", "32",
                  "--stored-inputs", "3", "--seed", "4"], capsys)
    report = randomness_report(runs["recall"], runs["recall-r0"], n=32, stored_inputs=3, seed=4)
    assert isinstance(report, RandomnessReport) and [r["name"] for r in report.runs] == ["recall", "recall-r0"]
    assert json.loads(report.to_json()) == json.loads((out / "randomness.json").read_text())
    assert stdout.startswith(report.text() + "\n") and "per seed: deterministic capacity" in report.text()
    assert report.runs[0]["mechanism"]["mixing"]["capacity_source"] == "recall-r0"  # judged against --compare
    # the drawing reads the report or its JSON alike
    a, b = write_randomness_html(report, tmp_path / "a.html"), tmp_path / "b.html"
    write_randomness_html(json.loads(report.to_json()), b)
    assert a.read_text() == b.read_text() == (out / "randomness.html").read_text()
    # the claims: the first run against its random-init control and the compared run, and recall's mixing
    first, second = report.runs
    judged, claims = report.claims, report.to_dict()["claims"]
    # use for the task: what the seed decides, against the random-init control and the compared run
    assert [c.value for c in judged[:2]] == [first["decides"]["decides"]] * 2
    assert judged[0].control == first["random_init"]["decides"]["decides"]
    assert judged[1].control == second["decides"]["decides"]
    mix = first["mechanism"]["mixing"]
    assert claims[2]["verdict"] == ("holds" if mix["mixes"] else "inconclusive" if mix["size_ratio"] is None
                                    else "fails")
    assert all(c["line"] in stdout for c in claims)
    # recall's algorithm, where its key codes were read: every claim letter the pseudocode cites is a claim
    import re as _re
    algorithm = report.to_dict()["algorithm"]
    assert (algorithm is None) == ("failure_rate" not in first.get("codes", {}))
    if algorithm is not None:
        assert algorithm in report.text() and "hook_k @ j" in (out / "randomness.html").read_text()
        cited = set(_re.findall(r"# \((\w)\)", algorithm)) | set(_re.findall(r", \((\w)\)", algorithm))
        assert cited and all(any(c["claim"].startswith(f"({x})") for c in claims) for x in cited)
    # what a reader sees first: the headline (verdict over the claims), then the usage chart with
    # every run and the random-init control, each bar labelled with its value
    import browser
    from circuits.draw.randomness_figure import usage_figure
    from interp_rand.figures.headline import overall_verdict as step_verdict

    look = browser.first_look(out / "randomness.html", browser.screenshot_path(tmp_path, "randomness.png"))
    browser.assert_first_look(look)
    assert look["headline"]["verdict"] == step_verdict(claims)
    assert f"{first['random_init']['decides']['decides']:.3f}" in look["headline"]["text"]
    bars = usage_figure(report.runs).data
    assert [t.name for t in report.figure().data] == [t.name for t in bars]  # the report's figure, in a notebook
    assert [t.name.split(" (")[0] for t in bars] == ["recall", "recall-r0", "random init"]
    assert all(t.texttemplate for t in bars) and list(bars[-1].y)[-1] == first["random_init"]["reference"]


def test_randomness_report_runs_the_tasks_own_analyses(runs):
    from interp_rand.reports.randomness import analyse_model
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(runs["coloring"])
    got = analyse_model(ckpt.model(), ckpt.spec.make_task(), n=16, seed=1)
    assert {"usage", "entry", "random_init", "symmetry", "mechanism"} <= set(got) and "stored_set" not in got
    assert "rule" in got["mechanism"]


def test_randomness_report_refuses_before_work(runs):
    from interp_rand.reports.randomness import randomness_report

    with pytest.raises(ValueError, match="no seed channel"):
        randomness_report(runs["sort"])
    with pytest.raises(ValueError, match="is a 'coloring' run, not 'recall'"):
        randomness_report(runs["recall"], runs["coloring"])


def test_circuit_report_is_what_the_command_writes_and_prints(runs, tmp_path, capsys):
    from interp_rand.reports.circuit import circuit_report

    out = tmp_path / "cli"
    stdout = cli(["circuit", runs["sort"], "--n", "16", "--top-k", "6", "--resamples", "1", "--no-card",
                  "--out", str(out)], capsys)
    report = circuit_report(runs["sort"], n=16, top_k=6, n_resamples=1, card=False)
    written = json.loads((out / "faithfulness.json").read_text())
    drop = lambda d: {k: v for k, v in json.loads(json.dumps(d)).items() if k != "discovery_seconds"}  # noqa: E731
    assert drop(report.summary) == drop(written) and len(report.circuit) == 6 - report.circuit.settings["n_dropped"]
    assert drop(json.loads(stdout.split("\nwrote ")[0])) == drop(report.key_numbers())
    report.write(tmp_path / "py")
    assert (tmp_path / "py" / "circuit.json").read_text() == (out / "circuit.json").read_text()
    assert report.figure().layout.title.text  # the drawing circuit.html shows, as a figure for a notebook
    with pytest.raises(ValueError, match="give --top-k or --threshold, not both"):
        circuit_report(runs["sort"], top_k=3, threshold=0.1)


def test_compare_report_is_what_the_command_writes_and_prints(runs, tmp_path, capsys):
    from interp_rand.reports.compare import compare_report

    out = tmp_path / "cli"
    stdout = cli(["compare", runs["recall"], runs["recall-r0"], "--n", "8", "--method", "eap", "--top-k", "5",
                  "--controls", "1", "--no-card", "--out", str(out)], capsys)
    report = compare_report(runs["recall"], runs["recall-r0"], n=8, method="eap", top_k=5, n_controls=1, card=False)
    assert json.loads(report.to_json()) == json.loads((out / "comparison.json").read_text())
    assert stdout.startswith(report.text() + "\n")
    assert report.summary["behaviour_gap"] == report.gaps and len(report.lines) == len(report.claims) + 1
    # what a reader sees first: the headline with the verdict over the claims, the figure in the window
    import browser
    from interp_rand.figures.headline import overall_verdict as step_verdict

    look = browser.first_look(out / "comparison.html", browser.screenshot_path(tmp_path, "compare-recall.png"))
    browser.assert_first_look(look)
    assert look["headline"]["verdict"] == step_verdict(report.summary["claims"])
    (fig,) = look["figures"].values()
    assert fig["width"] <= 1280 and fig["xticks"].count("logits") == 2
    assert report.circuits[0].arch.attn_only  # an attention-only model: no empty MLP columns
    assert not [t for t in fig["xticks"] if t.startswith("mlp")], fig["xticks"]
    with pytest.raises(ValueError, match="different tasks"):
        compare_report(runs["recall"], runs["coloring"], n=8, method="eap", top_k=5)


def test_evaluation_report_is_what_the_command_writes_and_prints(runs, tmp_path, capsys):
    from interp_rand.reports.evaluation import evaluation_report

    out = tmp_path / "cli"
    stdout = cli(["eval", runs["recall-r0"], "--n", "20", "--seeds", "3", "--out", str(out)], capsys)
    report = evaluation_report(runs["recall-r0"], n=20, seeds=3)
    assert report.result == json.loads((out / "eval.json").read_text())
    assert report.seeded == json.loads((out / "seeded_eval.json").read_text())
    assert report.seeded["n_inputs"] == 20 and json.dumps(report.seeded_key_numbers(), indent=2) in stdout
    with pytest.raises(ValueError, match="has no seed channel"):
        evaluation_report(runs["sort"], n=4, seeds=3)


def test_case_study_report_is_what_the_command_writes_and_prints(runs, tmp_path, capsys, monkeypatch):
    from mechanism_sizes import small_mechanisms

    from interp_rand.reports import case_study as case_study_module
    from interp_rand.reports.case_study import EDGE_STUDIES, STUDIES, case_study_report, studies

    small_mechanisms(monkeypatch)
    made = []  # the report the command makes, and what it asked for (running the study once, not twice)

    def recorded(*args, **kwargs):
        made.append((args, kwargs, case_study_report(*args, **kwargs)))
        return made[-1][2]

    monkeypatch.setattr(case_study_module, "case_study_report", recorded)
    out = tmp_path / "cli"
    # an untrained model has no sorting heads to study: the zoo's trained sort model
    assert main(["case-study", "sort", "zoo:sort", "--n", "100", "--controls", "2", "--out", str(out)]) == 0
    stdout, err = capsys.readouterr()
    [(args, kwargs, report)] = made
    # the progress lines name each stage; the mechanism's names its verdict (which one, at these
    # small sizes, is the mechanism tests' business: 40 pairs put an IIA of 0.95 one pair either
    # side of the 0.9 bar)
    assert re.search(r"case-study sort: mechanism: (HOLDS|FAILS|INCONCLUSIVE) \(\d+ s\)", err), err
    for stage in ("case-study sort: checking the sort mechanism", "case-study sort: scoring heads",
                  "case-study sort: ablating 2 random head sets 2/2", "case-study sort: writing case_study.json"):
        assert stage in err, err
    assert args == ("sort", "zoo:sort") and kwargs == dict(seed=0, n_controls=2, n=100, card=True, card_resamples=2,
                                                           progress=True)

    def untimed(data):  # the mechanism card says how long it took
        return {k: untimed(v) for k, v in data.items() if k != "seconds"} if isinstance(data, dict) else data

    assert untimed(json.loads(report.to_json())) == untimed(json.loads((out / "case_study.json").read_text()))
    assert json.loads((out / "mechanism.json").read_text())["verdict"] == report.mechanism.card.verdict
    timed = [line for line in report.text().splitlines() if line.endswith(" s")]
    assert [line for line in stdout.splitlines() if line not in timed][: 5] == [
        line for line in report.text().splitlines() if line not in timed][: 5]
    assert stdout.splitlines()[0] == report.mechanism.card.headline() and report.data["verdicts"]
    card = json.loads((out / "card.json").read_text())   # the study circuit's claim card
    assert card["verdict"] == report.card.verdict and card["n_edges"] == len(report.result.circuit)
    assert card["found_with"]["selection"] == "connected" and "claim card" in stdout
    # the page opens with one verdict over the mechanism's checks, the edge-level claims and the card
    head = report.page_headline()
    every = [*report.mechanism.card.claims, *report.claims, *report.card.claims]
    assert head.verdict == ("fails" if any(c.verdict.outcome == "fails" for c in every) else
                            "holds" if all(c.verdict.holds for c in every) else "inconclusive")
    assert f"circuit card {report.card.verdict.upper()}" in head.number
    assert (head.failing is None) == all(c.verdict.holds for c in every)
    page = (out / "case_study.html").read_text()
    assert page.index("class='headline'") < page.index("<h2>")
    assert {name: studies().get(name).task for name in studies()} == {"carry": "addition", "sort": "sort"}
    assert tuple(studies()) == EDGE_STUDIES and set(EDGE_STUDIES) < set(STUDIES)
    with pytest.raises(ValueError, match="needs a addition run"):
        case_study_report("carry", runs["sort"])
    with pytest.raises(ValueError, match="unknown case study"):
        case_study_report("bogus", runs["sort"])


def test_a_claim_card_that_cannot_be_made_leaves_the_report_written(runs, tmp_path, monkeypatch, capsys):
    """A card needs a non-zero full - empty gap; when it cannot be made the command still writes
    the circuit and its faithfulness and says why there is no card."""
    import circuits.analyses.claim_card as claim_card_module

    def no_gap(*args, **kwargs):
        raise ValueError("the full model and the empty circuit give the same metric")

    monkeypatch.setattr(claim_card_module, "claim_card", no_gap)
    out = tmp_path / "cli"
    stdout = cli(["circuit", runs["sort"], "--n", "16", "--top-k", "6", "--resamples", "0", "--out", str(out)],
                 capsys)
    assert (out / "circuit.json").exists() and (out / "faithfulness.json").exists()
    assert not (out / "card.json").exists() and "claim card" not in stdout
