"""Replaying analyses over the checkpoints of a tiny sort run trained with a log schedule: one
row per checkpoint, crossing steps recomputed from the written JSON, the figures, and the
errors (an analysis failing on one checkpoint, a run with one checkpoint, unknown names)."""

from __future__ import annotations

import json

import pytest

from interp_rand.evaluation import evaluate
from interp_rand.reports.dynamics import DYNAMICS_ANALYSES, THRESHOLDS
from interp_rand.reports.dynamics.replay import ReplayError, load_replay, replay
from interp_rand.reports.inputs import load_run_inputs
from interp_rand.tasks import make_task
from interp_rand.tasks.base import KEY_VALUE_RECALL, require_capability
from interp_rand.training import TrainConfig, train
from interp_rand.training.checkpoint import list_checkpoints, load_checkpoint
from interp_rand.training.checkpoint_schedule import scheduled_steps

TASK = make_task("sort", length=4, vocab=8)
CONFIG = TrainConfig(steps=80, batch_size=64, lr=3e-3, warmup_steps=5, eval_every=20, eval_size=128,
                     checkpoint_schedule="log:5", keep_checkpoints=1)
N = 64


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dynamics") / "sort-log5"
    train(TASK, TASK.model_config(d_model=32, n_layers=1, n_heads=2), CONFIG, folder, progress=False)
    return folder


@pytest.fixture(scope="module")
def replayed(run, tmp_path_factory):
    result = replay(run, ["accuracy", "circuit", "probe"], n=N, seed=0)
    out = tmp_path_factory.mktemp("replay")
    return result, result.write(out), out


def test_one_row_per_checkpoint_oldest_first(run, replayed):
    result, _, _ = replayed
    assert result.steps == list(scheduled_steps("log:5", 80))
    assert result.checkpoints == [str(p) for p in list_checkpoints(run)]
    assert all(len(values) == len(result.steps) for values in result.table.values())
    assert result.analyses == ["accuracy", "circuit", "probe"] and result.notes == []
    assert set(result.seconds) == {"accuracy", "circuit", "probe", "open", "total"}


def test_accuracy_matches_an_independent_evaluation(run, replayed):
    result, _, _ = replayed
    for i, path in enumerate(list_checkpoints(run)):
        inputs = load_run_inputs(path, n=N, seed=0)
        direct = evaluate(load_checkpoint(path).model(), TASK, inputs.batch)
        assert result.table["accuracy/exact_match"][i] == pytest.approx(direct.exact_match)
        exact = direct.correct.all(-1)
        for value in inputs.batch.metadata["n_distinct"].unique().tolist():
            rows = inputs.batch.metadata["n_distinct"] == value
            assert result.table[f"accuracy/n_distinct={value}"][i] == pytest.approx(exact[rows].float().mean().item())


def test_the_tracked_edges_are_the_final_checkpoints_top_edges_at_every_step(replayed):
    result, _, _ = replayed
    edges = [k for k in result.table if k.startswith("edge/")]
    assert len(edges) == 20
    for key in edges:
        assert all(v is not None for v in result.table[key])
        rel = result.table["edge_rel/" + key[len("edge/"):]]
        assert rel[-1] == pytest.approx(1.0)
        assert rel[0] == pytest.approx(result.table[key][0] / result.table[key][-1])
    final = [abs(result.table[k][-1]) for k in edges]
    assert final == sorted(final, reverse=True)


