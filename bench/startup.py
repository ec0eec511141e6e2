"""Start-up time of the command line: ``--help``, ``tasks``, ``zoo list``, argument and file errors,
each in a fresh subprocess (median of ``--runs``), next to ``python -c "import torch"`` measured
in the same run, with the ratio. None of these commands should import torch: target <= 0.5 s on
an idle machine, a small fraction of torch's import.

    python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the CLI as the console script runs it (also works on checkouts without interp_rand/cli/__main__.py)
CLI = "import sys; from interp_rand.cli import main; sys.exit(main())"
COMMANDS = [
    ["--help"],
    ["tasks"],
    ["zoo", "list"],
    ["train", "--help"],
    ["train", "sort", "--help"],
    ["circuit", "--help"],
    ["report", "--help"],
    ["nope"],                                          # unknown command
    ["train", "sortt"],                                # typo'd task name
    ["circuit", "zoo:sort", "--out", "x", "--method", "nope"],  # bad choice
    # file errors, refused before the heavy imports (issue 38: 7-12 s with the imports first)
    ["eval", "/nonexistent"],                          # no such run
    ["report", "zoo:nope", "--out", "x"],              # no such zoo model
    ["circuit", "tests", "--out", "x"],                # a folder that is no run
    ["eval", "--model", "no_such_module:f", "--out", "x"],  # a --model whose module does not exist
]


def seconds(argv: list[str], runs: int) -> float:
    """Median wall time of ``argv`` over ``runs`` runs (the first, cold, run is discarded)."""
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = seconds([sys.executable, "-c", "pass"], args.runs)
    torch = seconds([sys.executable, "-c", "import torch"], args.runs)
    print(f"{'python -c pass':<58} {python:6.3f} s")
    print(f"{'python -c ' + chr(34) + 'import torch' + chr(34):<58} {torch:6.3f} s")
    for command in COMMANDS:
        took = seconds([sys.executable, "-c", CLI, *command], args.runs)
        print(f"{'interp-rand ' + ' '.join(command):<58} {took:6.3f} s  {took / torch:5.2f} x torch's import")


if __name__ == "__main__":
    main()
