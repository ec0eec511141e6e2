"""Replaying the registered training-dynamics analyses over the checkpoints of a zoo recipe run,
timed (issue 17's target: five analyses over 50 checkpoints of a zoo model in <= 5 minutes on
2 cores).

Trains the ``zoo:sort`` recipe (:mod:`interp_rand.zoo.entries`) with a ``log:N`` checkpoint
schedule and without its early stop (so every scheduled checkpoint is written) into
``--run`` unless that run already holds a finished run, then replays every registered analysis
(or ``--analyses``) over its checkpoints on ``--n`` examples and prints the seconds per
analysis, the total, how many analyses applied and the command. Writes the replay's
``replay.json`` and ``replay.html`` to ``--out``.

    python bench/replay.py --run /tmp/bench-sort-log50 --out /tmp/bench-replay
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path

import torch

from interp_rand.reports.dynamics.replay import DYNAMICS_ANALYSES, replay
from interp_rand.tasks import make_task
from interp_rand.training import train
from interp_rand.training.checkpoint import list_checkpoints
from interp_rand.zoo.entries import ENTRIES

TARGET_SECONDS = 300


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="run folder (trained here if it has no checkpoints)")
    parser.add_argument("--out", type=Path, required=True, help="where replay.json and replay.html go")
    parser.add_argument("--entry", default="sort", help="the zoo recipe (default: sort)")
    parser.add_argument("--checkpoints", type=int, default=50, help="N of the log:N schedule (default: 50)")
    parser.add_argument("--n", type=int, default=256, help="examples per checkpoint (default: 256)")
    parser.add_argument("--analyses", default=None, help="comma-separated (default: every registered one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    command = "python bench/replay.py " + shlex.join(sys.argv[1:] if argv is None else argv)

    entry = ENTRIES[args.entry]
    config = dataclasses.replace(entry.train, checkpoint_schedule=f"log:{args.checkpoints}", stop_at_exact_match=None)
    train_seconds = None
    if not list_checkpoints(args.run):
        task = make_task(entry.task_name, **entry.task_config)
        began = time.perf_counter()
        train(task, task.model_config(**entry.model), config, args.run, progress=True)
        train_seconds = time.perf_counter() - began
    n_checkpoints = len(list_checkpoints(args.run))

    analyses = None if args.analyses is None else args.analyses.split(",")
    result = replay(args.run, analyses, n=args.n, options=None, progress=True, command=command)
    result.write(args.out)
    total = result.seconds["total"]
    summary = {
        "run": str(args.run), "recipe": f"zoo:{args.entry} with checkpoint_schedule=log:{args.checkpoints}, "
        "no early stop", "train_seconds": None if train_seconds is None else round(train_seconds, 1),
        "checkpoints": n_checkpoints, "registered": DYNAMICS_ANALYSES.names(), "replayed": result.analyses,
        "skipped": result.notes, "seconds": result.seconds,
        "seconds_per_checkpoint": round(total / n_checkpoints, 2),
        "target": f"<= {TARGET_SECONDS} s for five analyses over 50 checkpoints",
        "within_target_seconds": total <= TARGET_SECONDS, "n_analyses": len(result.analyses), "load_average": os.getloadavg(), "command": command,
    }
    print(json.dumps(summary, indent=2))
    for name in result.analyses:
        print(f"{name:>20}: {result.seconds[name]:7.1f} s")
    print(f"{'opening checkpoints':>20}: {result.seconds['open']:7.1f} s")
    print(f"{'total':>20}: {total:7.1f} s over {n_checkpoints} checkpoints, {len(result.analyses)} analyses "
          f"(target <= {TARGET_SECONDS} s)")
    print(f"command: {command}")
    return summary


if __name__ == "__main__":
    main()
