"""The length-generalisation study of docs/generalization.md: train sort and addition on a range of
lengths under several position schemes, run each to 3x its longest trained length, and report the
extrapolation factor and where each breaks; then recall across N on the zoo's models.

    python examples/length_study.py --out out/length-study            # the study (~15 min, one core)
    python examples/length_study.py --out out/ls --only sort --steps 50  # a quick look

Models (``--out``/NAME, reused when already trained there: the trainer resumes a finished run
with nothing left to do); their recipes are ``interp_rand.zoo.entries.LENGTH_STUDY`` (two of them,
``sort-alibi`` and ``addition-digit_offset``, are in the zoo):

- sort, lists of lengths 2..8 over 10 values, positions ``learned`` (a table of 48 rows, so
  lengths up to 24 can be run: rows past 16 are never trained) and ``alibi``;
- addition, operands of 1..5 digits, every number written units first (``operand_order`` and
  ``answer_order`` ``lsb``), positions ``learned`` (48 rows), ``alibi``, ``digit_index`` and
  ``digit_index`` with Abacus's training-time index offset (``digit_offset`` 10: indices up to 15
  are trained).

Every model: 2 blocks of width 64 with 4 heads, batch 128, lr 3e-3, at most 4,000 steps (10,000
for the offset model), stopping at exact match 0.999 on the longest trained length (the zoo's
algorithmic recipe). The summary (JSON
and printed) gives per model the extrapolation factor, the breaking step, and the seconds its
training and its study took; each model's report is written to ``--out``/gen-NAME.

Recall: ``recall-keys16-{AE_R,Aq_R}`` are trained on 4-8 pairs over 16 keys (``n_keys``: the key
one-hot stays 16 wide, so the model reads up to 16 pairs), at the CPU recipe; each is run at every
even N up to 16: the paper's metrics and the keys kept (average x N), ``A^q_R`` against ERM. And
``recall-zoo``: the zoo's models trained at N = 12, 14 and 16 (their key one-hot is N wide, so
each reads at most its own N), the fraction of queries recalled and the count it means.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

RECALL = {12: ("zoo:recall-Aq_R", "zoo:recall-AE_R"), 14: ("zoo:recall-N14-Aq_R", "zoo:recall-N14-AE_R"),
          16: ("zoo:recall-N16-Aq_R", "zoo:recall-N16-AE_R")}


def train_one(name: str, out: Path, steps: int | None, seed: int) -> tuple[Path, float, Any, Any]:
    """Train study model ``name`` by its recipe (``steps``: at most that many instead): its run
    folder, seconds, task and model config."""
    import dataclasses

    from interp_rand import make_task, train
    from interp_rand.zoo.entries import LENGTH_STUDY

    entry = LENGTH_STUDY[name]
    task = make_task(entry.task_name, **entry.task_config)
    model_config = task.model_config(**entry.model)
    config = entry.train if steps is None else dataclasses.replace(
        entry.train, steps=steps, checkpoint_every=steps, warmup_steps=min(entry.train.warmup_steps, steps // 10))
    start = time.perf_counter()
    train(task, model_config, dataclasses.replace(config, seed=seed), out / name, progress=False)
    return out / name, time.perf_counter() - start, task, model_config


def study_one(run: Path, out: Path, n: int, mechanism: bool) -> tuple[dict, float]:
    from interp_rand.reports.generalization import generalization_report

    start = time.perf_counter()
    report = generalization_report(run, n=n, mechanism=mechanism)
    report.write(out / f"gen-{run.name}")
    found = report.found
    return ({"trained": list(found.trained), "extrapolation_factor": round(found.extrapolation_factor(), 3),
             "longest_solved": found.longest_solved(), "breaks_at": found.breaks_at(),
             "breaking_step": found.breaking_step(),
             "exact_match": {str(s.length): s.exact_match for s in found.scores}}, time.perf_counter() - start)


def seeded_numbers(model: Any, task: Any, n_inputs: int, n_seeds: int, seed: int) -> dict:
    """The paper's metrics of a recall model over ``n_inputs`` x ``n_seeds`` (average,
    worst-5%, majority-30 worst) and the keys it keeps (average x N)."""
    from interp_rand.seeded_evaluation.paper_metrics import evaluate_seeded

    g = torch.Generator().manual_seed(seed)
    metrics = evaluate_seeded(task, model, task.sample(n_inputs, g), n_seeds, g)
    return {"average": round(metrics["average"], 4), "worst_5pct": round(metrics["worst_5pct"], 4),
            # (None with fewer than 30 seeds: no majority of 30 to take)
            "majority_30_worst": None if metrics["majority_30"] is None else round(metrics["majority_30"]["worst"], 4),
            "keys_kept": round(metrics["average"] * task.n_pairs, 2)}


def recall_by_n(run: Path, n_inputs: int, n_seeds: int) -> dict:
    """A recall model of the study at every even N up to its key alphabet: :func:`seeded_numbers`."""
    from interp_rand.tasks.lengths import at_length
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run)
    model, task = ckpt.model().eval(), ckpt.spec.make_task()
    return {str(n_pairs): seeded_numbers(model, at_length(task, n_pairs), n_inputs, n_seeds, n_pairs)
            for n_pairs in range(4, task.key_space + 1, 2)}


def recall_sweep(n_inputs: int, n_seeds: int) -> dict:
    """Per N and variant of the zoo: the fraction of queries recalled and the count it means."""
    from interp_rand.training.checkpoint import load_checkpoint

    out: dict = {}
    for n_pairs, runs in RECALL.items():
        for run in runs:
            try:
                ckpt = load_checkpoint(run)
            except Exception as err:  # a zoo model not built in this checkout
                out.setdefault(str(n_pairs), {})[run] = {"missing": str(err).splitlines()[0]}
                continue
            row = seeded_numbers(ckpt.model().eval(), ckpt.spec.make_task(), n_inputs, n_seeds, 0)
            out.setdefault(str(n_pairs), {})[run] = {"variant": run.split("-")[-1], "fraction": row["average"],
                                                     "count": row["keys_kept"], "worst_5pct": row["worst_5pct"]}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs, reports and summary")
    parser.add_argument("--only", default="sort,addition,recall,recall-zoo",
                        help="tasks (sort, addition, recall), study model names, and recall-zoo (the zoo's recall "
                        "models across N) to run (default: all)")
    parser.add_argument("--steps", type=int, default=None,
                        help="most training steps per model (default: each recipe's, 4,000 or 10,000)")
    parser.add_argument("--n", type=int, default=512, help="examples per length (default 512)")
    parser.add_argument("--no-mechanism", action="store_true", help="skip the mechanism by length")
    parser.add_argument("--recall-inputs", type=int, default=256, help="recall: inputs per model (default 256)")
    parser.add_argument("--recall-seeds", type=int, default=64, help="recall: seeds per input (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    parts = {p.strip() for p in args.only.split(",")}
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"models": {}}
    from interp_rand.tasks import KEY_VALUE_RECALL, has_capability
    from interp_rand.zoo.entries import LENGTH_STUDY

    for name, entry in LENGTH_STUDY.items():
        if entry.task_name not in parts and name not in parts:
            continue
        run, train_seconds, task, model_config = train_one(name, args.out, args.steps, args.seed)
        result, study_seconds = study_one(run, args.out, args.n, not args.no_mechanism)
        summary["models"][name] = {**result, "positional": model_config.positional,
                                   "train_seconds": round(train_seconds, 1), "study_seconds": round(study_seconds, 1)}
        if has_capability(task, KEY_VALUE_RECALL):  # how many keys it keeps past its pairs, and its worst case
            summary["models"][name]["by_n"] = recall_by_n(run, args.recall_inputs, args.recall_seeds)
        print(f"{name}: factor {result['extrapolation_factor']:.2f}; {result['breaking_step']} "
              f"(train {train_seconds:.0f} s, study {study_seconds:.0f} s)", flush=True)
        for n_pairs, row in summary["models"][name].get("by_n", {}).items():
            majority = "-" if row["majority_30_worst"] is None else f"{row['majority_30_worst']:.3f}"
            print(f"  N={n_pairs}: average {row['average']:.3f} ({row['keys_kept']:.1f} keys), worst-5% "
                  f"{row['worst_5pct']:.3f}, majority-30 worst {majority}", flush=True)
    if "recall-zoo" in parts:
        summary["recall"] = recall_sweep(args.recall_inputs, args.recall_seeds)
        for n_pairs, runs in summary["recall"].items():
            print(f"recall N={n_pairs}: " + "; ".join(
                f"{run}: {r['fraction']:.3f} of keys = {r['count']:.1f}" if "fraction" in r else f"{run}: missing"
                for run, r in runs.items()))
    (args.out / "length_study.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
