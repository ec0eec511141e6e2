"""``interp-rand curve``: a run's training curve, drawn without torch, readable in a browser."""

from __future__ import annotations

import json

import pytest
from test_cli_startup import run_fresh

from interp_rand.cli.main import main
from interp_rand.figures.training_curve import training_curve_figure


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
