"""``interp-rand reproduce recall|coloring``: the paper's variants, side by side with its numbers."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli import catalogue
from interp_rand.cli.options import at_least, output_path, seed_option


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "reproduce", help="train and compare the paper's model variants on a randomized task",
        description="Train the variants A^E_r0, A^q_r0, A^E_R, A^q_R (and A^q_R with m = 1) on "
        "recall (sweeping N) or colouring (sweeping q), evaluate each over many seeds, and write a "
        "table and a figure with the paper's values beside ours.",
    )
    parser.add_argument("task", choices=catalogue.choices("reproduce_task"))
    parser.add_argument("--scale", choices=catalogue.choices("reproduce_scale"), default="cpu",
                        help="cpu: minutes on 2 cores; paper: the paper's settings, for a GPU; port (recall only): the "
                        "public port's recipe at N = 14 and 16, about 95 minutes a run on one core (default: cpu)")
    parser.add_argument("--out", type=output_path, default=None, help="output folder (default: reproduction/TASK-SCALE)")
    parser.add_argument("--train-seeds", "--seeds", dest="seeds", type=seed_option, nargs="+", default=[0], metavar="SEED",
                        help="training seeds; every variant is trained once per seed and the table "
                        "shows the mean and the range over seeds (default: 0)")
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="run each training and evaluation as a Ray task: 'local' starts a local Ray "
                        "instance of --workers CPUs; host:port, ray://host:port or auto joins a cluster "
                        "(its workers must import interp_rand and share the output folder). Without it "
                        "the runs execute here, one after the other")
    parser.add_argument("--workers", type=at_least(1), default=None, metavar="N",
                        help="CPUs of the local Ray instance (--ray-address local; default: all cores)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines or bars")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reproduce import OUTPUT_FILES, reproduce, table

    out = args.out or Path("reproduction") / f"{args.task}-{args.scale}"
    if args.workers is not None and args.ray_address != "local":
        raise ValueError("--workers sizes a local Ray instance: use it with --ray-address local")
    claim(out, OUTPUT_FILES, keeps=f"the runs finished or checkpointed under {out} are kept and reused")
    rows = reproduce(args.task, args.scale, out, progress=not args.quiet, train_seeds=args.seeds,
                     ray_address=args.ray_address, workers=args.workers)
    print(table(args.task, rows))
    print(f"wrote reproduction.json, reproduction.md and reproduction.html to {out}")
    return 0
