"""``interp-rand``: train, evaluate and list tasks. Thin: it parses into the library's configs
and calls the library."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
from interp_rand.cli.options import add_dataclass_options, collect, field_docs
from interp_rand.evaluation import evaluate
from interp_rand.model import config as model_config_module
from interp_rand.model.config import ModelConfig
from interp_rand.tasks import task_class, task_names
from interp_rand.training import TrainConfig, objective_names, train
from interp_rand.training.config import SEED_SOURCES
from interp_rand.training.objectives import fixed_seeds_if_asked
from interp_rand.training.trainer import TrainingDiverged

_MODEL_CHOICES = {
    "attention": model_config_module.ATTENTION_KINDS,
    "mask": model_config_module.MASK_KINDS,
    "input_kind": model_config_module.INPUT_KINDS,
    "seed_mode": model_config_module.SEED_MODES,
    "positional": model_config_module.POSITIONAL_KINDS,
    "normalization_type": model_config_module.NORMALIZATION_TYPES,
    "act_fn": model_config_module.ACT_FNS,
}
# The task decides these (vocabulary, input and output widths); the CLI does not offer them.
_TASK_FIXED_MODEL_FIELDS = ("d_vocab", "d_input", "d_vocab_out", "input_kind")
DEFAULT_EVAL_SEED = 20_261_130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp-rand",
        description="Train small TransformerLens-hooked transformers on algorithmic and randomized "
        "tasks, evaluate them, and analyse their circuits.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    commands.add_parser("tasks", help="list the registered tasks and their options",
                        description="List the registered tasks, their options and defaults.")

    train_parser = commands.add_parser(
        "train", help="train a model on a task",
        description="Train a model on TASK. Each task has its own options: "
        "`interp-rand train TASK --help` lists them with the model and training options.",
    )
    per_task = train_parser.add_subparsers(dest="task", required=True, metavar="TASK")
    for name in task_names():
        cls = task_class(name)
        sub = per_task.add_parser(
            name, help=cls.description, description=f"Train on {name!r}: {cls.description}",
        )
        task_fields = add_dataclass_options(sub.add_argument_group(f"{name} task options"), cls)
        train_fields = add_dataclass_options(
            sub.add_argument_group("training options"), TrainConfig,
            choices={"objective": tuple(objective_names()), "seed_source": SEED_SOURCES},
        )
        model_fields = add_dataclass_options(
            sub.add_argument_group("model options (override the task's default model)"),
            ModelConfig, choices=_MODEL_CHOICES, keep_default=False,
            skip=_TASK_FIXED_MODEL_FIELDS,
        )
        clash = set(task_fields) & (set(train_fields) | set(model_fields))
        if clash:
            raise RuntimeError(f"task {name!r} options clash with model/training options: {sorted(clash)}")
        run = sub.add_argument_group("run")
        run.add_argument("--out", type=Path, default=None,
                         help=f"run directory (default: runs/{name})")
        run.add_argument("--no-resume", action="store_true",
                         help="refuse to start if the run directory already has checkpoints "
                         "(default: continue from the last checkpoint)")
        run.add_argument("--quiet", action="store_true", help="no progress bar")
        sub.set_defaults(task_fields=task_fields, train_fields=train_fields, model_fields=model_fields)

    eval_parser = commands.add_parser(
        "eval", help="evaluate a trained run on fresh examples",
        description="Evaluate the newest checkpoint of RUN_DIR (or a checkpoint folder) on fresh "
        "examples of its task; prints the result and writes eval.json next to the checkpoint.",
    )
    eval_parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    eval_parser.add_argument("--task", choices=task_names(), default=None,
                             help="expected task; an error if the checkpoint was trained on another")
    eval_parser.add_argument("--n", type=int, default=10_000, help="fresh examples (default: 10000)")
    eval_parser.add_argument("--seed", type=int, default=DEFAULT_EVAL_SEED,
                             help="seed of the evaluation examples")

    repro = commands.add_parser(
        "reproduce", help="train and compare the paper's model variants on a randomized task",
        description="Train the variants A^E_r0, A^q_r0, A^E_R, A^q_R (and A^q_R with m = 1) on "
        "recall (sweeping N) or colouring (sweeping q), evaluate each over many seeds, and write a "
        "table and a figure with the paper's values beside ours.",
    )
    repro.add_argument("task", choices=["recall", "coloring"])
    repro.add_argument("--scale", choices=["cpu", "paper"], default="cpu",
                       help="cpu: minutes on 2 cores; paper: the paper's settings, for a GPU (default: cpu)")
    repro.add_argument("--out", type=Path, default=None, help="output folder (default: reproduction/TASK-SCALE)")
    repro.add_argument("--seed", type=int, default=0, help="training seed (default: 0)")
    repro.add_argument("--quiet", action="store_true", help="no progress bars")

    demo = commands.add_parser(
        "demo", help="train small sort and addition models on CPU and evaluate them",
        description="The main job on an embedded default: trains small sort and addition models "
        "on CPU (a few minutes), evaluates them on fresh examples and writes runs, a summary and "
        "a figure of the training curves to a folder it prints.",
    )
    demo.add_argument("--out", type=Path, default=Path("demo-output"), help="output folder (default: demo-output)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "tasks":
            return _tasks()
        if args.command == "train":
            return _train(args)
        if args.command == "eval":
            return _eval(args)
        if args.command == "reproduce":
            from interp_rand.reproduce import reproduce, table

            out = args.out or Path("reproduction") / f"{args.task}-{args.scale}"
            rows = reproduce(args.task, args.scale, out, progress=not args.quiet, train_seed=args.seed)
            print(table(args.task, rows))
            print(f"wrote reproduction.json, reproduction.md and reproduction.html to {out}")
            return 0
        if args.command == "demo":
            from interp_rand.demo import run_demo

            run_demo(args.out, progress=not args.quiet)
            return 0
    except (ValueError, CheckpointError, TrainingDiverged, FloatingPointError, OSError) as err:
        print(f"interp-rand {args.command}: error: {err}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


def _tasks() -> int:
    for name in task_names():
        cls = task_class(name)
        print(f"{name}: {cls.description}")
        docs = field_docs(cls)
        for field in dataclasses.fields(cls):
            text = docs.get(field.name, "").replace("``", "")
            print(f"    --{field.name.replace('_', '-'):<20} default {field.default!r:<8} {text}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from interp_rand.tasks import make_task

    task = make_task(args.task, **collect(args, args.task_fields))
    model_config = task.model_config(**collect(args, args.model_fields))
    train_config = TrainConfig(**collect(args, args.train_fields))
    out = args.out or Path("runs") / args.task
    result = train(task, model_config, train_config, out, resume=not args.no_resume, progress=not args.quiet)
    summary = {"run_dir": str(out), "step": result.step,
               **(result.last_eval.to_dict() if result.last_eval else {})}
    summary.pop("breakdown", None)
    print(json.dumps(summary, indent=2))
    return 0


def _eval(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise ValueError(f"--n={args.n} must be >= 1")
    ckpt = load_checkpoint(args.run_dir)
    if args.task is not None and args.task != ckpt.spec.task_name:
        raise ValueError(
            f"{ckpt.path} was trained on task {ckpt.spec.task_name!r}, not {args.task!r}"
        )
    task = ckpt.spec.make_task()
    batch = task.sample(args.n, torch.Generator().manual_seed(args.seed))
    # a model trained on the fixed seed r0 is evaluated on r0, as in training
    batch = fixed_seeds_if_asked(task, batch, ckpt.spec.train_config)
    result = evaluate(ckpt.model(), task, batch, progress=True)
    report = {"checkpoint": str(ckpt.path), "step": ckpt.step, "task": ckpt.spec.task_name,
              "eval_seed": args.seed, **result.to_dict()}
    (ckpt.path.parent.parent / "eval.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "breakdown"}, indent=2))
    print(f"wrote {ckpt.path.parent.parent / 'eval.json'}")
    return 0
