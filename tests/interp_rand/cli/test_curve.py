"""``interp-rand curve``: a run's training curve, drawn without torch, readable in a browser."""

from __future__ import annotations

import json

import pytest
from test_cli_startup import run_fresh

from interp_rand.cli.main import main
from interp_rand.figures.training_curve import curve_headline, starts_late, training_curve_figure


def test_curve_of_a_zoo_model_without_torch(tmp_path):
    out = tmp_path / "curve.html"
    code, heavy, stdout, err = run_fresh(["curve", "zoo:sort", "--out", str(out)])
    assert code == 0, err
    assert "torch" not in heavy and f"wrote {out}" in stdout  # plotly only: it draws
    page = out.read_text()
    assert "<script src=" not in page and "training curve: zoo:sort" in page


def test_curve_draws_loss_exact_match_and_lr_and_skips_what_is_missing():
    records = [{"step": 10, "train_loss": 1.0, "loss": 1.2, "exact_match": 0.1, "lr": 1e-3},
               {"step": 20, "train_loss": 0.5, "loss": 0.6, "exact_match": 0.5}]
    fig = training_curve_figure(records, "t")
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"training loss", "held-out loss", "held-out exact match", "learning rate"}
    assert list(by_name["learning rate"].x) == [10]
    with pytest.raises(ValueError, match="empty"):
        training_curve_figure([], "t")


def test_curve_refuses_a_folder_without_metrics(tmp_path, capsys):
    assert main(["curve", str(tmp_path), "--out", str(tmp_path / "c.html")]) == 2
    assert "metrics.jsonl does not exist" in capsys.readouterr().err


def test_curve_in_a_browser_has_ticks_and_nothing_cut_off(tmp_path):
    import browser

    out = tmp_path / "curve.html"
    assert main(["curve", "zoo:addition", "--out", str(out)]) == 0
    result = browser.render(out, browser.screenshot_path(tmp_path, "curve.png"), "1400,700")
    browser.assert_readable(result, figures=1)
    (fig,) = result["figures"].values()
    assert len(fig["xticks"]) >= 9 and len(fig["yticks"]) >= 6  # three panels, both axes ticked


def test_a_curve_that_starts_after_the_learning_phase_says_so():
    """zoo:sort's stored curve begins at step 250 with exact match 0.996 (eval_every 250): the
    headline says the learning phase is not recorded; a curve that starts low does not."""
    from interp_rand.run_history import METRICS_FILE, read_metrics
    from interp_rand.run_names import resolve_run

    records = read_metrics(resolve_run("zoo:sort") / METRICS_FILE)
    assert records[0]["step"] == 250 and records[0]["exact_match"] > 0.99
    line = curve_headline(records, "zoo:sort")
    assert line.verdict is None and "5 evaluations from step 250" in line.number
    assert line.failing is not None and "starts late" in line.failing and "step 250" in line.failing
    learning = [{"step": 16, "exact_match": 0.0}, {"step": 64, "exact_match": 0.4}, {"step": 250, "exact_match": 0.99}]
    assert starts_late(learning) is None and curve_headline(learning, "r").failing is None
    assert starts_late([{"step": 1, "loss": 2.0}]) is None  # no exact match recorded: nothing to judge


def test_curve_first_look_headline_on_top_and_the_figure_within_the_window(tmp_path):
    import browser

    out = tmp_path / "curve.html"
    assert main(["curve", "zoo:sort", "--out", str(out)]) == 0
    result = browser.first_look(out, browser.screenshot_path(tmp_path, "curve-first-look.png"))
    browser.assert_first_look(result, verdict=False)
    assert result["headline"]["text"].startswith("training curve of zoo:sort: held-out exact match 0.9995")
    assert "starts late" in result["headline"]["text"]
