"""``make demo``: a tour of the toolkit on the zoo's trained models, with no training.

Runs, one after the other, the commands a researcher would type on the packaged models
(``zoo:NAME``), prints each command line and its output, and writes every result under one
folder with an ``index.html`` linking the figures and giving each step's verdict over the claims
it states (one word, and one line per failing claim). ``--train`` instead trains small sort and
addition models first (a few minutes) and evaluates those.
"""

from __future__ import annotations

import io
import multiprocessing.connection
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from interp_rand.evaluation import evaluate
from interp_rand.figures import training_curves
from interp_rand.figures.demo_index import PRINTED, demo_index, verdict_lines
from interp_rand.figures.html_page import asset_folder, write_figure
from interp_rand.output import replace_files, write_json, write_text
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train

# (folder, what it shows, the command's arguments; OUT is the folder's path)
TOUR: list[tuple[str, str, list[str]]] = [
    ("zoo", "the trained models shipped with the package", ["zoo", "list"]),
    ("addition", "the 3-digit addition model on 100,000 fresh problems",
     ["eval", "zoo:addition", "--n", "100000", "--out", "OUT"]),
    ("carry", "carry propagation: the algorithm checked (interchange, scrubbing, predictions), then the "
     "components that carry, removed, and controls",
     ["case-study", "carry", "zoo:addition", "--n", "1000", "--controls", "3", "--out", "OUT"]),
    ("sort", "sorting: the algorithm checked, then the heads' role scores, ablation per output position, "
     "duplicates and near-ties",
     ["case-study", "sort", "zoo:sort", "--n", "2000", "--controls", "3", "--out", "OUT"]),
    ("recall-seed", "recall's seed: which keys a seed stores, checked on held-out seeds and by seed-bit interventions",
     ["case-study", "recall-seed", "zoo:recall-Aq_R", "--out", "OUT"]),
    ("coloring-seed", "colouring's noise: the rule from noise ranks to a colour, checked against the model",
     ["case-study", "coloring-seed", "zoo:coloring-Aq_R", "--out", "OUT"]),
    ("explain", "explain: the sort model's algorithm found with no hand-written hypothesis (candidates from the "
     "primitive library, a site search, decisive experiments between the survivors)",
     ["explain", "zoo:sort", "--out", "OUT"]),
    ("explain-seed", "explain on the colouring model: programs that read the seed against their seed-free rivals, "
     "decided by the seed experiment (where a fresh seed moved the model's answer, does the program give the new one?)",
     ["explain", "zoo:coloring-Aq_R", "--out", "OUT"]),
    ("report", "the attention-pattern report of the addition model (heads, roles, probes)",
     ["report", "zoo:addition", "--out", "OUT/report.html"]),
    ("randomness", "the randomness channel: colouring A^q_R (randomized) against A^E_R (ERM)",
     ["randomness", "zoo:coloring-Aq_R", "--compare", "zoo:coloring-AE_R", "--n", "256", "--out", "OUT"]),
    ("recall", "recall (N = 12): seed usage and the stored-set map, A^q_R against A^E_R",
     ["randomness", "zoo:recall-Aq_R", "--compare", "zoo:recall-AE_R", "--n", "256", "--out", "OUT"]),
    ("compare", "the seed's circuit (pairs differing in the seed only): colouring A^q_R against its ERM twin A^E_R",
     ["compare", "zoo:coloring-Aq_R", "zoo:coloring-AE_R", "--pairs", "seed", "--out", "OUT"]),
    ("gridworld", "the grid-world explorer: what its seed chooses (the first move, the route, the worst cell), "
     "beside its ERM twin",
     ["gridworld", "eval", "zoo:gridworld-Aq_R", "--compare", "zoo:gridworld-AE_R", "--route-seeds", "500",
      "--out", "OUT"]),
]


TOUR_FILES = ("tour.json", "index.html")  # the tour's own files in its folder, written together


class _Tee(io.StringIO):
    """Within the block, what is printed goes to the terminal and is kept (``getvalue()``)."""

    def __enter__(self) -> "_Tee":
        self._real = sys.stdout
        sys.stdout = self
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout = self._real

    def write(self, text: str) -> int:
        self._real.write(text)
        return super().write(text)

    def flush(self) -> None:
        self._real.flush()
DEMO_FILES = ("summary.json", "training_curves.html")  # --train's


#: the order steps start in when they run side by side, longest first (measured seconds on one
#: idle core, 2026-12-06), so that the two lanes end together; a step not named starts last
LONGEST_FIRST = ("carry", "sort", "coloring-seed", "report", "recall-seed", "compare", "randomness", "explain",
                 "recall", "addition", "gridworld", "explain-seed", "zoo")


#: the steps that hold the most memory (about 1 GB above the process's 0.6 GB each, measured
#: 2026-12-06), run one after the other even when steps run side by side
APART = ("carry", "sort")


