"""``interp-rand demo``: the main job on an embedded default."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "demo", help="train small sort and addition models on CPU and evaluate them",
        description="The main job on an embedded default: trains small sort and addition models "
        "on CPU (a few minutes), evaluates them on fresh examples and writes runs, a summary and "
        "a figure of the training curves to a folder it prints.",
    )
    parser.add_argument("--out", type=Path, default=Path("demo-output"), help="output folder (default: demo-output)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.demo import run_demo

    run_demo(args.out, progress=not args.quiet)
    return 0
