"""``interp-rand demo``: a tour of the toolkit on the zoo's trained models (``--train``: train
small models first instead)."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli.options import at_least, output_path



def jobs_option(text: str) -> str | int:
    """``auto`` or an integer >= 1."""
    return text if text == "auto" else at_least(1)(text)


def auto_jobs() -> int:
    """2 where two cores are free (load average below ``cores - 1``: side by side, the steps
    only gain where a second core is idle; at load 3 on 2 cores the tour took 221 s side by
    side against 193 s one after the other), else 1."""
    import os

    from interp_rand.threads import cores

    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1
    return 2 if cores() >= 2 and load < cores() - 1 else 1


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
    parser.add_argument("--jobs", type=jobs_option, default="auto", metavar="N",
                        help="tour steps run at once, each in its own process on one thread (default: auto, 2 when "
                        "the machine has two cores with little else running (load average below cores - 1), else 1; "
                        "1 runs them one after the other in this process); the output is printed in the tour's "
                        "order and no result depends on it. The carry and sort studies never run together (memory)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.demo import DEMO_FILES, TOUR_FILES, run_demo, run_tour
    from interp_rand.output import claim

    claim(args.out, DEMO_FILES if args.train else TOUR_FILES)
    if args.train:
        run_demo(args.out, progress=not args.quiet)
    else:
        run_tour(args.out, args.main, jobs=auto_jobs() if args.jobs == "auto" else args.jobs)  # the command line's entry point, given by it
    return 0