def _command_line(out: Path, folder: str, argv: list[str]) -> tuple[list[str], str]:
    argv = [a.replace("OUT", str(out / folder)) if a.startswith("OUT") else a for a in argv]
    return argv, "interp-rand --threads 1 " + shlex.join(argv)


def _run_step(out: Path, folder: str, argv: list[str], main: Callable[[list[str]], int]) -> tuple[int, str]:
    """Run one step here; its exit code and what it printed (also written to its folder)."""
    with asset_folder(out), _Tee() as printed:  # every page shares out/plotly.min.js
        code = main(["--threads", "1", *argv])
    (out / folder).mkdir(exist_ok=True)
    write_text(out / folder / PRINTED, printed.getvalue())
    return code, printed.getvalue()


def _step_child(out: Path, folder: str, argv: list[str], main: Callable[[list[str]], int], report: Path) -> None:
    """A forked child's body: run the step with its output kept (printed by the parent, in the
    tour's order) and its stderr (progress) in a file; write ``{"code", "printed"}`` to ``report``."""
    import os
    import traceback

    with open(report.with_suffix(".err"), "w") as err:  # scratch: the step's progress, not an output
        os.dup2(err.fileno(), 2)
    sys.stderr = open(2, "w", closefd=False)
    sys.stdout = io.StringIO()  # _Tee writes through to it: the parent prints it
    try:
        code, printed = _run_step(out, folder, argv, main)
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the tour
        code, printed = 1, traceback.format_exc()
        sys.stderr.write(printed)
    sys.stderr.flush()
    write_json(report, {"code": code, "printed": printed})


def _run_side_by_side(out: Path, main: Callable[[list[str]], int], jobs: int) -> list[tuple[int, str, float]]:
    """Every :data:`TOUR` step in a forked process, ``jobs`` at a time, longest first; each
    step's command line and output printed in the tour's order as soon as it and the steps
    before it are done. Returns ``(code, printed, seconds)`` per step, in the tour's order."""
    import json
    import multiprocessing
    import tempfile

    context = multiprocessing.get_context("fork")  # the children inherit the loaded modules (no imports)
    order = sorted(range(len(TOUR)), key=lambda i: LONGEST_FIRST.index(TOUR[i][0])
                   if TOUR[i][0] in LONGEST_FIRST else len(LONGEST_FIRST))
    done: dict[int, tuple[int, str, float]] = {}
    shown = 0
    running: dict[int, tuple[Any, float]] = {}
    with tempfile.TemporaryDirectory(prefix="interp-rand-demo-") as scratch:
        try:
            while len(done) < len(TOUR):
                while len(running) < jobs:
                    # never two of APART at once: side by side they would pass the demo's 2 GB
                    busy = any(TOUR[r][0] in APART for r in running)
                    i = next((j for j in order if not (busy and TOUR[j][0] in APART)), None)
                    if i is None:
                        break
                    order.remove(i)
                    folder, _, argv = TOUR[i]
                    argv, _ = _command_line(out, folder, argv)
                    child = context.Process(target=_step_child, args=(out, folder, argv, main,
                                                                      Path(scratch) / f"{i}.json"))
                    child.start()
                    running[i] = (child, time.perf_counter())
                multiprocessing.connection.wait([c.sentinel for c, _ in running.values()])
                for i, (child, began) in list(running.items()):
                    if child.is_alive():
                        continue
                    child.join()
                    del running[i]
                    report = Path(scratch) / f"{i}.json"
                    result = json.loads(report.read_text()) if report.is_file() else {
                        "code": child.exitcode or 1, "printed": ""}
                    if result["code"] != 0:  # its progress and error, which went to its own file
                        errors = report.with_suffix(".err")
                        sys.stderr.write(errors.read_text()[-4000:] if errors.is_file() else "")
                    done[i] = (result["code"], result["printed"], time.perf_counter() - began)
                while shown in done:  # print in the tour's order
                    folder, what, argv = TOUR[shown]
                    print(f"\n## {what}\n$ {_command_line(out, folder, argv)[1]}", flush=True)
                    sys.stdout.write(done[shown][1])
                    sys.stdout.flush()
                    if done[shown][0] != 0:
                        raise RuntimeError(f"demo step failed ({done[shown][0]}): {_command_line(out, folder, argv)[1]}")
                    verdict = verdict_lines(out / folder)
                    if verdict:
                        print("verdict: " + "\n  ".join(verdict), flush=True)
                    shown += 1
        finally:
            for child, _ in running.values():  # a failed step or Ctrl-C: stop the others
                child.terminate()
                child.join()
    return [done[i] for i in range(len(TOUR))]


