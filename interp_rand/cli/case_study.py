"""``interp-rand case-study carry|sort RUN_DIR --out DIR``: run a case study on a trained run,
print each claim with its verdict against its control (HOLDS / FAILS / INCONCLUSIVE), then the
numbers behind them, and write ``case_study.json`` and ``case_study.html``
(the circuit drawing and the ablation figures, offline). The report is
:func:`interp_rand.reports.case_study.case_study_report`."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand import progress
from interp_rand.cli.options import at_least, output_path, seed_option
from interp_rand.cli.circuit import add_card_options
from interp_rand.reports.case_study import STUDIES


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "case-study", help="carry propagation (addition) or sorting passes (sort), backed by ablations",
        description="carry: the components that move carries (carry-flip patching), carry-removal "
        "ablation against random same-position components, the carry probe, cascades. sort: the "
        "heads that point to the next element, per-position ablation against random heads, "
        "duplicates and near-ties. Prints one line per claim with its verdict against its control "
        "(HOLDS, FAILS or INCONCLUSIVE, with the numbers), then the details; writes JSON and HTML.",
    )
    parser.add_argument("study", choices=STUDIES)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--seed", type=seed_option, default=0, help="seed of every draw (default: 0)")
    parser.add_argument("--controls", type=at_least(2), default=10, help="random control sets (default: 10)")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=None,
                        help="evaluation examples (default: carry 2000, sort 4000)")
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
    cards = ", card.json, card.html" if report.card is not None else ""
    print(f"wrote {args.out}/case_study.json, circuit.json, case_study.html{cards}")
    return 0