def test_crossing_steps_equal_the_first_step_past_the_threshold_in_the_json(replayed):
    _, paths, _ = replayed
    data = json.loads(paths["table"].read_text())
    assert data["steps"] == sorted(data["steps"])
    checked = 0
    for key, values in data["table"].items():
        matching = [(p, t) for p, t in data["thresholds"].items() if key.startswith(p)]
        if not matching:
            assert key not in data["crossings"]
            continue
        _, t = max(matching, key=lambda m: len(m[0]))
        past = [value is not None and (value >= t["value"] if t["rising"] else value <= t["value"]) for value in values]
        if t["given"]:  # a ratio: only where its denominator is at least share x its last value
            denominator = data["table"][t["given"]["key"]]
            last = [d for d in denominator if d is not None][-1]
            past = [ok and d is not None and abs(d) >= t["given"]["share"] * abs(last) > 0
                    for ok, d in zip(past, denominator)]
        expected = next((step for step, ok in zip(data["steps"], past) if ok), None)
        assert data["crossings"][key]["step"] == expected, key
        # settled: past the threshold from that step to the last measured one
        stays = next((data["steps"][i] for i in range(len(past)) if all(past[i:]) and past[i]), None)
        measured = [i for i, v in enumerate(values) if v is not None]
        if len(measured) == len(values):
            assert data["crossings"][key]["settled"] == stays, key
        assert data["crossings"][key]["text"] == ("never" if expected is None else f"step {expected}")
        checked += 1
    assert checked >= 20
    assert {"accuracy/", "edge_rel/", "faithfulness/", "probe/"} <= set(data["thresholds"])
    assert data["curve"] and data["curve"][-1]["step"] == 80  # the run's metrics.jsonl alongside


def test_a_ratio_crosses_only_where_its_denominator_is_meaningfully_above_zero():
    """The own circuit's faithfulness is the circuit's effect over the model's own gap: at step 1
    both are near zero, the share 0.95, and a plain threshold reports a crossing there. The
    replay judges it only where the gap is >= MEANINGFUL_GAP of the final gap (0.1 x 3.0)."""
    from interp_rand.reports.dynamics.analyses import MEANINGFUL_GAP
    from interp_rand.reports.dynamics.replay import crossings_of
    from interp_rand.reports.dynamics.view import crossing_step

    rows = [{"step": s, "faithfulness/own": f, "gap/metric": g, "accuracy/exact_match": a}
            for s, f, g, a in [(1, 0.95, 0.001, 0.0), (2, 0.3, 0.5, 0.1), (3, 0.85, 2.0, 0.8), (4, 0.9, 3.0, 1.0)]]
    assert MEANINGFUL_GAP == 0.1
    assert crossing_step(rows, "faithfulness/own", 0.8) == 1  # the spurious crossing, without the rule
    thresholds = {t.prefix: t for name in ("accuracy", "circuit") for t in THRESHOLDS.get(name)}
    crossed = crossings_of(rows, ["faithfulness/own", "accuracy/exact_match"], thresholds)
    assert crossed["faithfulness/own"]["step"] == 3 and crossed["faithfulness/own"]["settled"] == 3
    assert "where |gap/metric| >= 0.1 x its last value" in crossed["faithfulness/own"]["rule"]
    assert crossed["accuracy/exact_match"]["step"] == 4 and crossed["accuracy/exact_match"]["rule"] == ">= 0.99"
    # a denominator that never becomes meaningful: never crossed
    flat = [dict(r, **{"gap/metric": 0.0}) for r in rows]
    assert crossings_of(flat, ["faithfulness/own"], thresholds)["faithfulness/own"]["step"] is None


