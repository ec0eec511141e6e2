"""``interp-rand demo``: a tour of the toolkit on the zoo's trained models (``--train``: train
small models first instead)."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli.options import output_path


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "demo", help="a tour of the toolkit on the zoo's trained models (no training)",
        description="Runs the main analyses on the trained models shipped with the package (zoo:NAME), "
        "printing each command and its output: evaluation, the carry and sorting case studies, the "
        "randomness channel of the randomized colouring model against ERM, and a grid-world agent's "
        "exploration map. Writes everything under --out with an index.html of the figures. With "
        "--train it instead trains small sort and addition models on CPU (a few minutes) and "
        "evaluates them.",
    )
    parser.add_argument("--out", type=output_path, default=Path("demo-output"),
                        help="output folder (default: demo-output)")
    parser.add_argument("--train", action="store_true",
                        help="train small sort and addition models first instead of using the zoo")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (with --train)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.demo import DEMO_FILES, TOUR_FILES, run_demo, run_tour
    from interp_rand.output import claim

    claim(args.out, DEMO_FILES if args.train else TOUR_FILES)
    if args.train:
        run_demo(args.out, progress=not args.quiet)
    else:
        run_tour(args.out, args.main)  # the command line's entry point, given by it
    return 0
