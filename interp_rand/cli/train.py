"""``interp-rand train TASK``: options generated from the task, model and training configs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand.cli import catalogue
from interp_rand.cli.options import add_dataclass_options, collect, output_path

# ModelConfig fields with a fixed set of values
MODEL_CHOICE_FIELDS = ("attention", "mask", "input_kind", "seed_mode", "positional", "normalization_type", "act_fn",
                       "input_mlp_act", "init")
# The task decides these (vocabulary, input and output widths); the CLI does not offer them.
TASK_FIXED_MODEL_FIELDS = ("d_vocab", "d_input", "d_vocab_out", "input_kind")


def add_parser(commands) -> argparse.ArgumentParser:
    train_parser = commands.add_parser(
        "train", help="train a model on a task",
        description="Train a model on TASK. Each task has its own options: "
        "`interp-rand train TASK --help` lists them with the model and training options.",
    )
    per_task = train_parser.add_subparsers(dest="task", required=True, metavar="TASK")
    model_choices = {name: catalogue.choices(name) for name in MODEL_CHOICE_FIELDS}
    train_choices = {name: catalogue.choices(name) for name in ("objective", "seed_source")}
    for name in catalogue.task_names():
        description = catalogue.task_description(name)
        sub = per_task.add_parser(name, help=description, description=f"Train on {name!r}: {description}")
        task_fields = add_dataclass_options(sub.add_argument_group(f"{name} task options"),
                                            catalogue.task_options(name))
        train_fields = add_dataclass_options(
            sub.add_argument_group("training options"), catalogue.config_options("TrainConfig"),
            choices=train_choices,
        )
        model_fields = add_dataclass_options(
            sub.add_argument_group(
                "model options (override the task's default model)",
                f"Defaults: the {name} task's own model at the task options' defaults (derived sizes, "
                "such as --n-ctx from the task options or --d-head from --d-model, follow the options given)."),
            catalogue.config_options("ModelConfig"), defaults=catalogue.task_model_defaults(name),
            choices=model_choices, keep_default=False, skip=TASK_FIXED_MODEL_FIELDS,
        )
        clash = set(task_fields) & (set(train_fields) | set(model_fields))
        if clash:
            raise RuntimeError(f"task {name!r} options clash with model/training options: {sorted(clash)}")
        run_group = sub.add_argument_group("run")
        run_group.add_argument("--out", type=output_path, default=None,
                               help=f"run directory (default: runs/{name})")
        run_group.add_argument("--no-resume", action="store_true",
                               help="refuse to start if the run directory already has checkpoints "
                               "(default: continue from the last checkpoint)")
        run_group.add_argument("--quiet", action="store_true", help="no progress bar")
        sub.set_defaults(task_fields=task_fields, train_fields=train_fields, model_fields=model_fields)
    return train_parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.tasks import make_task
    from interp_rand.training import TrainConfig, train

    task = make_task(args.task, **collect(args, args.task_fields))
    model_config = task.model_config(**collect(args, args.model_fields))
    train_config = TrainConfig(**collect(args, args.train_fields))
    from interp_rand.output import check_output

    out = check_output(args.out or Path("runs") / args.task)  # a default path checked as an explicit one
    # an interrupt's line (with the command that resumes) is interp_rand.cli.main's
    result = train(task, model_config, train_config, out, resume=not args.no_resume, progress=not args.quiet)
    summary = {"run_dir": str(out), "step": result.step,
               **(result.last_eval.to_dict() if result.last_eval else {})}
    summary.pop("breakdown", None)
    print(json.dumps(summary, indent=2))
    return 0
