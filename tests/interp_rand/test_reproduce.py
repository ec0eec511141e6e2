"""``reproduce`` end to end on tiny scales: every variant trained, evaluated over seeds, saved
next to its checkpoint, and tabulated with the paper's values beside ours; the plan of runs
(variants, ERM twins, recipes read from the scale); and the Ray path against the in-process one."""

import contextlib
import dataclasses
import io
import json
import re

import pytest

from interp_rand import reproduce as repro
from interp_rand.cli import main
from interp_rand.tasks.coloring import COLORING_CPU
from interp_rand.tasks.recall import RECALL_CPU, RECALL_PAPER

TINY = {
    "recall": dataclasses.replace(RECALL_CPU, n_pairs=(12,), d_model=16, steps=4, batch_size=8,
                                  warmup_steps=1, m_seeds=2, eval_seeds=6, qnorm_from_erm=True, qnorm_steps=3),
    "coloring": dataclasses.replace(COLORING_CPU, steps=4, batch_size=8, warmup_steps=1, m_seeds=2, eval_seeds=6,
                                    qnorm_from_erm=False),
}


@contextlib.contextmanager
def _tiny_scales():
    """Both experiments at the tiny scale, the real ones back on exit."""
    with contextlib.ExitStack() as stack:
        for task, eval_inputs in (("recall", 10), ("coloring", 12)):
            tiny = dataclasses.replace(repro.EXPERIMENTS.get(task), scales={"cpu": TINY[task]}, eval_inputs=eval_inputs)
            stack.enter_context(repro.EXPERIMENTS.replaced(task, tiny))
        yield


@pytest.fixture
def tiny():
    with _tiny_scales():
        yield
    assert repro.EXPERIMENTS.get("recall").scales["cpu"] is not TINY["recall"]  # restored


@pytest.fixture(scope="module")
def recall_in_process(tmp_path_factory):
    """One in-process ``reproduce recall`` on the tiny scale, one training seed, with progress:
    ``(rows, its output folder, what it printed on stderr)``, shared by the progress and Ray tests."""
    out = tmp_path_factory.mktemp("here")
    err = io.StringIO()
    with _tiny_scales(), contextlib.redirect_stderr(err):
        rows = repro.reproduce("recall", "cpu", out, progress=True, train_seeds=(0,))
    return rows, out, err.getvalue()


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
        if merged["variant"].endswith("-sampled"):  # a deterministic variant's sampled baseline
            base = merged["variant"].removesuffix("-sampled")
            runs = [r for r in rows if (r[x_key], r["variant"]) == (merged[x_key], base)]
            assert merged["worst_5pct"] == pytest.approx(sum(r["sampled"]["worst"] for r in runs) / len(runs))
            continue
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
    assert paper_value in markdown  # A^q_R's worst case from the paper, beside ours
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


# ------------------------------------------------------------------------------ the plan
@pytest.mark.parametrize("from_erm", [True, False])
def test_plan_reads_the_recipe_from_the_scale(tmp_path, from_erm):
    scale = dataclasses.replace(RECALL_CPU, n_pairs=(8, 12), m_seeds=7, qnorm_from_erm=from_erm, qnorm_steps=5)
    jobs = repro.plan("recall", scale, tmp_path, [0, 1])
    assert len(jobs) == 2 * 2 * 5 and [j.index for j in jobs] == list(range(1, 21))
    assert sorted({j.sweep_value for j in jobs}) == [8, 12]
    by_title = {j.title: j for j in jobs}
    erm = by_title["recall N=12 A^E_R seed 1"]
    # ERM with fresh seeds: the mean loss over the m seeds shared by the batch
    assert (erm.run.config.objective, erm.run.config.q, erm.run.config.m_seeds) == ("qnorm", 1.0, 7)
    assert erm.run.config.q_ramp_steps == 0 and erm.run.config.steps == scale.steps and erm.after is None
    fixed_erm = by_title["recall N=12 A^E_r0 seed 1"]
    assert (fixed_erm.run.config.objective, fixed_erm.run.config.seed_source) == ("erm", "fixed")
    for title, twin in (("A^q_R", erm), ("A^q_R (m=1)", erm), ("A^q_r0", fixed_erm)):
        job = by_title[f"recall N=12 {title} seed 1"]
        assert job.run.config.q == scale.q and job.run.config.steps == 5
        if from_erm:
            assert job.after == twin.index and job.run.config.init_from == twin.run_dir
        else:
            assert job.after is None and job.run.config.init_from is None
    assert by_title["recall N=12 A^q_R seed 1"].run.config.m_seeds == 7
    assert len({j.run_dir for j in jobs}) == len(jobs)  # each run its own folder


def test_coloring_sweeps_q_with_erm_as_its_q1_point(tmp_path):
    jobs = repro.plan("coloring", COLORING_CPU, tmp_path, [0])
    fresh = sorted(j.sweep_value for j in jobs if j.run.variant in ("A^E_R", "A^q_R"))
    assert fresh == [1.0, 2.0, 3.0, 4.0, COLORING_CPU.q] and COLORING_CPU.q == 10.0


