"""``interp-rand reproduce recall|coloring``: PAPER.md's comparison of the model variants.

Trains every variant at each setting of the sweep (recall: the number of pairs ``N``;
colouring: the norm exponent ``q``), evaluates each over many seeds (average and worst-5%
success, majority-k, the output-sampled baseline, predictive variance, success histogram),
saves each evaluation as ``seeded_eval.json`` next to its checkpoint, and writes
``reproduction.json``, ``reproduction.md`` (the table, with the paper's values beside ours)
and ``reproduction.html`` (the figure) to the output folder.

The variants (PAPER.md):

=============  =========  ==========================================================
``A^E_r0``     ERM        one fixed seed r0 in training and evaluation: deterministic
``A^q_r0``     q-norm     fixed r0
``A^E_R``      ERM        fresh random seeds
``A^q_R``      q-norm     m fresh seeds shared by the batch: the model of interest
``A^q_R (m=1)``  q-norm   one seed per step: the paper finds this gives no gain
=============  =========  ==========================================================
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interp_rand.figures.reproduction import reproduction_figure
from interp_rand.losses import output_judge
from interp_rand.seeded_evaluation import save_summary, success_matrix, summarize
from interp_rand.tasks import make_task
from interp_rand.tasks.coloring import COLORING_CPU, COLORING_PAPER
from interp_rand.tasks.recall import RECALL_CPU, RECALL_PAPER
from interp_rand.training import TrainConfig, train

SCALES = {
    "recall": {"cpu": RECALL_CPU, "paper": RECALL_PAPER},
    "coloring": {"cpu": COLORING_CPU, "paper": COLORING_PAPER},
}

# Read off PAPER.md (values marked ≈ there were read off the paper's plots).
PAPER_POINTS: dict[str, list[dict[str, Any]]] = {
    "recall": (
        [{"variant": v, "N": n, "metric": "worst_5pct", "value": 1.0 if n <= 11 else 0.0}
         for v in ("A^E_r0", "A^q_r0", "A^E_R") for n in (8, 10, 11, 12, 14, 16, 18, 20)]
        + [{"variant": "A^q_R", "N": n, "metric": "worst_5pct", "value": v}
           for n, v in ((12, 0.67), (14, 0.42), (16, 0.29), (20, 0.20))]
        + [{"variant": "A^q_R", "N": 20, "metric": "average", "value": 0.40},
           {"variant": "A^E_R", "N": 20, "metric": "average", "value": 0.57}]
    ),
    "coloring": [
        {"variant": "A^E_R", "q": 1.0, "metric": "average", "value": 0.89},
        {"variant": "A^E_R", "q": 1.0, "metric": "worst_5pct", "value": 0.0},
        {"variant": "A^q_R", "q": 10.0, "metric": "average", "value": 0.86},
        {"variant": "A^q_R", "q": 10.0, "metric": "worst_5pct", "value": 0.70},
    ],
}
PAPER_NOTES = {
    "recall": "paper: majority-30 of A^q_R ≈ 100% worst-case at every N; majority-5 ≈ 50% at N = 20",
    "coloring": "paper: majority vote ≈ 100%; deterministic-sampled ≤ 7% worst-case",
}
EVAL_INPUTS = {"recall": 1000, "coloring": 5000}
# the quantity each task's reproduction sweeps: the number of pairs, or the norm's exponent
SWEEP_KEY = {"recall": "N", "coloring": "q"}
# Seeds are drawn from generators offset from the training seed so no stream is reused.
EVAL_SEED = 99_991


def variants(task_name: str, scale) -> list[tuple[str, dict[str, Any]]]:
    """(variant name, sweep value, TrainConfig overrides) for one task at one scale."""
    erm = {"objective": "erm", "q": 1.0, "m_seeds": 1, "q_ramp_steps": 0}
    qnorm = {"objective": "qnorm", "q": scale.q, "m_seeds": scale.m_seeds}
    out = [
        ("A^E_r0", {**erm, "seed_source": "fixed"}),
        ("A^q_r0", {**qnorm, "m_seeds": 1, "seed_source": "fixed"}),
        ("A^E_R", {**erm, "seed_source": "fresh"}),
        ("A^q_R", {**qnorm, "seed_source": "fresh"}),
        ("A^q_R (m=1)", {**qnorm, "m_seeds": 1, "seed_source": "fresh"}),
    ]
    if task_name == "coloring":
        # the sweep over q: the randomized variant at smaller exponents too
        out += [("A^q_R", {**qnorm, "q": q, "seed_source": "fresh"}) for q in (2.0, 4.0) if q < scale.q]
    return out


@dataclass(frozen=True)
class VariantRun:
    """One variant's training run at a scale.

    Attributes:
        variant: PAPER.md's name (``"A^q_R (m=1)"``).
        label: the same as a file name (``"Aq_R_m1"``).
        config: its ``TrainConfig``, without ``init_from``.
        erm_twin: the label of the ERM variant whose trained weights start this one
            (``scale.qnorm_from_erm``), or ``None``: from scratch.
    """

    variant: str
    label: str
    config: TrainConfig
    erm_twin: str | None


def file_label(variant: str) -> str:
    """PAPER.md's variant name as a file name: ``"A^q_R (m=1)"`` -> ``"Aq_R_m1"``."""
    return variant.replace("^", "").replace(" ", "").replace("(", "_").replace(")", "").replace("=", "")


