"""Training steps/s of docs/python.md's example (3-digit addition, d_model 64, batch 256)
with 1 and 2 torch intra-op threads, on an otherwise idle machine and with one core kept busy
by a spinning process (what a shared 2-core machine looks like), alternating in rounds.

    python bench/threads.py [--steps 30] [--rounds 3]

The default of ``interp_rand.DEFAULT_THREADS`` (and the CLI's ``--threads``) comes from this.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train

SPIN = "while True: pass"


def steps_per_second(threads: int, steps: int) -> float:
    task = make_task("addition", n_digits=3)
    config = TrainConfig(steps=steps, eval_every=10 * steps, eval_size=64, checkpoint_every=10 * steps)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        train(task, task.model_config(d_model=64), config, out, progress=False)
        return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    before = torch.get_num_threads()
    print(f"torch {torch.__version__}, default threads {before}, {args.steps} steps per measurement")
    steps_per_second(1, 5)  # warm-up
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for load in ("idle", "one core busy"):
            spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if load != "idle" else None
            try:
                for threads in (1, 2):
                    results.setdefault((load, threads), []).append(steps_per_second(threads, args.steps))
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
    torch.set_num_threads(before)
    for (load, threads), rates in results.items():
        print(f"{load:<14} {threads} thread(s): {statistics.median(rates):6.2f} steps/s "
              f"(median of {len(rates)}: {', '.join(f'{r:.2f}' for r in rates)})")


if __name__ == "__main__":
    main()
