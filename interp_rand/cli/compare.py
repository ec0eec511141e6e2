"""``interp-rand compare RUN_A RUN_B``: discover a circuit in each of two runs of one task (e.g.
the ERM and the randomized model), align them and write comparison.json (shared/unique edges,
Jaccard, rank correlation, cross-faithfulness), both circuit JSONs and comparison.html (both
graphs side by side on one layout) in --out; prints one line per claim with its verdict
against its control (random circuits of the same sizes)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from interp_rand import progress
from interp_rand.cli import catalogue
from interp_rand.cli.circuit import (
    add_pairs_option,
    add_size_options,
    check_size_options,
    check_top_k,
    make_pairs,
    position_names,
    top_k_circuit,
)
from interp_rand.cli.options import (
    add_method_options,
    at_least,
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
    parser.add_argument("run_a", type=Path, metavar="RUN_A")
    parser.add_argument("run_b", type=Path, metavar="RUN_B")
    parser.add_argument("--method", choices=catalogue.choices("method"), default="eap-ig",
                        help=described_choices("method", "eap-ig"))
    parser.add_argument("--metric", choices=catalogue.choices("metric"), default="logprob",
                        help=described_choices("metric", "logprob"))
    parser.add_argument("--ablation", choices=catalogue.choices("ablation"), default="resample")
    add_size_options(parser, default="auto", default_text="auto, per run")
    parser.add_argument("--n", type=at_least(2), default=128, help="clean/corrupted pairs per run (default: 128)")
    add_pairs_option(parser)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the data (same for both runs)")
    # the methods' options from their registry (eap-ig: --steps); circuits are chosen by
    # --top-k, so acdc runs at its default search threshold
    add_method_options(parser, skip=("threshold",))
    parser.add_argument("--no-positions", action="store_true",
                        help="one edge per component pair over all positions (default: per position)")
    parser.add_argument("--controls", type=at_least(1), default=3,
                        help="random circuits per cross-faithfulness measurement, its control (default: 3)")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    return parser


# Below this clean-vs-corrupted difference of the metric a model's circuit is noise.
TINY_GAP = 1e-2


def behaviour_gap(model, pairs, metric: str) -> float:
    """The metric on the clean run minus on the corrupted run (both against the clean answers):
    how much the corruption moves the model, the denominator of every faithfulness share."""
    import torch

    from circuits import get_metric
    from circuits.graph.architecture import run_model

    fn = get_metric(metric)
    with torch.no_grad():
        clean = fn(run_model(model, pairs.clean), pairs.clean)
        return float(clean - fn(run_model(model, pairs.corrupted), pairs.clean))


def _load(run_dir: Path, args: argparse.Namespace):
    import torch

    from circuits import architecture
    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.objectives import fixed_seeds_if_asked

    ckpt = load_checkpoint(run_dir)
    model = ckpt.model().eval()
    try:
        architecture(model)
    except ValueError as err:
        raise ValueError(f"{run_dir}: {err}") from None
    task = ckpt.spec.make_task()
    generator = torch.Generator().manual_seed(args.seed)
    batch = fixed_seeds_if_asked(task, task.sample(args.n, generator), ckpt.spec.train_config)
    pairs = make_pairs(args.pairs, model, task, batch, generator)
    return ckpt, model, pairs


def run(args: argparse.Namespace) -> int:
    from circuits import Ablation, architecture, discover
    from circuits.analyses.comparison import compare_circuits, comparison_claims
    from circuits.draw.comparison_figure import write_comparison_html
    from circuits.analyses.verdict import summary_line, verdict_counts

    check_size_options(args)
    ckpt_a, model_a, pairs_a = _load(args.run_a, args)
    ckpt_b, model_b, pairs_b = _load(args.run_b, args)
    if ckpt_a.spec.task_name != ckpt_b.spec.task_name:
        raise ValueError(f"the runs are of different tasks: {ckpt_a.spec.task_name!r} vs {ckpt_b.spec.task_name!r}")
    if ckpt_a.spec.task_config != ckpt_b.spec.task_config:
        diff = sorted(k for k in ckpt_a.spec.task_config.keys() | ckpt_b.spec.task_config.keys()
                      if ckpt_a.spec.task_config.get(k) != ckpt_b.spec.task_config.get(k))
        raise ValueError(f"the runs have different task configs ({', '.join(diff)})")
    mismatch = architecture(model_a).mismatch(architecture(model_b))
    if mismatch:
        raise ValueError("the runs have different architectures (A vs B): " + "; ".join(mismatch))
    check_top_k(args.top_k, model_a, pairs_a, by_position=not args.no_positions)
    ablation = Ablation(args.ablation, seed=args.seed)
    options = method_options(args, args.method)
    circuits = []
    runs = ((args.run_a, ckpt_a, model_a, pairs_a), (args.run_b, ckpt_b, model_b, pairs_b))
    for k, (run_dir, ckpt, model, pairs) in enumerate(runs, 1):
        progress.note(f"run {k} of 2 ({run_dir}): discovering its circuit")
        scores = discover(model, pairs.clean, pairs.corrupted, metric=args.metric, method=args.method,
                          ablation=ablation, by_position=not args.no_positions, progress=True, **options)
        circuit = top_k_circuit(scores, args, model, pairs, ablation)
        circuits.append(dataclasses.replace(circuit, settings={
            **circuit.settings, "by_position": not args.no_positions, "run": str(ckpt.path),
            "task": ckpt.spec.task_name, "data_seed": args.seed}))
    from interp_rand.zoo.location import run_label

    labels = (run_label(args.run_a), run_label(args.run_b))
    progress.note("aligning the circuits and measuring each on the other run (cross-faithfulness)")
    result = compare_circuits(*circuits, models=(model_a, model_b),
                              data=((pairs_a.clean, pairs_a.corrupted), (pairs_b.clean, pairs_b.corrupted)),
                              metric=args.metric, ablation=ablation, labels=labels, n_random=args.controls,
                              seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    circuits[0].save(args.out / "circuit_a.json")
    circuits[1].save(args.out / "circuit_b.json")
    gaps = [behaviour_gap(model, pairs, args.metric) for model, pairs in ((model_a, pairs_a), (model_b, pairs_b))]
    claims = comparison_claims(result, tuple(gaps), min_gap=TINY_GAP)
    lines = [c.line() for c in claims] + [summary_line(claims)]
    summary = {"run_a": str(args.run_a), "run_b": str(args.run_b), "task": ckpt_a.spec.task_name,
               "pairs": args.pairs, "behaviour_gap": gaps,
               "method": args.method, "top_k": args.top_k,
               "edges": [len(circuits[0]), len(circuits[1])], "n": args.n,
               "claims": [c.to_dict() for c in claims], "verdicts": verdict_counts(claims), **result.to_dict()}
    (args.out / "comparison.json").write_text(json.dumps(summary, indent=2))
    from circuits.analyses.flow import mean_attention

    attention = None if args.no_positions else (mean_attention(model_a, pairs_a.clean), mean_attention(model_b, pairs_b.clean))
    _with_claims(write_comparison_html(*circuits, result, args.out / "comparison.html", attention=attention,
                                       position_names=position_names(model_a, ckpt_a.spec.make_task())), lines)
    key = {k: summary[k] for k in ("task", "pairs", "behaviour_gap", "method", "top_k", "edges", "n_shared",
                                   "n_only_a", "n_only_b", "jaccard", "node_jaccard", "spearman_shared",
                                   "cross_faithfulness", "random_cross_faithfulness")}
    print(json.dumps(key, indent=2))
    print("\n".join(lines))
    for label, gap in zip(labels, gaps):
        if abs(gap) < TINY_GAP:
            print(f"note: on {label} the clean and corrupted runs differ by {gap:.2g} in {args.metric}: the "
                  "corruption barely moves this model, so its circuit and faithfulness shares are noise")
    print(f"wrote {args.out}/comparison.json, comparison.html, circuit_a.json, circuit_b.json")
    return 0


def _with_claims(page: Path, lines: list[str]) -> None:
    """Put the claim lines at the top of the written comparison page's body."""
    import html

    block = "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"
    text = page.read_text()
    page.write_text(text.replace("<body>", "<body>\n" + block, 1))
