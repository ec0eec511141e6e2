"""``interp-rand eval RUN_DIR``: evaluate a trained run on fresh examples of its task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand import progress
from interp_rand.cli import catalogue
from interp_rand.cli.options import at_least, output_path

from interp_rand.defaults import DEFAULT_SEED as DEFAULT_EVAL_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "eval", help="evaluate a trained run on fresh examples",
        description="Evaluate the newest checkpoint of RUN_DIR (or a checkpoint folder) on fresh "
        "examples of its task; prints the result and writes eval.json next to the checkpoint "
        "(zoo:NAME: into zoo-output/NAME, or --out).",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=output_path, default=None,
                        help="folder for eval.json / seeded_eval.json (default: RUN_DIR; zoo-output/NAME for zoo:NAME)")
    parser.add_argument("--task", choices=catalogue.task_names(), default=None,
                        help="expected task; an error if the checkpoint was trained on another")
    parser.add_argument("--n", type=at_least(1), default=10_000, help="fresh examples (default: 10000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_EVAL_SEED,
                        help="seed of the evaluation examples")
    parser.add_argument("--seeds", type=at_least(1), default=None, metavar="S",
                        help="randomized tasks: also run every example under S random seeds (a "
                        "fixed-seed run: its seed r0) and write the paper's metrics (README: The randomized-algorithms setting; average and "
                        "worst-5%% success, majority-5/30, the sampled baseline, predictive "
                        "variance, histogram) to seeded_eval.json")
    return parser


def run(args: argparse.Namespace) -> int:
    import torch

    from interp_rand.evaluation import evaluate
    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.objectives import fixed_seeds_if_asked
    from interp_rand.zoo.location import output_folder

    ckpt = load_checkpoint(args.run_dir, task=args.task)
    task = ckpt.spec.make_task()
    if args.seeds is not None and not hasattr(task, "sample_seeds"):  # before any work is done
        raise ValueError(f"--seeds: task {task.name!r} has no seed channel; --seeds is for the randomized "
                         f"tasks ({', '.join(_seeded_tasks())})")
    batch = task.sample(args.n, torch.Generator().manual_seed(args.seed))
    # a model trained on the fixed seed r0 is evaluated on r0, as in training
    batch = fixed_seeds_if_asked(task, batch, ckpt.spec.train_config)
    result = evaluate(ckpt.model(), task, batch, progress=True)
    report = {"checkpoint": str(ckpt.path), "step": ckpt.step, "task": ckpt.spec.task_name,
              "eval_seed": args.seed, **result.to_dict()}
    run_dir = output_folder(args.run_dir, ckpt.path.parent.parent, args.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "eval.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "breakdown"}, indent=2))
    print(f"wrote {run_dir / 'eval.json'}")
    if args.seeds is not None:
        _seeded(args, ckpt, task, batch, run_dir)
    return 0


def _seeded(args: argparse.Namespace, ckpt, task, batch, run_dir: Path) -> None:
    import torch

    from interp_rand.reproduce import evaluate_seeded
    from interp_rand.seeded_evaluation import save_summary

    fixed = ckpt.spec.train_config.seed_source == "fixed"
    with progress.stage(f"{len(batch)} inputs x {1 if fixed else args.seeds} seeds"):
        summary = evaluate_seeded(task, ckpt.model(), batch, args.seeds, torch.Generator().manual_seed(args.seed),
                                  fixed=fixed)
    summary = {"checkpoint": str(ckpt.path), "step": ckpt.step, "eval_seed": args.seed, **summary}
    save_summary(summary, run_dir / "seeded_eval.json")
    print(json.dumps({k: summary[k] for k in ("n_inputs", "n_seeds", "average", "worst_5pct",
                                              "predictive_variance")}, indent=2))
    print(f"wrote {run_dir / 'seeded_eval.json'}")


def _seeded_tasks() -> list[str]:
    from interp_rand.tasks import task_class, task_names

    return [name for name in task_names() if hasattr(task_class(name), "sample_seeds")]
