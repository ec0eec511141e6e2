"""When do an addition or sort model's circuit components form, against its accuracy and loss?

The step each component forms, against the step the run's accuracy crosses 99% and the step its
loss drops. Measures every (or a log-spaced subset of
the) checkpoint(s) of a run with the progress measures of interp_rand.reports.dynamics.progress
(addition: digit accuracy per sub-task and the aligned-digit / carry-source attention of every
head; sort: the next-larger attention of every head and exact match with and without
duplicates) and prints, per component, the step it crosses its threshold.

The named components are the head roles the final checkpoint shows (a head's score at an answer
position >= 0.5, the role threshold) and the best head of each role; plus the sub-task
accuracies (threshold 0.99).

    # train the zoo's recipe with an evaluation and a kept checkpoint every 10 (sort: 5) steps
    # into OUT/NAME, then measure 50 log-spaced checkpoints. Measured on this project's shared
    # 2-core machine (load average 6-10): training 210 s (addition, stops at step 1120 when the
    # denser evaluation first sees 99.9% exact match; the zoo's own run, evaluated every 250
    # steps, stopped at 1500) and 90 s (sort, stops at 635; the zoo's at 1250); measuring 40 s.
    python examples/progress_measures.py --train addition --every 10 --out /tmp/progress
    python examples/progress_measures.py --train sort --every 5 --out /tmp/progress
    # a run of your own (checkpoints kept with TrainConfig(keep_checkpoints=...))
    python examples/progress_measures.py --run RUN_DIR --out /tmp/progress
"""

import argparse
import dataclasses
import json
import math
from pathlib import Path

import torch

from interp_rand.progress import bar, note
from interp_rand.reports.dynamics import open_view
from interp_rand.reports.dynamics.progress import (ROLE_THRESHOLD, addition_progress, compare_to_loss,
                                                    format_crossings, sort_progress)
from interp_rand.run_history import read_metrics
from interp_rand.tasks.base import CARRIES, SORTED_OUTPUT, has_capability
from interp_rand.training.checkpoint import list_checkpoints, read_meta

ANALYSES = {CARRIES: addition_progress, SORTED_OUTPUT: sort_progress}


def train_recipe(name: str, every: int, out: Path) -> Path:
    """The zoo's recipe ``name`` trained into ``out/name`` with an evaluation and a kept
    checkpoint every ``every`` steps (a dense loss curve to compare against)."""
    from interp_rand.tasks import make_task
    from interp_rand.training import train
    from interp_rand.zoo.entries import ENTRIES

    entry = ENTRIES[name]
    task = make_task(entry.task_name, **entry.task_config)
    config = dataclasses.replace(entry.train, eval_every=every, checkpoint_every=every, keep_checkpoints=100_000)
    train(task, task.model_config(**entry.model), config, out / name, progress=True)
    return out / name


def log_spaced(folders: list[Path], n: int) -> list[Path]:
    """About ``n`` of ``folders`` (oldest first), nearest to log-spaced steps (dense early, where
    a step is a larger share of the training so far), the first and last always kept."""
    steps = [max(read_meta(f)[1]["step"], 1) for f in folders]
    if len(folders) <= n:
        return folders
    chosen: set[int] = set()
    targets = n
    while len(chosen) < n:  # early targets fall on the same checkpoint: ask for more
        ratio = steps[-1] / steps[0]
        chosen = {min(range(len(steps)), key=lambda j: abs(math.log(steps[j] / (steps[0] * ratio ** (i / (targets - 1))))))
                  for i in range(targets)}
        targets += 1
    return [folders[j] for j in sorted(chosen)]


def named_keys(final: dict[str, float]) -> list[str]:
    """The sub-task accuracies, each role's best head, and the (role, head, answer position)s
    whose score at the final checkpoint is at or above the role threshold."""
    keys = [k for k in final if k.startswith("subtask/") and "@" not in k]
    keys += [k for k in final if k.startswith("role/") and k.endswith("@best")]
    keys += [k for k, v in final.items() if k.startswith("role/") and ":" in k and "@best" not in k
             and v >= ROLE_THRESHOLD]
    return keys


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for progress.json (and --train's run)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="a run folder of an addition or sort model, with its checkpoints")
    source.add_argument("--train", choices=("addition", "sort"), help="train the zoo's recipe into OUT/NAME first")
    parser.add_argument("--every", type=int, default=10, help="--train: steps between evaluations and checkpoints (default: %(default)s)")
    parser.add_argument("--checkpoints", type=int, default=50, help="checkpoints measured, log-spaced (default: %(default)s)")
    parser.add_argument("--n", type=int, default=512, help="held-out examples measured at every checkpoint (default: %(default)s)")
    args = parser.parse_args(argv)
    for name in ("every", "checkpoints", "n"):
        if getattr(args, name) < 2:
            parser.error(f"--{name} must be >= 2, got {getattr(args, name)}")
    torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine

    run = train_recipe(args.train, args.every, args.out) if args.train else args.run
    folders = list_checkpoints(run)
    if len(folders) < 2:
        parser.error(f"{run}: {len(folders)} checkpoint(s); the replay needs a run that kept several "
                     "(TrainConfig(checkpoint_every=..., keep_checkpoints=...)) or --train")
    folders = log_spaced(folders, args.checkpoints)
    cache: dict = {}
    table = []
    for folder in bar(folders, desc="progress measures: checkpoint", enabled=True):
        view = open_view(folder, n=args.n, seed=1, cache=cache)
        analysis = next((fn for cap, fn in ANALYSES.items() if has_capability(view.task, cap)), None)
        if analysis is None:
            parser.error(f"{run}: task {view.task.name!r} has no progress measures (addition or sort only)")
        table.append({"step": view.step, **analysis(view)})
    note(f"measured {len(table)} checkpoints, steps {table[0]['step']}..{table[-1]['step']}")

    crossings = compare_to_loss(table, read_metrics(run), keys=named_keys(table[-1]))
    print(f"{run} ({view.task.name}): {len(table)} checkpoints, {args.n} held-out examples each")
    print(format_crossings(crossings))
    summary = {"run": str(run), "task": view.task.name, "n_examples": args.n,
               "crossings": [c.to_dict() for c in crossings], "table": table}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "progress.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