def _fake_rows(task, scale):
    """One made-up evaluation row per run of the plan (no training)."""
    rows = []
    for job in repro.plan(task, scale, "unused", [0, 1]):
        value = (job.index % 10) / 10
        rows.append({"variant": job.run.variant, "q": job.run.config.q, "m_seeds": job.run.config.m_seeds,
                     "train_seed": job.run.config.seed, repro.EXPERIMENTS.get(task).sweep_key: job.sweep_value,
                     "average": value, "worst_5pct": value / 2, "majority_5": {"average": 1.0, "worst": 0.5},
                     "majority_30": {"average": 1.0, "worst": 0.75}, "sampled": {"average": 0.3, "worst": 0.1},
                     "predictive_variance": 0.0, "histogram": {"counts": [1] * 10}})
    return rows


@pytest.mark.parametrize("task", ["recall", "coloring"])
def test_table_has_a_line_per_sweep_value_and_variant_with_the_papers_values(task):
    exp = repro.EXPERIMENTS.get(task)
    scale = dataclasses.replace(RECALL_PAPER, n_pairs=(8, 10, 11, 12, 14, 16, 20)) if task == "recall" else COLORING_CPU
    rows = _fake_rows(task, scale)
    lines = [line for line in repro.table(task, rows).splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "maj-30 worst (paper)" in header and "worst-5% (paper)" in header
    cells = {}
    for line in lines[1:]:
        row = [c.strip() for c in line.strip("|").split("|")]
        key = (float(row[0]), row[1])
        assert key not in cells  # one line per (sweep value, variant)
        cells[key] = dict(zip(header, row))
    expected = {(float(r[exp.sweep_key]), r["variant"]) for r in rows}
    expected |= {(x, f"{v}-sampled") for x, v in expected if v in repro.SAMPLED_VARIANTS}
    assert set(cells) == expected
    if task == "recall":
        assert {x for x, _ in cells} == {8, 10, 11, 12, 14, 16, 20}
        assert {v for _, v in cells} >= {"A^E_r0", "A^q_r0", "A^E_R", "A^q_R", "A^q_R (m=1)", "A^E_R-sampled"}
    columns = {"average": "average (paper)", "worst_5pct": "worst-5% (paper)",
               "majority_5_worst": "maj-5 worst (paper)", "majority_30_worst": "maj-30 worst (paper)"}
    n_paper = 0
    for point in exp.paper_points:
        key = (float(point[exp.sweep_key]), point["variant"])
        if key not in cells:  # a sweep value this scale does not train (recall's N = 18)
            continue
        cell = cells[key][columns[point["metric"]]]
        assert cell.endswith(f"({point.get('bound', '')}{point['value']:.2f})"), (key, point, cell)
        n_paper += 1
    assert n_paper >= (30 if task == "recall" else 6)
    for (x, variant), cell in cells.items():  # ours first, with the range over the 2 seeds
        assert re.match(r"\d\.\d\d \[\d\.\d\d–\d\.\d\d\]", cell["average (paper)"]), cell
    sampled = cells[(1.0 if task == "coloring" else 12.0, "A^E_R-sampled")]
    assert sampled["worst-5% (paper)"].startswith("0.10 [0.10–0.10]") and sampled["histogram (10 bins, all seeds)"] == "–"


# ------------------------------------------------------------------------------ progress and Ray
@pytest.mark.slow
def test_progress_lines_name_each_run_with_its_headline(recall_in_process):
    rows, _, err = recall_in_process
    n = len(rows)
    assert f"run 1 of {n}: recall N=12 A^E_r0 seed 0\n" in err
    for k, row in enumerate(rows, 1):
        assert re.search(rf"run {k} of {n}: recall N=12 {re.escape(row['variant'])} seed 0: done in [\d.]+ s, "
                         rf"average {row['average']:.3f}, worst-5% {row['worst_5pct']:.3f}", err)


def _comparable(rows, out):
    """Rows without their timing, with paths relative to their output folder."""
    def strip(value):
        return value.replace(str(out), "OUT") if isinstance(value, str) else value
    return [{k: strip(v) for k, v in r.items() if k != "train_seconds"} for r in rows]


@pytest.mark.slow
def test_ray_gives_the_same_rows_as_in_process(tmp_path, tiny, capsys, recall_in_process):
    ray = pytest.importorskip("ray")
    here, here_out, _ = recall_in_process  # the same plan, run in this process
    try:
        remote = repro.reproduce("recall", "cpu", tmp_path / "ray", progress=True, train_seeds=(0,),
                                 ray_address="local", workers=2)
    except ConnectionError as err:  # reproduce's own message when a local Ray instance cannot start
        pytest.skip(str(err))
    assert not ray.is_initialized()  # the instance it started is stopped again
    assert _comparable(remote, tmp_path / "ray") == _comparable(here, here_out)
    assert any(r["init_from"] for r in remote)  # the q-norm runs waited for their ERM twins
    for row in remote:  # each run wrote its own folder, under the Ray output folder
        assert (tmp_path / "ray" / "runs").joinpath(row["run_dir"].split("runs/")[-1], "seeded_eval.json").is_file()
    err = capsys.readouterr().err
    assert len(re.findall(r"run \d+ of 5: .*: done in", err)) == 5
    assert (tmp_path / "ray" / "reproduction.md").read_text() == (here_out / "reproduction.md").read_text()


def test_cli_reproduce_workers_need_a_local_ray_instance(capsys):
    assert main(["reproduce", "recall", "--workers", "2"]) == 2
    assert "--ray-address local" in capsys.readouterr().err
