"""``interp-rand qsweep recall|coloring``: where the seed starts to be used as q grows (the q
sweep at a fixed budget, and with ``--ramp`` one run whose q grows during training)."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path

from interp_rand.cli import catalogue
from interp_rand.cli.options import at_least, number, output_path, seed_option

DEFAULT_QS = "1,2,4,8,16,32,100"


def q_list(text: str) -> list[float]:
    """``type=`` of ``--qs``: comma-separated numbers, each a finite q that ``TrainConfig.q``
    allows (>= 1: 1 is ERM), none repeated."""
    allowed = next(spec for spec in catalogue.config_options("TrainConfig") if spec.name == "q").limits()
    one_q = number(float, dataclasses.replace(allowed, infinite=False))
    values = []
    for part in text.split(","):
        try:
            values.append(one_q(part.strip()))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"every q {err}") from None
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"q values repeat in {text!r}")
    return values


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "qsweep", help="the q transition: seed use per node, stored set and worst-case success against q",
        description="Train the task's randomized recipe A^q_R (its experiment's scale, as `reproduce` "
        "trains it) at each q of --qs with the same budget and seeds, one run folder per q under --out "
        "(q1, q2, ...; a finished run is skipped, an unfinished one resumes). On each run's final "
        "checkpoint: seed use per node (seed-resample patching) against a random-initialised model of the "
        "same config, recall's stored set across seeds, and the average and worst-5% success over seeds. "
        "Reports the q at which seed use first rises above its control and stays there, and which node "
        "first. --ramp adds one run at the largest q whose exponent grows from 1 during training, replayed "
        "over its checkpoints: the step of the rise, the first node, and whether the stored set starts to "
        "mix seeds before or after the worst-case success rises. Writes qsweep.json and qsweep.html.",
    )
    parser.add_argument("task", choices=catalogue.choices("reproduce_task"),
                        help="a randomized task with an experiment (its A^q_R recipe)")
    parser.add_argument("--qs", type=q_list, default=q_list(DEFAULT_QS), metavar="Q,Q,...",
                        help=f"the exponents, comma-separated, each >= 1 (default: {DEFAULT_QS})")
    parser.add_argument("--steps", type=at_least(1), default=None, metavar="N",
                        help="training steps of every run (default: the recipe's; another value is recorded "
                        "as a departure)")
    parser.add_argument("--out", type=output_path, default=None, help="output folder (default: qsweep/TASK)")
    parser.add_argument("--scale", choices=catalogue.choices("reproduce_scale"), default="cpu",
                        help="the experiment's scale whose recipe is trained (default: cpu)")
    parser.add_argument("--train-seed", type=seed_option, default=0, metavar="SEED",
                        help="training seed of every run (default: 0)")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=256,
                        help="examples of the seed-use analysis, the same for every run (default: 256)")
    parser.add_argument("--eval-inputs", type=at_least(1, counts="examples"), default=None, metavar="N",
                        help="fresh inputs of each run's seeded evaluation (default: the experiment's)")
    parser.add_argument("--replay", action="store_true",
                        help="also replay the analyses over each run's checkpoints (--checkpoints of them)")
    parser.add_argument("--checkpoints", type=at_least(2), default=10, metavar="K",
                        help="checkpoints kept per run for --replay (default: 10)")
    parser.add_argument("--ramp", action="store_true",
                        help="also train one run whose q grows from 1 to the largest --qs, and replay it")
    parser.add_argument("--ramp-checkpoints", type=at_least(2), default=30, metavar="K",
                        help="checkpoints of the ramp run (default: 30)")
    parser.add_argument("--ramp-steps", type=at_least(1), default=None, metavar="N",
                        help="steps over which q grows (default: the whole run)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines or bars")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.reports.dynamics.qsweep import q_sweep

    out = args.out or Path("qsweep") / args.task
    command = shlex.join(["interp-rand", *getattr(args, "argv", [])])
    result = q_sweep(args.task, args.qs, out, steps=args.steps, scale=args.scale, train_seed=args.train_seed,
                     n=args.n, eval_inputs=args.eval_inputs, replay=args.replay, replay_checkpoints=args.checkpoints,
                     ramp=args.ramp, ramp_checkpoints=args.ramp_checkpoints, ramp_steps=args.ramp_steps,
                     progress=not args.quiet, command=command)
    json_path, html_path = result.write(out)
    print(result.text())
    print(f"wrote {json_path} and {html_path}")
    return 0
