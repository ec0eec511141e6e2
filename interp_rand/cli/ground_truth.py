"""``interp-rand ground-truth``: score the circuit-discovery methods against circuits known by
construction (the planted models of :mod:`circuits.analyses.planted`: hand-set models at the
shapes of this toolkit's tasks, with distractors). Prints the method x model table (edge AUROC,
MIB's CPR and CMD, necessity CMD, seconds) and writes it as ground_truth.json and
ground_truth.html. The suite is :func:`circuits.analyses.ground_truth.ground_truth_suite`."""

from __future__ import annotations

import argparse

from interp_rand.cli import catalogue
from interp_rand.cli.options import output_path


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "ground-truth", help="score discovery methods against planted circuits (AUROC, CPR, CMD)",
        description="Run every discovery method on hand-set models whose circuit is known by construction "
        "(a sort head copying the next-larger element, an addition model with a wired carry, a recall "
        "model with a hand-set storage rule, seed readers, distractors) and score each by the edge AUROC "
        "of its scores against the known edges, MIB's CPR and CMD, and its time.",
    )
    methods = catalogue.choices("method")
    parser.add_argument("--methods", nargs="+", choices=methods, default=list(methods),
                        help="discovery methods (default: all)")
    models = catalogue.choices("planted_model")
    parser.add_argument("--models", nargs="+", choices=models, default=list(models),
                        help="planted models (default: all)")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    return parser


def run(args: argparse.Namespace) -> int:
    from circuits.analyses.ground_truth import format_table, ground_truth_suite, write_tables

    from interp_rand.output import claim, replace_files

    files = ("ground_truth.json", "ground_truth.html")
    claim(args.out, files)
    rows = ground_truth_suite(methods=tuple(args.methods), models=tuple(args.models))
    with replace_files(args.out, files) as stage:
        write_tables(rows, *(stage / name for name in files))
    print(format_table(rows))
    print(f"wrote {args.out}/ground_truth.json, ground_truth.html")
    return 0
