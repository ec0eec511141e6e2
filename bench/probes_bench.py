"""Probes and the attention report on a trained 5-digit addition model.

    python bench/probes_bench.py [--run-dir /tmp/probes-models/add5] [--n 10000] [--threads 2]

Trains the model first if RUN_DIR holds no checkpoint (the trainer's defaults with
``--stop-at-exact-match 0.999``: a few minutes). Then measures, in one run:

1. probes for every variable of the task (carry_in, carry_out, digit) at every layer x
   position (the residual stream at 5 hooks x 17 positions) on N examples, with the
   group-held-out split, the control task, the random-init model and the causal check at each
   instance's most selective probe. Target: <= 30 s on 2 cores for N = 10,000.
2. ``interp-rand report RUN_DIR``: time (target <= 20 s) and HTML size (target < 10 MB).
3. the carry probe per layer: selectivity at each answer digit's output position, trained vs
   random init, and the causal check (steering along the probe) at every layer.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from interp_rand import load_checkpoint, make_task, train
from interp_rand.cli.main import main as cli
from interp_rand.training import TrainConfig
from interp_rand.training.checkpoint import latest_checkpoint
from probes import ProbeConfig, probe_task

PROBE_TARGET_S, REPORT_TARGET_S, REPORT_MAX_MB = 30.0, 20.0, 10.0


def _model(run_dir: Path):
    if latest_checkpoint(run_dir) is None:
        task = make_task("addition", n_digits=5)
        print(f"training 5-digit addition into {run_dir} (stops at 99.9% exact match) ...")
        train(task, task.model_config(d_model=128), TrainConfig(stop_at_exact_match=0.999), run_dir)
    ckpt = load_checkpoint(run_dir)
    print(f"model: {ckpt.path} (step {ckpt.step}, exact match {ckpt.metrics.get('exact_match')})")
    return ckpt.model(), ckpt.spec.make_task()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/probes-models/add5"))
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, task = _model(args.run_dir)
    batch = task.sample(args.n, torch.Generator().manual_seed(1))

    # the machine's speed right now: one plain forward pass over the same examples
    began = time.perf_counter()
    with torch.no_grad():
        for start in range(0, args.n, 2048):
            model(batch.inputs[start : start + 2048])
    forward_s = time.perf_counter() - began
    print(f"0. one plain forward pass over {args.n} examples: {forward_s:.2f} s (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")

    began = time.perf_counter()
    results = probe_task(model, task, batch)
    probe_s = time.perf_counter() - began
    n_hooks, n_pos = results[0].accuracy.shape[:2]
    n_probes = sum(r.accuracy.numel() for r in results)
    print(f"\n1. probes: {len(results)} variables x {n_hooks} hooks x {n_pos} positions ({n_probes} probe "
          f"instances, each with its control, x2 for the random-init model) on {args.n} examples: "
          f"{probe_s:.1f} s (target <= {PROBE_TARGET_S:.0f} s) = {probe_s / forward_s:.1f} forward passes")

    out = args.run_dir / "report.html"
    began = time.perf_counter()
    cli(["report", str(args.run_dir), "--out", str(out)])
    report_s = time.perf_counter() - began
    size = out.stat().st_size / 1e6
    print(f"2. report: {report_s:.1f} s = {report_s / forward_s:.1f} forward passes of step 0 "
          f"(target <= {REPORT_TARGET_S:.0f} s), {size:.2f} MB "
          f"(target < {REPORT_MAX_MB:.0f} MB)")

    carry = probe_task(model, task, batch, ProbeConfig(variables=("carry_in",), causal_layers="all"))[0]
    hooks = [h.replace("blocks.", "").replace("hook_", "") for h in carry.hooks]
    print("3. carry_in probe, selectivity (accuracy - control) per layer at each digit's output position")
    print(f"   {'place':8s} {'model':7s} " + " ".join(f"{h:>14s}" for h in hooks))
    for k, name in enumerate(carry.instance_names):
        p = int(batch.answer_positions[k])
        for label, sel in (("trained", carry.selectivity), ("random", carry.random_selectivity)):
            print(f"   {name:8s} {label:7s} " + " ".join(f"{float(v):14.3f}" for v in sel[:, p, k]))
    print("   causal check (steer to the other carry value): share of held-out outputs whose carried digit "
          "became (a + b + new carry) mod 10, placebo in brackets")
    print(f"   {'place':8s} " + " ".join(f"{h:>14s}" for h in hooks))
    for k, name in enumerate(carry.instance_names):
        effects = [c for c in carry.causal if c.instance == k]
        if effects:
            print(f"   {name:8s} " + " ".join(f"{c.counterfactual:6.3f} ({c.placebo_counterfactual:.3f})"
                                             for c in effects))


if __name__ == "__main__":
    main()
