"""``interp-rand circuit RUN_DIR``: discover a circuit in a trained run, measure its
faithfulness and draw it (circuit.json, circuit.graphml, circuit.dot, circuit.tracer.json,
faithfulness.json, circuit.html in --out). The report is :func:`interp_rand.reports.circuit.circuit_report`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand.cli.model_option import add_model_option, check_args, model_or_run  # noqa: F401 (check_args: main's)
from interp_rand.cli import catalogue
from interp_rand.cli.options import (
    add_method_options,
    add_qk_head_option,
    at_least,
    described_choices,
    method_options,
    number,
    output_path,
    seed_option,
    top_k_option,
)
from interp_rand.reports.inputs import PAIRS

from interp_rand.defaults import DEFAULT_SEED
from interp_rand.validation import Bounds


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "circuit", help="discover, measure and draw a circuit of a trained run",
        description="Score every edge of RUN_DIR's model on clean/corrupted pairs of its task, "
        "keep the top edges (or those above a threshold), measure faithfulness and write the "
        "circuit JSON (+ GraphML, DOT, a circuit-tracer / Neuronpedia graph), faithfulness.json and an offline, "
        "interactive HTML drawing.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", nargs="?", default=None)
    add_model_option(parser)
    parser.add_argument("--method", choices=catalogue.choices("method"), default="eap",
                        help=described_choices("method", "eap"))
    parser.add_argument("--metric", choices=catalogue.choices("metric"), default=None,
                        help=described_choices("metric", "logprob, or the --model task's own"))
    parser.add_argument("--ablation", choices=catalogue.choices("ablation"), default="resample",
                        help="what edges outside the circuit carry (default: resample = the "
                        "task's corrupted inputs)")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=256, help="clean/corrupted pairs (default: 256)")
    add_pairs_option(parser)
    parser.add_argument("--seed", type=seed_option, default=DEFAULT_SEED, help="seed of the data")
    add_size_options(parser, default=None, default_text="auto; acdc: its own circuit")
    parser.add_argument("--threshold", type=number(float, Bounds(minimum=0)), default=None,
                        help="keep edges with |score| >= this (acdc: also its search threshold)")
    # the methods' options from their registry (eap-ig: --steps); --threshold above is acdc's
    add_method_options(parser, skip=("threshold",))
    parser.add_argument("--no-positions", action="store_true",
                        help="one edge per component pair over all positions (default: per position)")
    parser.add_argument("--resamples", type=at_least(0), default=5, help="bootstrap resamples for the spread (default: 5)")
    parser.add_argument("--circuit", type=Path, default=None,
                        help="measure and draw this circuit JSON instead of discovering one "
                        "(refused if it belongs to another architecture)")
    add_card_options(parser)
    add_qk_head_option(parser, "draw on the circuit")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.circuit import CircuitReport, circuit_report

    claim(args.out, CircuitReport.FILES)
    given = model_or_run(args.run_dir, args.model)
    own = {} if given is None else {"model": given[0], "task": given[1], "seed_source": given[2]}
    report = circuit_report(args.run_dir, **own, method=args.method, metric=args.metric, ablation=args.ablation, n=args.n,
                            pairs=args.pairs, seed=args.seed, top_k=args.top_k, target=args.target,
                            threshold=args.threshold, options=method_options(args, args.method),
                            selection=args.selection, by_position=not args.no_positions, n_resamples=args.resamples,
                            card=not args.no_card, card_resamples=args.card_resamples, circuit=args.circuit,
                            qk_heads=tuple(args.qk_head), progress=True)
    report.write(args.out)
    print(json.dumps(report.key_numbers(), indent=2))
    for line in report.card_lines() + report.qk_lines():
        print(line)
    cards = ", card.json, card.html" if report.card is not None else ""
    print(f"wrote {args.out}/circuit.json, circuit.graphml, circuit.dot, circuit.tracer.json, faithfulness.json, "
          f"circuit.html{cards}")
    return 0


def add_pairs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pairs", choices=PAIRS, default="task",
                        help="task (default): the task's own corruption (a minimal input edit that changes "
                        "the answer); seed: the same inputs under fresh seeds, with the model's own answers "
                        "as targets: the circuit by which the seed moves the answer (randomized tasks)")


def add_size_options(parser: argparse.ArgumentParser, default: str | None, default_text: str) -> None:
    parser.add_argument("--top-k", type=top_k_option, default=default, metavar="K|auto",
                        help="keep this many edges, or auto: the smallest top-k circuit recovering --target "
                        f"of the behaviour at this and every larger size tried (default: {default_text})")
    parser.add_argument("--target", type=number(float, Bounds(above=0, maximum=1)), default=0.8,
                        help="with --top-k auto: the recovered share required, within 1 +- (1 - target); in "
                        "(0, 1] (default: 0.8)")
    parser.add_argument("--selection", choices=catalogue.choices("selection"), default="connected",
                        help="how the top edges become a circuit: connected (default: the top-k edges, then "
                        "every edge on no input -> logits path is dropped, and the circuit says how many), "
                        "greedy (MIB's growth from the logits), top_k (the top-k edges as they are: the rule "
                        "before dangling edges were dropped)")


def add_card_options(parser: argparse.ArgumentParser) -> None:
    """``--no-card`` and ``--card-resamples``: every circuit a command writes carries a claim card."""
    parser.add_argument("--no-card", action="store_true",
                        help="skip the claim card (card.json, card.html: sufficiency and necessity against random "
                        "circuits, the random-initialised model, MIB's CPR/CMD, stability over resampled data)")
    parser.add_argument("--card-resamples", type=at_least(1), default=2,
                        help="resampled-data circuits the card's stability is measured on (default: 2; each is one "
                        "more discovery run)")
