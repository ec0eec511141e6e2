"""Exact edge patching and ACDC: the one-forward-per-edge references against the batched
versions, side by side in one run, on the zoo's trained models.

    python bench/patching.py [--only sort|addition] [--n 256] [--seed 7] [--threshold 0.01]
                             [--max-batch K] [--memory-budget MiB] [--skip-old] [--skip-block]
                             [--threads 1] [--out FILE]

For each of ``zoo:sort`` and ``zoo:addition`` it draws ``--n`` clean / corrupted pairs of the
task (:func:`interp_rand.reports.inputs.load_run_inputs`, ``pairs="task"``), builds the
position-resolved graph and resample-ablation data as :func:`circuits.discover` does, and times

* exact edge patching: :func:`~circuits.interventions.edge_patching.exact_edge_scores` (one
  forward per edge, the reference: ``old``), the previous batched path
  (:func:`~circuits.interventions.batched_patching.batched_edge_scores` with
  ``incremental=False``, each forward from the reader's block: ``block``) and the ``exact``
  method (``new``: :class:`~circuits.interventions.incremental_run.IncrementalRun`, the
  patched node and what it reaches), in the denoising form ``discover`` uses;
* ACDC: :func:`~circuits.methods.acdc.acdc_scores_sequential` (``old``),
  :func:`~circuits.methods.acdc.acdc_scores` with ``incremental=False`` (``block``) and the
  ``acdc`` method (``new``);

and prints the seconds (wall clock and this process's CPU time), the speed-ups of ``new``
against each, the largest score difference, whether ACDC kept the same edges, the load average
before and after (``os.getloadavg()``) and the command that produced it. Targets of issue 16
(idle 2-core machine, one thread): ACDC <= 10 s and exact patching <= 8 s at 256 pairs; under
load only the ratios (and, more steadily, the CPU seconds) are meaningful.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from circuits import Ablation, ModelGraph, writer_values
from circuits.interventions.batched_patching import DEFAULT_MEMORY_BUDGET, batched_edge_scores
from circuits.interventions.edge_patching import exact_edge_scores
from circuits.interventions.metrics import get_metric
from circuits.methods.acdc import acdc_scores, acdc_scores_sequential
from circuits.methods.discovery import patch_data
from interp_rand.reports.inputs import load_run_inputs

TASKS = ("sort", "addition")


def timed(fn, row: dict, key: str):
    """``fn()``, recording its wall-clock seconds as ``row[key + "_s"]`` and this process's CPU
    seconds as ``row[key + "_cpu_s"]`` (on a loaded machine the CPU time is the steadier one)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    row[f"{key}_s"], row[f"{key}_cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
    return out


def bench_task(name: str, args) -> dict:
    run = load_run_inputs(f"zoo:{name}", n=args.n, seed=args.seed, pairs="task")
    model, clean, corrupted = run.model, run.pairs.clean, run.pairs.corrupted
    graph = ModelGraph.of(model, clean.inputs.shape[1])
    data = patch_data(model, graph, clean, corrupted, Ablation("resample"))
    metric = get_metric("logprob")
    budget = int(args.memory_budget * 2**20)
    row: dict = {"task": name, "n_pairs": args.n, "n_edges": graph.n_edges, "load_before": os.getloadavg()}
    clean_writers = writer_values(model, graph, clean)

    kw = dict(max_batch=args.max_batch, memory_budget=budget)

    def compare(key: str, new, other, name: str) -> None:
        row[f"{key}_{name}_speedup"] = round(row[f"{key}_{name}_s"] / row[f"{key}_new_s"], 2)
        row[f"{key}_{name}_cpu_speedup"] = round(row[f"{key}_{name}_cpu_s"] / row[f"{key}_new_cpu_s"], 2)
        row[f"{key}_{name}_max_abs_diff"] = float((other - new).abs().max())
        if key == "acdc":
            row[f"acdc_{name}_same_kept_edges"] = bool(torch.equal(other.abs() >= args.threshold,
                                                                   new.abs() >= args.threshold))

    others = {}
    if not args.skip_old:
        others["old"] = timed(lambda: exact_edge_scores(model, graph, data.source, clean_writers, metric, clean),
                              row, "exact_old")
    if not args.skip_block:
        others["block"] = timed(lambda: batched_edge_scores(model, graph, data.source, clean_writers, metric, clean,
                                                            incremental=False, **kw), row, "exact_block")
    new = timed(lambda: batched_edge_scores(model, graph, data.source, clean_writers, metric, clean, **kw),
                row, "exact_new")
    for name, other in others.items():
        compare("exact", new, other, name)

    others = {}
    if not args.skip_old:
        others["old"] = timed(lambda: acdc_scores_sequential(model, graph, clean, data.replacement, metric,
                                                             args.threshold), row, "acdc_old")
    if not args.skip_block:
        others["block"] = timed(lambda: acdc_scores(model, graph, clean, data.replacement, metric, args.threshold,
                                                    incremental=False, **kw), row, "acdc_block")
    new = timed(lambda: acdc_scores(model, graph, clean, data.replacement, metric, args.threshold, **kw),
                row, "acdc_new")
    row["acdc_kept_edges"] = int((new.abs() >= args.threshold).sum())
    for name, other in others.items():
        compare("acdc", new, other, name)
    row["load_after"] = os.getloadavg()
    return {k: (round(v, 3) if k.endswith("_s") else v) for k, v in row.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=TASKS, default=None)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threshold", type=float, default=0.01, help="ACDC's threshold")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="edges (ACDC: tests) per forward (default: as many as fit --memory-budget)")
    parser.add_argument("--memory-budget", type=float, default=DEFAULT_MEMORY_BUDGET / 2**20,
                        help="MiB of activations per batched forward")
    parser.add_argument("--skip-old", action="store_true",
                        help="skip the one-forward-per-edge references (exact_edge_scores, acdc_scores_sequential)")
    parser.add_argument("--skip-block", action="store_true",
                        help="skip the previous batched path (incremental=False: each forward from the reader's block)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    rows = [bench_task(name, args) for name in ([args.only] if args.only else TASKS)]
    report = {"command": command, "machine": platform.processor() or platform.machine(), "threads": args.threads,
              "cpus": os.cpu_count(), "rows": rows}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
