"""``interp-rand generalization RUN_DIR|zoo:NAME|--model MODULE:FUNCTION --lengths A-B --out DIR``:
accuracy by length up to lengths the model never saw, the extrapolation factor and where it
breaks first (:func:`circuits.analyses.length_generalization.generalization`). Writes
``generalization.json`` and ``generalization.html``; the report is
:func:`interp_rand.reports.generalization.generalization_report`."""

from __future__ import annotations

import argparse

from interp_rand import progress
from interp_rand.cli.model_option import add_run_or_model, check_args, given_model  # noqa: F401 (check_args: main's)
from interp_rand.cli.options import at_least, output_path, seed_option


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "generalization", help="accuracy at lengths the model never saw: extrapolation factor, where it breaks",
        description="Run the model on its task at every length of --lengths (default: the shortest trained length "
        "to 3x the longest; a run's trained range comes from its config: --min-length to the task's length). "
        "Reports exact match and accuracy per output position at each length, the extrapolation factor (the "
        "longest length such that every length from the trained maximum up to it scores exact match >= 0.9, "
        "over the trained maximum) and where it breaks: the first failing length, its first failing output, "
        "and the head whose attention at the answers moves first (its mass per position role, or its entropy) "
        "against the trained maximum; and the mechanism explain finds at the trained maximum, restated at longer lengths: "
        "which variable's interchange accuracy falls first (where none falls and no head moves: the mechanism holds "
        "and the readout fails). Lengths "
        "a learned positional table cannot reach are reported as not run. Tasks with a length: sort (length), "
        "addition (n_digits), or a TaskSpec with lengths=(A, B).",
    )
    add_run_or_model(parser)
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--lengths", default=None, metavar="A-B",
                        help="the lengths to run (default: the shortest trained to 3x the longest)")
    parser.add_argument("--trained", default=None, metavar="A-B",
                        help="the lengths the model was trained on (default: from the run's config; for --model, "
                        "the task's own length)")
    parser.add_argument("--n", type=at_least(16, counts="examples"), default=512,
                        help="examples per length (default: 512)")
    parser.add_argument("--no-mechanism", action="store_true",
                        help="skip the mechanism: by default explain finds it at the trained maximum and it is checked "
                        "at up to 6 longer lengths (which variable's interchange accuracy falls first; about 30 s "
                        "for a small sort model)")
    parser.add_argument("--seed", type=seed_option, default=0, help="seed of every draw (default: 0)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.generalization import GeneralizationReport, generalization_report
    from interp_rand.tasks.lengths import parse_lengths

    lengths = None if args.lengths is None else parse_lengths(args.lengths)
    trained = None if args.trained is None else parse_lengths(args.trained)
    claim(args.out, GeneralizationReport.FILES)
    own = given_model(args)
    with progress.scope("generalization"):
        report = generalization_report(args.run_dir, **own, lengths=lengths, n=args.n, seed=args.seed,
                                       mechanism=not args.no_mechanism,
                                       trained=None if trained is None else (trained.start, trained.stop - 1),
                                       progress=True)
        progress.note("writing generalization.json, generalization.html")
    report.write(args.out)
    print(report.text())
    print(f"wrote {args.out}/generalization.json, generalization.html")
    return 0
