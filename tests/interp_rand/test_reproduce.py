"""``reproduce`` end to end on tiny scales: every variant trained, evaluated over seeds, saved
next to its checkpoint, and tabulated with the paper's values beside ours."""

import dataclasses
import json

import pytest

from interp_rand import reproduce as repro
from interp_rand.cli import main
from interp_rand.tasks.coloring import COLORING_CPU
from interp_rand.tasks.recall import RECALL_CPU

TINY = {
    "recall": dataclasses.replace(RECALL_CPU, n_pairs=(12,), d_model=16, steps=4, batch_size=8,
                                  warmup_steps=1, m_seeds=2, eval_seeds=6, qnorm_from_erm=True, qnorm_steps=3),
    "coloring": dataclasses.replace(COLORING_CPU, steps=4, batch_size=8, warmup_steps=1, m_seeds=2, eval_seeds=6),
}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(repro, "SCALES", {k: {"cpu": v} for k, v in TINY.items()})
    monkeypatch.setattr(repro, "EVAL_INPUTS", {"recall": 10, "coloring": 12})


@pytest.mark.slow
@pytest.mark.parametrize("task", ["recall", "coloring"])
def test_reproduce_writes_every_variant_with_the_papers_values(tmp_path, tiny, task):
    rows = repro.reproduce(task, "cpu", tmp_path, progress=False, train_seeds=(0, 1))
    names = [r["variant"] for r in rows]
    assert len(rows) == 2 * len(repro.variants(task, TINY[task]))
    assert sorted({r["train_seed"] for r in rows}) == [0, 1]
    assert {"A^E_r0", "A^q_r0", "A^E_R", "A^q_R", "A^q_R (m=1)"} <= set(names)
    for row in rows:
        saved = json.loads((tmp_path / "runs").joinpath(row["run_dir"].split("runs/")[-1], "seeded_eval.json").read_text())
        assert saved["average"] == row["average"]
        fixed = row["variant"].endswith("r0")
        assert row["n_seeds"] == (1 if fixed else TINY[task].eval_seeds)
        assert 0.0 <= row["worst_5pct"] <= row["average"] <= 1.0
        if fixed:
            assert row["sampled"] is not None and row["predictive_variance"] == 0.0
    data = json.loads((tmp_path / "reproduction.json").read_text())
    assert data["task"] == task and len(data["rows"]) == len(rows)
    for row in rows:  # recall's tiny scale fine-tunes each q-norm variant from its ERM twin
        if task == "recall" and row["q"] > 1:
            twin = "A^E_r0" if row["variant"].endswith("r0") else "A^E_R"
            source = next(r for r in rows if r["variant"] == twin and r["train_seed"] == row["train_seed"])
            assert row["init_from"] == source["run_dir"] and row["steps"] == 3
        else:
            assert row["init_from"] is None and row["steps"] == 4
    x_key = "N" if task == "recall" else "q"
    for merged in repro.aggregate(task, rows):
        runs = [r for r in rows if (r[x_key], r["variant"], r["q"], r["m_seeds"])
                == (merged[x_key], merged["variant"], merged["q"], merged["m_seeds"])]
        assert merged["n_train_seeds"] == len(runs) == 2
        assert merged["average"] == pytest.approx(sum(r["average"] for r in runs) / 2)
        assert merged["worst_5pct_range"] == (min(r["worst_5pct"] for r in runs), max(r["worst_5pct"] for r in runs))
        assert sum(merged["histogram"]) == sum(sum(r["histogram"]["counts"]) for r in runs)
    markdown = (tmp_path / "reproduction.md").read_text()
    data_lines = [line for line in markdown.splitlines() if line.startswith("| ")][1:]  # after the header
    assert len(data_lines) == len(repro.aggregate(task, rows))  # one line per (sweep value, variant)
    assert all("[" in line for line in data_lines)  # the range over the two training seeds
    paper_value = "(0.67)" if task == "recall" else "(0.70)"
    assert paper_value in markdown  # A^q_R's worst case from PAPER.md, beside ours
    assert "plotly" in (tmp_path / "reproduction.html").read_text()[:200_000].lower()


def test_reproduce_refuses_unknown_task_and_scale(tmp_path):
    with pytest.raises(ValueError, match="train_seeds"):
        repro.reproduce("recall", "cpu", tmp_path, train_seeds=(1, 1))
    with pytest.raises(ValueError, match="recall"):
        repro.reproduce("sort", "cpu", tmp_path)
    with pytest.raises(ValueError, match="paper"):
        repro.reproduce("recall", "huge", tmp_path)


def test_cli_reproduce_help_names_the_scales(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--scale" in out and "paper" in out and "coloring" in out
