"""``interp-rand reproduce recall|coloring``: the paper's comparison of the model variants.

Trains every variant at each value of the task's sweep (recall: the number of pairs ``N``;
colouring: the norm exponent ``q``), once per training seed, evaluates each over many seeds
(average and worst-5% success, majority-k, the output-sampled baseline, predictive variance,
success histogram), saves each evaluation as ``seeded_eval.json`` next to its checkpoint, and
writes ``reproduction.json``, ``reproduction.md`` (the table, with the paper's values beside
ours) and ``reproduction.html`` (the figure) to the output folder. The runs execute in this
process, or as Ray tasks (``ray_address``, see :mod:`interp_rand.job_runner`); both give the
same rows.

The variants (the paper):

=============  =========  ==========================================================
``A^E_r0``     ERM        one fixed seed r0 in training and evaluation: deterministic
``A^q_r0``     q-norm     fixed r0
``A^E_R``      ERM        fresh random seeds: the mean loss over ``m`` seeds shared by the
                          batch (the q-norm objective with q = 1, as the paper's code does)
``A^q_R``      q-norm     m fresh seeds shared by the batch: the model of interest
``A^q_R (m=1)``  q-norm   one seed per step: the paper finds this gives no gain
=============  =========  ==========================================================

Each q-norm variant trains from scratch, or, when the scale's ``qnorm_from_erm`` is set, starts
from the trained ERM variant with the same seed source (its "twin"). The table also shows the
"-sampled" baseline of the deterministic variants (``A^E_r0-sampled``: outputs drawn from the
output distribution instead of argmaxed; measured in each run's evaluation as ``sampled``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interp_rand.figures.html_page import write_figure
from interp_rand.figures.reproduction import reproduction_figure
from interp_rand.job_runner import LOCAL, print_line, run_jobs
from interp_rand.registry import Registry
from interp_rand.seeded_evaluation import evaluate_seeded, save_summary
from interp_rand.tasks import make_task
from interp_rand.tasks.randomized import Experiment, ExperimentScale, experiments
from interp_rand.training import TrainConfig, train
from interp_rand.variant_names import file_label

# Every randomized task's experiment (its scales, sweep, evaluation size and the paper's
# values), each held by its task (``RecallTask.experiment``): adding one is an entry there.
# Tests run a tiny scale of one with ``EXPERIMENTS.replaced(task, tiny)``.
EXPERIMENTS: Registry[Experiment] = Registry("randomized experiment")
for _name, _experiment in experiments().items():
    EXPERIMENTS.register(_name, _experiment)
# Seeds are drawn from generators offset from the training seed so no stream is reused.
EVAL_SEED = 99_991
# the variants whose "-sampled" baseline the table shows: the deterministic ones
SAMPLED_VARIANTS = ("A^E_r0", "A^q_r0", "A^E_R")


def variants(task_name: str, scale) -> list[tuple[str, dict[str, Any]]]:
    """(variant name, TrainConfig overrides) of every run of one task at one scale and setting."""
    erm = {"q": 1.0, "q_ramp_steps": 0}
    qnorm = {"objective": "qnorm", "q": scale.q, "m_seeds": scale.m_seeds}
    out = [
        ("A^E_r0", {**erm, "objective": "erm", "m_seeds": 1, "seed_source": "fixed"}),
        ("A^q_r0", {**qnorm, "m_seeds": 1, "seed_source": "fixed"}),
        # ERM over m seeds shared by the batch: the q-norm objective at q = 1
        ("A^E_R", {**erm, "objective": "qnorm", "m_seeds": scale.m_seeds, "seed_source": "fresh"}),
        ("A^q_R", {**qnorm, "seed_source": "fresh"}),
        ("A^q_R (m=1)", {**qnorm, "m_seeds": 1, "seed_source": "fresh"}),
    ]
    out += [("A^q_R", {**qnorm, "q": q, "seed_source": "fresh"})
            for q in experiment(task_name).extra_q if q < scale.q]
    return out


def experiment(task_name: str) -> Experiment:
    """The experiment of ``task_name`` (:data:`EXPERIMENTS`); other names list those that exist."""
    if task_name not in EXPERIMENTS:
        raise ValueError(f"reproduce: task must be one of {sorted(EXPERIMENTS)}, got {task_name!r}")
    return EXPERIMENTS.get(task_name)


@dataclass(frozen=True)
class VariantRun:
    """One variant's training run at a scale.

    Attributes:
        variant: the paper's name (``"A^q_R (m=1)"``).
        label: the same as a file name (``"Aq_R_m1"``).
        config: its ``TrainConfig``, without ``init_from``.
        erm_twin: the label of the ERM variant whose trained weights start this one
            (``scale.qnorm_from_erm``), or ``None``: from scratch.
    """

    variant: str
    label: str
    config: TrainConfig
    erm_twin: str | None


def variant_runs(task_name: str, scale, train_seed: int = 0) -> list[VariantRun]:
    """Every variant's run at ``scale`` for one training seed, ERM twins (q = 1) before the
    q-norm variants they start."""
    runs: list[VariantRun] = []
    for variant, overrides in variants(task_name, scale):
        steps, twin = scale.steps, None
        if overrides["q"] > 1:
            steps = scale.qnorm_steps or scale.steps
            if scale.qnorm_from_erm:
                twin = next(r.label for r in runs if r.config.q == 1
                            and r.config.seed_source == overrides["seed_source"])
        config = TrainConfig.from_scale(scale, seed=train_seed, steps=steps, eval_size=512,
                                        eval_every=max(1, steps // 10), checkpoint_every=steps, **overrides)
        runs.append(VariantRun(variant, file_label(variant), config, twin))
    return runs


@dataclass(frozen=True)
class RunJob:
    """One training run and its evaluation, as :func:`run_variant` does it (in process or as a
    Ray task: everything it needs travels with it).

    Attributes:
        index, title, after: as :mod:`interp_rand.job_runner` wants them (``after``: the
            index of the ERM twin's job).
        task_name, task_config, scale, run: what to train; ``run.config.init_from`` is set.
        run_dir: the run's own folder, the only one it writes.
        sweep_value: its x value in the table.
        eval_inputs: fresh inputs of the evaluation.
        progress: progress bars while training.
    """

    index: int
    title: str
    after: int | None
    task_name: str
    task_config: dict[str, Any]
    scale: ExperimentScale
    run: VariantRun
    run_dir: str
    sweep_value: float
    eval_inputs: int
    progress: bool


def plan(task_name: str, scale, out: str | Path, train_seeds: Sequence[int], *, progress: bool = False,
         eval_inputs: int | None = None) -> list[RunJob]:
    """Every run of the reproduction, numbered from 1, each ERM twin before the runs it starts."""
    exp, out = experiment(task_name), Path(out)
    eval_inputs = exp.eval_inputs if eval_inputs is None else eval_inputs
    jobs: list[RunJob] = []
    for task_config in exp.settings(scale):
        for train_seed in train_seeds:
            twins: dict[str, RunJob] = {}  # ERM label -> its job
            for run in variant_runs(task_name, scale, train_seed):
                twin = twins.get(run.erm_twin) if run.erm_twin is not None else None
                config = run.config if twin is None else dataclasses.replace(run.config, init_from=twin.run_dir)
                run = dataclasses.replace(run, config=config)
                run_dir = out / "runs" / "_".join([f"{k}{v}" for k, v in task_config.items()]
                                                  + [run.label, f"q{config.q:g}", f"seed{train_seed}"])
                x = exp.sweep_value(task_config, config)
                title = f"{task_name} {exp.sweep_key}={x:g} {run.variant} seed {train_seed}"
                job = RunJob(len(jobs) + 1, title, None if twin is None else twin.index, task_name, task_config,
                             scale, run, str(run_dir), x, eval_inputs, progress)
                if config.q == 1:
                    twins[run.label] = job
                jobs.append(job)
    return jobs


def run_variant(job: RunJob) -> dict[str, Any]:
    """Train ``job``'s run into its folder, evaluate it over seeds, save the evaluation as
    ``seeded_eval.json`` there, and return it with the run's settings (a row of the table)."""
    task = make_task(job.task_name, **job.task_config)
    model_config = task.model_config(**job.scale.model_overrides())
    config, run_dir = job.run.config, Path(job.run_dir)
    result = train(task, model_config, config, run_dir, progress=job.progress)
    row = evaluate_variant(task, result.model, job.scale, config, n_inputs=job.eval_inputs)
    row.update(variant=job.run.variant, q=config.q, m_seeds=config.m_seeds, steps=result.step,
               train_seed=config.seed, train_seconds=round(result.seconds, 1), run_dir=job.run_dir,
               init_from=config.init_from, **job.task_config)
    row[experiment(job.task_name).sweep_key] = job.sweep_value
    save_summary(row, run_dir / "seeded_eval.json")
    return row


def headline(row: dict[str, Any]) -> str:
    """A run's headline numbers, for its progress line."""
    return f"average {row['average']:.3f}, worst-5% {row['worst_5pct']:.3f}"


def reproduce(task_name: str, scale_name: str = "cpu", out: str | Path = "reproduction",
              progress: bool = True, train_seeds: Sequence[int] = (0,), *, ray_address: str | None = None,
              workers: int | None = None) -> list[dict[str, Any]]:
    """Train and evaluate every variant at every sweep value once per training seed; returns
    one row per run, in plan order (also written to ``out``; the table and figure show the
    mean over training seeds and their range).

    ``progress``: a line per run start and finish (``run 3 of 14: recall N=12 A^q_R seed 0``)
    and, in process, training progress bars. ``ray_address``: run each training and evaluation
    as a Ray task (``"local"``: a local Ray instance of ``workers`` CPUs; else a cluster's
    address), ERM twins before the runs they start; ``None``: one after the other here.
    """
    train_seeds = list(train_seeds)
    if not train_seeds or len(set(train_seeds)) != len(train_seeds):
        raise ValueError(f"reproduce: train_seeds must be distinct and non-empty, got {train_seeds}")
    scale = scale_for(task_name, scale_name)
    if ray_address not in (None, LOCAL):
        out = Path(out).resolve()  # a cluster's workers do not share this process's working directory
    jobs = plan(task_name, scale, out, train_seeds, progress=progress and ray_address is None)
    rows = run_jobs(jobs, run_variant, headline=headline, log=print_line if progress else None,
                    ray_address=ray_address, workers=workers)
    write_outputs(task_name, scale_name, rows, Path(out))
    return rows


def scale_for(task_name: str, scale_name: str):
    """The named scale (``"cpu"`` or ``"paper"``) of a randomized task's experiment."""
    scales = experiment(task_name).scales
    if scale_name not in scales:
        raise ValueError(f"reproduce: scale must be one of {sorted(scales)}, got {scale_name!r}")
    return scales[scale_name]


def evaluate_variant(task, model, scale, config: TrainConfig, n_inputs: int | None = None) -> dict[str, Any]:
    """Seeded evaluation of one trained variant on ``n_inputs`` fresh inputs (default
    the experiment's ``eval_inputs``) and ``scale.eval_seeds`` seeds (see :func:`evaluate_seeded`)."""
    generator = torch.Generator().manual_seed(EVAL_SEED)
    batch = task.sample(experiment(task.name).eval_inputs if n_inputs is None else n_inputs, generator)
    return evaluate_seeded(task, model, batch, scale.eval_seeds, generator,
                           fixed=config.seed_source == "fixed")


OUTPUT_FILES = ("reproduction.json", "reproduction.md", "reproduction.html")  # written together


def write_outputs(task_name: str, scale_name: str, rows: list[dict[str, Any]], out: Path) -> None:
    """reproduction.json, reproduction.md and reproduction.html in ``out``, replaced together."""
    from interp_rand.output import replace_files, write_json, write_text

    exp = experiment(task_name)
    x_key = exp.sweep_key
    title = f"{task_name}: ours ({scale_name} scale) and the paper's values"
    drawn = [p for p in exp.paper_points if "bound" not in p]  # a bound is not a point
    with replace_files(out, OUTPUT_FILES) as stage:
        write_json(stage / "reproduction.json", {"task": task_name, "scale": scale_name, "rows": rows,
                                                 "paper": list(exp.paper_points), "paper_note": exp.paper_note})
        write_text(stage / "reproduction.md", table(task_name, rows))
        write_figure(reproduction_figure(aggregate(task_name, rows), drawn, x_key, title), stage / "reproduction.html",
                     title)


def paper_value(task_name: str, row: dict[str, Any], metric: str) -> str | None:
    """The paper's value of ``metric`` for ``row``'s variant and sweep value (``"≤0.07"`` for a
    bound), or ``None`` where it gives none."""
    exp = experiment(task_name)
    for p in exp.paper_points:
        if p["variant"] == row["variant"] and p["metric"] == metric and p[exp.sweep_key] == row[exp.sweep_key]:
            return p.get("bound", "") + f"{p['value']:.2f}"
    return None


def _metrics(row: dict[str, Any]) -> dict[str, float | None]:
    """The numbers the table and figure show, read from one run's summary."""
    return {
        "average": row["average"],
        "worst_5pct": row["worst_5pct"],
        **{f"majority_{k}_worst": (row.get(f"majority_{k}") or {}).get("worst") for k in (5, 30)},
        "sampled_average": (row.get("sampled") or {}).get("average"),
        "sampled_worst": (row.get("sampled") or {}).get("worst"),
        "predictive_variance": row["predictive_variance"],
    }


def aggregate(task_name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (sweep value, variant): each metric's mean over training seeds, with its
    ``min``/``max`` under ``{metric}_range``, the number of seeds, and the summed histogram;
    after each deterministic variant (``SAMPLED_VARIANTS``), its ``-sampled`` baseline as a
    row of its own (``average`` and ``worst_5pct`` of the sampled outputs, no histogram)."""
    x_key = experiment(task_name).sweep_key
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row[x_key], row["variant"], row["q"], row["m_seeds"]), []).append(row)
    out = []
    for (x, variant, q, m), runs in groups.items():
        merged: dict[str, Any] = {x_key: x, "variant": variant, "q": q, "m_seeds": m, "n_train_seeds": len(runs)}
        per_run = [_metrics(r) for r in runs]
        for name in per_run[0]:
            values = [p[name] for p in per_run if p[name] is not None]
            merged[name] = sum(values) / len(values) if values else None
            merged[f"{name}_range"] = (min(values), max(values)) if values else None
        merged["histogram"] = [sum(c) for c in zip(*(r["histogram"]["counts"] for r in runs))]
        out.append(merged)
        if variant in SAMPLED_VARIANTS and merged["sampled_worst"] is not None:
            sampled = {k: None for k in merged} | {x_key: x, "variant": f"{variant}-sampled", "q": q, "m_seeds": m,
                                                   "n_train_seeds": len(runs), "histogram": None}
            for name, source in (("average", "sampled_average"), ("worst_5pct", "sampled_worst")):
                sampled[name], sampled[f"{name}_range"] = merged[source], merged[f"{source}_range"]
            out.append(sampled)
    return out


def table(task_name: str, rows: list[dict[str, Any]]) -> str:
    """The table as Markdown, one line per (sweep value, variant) of :func:`aggregate`: the
    mean over training seeds (with the range over seeds when there are several) and, where
    the paper has one, the paper's value beside ours in brackets."""
    x_key = experiment(task_name).sweep_key

    def fmt(row: dict[str, Any], name: str) -> str:
        value = row[name]
        text = "–" if value is None else f"{value:.2f}"
        if value is not None and row["n_train_seeds"] > 1:
            low, high = row[f"{name}_range"]
            text += f" [{low:.2f}–{high:.2f}]"
        theirs = paper_value(task_name, row, name)
        return text + (f" ({theirs})" if theirs is not None else "")

    lines = [
        f"| {x_key} | variant | m | seeds | average (paper) | worst-5% (paper) | maj-5 worst (paper) "
        "| maj-30 worst (paper) | seed variance | histogram (10 bins, all seeds) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in aggregate(task_name, rows):
        variance = "–" if r["predictive_variance"] is None else f"{r['predictive_variance']:.2e}"
        histogram = "–" if r["histogram"] is None else " ".join(str(c) for c in r["histogram"])
        lines.append(
            f"| {r[x_key]:g} | {r['variant']} | {r['m_seeds']} | {r['n_train_seeds']} "
            f"| {fmt(r, 'average')} | {fmt(r, 'worst_5pct')} | {fmt(r, 'majority_5_worst')} "
            f"| {fmt(r, 'majority_30_worst')} | {variance} | {histogram} |"
        )
    lines.append("")
    lines.append("Mean over training seeds; [min–max] over seeds where there are several; (the paper's value). "
                 "X-sampled: variant X with outputs drawn from its output distribution instead of argmaxed.")
    lines.append(experiment(task_name).paper_note)
    return "\n".join(lines) + "\n"


__all__ = ["EXPERIMENTS", "Experiment", "RunJob", "aggregate", "evaluate_seeded",
           "paper_value", "plan", "reproduce", "run_variant", "table", "variants"]