def test_replay_files_get_the_users_umask(replayed, tmp_path):
    """replay.json and replay.html are written with mode 0o666 less the umask (0o644 under 022),
    never mkstemp's 0o600."""
    import os
    import stat

    result, _, _ = replayed
    old = os.umask(0o022)
    try:
        paths = result.write(tmp_path / "out")
    finally:
        os.umask(old)
    for path in paths.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_replay_page_legends_and_scales():
    """One legend per panel (a colour at most once in each), a heatmap of [0, 1] quantities on the
    sequential scale and one of signed quantities on the diverging scale centred on 0, the
    title naming the run, not its path."""
    from interp_rand.figures.dynamics_figure import replay_figures
    from interp_rand.figures.style import DIVERGING, SEQUENTIAL

    steps = [1, 10, 100]
    table = {f"accuracy/g{i}": [0.1 * i, 0.5, 1.0] for i in range(10)}
    table |= {f"probe/v{i}": [0.0, 0.2, 0.6] for i in range(12)}
    table |= {f"role/r{i}@a0.{i}": [0.0, 0.5, 1.0] for i in range(14)}
    table |= {f"edge/e{i}": [-0.5, 0.1, 2.0] for i in range(14)}
    data = {"run": "/long/path/to/runs/sort-dyn", "steps": steps, "table": table, "crossings": {}, "thresholds": {}}
    figures = dict(replay_figures(data))
    lines = figures["lines"]
    assert lines.layout.title.text.startswith("sort-dyn:") and "/long/path" not in lines.layout.title.text
    by_legend: dict = {}
    for trace in lines.data:
        if trace.showlegend is not False:
            by_legend.setdefault(trace.legend or "legend", []).append(trace.line.color)
    assert len(by_legend) == 2  # accuracy/ and probe/ (no loss traces here): one legend each
    assert all(len(colours) == len(set(colours)) for colours in by_legend.values())
    assert {len(c) for c in by_legend.values()} == {10, 12}
    role = next(t for t in figures["heatmap-role"].data if t.type == "heatmap")
    edge = next(t for t in figures["heatmap-edge"].data if t.type == "heatmap")
    assert (role.zmin, role.zmax) == (0, 1) and role.zmid is None
    assert edge.zmid == 0 and role.colorscale != edge.colorscale
    from plotly.colors import get_colorscale

    assert [c[1] for c in role.colorscale] == [c[1] for c in get_colorscale(SEQUENTIAL)]
    assert [c[1] for c in edge.colorscale] == [c[1] for c in get_colorscale(DIVERGING)]


def test_the_figures_are_written(replayed):
    _, paths, out = replayed
    page = paths["figures"].read_text(encoding="utf-8")
    assert "id=\"lines\"" in page and "id=\"heatmap-edge\"" in page and "First crossings" in page
    assert page.count("<tr>") > 20  # the crossing table
    assert page.index("<table>") > page.index('id="heatmap-edge"')  # figures first, then the table


def test_replay_first_look_headline_first_and_the_title_names_run_and_model(replayed, tmp_path):
    import browser

    _, paths, _ = replayed
    result = browser.first_look(paths["figures"], browser.screenshot_path(tmp_path, "replay-first-look.png"))
    browser.assert_first_look(result, verdict=False)
    assert result["headline"]["text"].startswith("replay of sort-log5 over 5 checkpoints")
    assert "exact match >= 0.99" in result["headline"]["text"]
    page = paths["figures"].read_text(encoding="utf-8")
    title = page[page.index("<title>") + 7: page.index("</title>")]
    assert title == "replay of sort-log5 (sort model, 1 layer x 2 heads, d_model 32)", title


@pytest.mark.slow
def test_the_figures_are_readable_in_a_browser(replayed, tmp_path):
    from browser import assert_readable, render, screenshot_path

    _, paths, _ = replayed
    result = render(paths["figures"], screenshot_path(tmp_path, "replay.png"), size="1400,3000")
    assert_readable(result, figures=3)  # lines, heatmaps of edge and edge_rel


def test_the_table_reads_back(replayed):
    result, paths, out = replayed
    data = load_replay(out)
    assert data["steps"] == result.steps and data["analyses"] == result.analyses
    with pytest.raises(ValueError, match="not a replay table"):
        bad = out / "other.json"
        bad.write_text(json.dumps({"format": "x"}))
        load_replay(bad)


def test_an_analysis_failing_on_one_checkpoint_names_it(run):
    second = list_checkpoints(run)[1]
    step = load_checkpoint(second).step

    def flaky(view):
        if view.step == step:
            raise ValueError("the probe fit did not converge")
        return {"flaky/x": 1.0}

    with DYNAMICS_ANALYSES.temporarily("flaky", flaky):
        with pytest.raises(ReplayError) as caught:
            replay(run, ["flaky"], n=16, seed=0)
    message = str(caught.value)
    assert "'flaky'" in message and str(second) in message and f"step {step}" in message
    assert "did not converge" in message


