"""Grid-world population evaluation: the vectorised path against a per-member loop, measured
side by side in one run (issue 16's target: >= 20x).

    python bench/gridworld_population.py [--scale cpu|paper] [--popsize P] [--m M] [--repeats R] [--threads T]

One PGPE generation's work: ``P`` members (the scale's init plus noise) x every treasure cell x
``m`` seeds. Paths, all returning the same ``[P, C, m]`` returns (checked):

* ``vectorised``: the default, :class:`~interp_rand.gridworld.population.PopulationPolicy`: the
  model's fast path (``FastForward``) vmapped over the members, one token per step with a
  key/value cache, each member's runs with the same seed and observations so far decoded once;
* ``vectorised_unshared``: the same decoding every run (``share_prefixes=False``): separates
  the gain of prefix sharing from that of batching members and caching;
* ``loop``: one member at a time through the hooked model (``functional_call``, each step
  re-reading the prefix), the naive path and the reference;
* ``loop_cached``: one member at a time through the default path: vectorised vs loop_cached is
  the gain of batching members;
* ``vmap`` (unless ``--skip-vmap``): ``torch.func.vmap`` over ``functional_call`` of the hooked
  model (each step re-reads the prefix), for reference.

Time is the best of ``--repeats``; throughput is runs (member x cell x seed) per second. The
load average is printed before and after (the ratios are measured in the same run; absolute
times move with the machine's other work).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

from interp_rand.gridworld.agent import agent_model_config, sample_seeds
from interp_rand.gridworld.config import scale_named
from interp_rand.gridworld.environment import treasure_cells
from interp_rand.gridworld.population import (
    ParameterLayout,
    population_returns,
    population_returns_loop,
)
from interp_rand.model import HookedTransformer


def best_time(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=["cpu", "paper"], default="cpu")
    parser.add_argument("--popsize", type=int, default=None, help="default: the scale's")
    parser.add_argument("--m", type=int, default=None, help="seeds per member and cell (default: the scale's)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-vmap", action="store_true", help="skip the (slow) vmapped hooked path")
    args = parser.parse_args()
    command = "python " + " ".join([sys.argv[0].split("/work/wt-population/")[-1], *sys.argv[1:]])
    print(f"# {command}", file=sys.stderr)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    scale = scale_named(args.scale)
    popsize, m = args.popsize or scale.pgpe.popsize, args.m or scale.pgpe.m_seeds
    model = HookedTransformer(agent_model_config(scale.grid, scale.agent), seed=0).eval()
    layout = ParameterLayout(model)
    g = torch.Generator().manual_seed(0)
    flat = layout.flatten(model)[None] + scale.pgpe.stdev_init * torch.randn(popsize, layout.n_params, generator=g)
    cells = treasure_cells(scale.grid)
    seeds = sample_seeds(scale.grid, m, g)
    runs = popsize * cells.shape[0] * m
    common = (model, layout, flat, scale.grid, cells, seeds)

    t_vec, r_vec = best_time(lambda: population_returns(*common), args.repeats)
    t_loop, r_loop = best_time(lambda: population_returns_loop(*common), args.repeats)
    t_unshared, r_unshared = best_time(lambda: population_returns(*common, share_prefixes=False), args.repeats)
    t_loop_cached, r_loop_cached = best_time(
        lambda: torch.cat([population_returns(model, layout, flat[i : i + 1], scale.grid, cells, seeds)
                           for i in range(popsize)]), args.repeats)
    result = {
        "command": command,
        "scale": args.scale, "popsize": popsize, "cells": int(cells.shape[0]), "m": m, "runs": runs,
        "n_params": layout.n_params, "threads": args.threads, "cpu": platform.processor() or platform.machine(),
        "vectorised_s": t_vec, "loop_s": t_loop, "vectorised_unshared_s": t_unshared, "loop_cached_s": t_loop_cached,
        "vectorised_runs_per_s": runs / t_vec, "loop_runs_per_s": runs / t_loop,
        "ratio_vectorised_over_loop": t_loop / t_vec,
        "ratio_vectorised_unshared_over_loop": t_loop / t_unshared,
        "ratio_vectorised_over_loop_cached": t_loop_cached / t_vec,
        "same_returns": bool(torch.equal(r_vec, r_loop)),
        "same_returns_unshared": bool(torch.equal(r_unshared, r_loop)),
        "same_returns_loop_cached": bool(torch.equal(r_loop_cached, r_loop)),
    }
    if not args.skip_vmap:
        t_vmap, r_vmap = best_time(lambda: population_returns(*common, cached=False), args.repeats)
        result.update({"vmap_s": t_vmap, "ratio_vmap_over_loop": t_loop / t_vmap,
                       "same_returns_vmap": bool(torch.equal(r_vmap, r_loop))})
    result["load_average_1min"] = [load_before, os.getloadavg()[0]]
    print(json.dumps(result, indent=2))
    print(f"population evaluation, vectorised / per-member loop: {t_loop / t_vec:.1f}x "
          f"({t_vec:.2f} s vs {t_loop:.2f} s, {runs} runs; without prefix sharing {t_loop / t_unshared:.1f}x; "
          f"load {load_before:.1f} -> {result['load_average_1min'][1]:.1f})  [{command}]")


if __name__ == "__main__":
    main()
