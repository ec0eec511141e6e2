"""``make demo``: the main job on an embedded default.

Trains a small sort model and a small addition model on CPU, evaluates them on fresh examples
(addition: on every one of the 10^6 three-digit problems), and writes to one folder: the run
directories (checkpoints, ``metrics.jsonl``, ``eval.json``), ``summary.json`` and
``training_curves.html`` (self-contained, works offline).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from interp_rand.evaluation import evaluate
from interp_rand.figures import training_curves
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train

# name -> (task, model overrides, training config, how to evaluate)
DEMO_RUNS: dict[str, dict[str, Any]] = {
    "sort": {
        "task": {"name": "sort", "length": 8, "vocab": 32},
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_mlp": 128},
        "train": TrainConfig(steps=1500, batch_size=128, lr=3e-3, warmup_steps=100, eval_every=100,
                             eval_size=1000, checkpoint_every=500, stop_at_exact_match=0.999),
        "eval": {"fresh": 10_000},
    },
    "addition": {
        "task": {"name": "addition", "n_digits": 3},
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_mlp": 128},
        "train": TrainConfig(steps=2500, batch_size=128, lr=3e-3, warmup_steps=100, eval_every=100,
                             eval_size=1000, checkpoint_every=500, stop_at_exact_match=0.999),
        "eval": {"exhaustive": True},
    },
}
EVAL_SEED = 7


def run_demo(out: str | Path, progress: bool = True) -> dict[str, Any]:
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    histories = {}
    for name, spec in DEMO_RUNS.items():
        task_spec = dict(spec["task"])
        task = make_task(task_spec.pop("name"), **task_spec)
        result = train(task, task.model_config(**spec["model"]), spec["train"], out / name, progress=progress)
        if spec["eval"].get("exhaustive"):
            batch = task.exhaustive()
            label = f"all {len(batch):,} problems"
        else:
            n = spec["eval"]["fresh"]
            batch, label = task.sample(n, torch.Generator().manual_seed(EVAL_SEED)), f"{n:,} fresh examples"
        evaluation = evaluate(result.model, task, batch, progress=progress)
        report = {"task": task.name, "task_config": task.config_dict(), "step": result.step,
                  "train_seconds": round(result.seconds, 1), "evaluated_on": label, **evaluation.to_dict()}
        (out / name / "eval.json").write_text(json.dumps(report, indent=2))
        summary[name] = report
        histories[name] = result.history
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    training_curves(histories).write_html(out / "training_curves.html", include_plotlyjs=True)
    print(_table(summary))
    print(f"\nwrote runs, summary.json and training_curves.html to {out}")
    return summary


def _table(summary: dict[str, Any]) -> str:
    lines = [f"{'task':<10} {'steps':>6} {'train s':>8} {'evaluated on':>22} {'exact match':>12}  per position"]
    for name, r in summary.items():
        per_position = " ".join(f"{p:.3f}" for p in r["per_position"])
        lines.append(
            f"{name:<10} {r['step']:>6} {r['train_seconds']:>8} {r['evaluated_on']:>22} "
            f"{r['exact_match']:>12.4f}  {per_position}"
        )
    return "\n".join(lines)
