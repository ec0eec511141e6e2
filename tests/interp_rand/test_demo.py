"""``interp-rand demo``: the tour runs every step on the zoo and links its figures; ``--train``
trains, evaluates and draws the training curves."""

from __future__ import annotations

import json

import pytest

from interp_rand import demo
from interp_rand.cli.main import main
from interp_rand.training import TrainConfig


@pytest.mark.slow
def test_tour_runs_every_step_on_the_zoo(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    steps = json.loads((tmp_path / "tour.json").read_text())
    assert [s["folder"] for s in steps] == [folder for folder, _, _ in demo.TOUR]
    assert all(s["command"] in printed for s in steps)  # each command is shown as a user would type it
    index = (tmp_path / "index.html").read_text()
    for name in ("carry/case_study.html", "sort/case_study.html", "report/report.html",
                 "randomness/randomness.html", "recall/randomness.html", "compare/comparison.html",
                 "gridworld/first_visit.html"):
        assert (tmp_path / name).stat().st_size > 100_000 and f'href="{name}"' in index
    # the claims the tour shows, read back from what it wrote
    carry = json.loads((tmp_path / "carry" / "case_study.json").read_text())
    assert carry["carry_removed"]["carry"] < 0.2 <= carry["control_mean"]["carry"]
    usage = json.loads((tmp_path / "randomness" / "randomness.json").read_text())["summary"]
    assert usage["zoo:coloring-Aq_R"]["usage seed"] > 0.1 > 0.01 > usage["zoo:coloring-AE_R"]["usage seed"]
    assert json.loads((tmp_path / "addition" / "eval.json").read_text())["exact_match"] > 0.999


def test_train_demo_trains_evaluates_and_draws(tmp_path, monkeypatch, capsys):
    tiny = TrainConfig(steps=4, batch_size=16, lr=3e-3, warmup_steps=1, eval_every=2, eval_size=32,
                       checkpoint_every=4)
    runs = {"sort": {"task": {"name": "sort", "length": 3, "vocab": 5}, "model": {"d_model": 16, "n_layers": 1},
                     "train": tiny, "eval": {"fresh": 64}},
            "addition": {"task": {"name": "addition", "n_digits": 1}, "model": {"d_model": 16, "n_layers": 1},
                         "train": tiny, "eval": {"exhaustive": True}}}
    monkeypatch.setattr(demo, "DEMO_RUNS", runs)
    assert main(["demo", "--train", "--quiet", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["addition"]["evaluated_on"] == "all 100 problems" and summary["sort"]["step"] == 4
    assert "Plotly.newPlot" in (tmp_path / "training_curves.html").read_text()
    assert "exact match" in capsys.readouterr().out


def test_index_shows_each_steps_key_numbers_and_links_every_output(tmp_path):
    import browser

    from interp_rand.figures.demo_index import demo_index

    (tmp_path / "addition").mkdir()
    (tmp_path / "addition" / "eval.json").write_text(json.dumps(
        {"checkpoint": "/abs/path", "exact_match": 0.99991, "per_position": [1.0, 0.99], "n": 100000}))
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "comparison.json").write_text(json.dumps(
        {"jaccard": 0.25, "n_shared": 12, "cross_faithfulness": {"a_on_b": 0.5}}))
    (tmp_path / "compare" / "comparison.html").write_text("<html><body>figure</body></html>")
    steps = [{"folder": "addition", "what": "the addition model", "command": "interp-rand eval zoo:addition " + "x" * 300,
              "seconds": 1.5},
             {"folder": "compare", "what": "two circuits", "command": "interp-rand compare a b", "seconds": 2.0},
             {"folder": "zoo", "what": "the zoo", "command": "interp-rand zoo list", "seconds": 0.1}]
    page = demo_index(tmp_path, steps)
    for needle in ('href="addition/eval.json"', 'href="compare/comparison.html"', 'href="compare/comparison.json"',
                   "exact_match", "0.9999", "jaccard", "0.25", "n_shared", "cross_faithfulness.a_on_b", "100,000"):
        assert needle in page, needle
    assert "/abs/path" not in page  # strings are not key numbers
    index = tmp_path / "index.html"
    index.write_text(page)
    result = browser.render(index, browser.screenshot_path(tmp_path, "index.png"), "1200,900")
    browser.assert_readable(result, figures=0)  # no wider than the window, even with a long command
    assert len(result["tables"]) == 2
