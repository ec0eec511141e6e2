"""Figures: every series drawn gets exactly one legend entry, and the curves carry the data."""

from interp_rand.figures import training_curves
from interp_rand.figures.reproduction import reproduction_figure


def test_reproduction_legend_lists_every_series_once():
    rows = [{"variant": v, "N": n, "average": 0.5, "worst_5pct": 0.1} for v in ("A^E_r0", "A^q_R") for n in (8, 12)]
    paper = [{"variant": "A^E_r0", "N": 8, "metric": "worst_5pct", "value": 1.0},
             {"variant": "A^q_R", "N": 12, "metric": "average", "value": 0.4}]
    fig = reproduction_figure(rows, paper, "N", "t")
    shown = [t.name for t in fig.data if t.showlegend]
    assert sorted(shown) == ["A^E_r0 (ours)", "A^E_r0 (paper)", "A^q_R (ours)", "A^q_R (paper)"]
    ours = next(t for t in fig.data if t.name == "A^q_R (ours)")
    assert list(ours.x) == [8, 12] and list(ours.y) == [0.5, 0.5]


def test_training_curves_plot_each_runs_history():
    history = [{"step": s, "train_loss": 1.0 / s, "loss": 2.0 / s, "exact_match": s / 300} for s in (100, 200, 300)]
    fig = training_curves({"sort": history})
    exact = [t for t in fig.data if t.name == "sort" and not t.showlegend]
    assert list(exact[0].y) == [r["exact_match"] for r in history]
    assert {t.name for t in fig.data} == {"sort train", "sort held out", "sort"}
