"""``interp-rand case-study carry|sort|recall-seed|coloring-seed [RUN_DIR] --out DIR``: check the
study's mechanism on a trained run (default: its zoo run) and print the algorithm with a verdict
per check (HOLDS / FAILS / INCONCLUSIVE); the carry and sort studies then run their edge-level
study and print each claim against its control. Writes ``case_study.json``, ``mechanism.json``
and ``case_study.html`` (the mechanism drawing, then the circuit and ablation figures, offline).
The report is :func:`interp_rand.reports.case_study.case_study_report`."""

from __future__ import annotations

import argparse
from interp_rand import progress
from interp_rand.cli.options import at_least, output_path, seed_option
from interp_rand.cli.circuit import add_card_options
from interp_rand.reports.case_study import STUDIES


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "case-study", help="a flagship mechanism checked on its run (carry, sort, recall-seed, coloring-seed)",
        description="Each study states an algorithm (pseudocode naming the components that compute "
        "each step) and checks it: interchange accuracy per variable against random-site, "
        "random-init (and random-direction) controls, causal scrubbing of the whole hypothesis "
        "against random location sets of the same size, and the predictions it makes about where "
        "the model fails or succeeds. carry and sort then add their edge-level study: carry-removal "
        "ablation against random same-position components, the carry probe, cascades (carry); the "
        "next-element heads, per-position ablation, duplicates and near-ties (sort). Prints one "
        "line per claim with its verdict (HOLDS, FAILS or INCONCLUSIVE, with the numbers); writes "
        "JSON and HTML.",
    )
    parser.add_argument("study", choices=STUDIES)
    parser.add_argument("run_dir", nargs="?", default=None, metavar="RUN_DIR",
                        help="a run of the study's task or zoo:NAME (default: the mechanism's zoo run: "
                        "zoo:addition, zoo:sort, zoo:recall-Aq_R, zoo:coloring-Aq_R)")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--seed", type=seed_option, default=0, help="seed of every draw (default: 0)")
    parser.add_argument("--controls", type=at_least(2), default=10, help="random control sets (default: 10)")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=None,
                        help="evaluation examples (default: mechanism 2000; edge-level carry 2000, sort 4000)")
    add_card_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.reports.case_study import case_study_report

    with progress.scope(f"case-study {args.study}"):
        report = case_study_report(args.study, args.run_dir, seed=args.seed, n_controls=args.controls, n=args.n,
                                   card=not args.no_card, card_resamples=args.card_resamples, progress=True)
        progress.note("writing case_study.json, circuit.json, case_study.html")
    report.write(args.out)
    print(report.text())
    extra = (", circuit.json" if report.result is not None else "") + (
        ", card.json, card.html" if report.card is not None else "")
    print(f"wrote {args.out}/case_study.json, mechanism.json, case_study.html{extra}")
    return 0
