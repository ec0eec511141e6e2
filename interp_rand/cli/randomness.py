"""``interp-rand randomness RUN_DIR [--compare RUN_DIR_B] --out DIR``: how a seeded model uses
its randomness channel (usage score per node, where seed information enters, and per task the
recall stored-set map or the colouring symmetry breaking); writes ``randomness.json`` and
``randomness.html`` and prints the key numbers, side by side with ``--compare``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from interp_rand import progress
from interp_rand.cli.options import at_least, output_path

from interp_rand.defaults import DEFAULT_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "randomness", help="how a seeded model uses its randomness channel",
        description="Seed-resample patching per node (randomness-usage score), seed vs input "
        "variance and seed-bit probes per layer, and for recall the stored-set map over all "
        "seeds, for colouring the dependence of a vertex's colour on its own and its "
        "neighbours' noise. Writes randomness.json and randomness.html to --out.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--compare", type=Path, default=None, metavar="RUN_DIR_B",
                        help="a second run of the same task (e.g. the ERM twin), analysed alike")
    parser.add_argument("--out", type=output_path, required=True, metavar="DIR")
    parser.add_argument("--n", type=at_least(2), default=2048, help="examples for the usage score and probes (default 2048)")
    parser.add_argument("--stored-inputs", type=at_least(1), default=32,
                        help="recall: key/value inputs of the stored-set map, each under every seed (default 32)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the sampled examples")
    return parser


def load_seeded(run_dir: Path):
    """The checkpoint of ``run_dir``, refused unless its model and task have a seed channel."""
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run_dir)
    task = ckpt.spec.make_task()
    if not getattr(ckpt.spec.model_config, "has_seed", False) or not hasattr(task, "sample_seeds"):
        raise ValueError(f"{run_dir}: task {task.name!r} / this model has no seed channel")
    return ckpt


def analyse(run_dir: Path, n: int, stored_inputs: int, seed: int, show: bool = False) -> dict[str, Any]:
    """Every randomness analysis that fits the run's task, as one JSON-ready dict; ``show``:
    name each stage on stderr."""
    import torch

    from circuits.analyses.randomness import randomness_usage, seed_entry

    ckpt = load_seeded(run_dir)
    task = ckpt.spec.make_task()
    model = ckpt.model()
    train = ckpt.spec.train_config
    generator = torch.Generator().manual_seed(seed)
    batch = task.sample(n, generator)
    progress.note(f"{run_dir}: randomness-usage score per node ({n} examples)", show)
    out: dict[str, Any] = {
        "name": Path(run_dir).name, "run": str(run_dir), "task": task.name, "step": ckpt.step,
        "objective": train.objective, "q": train.q, "seed_source": train.seed_source,
        "usage": randomness_usage(model, batch, task.loss_kind, per_position=True, seed=seed,
                                  progress=show).to_dict(),
    }
    inputs, seeds = task.sample(64, generator), task.sample_seeds(64, generator)
    probe_batch = task.sample(n, generator)
    progress.note(f"{run_dir}: where seed information enters (variance, seed-bit probes)", show)
    out["entry"] = seed_entry(model, task, inputs, seeds, probe_batch=probe_batch, generator=generator).to_dict()
    # control: the same architecture with fresh random weights uses its seed by accident only,
    # and a probe reads the seed bits from its residual stream as well as the embedding allows
    from circuits.analyses.randomness import residual_stream_hooks, seed_probe
    from probes.controls import random_init_like

    progress.note(f"{run_dir}: random-init control", show)
    random_model = random_init_like(model)
    control = randomness_usage(random_model, batch, task.loss_kind, seed=seed, progress=show)
    out["random_init"] = {"reference": control.reference, "reference_flip": control.reference_flip,
                          "score": control.score,
                          "seed_probe": seed_probe(random_model, probe_batch, residual_stream_hooks(random_model),
                                                   torch.Generator().manual_seed(seed))[0]}
    if task.name == "recall":
        from interp_rand.cli.randomness_mechanism import recall_mechanism
        from probes.stored_set import stored_set_map

        progress.note(f"{run_dir}: stored-set map ({stored_inputs} inputs x every seed)", show)
        # the key/value inputs stored_set_map draws next, for the per-seed mechanism lines
        inputs = task.sample(stored_inputs, torch.Generator().set_state(generator.get_state()))
        stats, stored = stored_set_map(model, task, stored_inputs, generator)
        out["stored_set"] = stats.to_dict()
        out["mechanism"] = recall_mechanism(model, task, train.seed_source, inputs, stored, seed)
    if task.name == "coloring":
        from probes.symmetry import colour_noise_information, noise_resample_effect

        progress.note(f"{run_dir}: symmetry breaking (colour vs noise rank, noise resampling)", show)
        out["symmetry"] = {
            "information": colour_noise_information(model, task, batch, generator).to_dict(),
            "resample": noise_resample_effect(model, task, batch, generator).to_dict(),
        }
        from interp_rand.cli.randomness_mechanism import coloring_mechanism

        out["mechanism"] = coloring_mechanism(model, task, batch, seed)
    return out


def key_numbers(run: dict[str, Any]) -> dict[str, Any]:
    """The numbers printed per run (and stored as the report's summary)."""
    usage, entry = run["usage"], run["entry"]
    row: dict[str, Any] = {f"usage {k}": v for k, v in usage["score"].items()}
    row["usage whole model (reference)"] = usage["reference"]
    row["answer flip, whole model"] = usage["reference_flip"]
    row["usage whole model, random-init control"] = run["random_init"]["reference"]
    row.update({f"seed fraction {h}": f for h, f in zip(entry["hooks"], entry["seed_fraction"])})
    row["seed enters at"] = entry["entry"]
    row.update({f"seed probe {h}": a for h, a in zip(entry["hooks"], entry["probe_accuracy"])})
    row.update({f"seed probe {h}, random-init control": a
                for h, a in zip(entry["hooks"], run["random_init"]["seed_probe"])})
    row["seed probe chance"] = entry["probe_chance"]
    if "stored_set" in run:
        s = run["stored_set"]
        row.update({"stored: mean size": s["mean_size"], "stored: coverage TV from uniform": s["coverage_tv"],
                    "stored: co-storage gap": s["costorage_gap"], "stored: seed-dependent cells": s["seed_dependent"],
                    "stored: worst-position coverage": s["worst_position_coverage"],
                    "stored: min coverage": min(s["coverage"])})
    if "symmetry" in run:
        info, effect = run["symmetry"]["information"], run["symmetry"]["resample"]
        row.update({"MI(colour; noise rank) bits": info["mi"], "MI shuffled control": info["mi_shuffled"],
                    "MI given vertex id": info["mi_given_id"], "colour from rank accuracy": info["rank_accuracy"],
                    "majority colour accuracy": info["majority_accuracy"]})
        row.update({f"colour change, noise at distance {d}": r for d, r in zip(effect["distance"], effect["change_rate"])})
    from interp_rand.cli.randomness_mechanism import mechanism_numbers

    row.update(mechanism_numbers(run))
    return row


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def run(args: argparse.Namespace) -> int:
    from circuits.draw.randomness_figure import write_randomness_html

    # both runs are checked before either is analysed
    first = load_seeded(args.run_dir)
    if args.compare is not None:
        second = load_seeded(args.compare)
        if first.spec.task_name != second.spec.task_name:
            raise ValueError(f"--compare: {args.compare} is a {second.spec.task_name!r} run, "
                             f"not {first.spec.task_name!r}")
    runs = [analyse(path, args.n, args.stored_inputs, args.seed, show=True)
            for path in (args.run_dir, args.compare) if path is not None]
    if len(runs) == 2:
        from interp_rand.cli.randomness_mechanism import compare_capacity

        compare_capacity(runs)  # the first run's per-seed sets against the second's capacity
    rows = [key_numbers(r) for r in runs]
    report = {"runs": runs, "summary": {r["name"]: row for r, row in zip(runs, rows)}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "randomness.json").write_text(json.dumps(report, indent=1))
    write_randomness_html(report, args.out / "randomness.html")
    names = [r["name"] for r in runs]
    width = max(len(k) for k in rows[0])
    print(f"{'':{width}}  " + "  ".join(f"{n[:28]:>28}" for n in names))
    for key in rows[0]:
        print(f"{key:{width}}  " + "  ".join(f"{_fmt(row.get(key)):>28}" for row in rows))
    print(f"wrote {args.out / 'randomness.json'} and {args.out / 'randomness.html'}")
    return 0
