"""``interp-rand compare RUN_A RUN_B``: discover a circuit in each of two runs of one task (e.g.
the ERM and the randomized model), align them and write comparison.json (shared/unique edges,
Jaccard, rank correlation, cross-faithfulness), both circuit JSONs and comparison.html (both
graphs side by side on one layout) in --out; prints one line per claim with its verdict
against its control (random circuits of the same sizes). The report is
:func:`interp_rand.reports.compare.compare_report`."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli.model_option import add_model_option, exactly_one, model_or_run
from interp_rand.cli import catalogue
from interp_rand.cli.circuit import add_card_options, add_pairs_option, add_size_options
from interp_rand.cli.options import (
    add_method_options,
    at_least,
    seed_option,
    described_choices,
    method_options,
    output_path,
)

from interp_rand.defaults import DEFAULT_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "compare", help="compare the circuits of two runs of one task",
        description="Discover a circuit in RUN_A and in RUN_B (same task and architecture, e.g. the "
        "ERM and the randomized model), report shared and unique edges, Jaccard, the rank "
        "correlation of shared edge scores and cross-faithfulness (each circuit measured on the "
        "other run's model and data), each against random circuits of the same size, and print one "
        "line per claim with its verdict (HOLDS, FAILS or INCONCLUSIVE); write comparison.json and a "
        "side-by-side comparison.html.",
    )
    parser.add_argument("run_a", type=Path, metavar="RUN_A", nargs="?", default=None)
    parser.add_argument("run_b", type=Path, metavar="RUN_B", nargs="?", default=None)
    add_model_option(parser, "RUN_A", "--model-a")
    add_model_option(parser, "RUN_B", "--model-b")
    parser.add_argument("--method", choices=catalogue.choices("method"), default="eap-ig",
                        help=described_choices("method", "eap-ig"))
    parser.add_argument("--metric", choices=catalogue.choices("metric"), default="logprob",
                        help=described_choices("metric", "logprob"))
    parser.add_argument("--ablation", choices=catalogue.choices("ablation"), default="resample")
    add_size_options(parser, default="auto", default_text="auto, per run")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=128, help="clean/corrupted pairs per run (default: 128)")
    add_pairs_option(parser)
    parser.add_argument("--seed", type=seed_option, default=DEFAULT_SEED, help="seed of the data (same for both runs)")
    # the methods' options from their registry (eap-ig: --steps); circuits are chosen by
    # --top-k, so acdc runs at its default search threshold
    add_method_options(parser, skip=("threshold",))
    parser.add_argument("--no-positions", action="store_true",
                        help="one edge per component pair over all positions (default: per position)")
    parser.add_argument("--controls", type=at_least(1), default=3,
                        help="random circuits per cross-faithfulness measurement, its control (default: 3)")
    add_card_options(parser)
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.compare import ComparisonReport, compare_report

    claim(args.out, ComparisonReport.FILES)
    run_a, run_b = _runs(args)
    a = model_or_run(run_a, args.model_a, "RUN_A", "--model-a")
    b = model_or_run(run_b, args.model_b, "RUN_B", "--model-b")
    if a and b and not _same_task(a[1], b[1]):  # one task is passed on: never replace B's with A's
        raise ValueError(f"--model-a solves {_task_label(a[1])} and --model-b {_task_label(b[1])}: compare needs "
                         "two models of one task")
    own = {"model_a": a[0] if a else None, "model_b": b[0] if b else None,
           "task": (a or b)[1] if (a or b) else None}
    report = compare_report(run_a, run_b, **own, method=args.method, metric=args.metric, ablation=args.ablation,
                            top_k=args.top_k, target=args.target, n=args.n, pairs=args.pairs, seed=args.seed,
                            options=method_options(args, args.method), selection=args.selection,
                            card=not args.no_card, card_resamples=args.card_resamples,
                            by_position=not args.no_positions, n_controls=args.controls,
                            progress=True)
    report.write(args.out)
    print(report.text())
    print(f"wrote {args.out}/comparison.json, comparison.html, circuit_a.json, circuit_b.json")
    return 0


def _runs(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """RUN_A and RUN_B: the positional runs in order, each in the place --model-a/--model-b leave."""
    runs = [r for r in (args.run_a, args.run_b) if r is not None]
    run_a = runs.pop(0) if args.model_a is None and runs else None
    run_b = runs.pop(0) if args.model_b is None and runs else None
    if runs:
        raise ValueError(f"{len(runs)} run folder(s) too many beside --model-a/--model-b")
    return run_a, run_b


def check_args(args: argparse.Namespace) -> None:
    """Each side a run or a model function, exactly one; checked by main before the heavy imports."""
    run_a, run_b = _runs(args)
    exactly_one(run_a, args.model_a, "RUN_A", "--model-a")
    exactly_one(run_b, args.model_b, "RUN_B", "--model-b")


def _task_label(task) -> str:
    config = task.config_dict() if hasattr(task, "config_dict") else None
    return f"{task.name!r}" + (f" {config}" if config else "")


def _same_task(a, b) -> bool:
    """The same task: one object, or the same name and (for registered tasks) the same options."""
    if a is b:
        return True
    if a.name != b.name:
        return False
    configs = [t.config_dict() if hasattr(t, "config_dict") else None for t in (a, b)]
    return configs[0] == configs[1]