def run_tour(out: str | Path, main: Callable[[list[str]], int], jobs: int = 1) -> list[dict[str, Any]]:
    """Run every :data:`TOUR` command on the zoo; write ``index.html`` and ``tour.json``.

    ``main``: the command line's entry point (``interp_rand.cli.main.main``, argv -> exit
    code), which runs each step; the command line gives it (``interp-rand demo``): the demo is
    the layer below the command line and never imports it. ``jobs``: steps run at once, each in
    a forked process on one thread (``1``: one after the other, here); the output is printed in
    the tour's order either way, and each step's results do not depend on it."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    steps = []
    if jobs > 1 and hasattr(os, "fork"):
        results = _run_side_by_side(out, main, jobs)
        for (folder, what, argv), (code, _, seconds) in zip(TOUR, results):
            verdict = verdict_lines(out / folder)
            steps.append({"folder": folder, "what": what, "command": _command_line(out, folder, argv)[1],
                          "seconds": round(seconds, 1), "verdict": verdict[0].split()[0] if verdict else None})
    else:
        for folder, what, argv in TOUR:
            argv, line = _command_line(out, folder, argv)
            print(f"\n## {what}\n$ {line}", flush=True)
            began = time.perf_counter()
            code, _ = _run_step(out, folder, argv, main)
            if code != 0:
                raise RuntimeError(f"demo step failed ({code}): {line}")
            verdict = verdict_lines(out / folder)
            if verdict:
                print("verdict: " + "\n  ".join(verdict), flush=True)
            steps.append({"folder": folder, "what": what, "command": line,
                          "seconds": round(time.perf_counter() - began, 1), "verdict": verdict[0].split()[0] if verdict
                          else None})
    with replace_files(out, TOUR_FILES) as stage:
        write_json(stage / "tour.json", steps)
        write_text(stage / "index.html", demo_index(out, steps))
    print(f"\nwrote {out}; open {out / 'index.html'} for the figures")
    return steps


# ----------------------------------------------------------------------------- --train
# name -> (task, model overrides, training config, how to evaluate)
DEMO_RUNS: dict[str, dict[str, Any]] = {
    "sort": {
        "task": {"name": "sort", "length": 8, "vocab": 32},
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_mlp": 128},
        "train": TrainConfig(steps=1500, batch_size=128, lr=3e-3, warmup_steps=100, eval_every=100,
                             eval_size=1000, checkpoint_every=500, stop_at_exact_match=0.999),
        "eval": {"fresh": 10_000},
    },
    "addition": {
        "task": {"name": "addition", "n_digits": 3},
        "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_mlp": 128},
        "train": TrainConfig(steps=2500, batch_size=128, lr=3e-3, warmup_steps=100, eval_every=100,
                             eval_size=1000, checkpoint_every=500, stop_at_exact_match=0.999),
        "eval": {"exhaustive": True},
    },
}
EVAL_SEED = 7


def run_demo(out: str | Path, progress: bool = True) -> dict[str, Any]:
    """Train the :data:`DEMO_RUNS` models, evaluate them and write runs, ``summary.json`` and
    ``training_curves.html`` to ``out``."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    histories = {}
    for name, spec in DEMO_RUNS.items():
        task_spec = dict(spec["task"])
        task = make_task(task_spec.pop("name"), **task_spec)
        result = train(task, task.model_config(**spec["model"]), spec["train"], out / name, progress=progress)
        if spec["eval"].get("exhaustive"):
            batch = task.exhaustive()
            label = f"all {len(batch):,} problems"
        else:
            n = spec["eval"]["fresh"]
            batch, label = task.sample(n, torch.Generator().manual_seed(EVAL_SEED)), f"{n:,} fresh examples"
        evaluation = evaluate(result.model, task, batch, progress=progress)
        report = {"task": task.name, "task_config": task.config_dict(), "step": result.step,
                  "train_seconds": round(result.seconds, 1), "evaluated_on": label, **evaluation.to_dict()}
        write_json(out / name / "eval.json", report)
        summary[name] = report
        histories[name] = result.history
    with replace_files(out, DEMO_FILES) as stage:
        write_json(stage / "summary.json", summary)
        write_figure(training_curves(histories), stage / "training_curves.html", "training curves")
    print(_table(summary))
    print(f"\nwrote runs, summary.json and training_curves.html to {out}")
    return summary


def _table(summary: dict[str, Any]) -> str:
    lines = [f"{'task':<10} {'steps':>6} {'train s':>8} {'evaluated on':>22} {'exact match':>12}  per position"]
    for name, r in summary.items():
        per_position = " ".join(f"{p:.3f}" for p in r["per_position"])
        lines.append(
            f"{name:<10} {r['step']:>6} {r['train_seconds']:>8} {r['evaluated_on']:>22} "
            f"{r['exact_match']:>12.4f}  {per_position}"
        )
    return "\n".join(lines)