def test_a_default_analysis_that_does_not_apply_is_skipped_and_a_chosen_one_refused(run):
    def recall_only(view):
        require_capability(view.task, KEY_VALUE_RECALL, "recall_only")
        return {}

    with DYNAMICS_ANALYSES.temporarily("recall_only", recall_only):
        with pytest.raises(ReplayError, match="recall_only needs a task with"):
            replay(run, ["recall_only"], n=16, seed=0)
        result = replay(run, None, n=16, seed=0)  # the default: every registered analysis
        registered = DYNAMICS_ANALYSES.names()
    assert "recall_only" in registered and "recall_only" not in result.analyses
    assert {"accuracy", "circuit", "probe"} <= set(result.analyses)
    assert any(note.startswith("recall_only skipped") and "'sort'" in note for note in result.notes)


def test_skip_unfit_skips_a_chosen_analysis_and_the_cache_is_the_callers(run):
    """``skip_unfit=True`` (the q sweep's replays) skips a chosen analysis that refuses the task;
    a given ``cache`` is the one every view shares (a control measured once across runs)."""
    seen = []

    def recall_only(view):
        require_capability(view.task, KEY_VALUE_RECALL, "recall_only")
        return {}

    def counts(view):
        seen.append(view.cache)
        view.cache["calls"] = view.cache.get("calls", 0) + 1
        return {"counted/calls": float(view.cache["calls"])}

    shared = {"calls": 100}
    with DYNAMICS_ANALYSES.temporarily("recall_only", recall_only), DYNAMICS_ANALYSES.temporarily("counts", counts):
        result = replay(run, ["recall_only", "counts"], n=16, seed=0, skip_unfit=True, cache=shared)
    assert result.analyses == ["counts"] and any(n.startswith("recall_only skipped") for n in result.notes)
    assert all(c is shared for c in seen) and shared["calls"] == 100 + len(result.steps)
    assert result.table["counted/calls"] == [float(100 + i + 1) for i in range(len(result.steps))]


def test_a_run_with_one_checkpoint_is_refused_with_how_to_train_one(tmp_path):
    config = TrainConfig(steps=3, batch_size=8, eval_every=3, eval_size=8)
    train(TASK, TASK.model_config(d_model=16, n_layers=1, n_heads=2), config, tmp_path / "one", progress=False)
    with pytest.raises(ValueError, match=r"1 checkpoint\(s\).*--checkpoint-schedule log:"):
        replay(tmp_path / "one", ["accuracy"])


def test_unknown_analyses_and_options_list_what_exists(run):
    with pytest.raises(ValueError, match="registered dynamics analyses: .*accuracy"):
        replay(run, ["nope"])
    with pytest.raises(ValueError, match="its options: method, metric, top_edges, size"):
        replay(run, ["circuit"], options={"circuit": {"nope": 1}})
    with pytest.raises(ValueError, match="not replayed"):
        replay(run, ["accuracy"], options={"circuit": {"size": 3}})


def test_every_registered_analysis_has_thresholds_of_its_own_quantities():
    for name in ("accuracy", "circuit", "probe"):
        assert name in DYNAMICS_ANALYSES and THRESHOLDS.get(name)


def test_the_final_circuits_faithfulness_is_the_circuit_reports(run, replayed):
    """At the last checkpoint the own circuit is the smallest faithful one, measured here through
    the public circuits API (discover, smallest_faithful_circuit, faithfulness)."""
    from circuits import Ablation, discover, faithfulness, smallest_faithful_circuit

    result, _, _ = replayed
    inputs = load_run_inputs(list_checkpoints(run)[-1], n=N, seed=0)
    clean, corrupted = inputs.pairs.clean, inputs.pairs.corrupted
    ablation = Ablation("resample", seed=0)
    scores = discover(inputs.model, clean, corrupted, method="eap", ablation=ablation)
    found, _ = smallest_faithful_circuit(inputs.model, scores, clean, corrupted, ablation=ablation)
    expected = faithfulness(inputs.model, found, clean, corrupted, ablation=ablation).recovered
    assert result.table["faithfulness/own"][-1] == pytest.approx(expected, abs=1e-5)
    assert result.table["faithfulness/final_circuit"][-1] == pytest.approx(expected, abs=1e-5)
    assert result.table["circuit_size/own"][-1] == len(found)
