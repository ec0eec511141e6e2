"""``interp-rand randomness RUN_DIR [--compare RUN_DIR_B] --out DIR``: how a seeded model uses
its randomness channel (usage score per node, where seed information enters, and per task the
recall stored-set map or the colouring symmetry breaking); writes ``randomness.json`` and
``randomness.html`` and prints the key numbers, side by side with ``--compare``. The report is
:func:`interp_rand.reports.randomness.randomness_report`."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli.model_option import add_model_option, check_args, model_or_run  # noqa: F401 (check_args: main's)
from interp_rand.cli.options import at_least, output_path, seed_option

from interp_rand.defaults import DEFAULT_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "randomness", help="how a seeded model uses its randomness channel",
        description="Seed-resample patching per node (randomness-usage score), seed vs input "
        "variance and seed-bit probes per layer, and for recall the stored-set map over all "
        "seeds, for colouring the dependence of a vertex's colour on its own and its "
        "neighbours' noise. Writes randomness.json and randomness.html to --out.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", nargs="?", default=None)
    add_model_option(parser)
    add_model_option(parser, "--compare", "--compare-model")
    parser.add_argument("--compare", type=Path, default=None, metavar="RUN_DIR_B",
                        help="a second run of the same task (e.g. the ERM twin), analysed alike")
    parser.add_argument("--out", type=output_path, required=True, metavar="DIR")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=2048, help="examples for the usage score and probes (default 2048)")
    parser.add_argument("--stored-inputs", type=at_least(1, counts="examples"), default=32,
                        help="recall: key/value inputs of the stored-set map, each under every seed (default 32)")
    parser.add_argument("--seed", type=seed_option, default=DEFAULT_SEED, help="seed of the sampled examples")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.randomness import RandomnessReport, randomness_report

    claim(args.out, RandomnessReport.FILES)

    given = model_or_run(args.run_dir, args.model)
    own: dict = {}
    if given is not None:
        own = {"model": given[0], "task": given[1], "seed_source": given[2]}
    if args.compare_model is not None:
        other = model_or_run(None, args.compare_model, "--compare", "--compare-model")
        own.update(compare_model=other[0], compare_seed_source=other[2])
    report = randomness_report(args.run_dir, args.compare, **own, n=args.n, stored_inputs=args.stored_inputs,
                               seed=args.seed, progress=True)
    json_path, html_path = report.write(args.out)
    print(report.text())
    print(f"wrote {json_path} and {html_path}")
    return 0