def variant_runs(task_name: str, scale, train_seed: int = 0) -> list[VariantRun]:
    """Every variant's run at ``scale`` for one training seed, ERM twins before the q-norm
    variants they start."""
    runs: list[VariantRun] = []
    for variant, overrides in variants(task_name, scale):
        steps, twin = scale.steps, None
        if overrides["objective"] == "qnorm":
            steps = scale.qnorm_steps or scale.steps
            if scale.qnorm_from_erm:
                twin = next(r.label for r in runs if r.config.objective == "erm"
                            and r.config.seed_source == overrides["seed_source"])
        config = scale.train_config(seed=train_seed, steps=steps, eval_size=512, eval_every=max(1, steps // 10),
                                    checkpoint_every=steps, **overrides)
        runs.append(VariantRun(variant, file_label(variant), config, twin))
    return runs


def reproduce(task_name: str, scale_name: str = "cpu", out: str | Path = "reproduction",
              progress: bool = True, train_seeds: Sequence[int] = (0,)) -> list[dict[str, Any]]:
    """Train and evaluate every variant once per training seed; returns one row per run (also
    written to ``out``; the table and figure show the mean over training seeds and their range)."""
    train_seeds = list(train_seeds)
    if not train_seeds or len(set(train_seeds)) != len(train_seeds):
        raise ValueError(f"reproduce: train_seeds must be distinct and non-empty, got {train_seeds}")
    scale = scale_for(task_name, scale_name)
    out = Path(out)
    rows = []
    settings = [{"n_pairs": n} for n in scale.n_pairs] if task_name == "recall" else [{"n_vertices": scale.n_vertices}]
    for task_config in settings:
        task = make_task(task_name, **task_config)
        model_config = task.model_config(**scale.model_overrides())
        for train_seed in train_seeds:
            run_dirs: dict[str, Path] = {}  # ERM label -> its run dir, for the q-norm twins
            for run in variant_runs(task_name, scale, train_seed):
                config = run.config
                if run.erm_twin is not None:
                    config = dataclasses.replace(config, init_from=str(run_dirs[run.erm_twin]))
                run_dir = out / "runs" / "_".join([f"{k}{v}" for k, v in task_config.items()]
                                                  + [run.label, f"q{config.q:g}", f"seed{train_seed}"])
                result = train(task, model_config, config, run_dir, progress=progress)
                if config.objective == "erm":
                    run_dirs[run.label] = run_dir
                row = evaluate_variant(task, result.model, scale, config)
                row.update(variant=run.variant, q=config.q, m_seeds=config.m_seeds, steps=result.step,
                           train_seed=train_seed, train_seconds=round(result.seconds, 1), run_dir=str(run_dir),
                           init_from=config.init_from, **task_config)
                if task_name == "recall":
                    row["N"] = task_config["n_pairs"]
                save_summary(row, run_dir / "seeded_eval.json")
                rows.append(row)
    write_outputs(task_name, scale_name, rows, out)
    return rows


def scale_for(task_name: str, scale_name: str):
    """The named scale (``"cpu"`` or ``"paper"``) of a randomized task's experiment."""
    if task_name not in SCALES:
        raise ValueError(f"reproduce: task must be one of {sorted(SCALES)}, got {task_name!r}")
    if scale_name not in SCALES[task_name]:
        raise ValueError(f"reproduce: scale must be one of {sorted(SCALES[task_name])}, got {scale_name!r}")
    return SCALES[task_name][scale_name]


def evaluate_variant(task, model, scale, config: TrainConfig) -> dict[str, Any]:
    """Seeded evaluation of one trained variant on ``EVAL_INPUTS`` fresh inputs and
    ``scale.eval_seeds`` seeds (see :func:`evaluate_seeded`)."""
    generator = torch.Generator().manual_seed(EVAL_SEED)
    batch = task.sample(EVAL_INPUTS[task.name], generator)
    return evaluate_seeded(task, model, batch, scale.eval_seeds, generator,
                           fixed=config.seed_source == "fixed")


def evaluate_seeded(task, model, batch, n_seeds: int, generator: torch.Generator, *,
                    fixed: bool = False) -> dict[str, Any]:
    """PAPER.md's metrics of ``model`` on ``batch`` under ``n_seeds`` seeds drawn with
    ``generator``; a fixed-seed model (``fixed``) is run on its one seed r0, and its sampled
    baseline still draws ``n_seeds`` samples per input."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds={n_seeds} must be >= 1")
    seeds = task.fixed_seed()[None] if fixed else task.sample_seeds(n_seeds, generator)
    run = success_matrix(model, task, batch, seeds)
    # a kind without a single right answer (colouring) judges sampled outputs itself
    return summarize(run, majority_ks=(5, 30), generator=generator,
                     correct_fn=output_judge(task.loss_kind, batch), n_samples=n_seeds)


def write_outputs(task_name: str, scale_name: str, rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    x_key = SWEEP_KEY[task_name]
    (out / "reproduction.json").write_text(json.dumps(
        {"task": task_name, "scale": scale_name, "rows": rows, "paper": PAPER_POINTS[task_name],
         "paper_note": PAPER_NOTES[task_name]}, indent=2))
    (out / "reproduction.md").write_text(table(task_name, rows))
    title = f"{task_name}: ours ({scale_name} scale) and the paper's values"
    reproduction_figure(aggregate(task_name, rows), PAPER_POINTS[task_name], x_key, title).write_html(
        out / "reproduction.html", include_plotlyjs=True)


def _paper_value(task_name: str, row: dict[str, Any], metric: str) -> str:
    x_key = SWEEP_KEY[task_name]
    for p in PAPER_POINTS[task_name]:
        if p["variant"] == row["variant"] and p["metric"] == metric and p[x_key] == row[x_key]:
            return f"{p['value']:.2f}"
    return "–"


def _metrics(row: dict[str, Any]) -> dict[str, float | None]:
    """The numbers the table and figure show, read from one run's summary."""
    return {
        "average": row["average"],
        "worst_5pct": row["worst_5pct"],
        **{f"majority_{k}_worst": (row.get(f"majority_{k}") or {}).get("worst") for k in (5, 30)},
        "sampled_worst": (row.get("sampled") or {}).get("worst"),
        "predictive_variance": row["predictive_variance"],
    }


def aggregate(task_name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (sweep value, variant): each metric's mean over training seeds, with its
    ``min``/``max`` under ``{metric}_range``, the number of seeds, and the summed histogram."""
    x_key = SWEEP_KEY[task_name]
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
    return out


def table(task_name: str, rows: list[dict[str, Any]]) -> str:
    """The table as Markdown: the mean over training seeds (with the range over seeds when
    there are several) and, where PAPER.md has one, the paper's value beside ours."""
    x_key = SWEEP_KEY[task_name]

    def fmt(row: dict[str, Any], name: str) -> str:
        value = row[name]
        if value is None:
            return "–"
        low, high = row[f"{name}_range"]
        return f"{value:.2f}" + (f" [{low:.2f}–{high:.2f}]" if row["n_train_seeds"] > 1 else "")

    lines = [
        f"| {x_key} | variant | m | seeds | average (paper) | worst-5% (paper) | maj-5 worst | maj-30 worst "
        "| sampled worst | seed variance | histogram (10 bins, all seeds) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in aggregate(task_name, rows):
        lines.append(
            f"| {r[x_key]:g} | {r['variant']} | {r['m_seeds']} | {r['n_train_seeds']} "
            f"| {fmt(r, 'average')} ({_paper_value(task_name, r, 'average')}) "
            f"| {fmt(r, 'worst_5pct')} ({_paper_value(task_name, r, 'worst_5pct')}) "
            f"| {fmt(r, 'majority_5_worst')} | {fmt(r, 'majority_30_worst')} | {fmt(r, 'sampled_worst')} "
            f"| {r['predictive_variance']:.2e} | {' '.join(str(c) for c in r['histogram'])} |"
        )
    lines.append("")
    lines.append("Mean over training seeds; [min–max] over seeds where there are several.")
    lines.append(PAPER_NOTES[task_name])
    return "\n".join(lines) + "\n"


__all__ = ["PAPER_POINTS", "SCALES", "aggregate", "evaluate_seeded", "reproduce", "table", "variants"]
