"""``interp-rand circuit RUN_DIR``: discover a circuit in a trained run, measure its
faithfulness and draw it (circuit.json, circuit.graphml, circuit.dot, faithfulness.json,
circuit.html in --out)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from interp_rand import progress
from interp_rand.cli import catalogue
from interp_rand.cli.options import (
    add_method_options,
    at_least,
    described_choices,
    method_options,
    output_path,
    top_k_option,
)

from interp_rand.defaults import DEFAULT_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "circuit", help="discover, measure and draw a circuit of a trained run",
        description="Score every edge of RUN_DIR's model on clean/corrupted pairs of its task, "
        "keep the top edges (or those above a threshold), measure faithfulness and write the "
        "circuit JSON (+ GraphML, DOT), faithfulness.json and an offline HTML drawing.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--method", choices=catalogue.choices("method"), default="eap",
                        help=described_choices("method", "eap"))
    parser.add_argument("--metric", choices=catalogue.choices("metric"), default="logprob",
                        help=described_choices("metric", "logprob"))
    parser.add_argument("--ablation", choices=catalogue.choices("ablation"), default="resample",
                        help="what edges outside the circuit carry (default: resample = the "
                        "task's corrupted inputs)")
    parser.add_argument("--n", type=at_least(2), default=256, help="clean/corrupted pairs (default: 256)")
    add_pairs_option(parser)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the data")
    add_size_options(parser, default=None, default_text="auto; acdc: its own circuit")
    parser.add_argument("--threshold", type=float, default=None,
                        help="keep edges with |score| >= this (acdc: also its search threshold)")
    # the methods' options from their registry (eap-ig: --steps); --threshold above is acdc's
    add_method_options(parser, skip=("threshold",))
    parser.add_argument("--no-positions", action="store_true",
                        help="one edge per component pair over all positions (default: per position)")
    parser.add_argument("--resamples", type=at_least(0), default=5, help="bootstrap resamples for the spread (default: 5)")
    parser.add_argument("--circuit", type=Path, default=None,
                        help="measure and draw this circuit JSON instead of discovering one "
                        "(refused if it belongs to another architecture)")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    return parser


def run(args: argparse.Namespace) -> int:
    import torch

    from circuits import Ablation, Circuit, discover, faithfulness
    from circuits.draw.circuit_figure import write_circuit_html
    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.objectives import fixed_seeds_if_asked

    check_size_options(args)
    if args.top_k is not None and args.threshold is not None and args.method != "acdc":
        raise ValueError("give --top-k or --threshold, not both")
    if args.threshold is not None and args.threshold < 0:
        raise ValueError(f"--threshold={args.threshold} must be >= 0")
    if args.circuit is not None and (args.top_k is not None or args.threshold is not None):
        raise ValueError("--circuit measures the given circuit: --top-k and --threshold do not apply")
    ckpt = load_checkpoint(args.run_dir)
    task = ckpt.spec.make_task()
    model = ckpt.model().eval()
    generator = torch.Generator().manual_seed(args.seed)
    batch = fixed_seeds_if_asked(task, task.sample(args.n, generator), ckpt.spec.train_config)
    pairs = make_pairs(args.pairs, model, task, batch, generator)
    ablation = Ablation(args.ablation, seed=args.seed)
    options = method_options(args, args.method)
    start = time.perf_counter()
    if args.circuit is not None:
        circuit, scores = Circuit.load(args.circuit, model), None
        by_position = bool(circuit.settings.get("by_position", True))
        if circuit.settings.get("n_positions") not in (None, pairs.clean.inputs.shape[1] + model.cfg.seed_offset):
            raise ValueError(f"{args.circuit} was found on {circuit.settings['n_positions']} positions; "
                             f"this task has {pairs.clean.inputs.shape[1] + model.cfg.seed_offset}")
    else:
        check_top_k(args.top_k, model, pairs, by_position=not args.no_positions)
        scores = discover(model, pairs.clean, pairs.corrupted, metric=args.metric, method=args.method,
                          ablation=ablation, by_position=not args.no_positions, progress=True, **options)
        by_position = not args.no_positions
        circuit = _select(scores, args, options, model, pairs, ablation)
    seconds = time.perf_counter() - start
    circuit = dataclasses.replace(circuit, settings={**circuit.settings, "by_position": by_position,
                                  "run": str(ckpt.path), "task": ckpt.spec.task_name, "data_seed": args.seed})
    progress.note(f"measuring the faithfulness of {len(circuit)} edges")
    result = faithfulness(model, circuit, pairs.clean, pairs.corrupted, metric=args.metric,
                          ablation=ablation, scores=scores, n_resamples=args.resamples, seed=args.seed,
                          progress=True)
    args.out.mkdir(parents=True, exist_ok=True)
    circuit.save(args.out / "circuit.json")
    circuit.write_graphml(args.out / "circuit.graphml")
    circuit.write_dot(args.out / "circuit.dot")
    method = str(args.circuit) if args.circuit else args.method
    summary = {"method": method, "discovery_seconds": round(seconds, 3), **result.to_dict()}
    (args.out / "faithfulness.json").write_text(json.dumps(summary, indent=2))
    from circuits.analyses.flow import mean_attention
    from interp_rand.zoo.location import run_label

    write_circuit_html(circuit, args.out / "circuit.html",
                       f"{run_label(args.run_dir)}: {method}, {len(circuit)} of {circuit.total_edges} edges",
                       attention=mean_attention(model, pairs.clean) if by_position else None,
                       position_names=position_names(model, task))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("curve", "spread")}, indent=2))
    print(f"wrote {args.out}/circuit.json, circuit.graphml, circuit.dot, faithfulness.json, circuit.html")
    return 0


PAIRS = ("task", "seed")


def position_names(model, task) -> list[str]:
    """Names of the model's positions: the task's, after a seed token if the model has one."""
    return ["seed"] * int(model.cfg.seed_offset) + list(task.position_names())


def add_pairs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pairs", choices=PAIRS, default="task",
                        help="task (default): the task's own corruption (a minimal input edit that changes "
                        "the answer); seed: the same inputs under fresh seeds, with the model's own answers "
                        "as targets: the circuit by which the seed moves the answer (randomized tasks)")


def make_pairs(kind: str, model, task, batch, generator):
    """Clean/corrupted pairs of ``kind`` (:data:`PAIRS`)."""
    if kind == "seed":
        from circuits.analyses.randomness import seed_pairs

        return seed_pairs(model, task, batch, generator)
    return task.corrupt(batch, generator)


def _select(scores, args: argparse.Namespace, options: dict, model, pairs, ablation):
    """ACDC's own circuit by default; else a threshold, the top-k, or (default) the smallest
    faithful top-k circuit."""
    if args.method == "acdc" and args.top_k is None:
        return scores.circuit(threshold=options["threshold"])
    if args.threshold is not None:
        return scores.circuit(threshold=args.threshold)
    return top_k_circuit(scores, args, model, pairs, ablation)


def add_size_options(parser: argparse.ArgumentParser, default: str | None, default_text: str) -> None:
    parser.add_argument("--top-k", type=top_k_option, default=default, metavar="K|auto",
                        help="keep this many edges, or auto: the smallest top-k circuit recovering --target "
                        f"of the behaviour at this and every larger size tried (default: {default_text})")
    parser.add_argument("--target", type=float, default=0.8,
                        help="with --top-k auto: the recovered share required, within 1 +- (1 - target); in "
                        "(0, 1] (default: 0.8)")


def check_size_options(args: argparse.Namespace) -> None:
    """Refuse a ``--target`` outside (0, 1] before any work."""
    if not 0 < args.target <= 1:
        raise ValueError(f"--target={args.target} must lie in (0, 1]")


def check_top_k(top_k: int | str | None, model, pairs, by_position: bool) -> None:
    """Refuse a ``--top-k`` larger than the model's number of edges, before edges are scored
    (the graph is built from the architecture alone, which costs nothing)."""
    from circuits.graph.model_graph import ModelGraph

    if not isinstance(top_k, int):
        return
    n_edges = ModelGraph.of(model, pairs.clean.inputs.shape[1], by_position).n_edges
    if top_k > n_edges:
        per = "per position" if by_position else "over all positions"
        raise ValueError(f"--top-k={top_k}: this model has {n_edges} edges ({per}); give 1..{n_edges} or auto")


def top_k_circuit(scores, args: argparse.Namespace, model, pairs, ablation):
    """The top ``--top-k`` edges, or with ``auto`` (or none given) the smallest faithful circuit."""
    from circuits import smallest_faithful_circuit

    if args.top_k in (None, "auto"):
        progress.note("choosing the smallest faithful circuit")
        return smallest_faithful_circuit(model, scores, pairs.clean, pairs.corrupted, metric=args.metric,
                                         ablation=ablation, target=args.target, progress=True)[0]
    return scores.circuit(top_k=args.top_k)
