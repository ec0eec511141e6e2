"""``interp-rand explain RUN_DIR|zoo:NAME|--model MODULE:FUNCTION --out DIR``: find the algorithm
a model runs with no hand-written hypothesis (:func:`circuits.explain.explain`): candidates from
the primitive library kept when they match the model, located by a site search, checked whole
and separated by decisive experiments. Writes ``explain.json`` and ``explain.html``; the report
is :func:`interp_rand.reports.explain.explain_report`."""

from __future__ import annotations

import argparse

from interp_rand import progress
from interp_rand.cli.model_option import add_run_or_model, check_args, given_model  # noqa: F401 (check_args: main's)
from interp_rand.cli.options import at_least, output_path, seed_option


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "explain", help="find the algorithm a model runs: candidates, site search, decisive experiments",
        description="Score every candidate of the primitive library (order statistic, next-larger search, "
        "copy, reverse, running max, count, majority ...; in order and with the outputs reversed) against "
        "the model's own answers and keep those with match accuracy >= 0.9 (D-RASP's bar). Locate each by "
        "sweeping the components at every output's position, check it whole (agreement, treeified causal "
        "scrubbing with whole-output agreement, interchange per variable against controls) and put the "
        "survivors to decisive experiments (off-distribution edits, patches): the winner is the candidate "
        "the model follows. Prints the verdict, the algorithm as pseudocode naming its components, the "
        "candidates and the experiments; where nothing fits, the best partial algorithm and the checks it "
        "fails. Then the chosen candidate's compositions (the same answer through named intermediate steps, each "
        "step's site searched at every position, components and 1-dim subspaces) are located and checked, and the "
        "explanation states whichever holds best. Works on sequence tasks whose answers are tokens (sort-like, "
        "copy-like, running statistics, addition) and on seeded tasks (recall's bits, a colouring): there it scores "
        "programs that read the seed (seed-chosen priorities, hashed key codes) and their seed-free rivals, and the "
        "seed experiment decides: where a fresh seed moved the model's answer, does the program give the new one "
        "(against the program under an unrelated seed)?",
    )
    add_run_or_model(parser)
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--n", type=at_least(50, counts="examples"), default=1000,
                        help="inputs for the candidates, the sweeps and the checks (default: 1000)")
    parser.add_argument("--seed", type=seed_option, default=0, help="seed of every draw (default: 0)")
    parser.add_argument("--families", default=None, metavar="A,B",
                        help="primitive families to try (default: the task's own, else all: order, search, copy, "
                        "count, digits, position; token tasks only)")
    parser.add_argument("--max-candidates", type=at_least(1), default=3,
                        help="candidates located and compared, best match first (default: 3)")
    parser.add_argument("--compose", action=argparse.BooleanOptionalAction, default=True,
                        help="also state the chosen candidate through its compositions (addition's digit: the carry "
                        "class of each place, the carry into each digit's place by lookahead or by ripple), each "
                        "step's site searched over every position and checked (default: on; 30-40 s per "
                        "composition for a 2-layer 3-digit addition model on one core)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.explain import ExplainReport, explain_report

    families = None if args.families is None else [f.strip() for f in args.families.split(",") if f.strip()]
    if families is not None:
        from circuits.explain import families as known

        unknown = [f for f in families if f not in known()]
        if unknown or not families:
            raise ValueError(f"--families {args.families!r}: unknown {unknown}; the library has: {', '.join(known())}")
    claim(args.out, ExplainReport.FILES)
    own = given_model(args)
    with progress.scope("explain"):
        report = explain_report(args.run_dir, **own, n=args.n, seed=args.seed, families=families,
                                max_candidates=args.max_candidates, compose=args.compose, progress=progress.note)
        progress.note("writing explain.json, explain.html")
    report.write(args.out)
    print(report.text())
    print(f"wrote {args.out}/explain.json, explain.html")
    return 0
