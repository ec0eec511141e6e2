"""``interp-rand zoo build``: train the zoo's models and install them, weights only.

Each model is trained in ``OUT/.build/NAME``, evaluated, and installed as ``OUT/NAME``: its
final checkpoint without the optimiser state (``model.safetensors`` + ``checkpoint.json``), its
training curve, and ``zoo.json``, the model card (recipe, evaluation, how long it took, the
versions and commit it was built with). A model is assembled under a temporary name and
renamed into place, so an interrupted build leaves the old model or the new one, never half.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from interp_rand.defaults import DEFAULT_SEED as EVAL_SEED
from interp_rand.output.files import write_bytes, write_json
from interp_rand.output.folder import recover_folders, replace_folder
from interp_rand.training.checkpoint import META_FILE, MODEL_FILE, latest_checkpoint
from interp_rand.zoo import headline
from interp_rand.zoo.entries import ENTRIES, AgentEntry, TrainedEntry
from interp_rand.run_names import CARD_FILE, PREFIX, ZOO_DIR, installed

FRESH_INPUTS = 10_000
CURVE_FILES = ("metrics.jsonl", "history.json")


def select(names: Sequence[str] | None, out: Path = ZOO_DIR) -> list[TrainedEntry | AgentEntry]:
    """The entries to build, in build order: ``names`` (all if empty), plus any ERM twin a
    q-norm model starts from that is neither asked for nor already installed in ``out``."""
    names = list(names or ENTRIES)
    unknown = [n for n in names if n not in ENTRIES]
    if unknown:
        raise ValueError(f"unknown zoo model(s) {unknown}; the zoo has: {', '.join(ENTRIES)}")
    wanted, have = set(names), set(installed(out))
    for name in names:
        twin = getattr(ENTRIES[name], "erm_twin", None)
        if twin is not None and twin not in have:
            wanted.add(twin)
    return [e for n, e in ENTRIES.items() if n in wanted]


def build(names: Sequence[str] | None = None, out: str | Path = ZOO_DIR, progress: bool = True,
          log: Callable[[str], None] = print, from_run: str | Path | None = None) -> list[dict[str, Any]]:
    """Train, evaluate and install the named zoo models (all if ``names`` is empty) under
    ``out``; returns their cards. ``from_run``: install this finished run as the one named
    model instead of training it (a long recipe trained in the background), refused unless its
    task, model and training config are the entry's recipe."""
    out = Path(out)
    if from_run is not None and (names is None or len(names) != 1):
        raise ValueError("zoo build --from-run installs one model: name exactly one")
    entries = select(names, out) if from_run is None else [select(names, out)[-1]]
    out.mkdir(parents=True, exist_ok=True)
    cards = []
    for i, entry in enumerate(entries, 1):
        log(f"[{i}/{len(entries)}] {entry.name}: {entry.description}")
        work = out / ".build" / entry.name
        shutil.rmtree(work, ignore_errors=True)
        began = time.perf_counter()
        if isinstance(entry, AgentEntry):
            if from_run is not None:
                raise ValueError(f"{entry.name} is a grid-world agent: --from-run installs trained models only")
            metrics = _train_agent(entry, work, progress)
        else:
            metrics = _train_model(entry, work, out, progress, from_run)
        card = _card(entry, metrics, time.perf_counter() - began)
        _install(work if from_run is None else Path(from_run), out / entry.name, card)
        shutil.rmtree(work, ignore_errors=True)
        log(f"    {headline(card)} ({card['build_seconds']:.0f} s)")
        cards.append(card)
    try:
        (out / ".build").rmdir()  # only if empty: another build may be using it
    except OSError:
        pass
    return cards


def _finished_run(entry: TrainedEntry, run: str | Path) -> tuple[Any, int]:
    """``run``'s final model and step (installed from ``run`` itself), after checking that it is
    the entry's recipe."""
    from interp_rand.tasks import make_task
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run)
    task = make_task(entry.task_name, **entry.task_config)
    wrong = []
    if ckpt.spec.task_name != entry.task_name or ckpt.spec.make_task().config_dict() != task.config_dict():
        wrong.append(f"task {ckpt.spec.task_name} {ckpt.spec.make_task().config_dict()} (needs {task.config_dict()})")
    if ckpt.spec.model_config != task.model_config(**entry.model):
        wrong.append("model config")
    if ckpt.spec.train_config != entry.train:
        wrong.append("training config")
    early = entry.train.stop_at_exact_match is not None  # a recipe that may stop before its last step
    if ckpt.step > entry.train.steps or (ckpt.step < entry.train.steps and not early):
        wrong.append(f"step {ckpt.step} (needs {entry.train.steps}: an unfinished run)")
    if wrong:
        raise ValueError(f"zoo build --from-run: {run} is not the recipe of {entry.name}: " + "; ".join(wrong))
    return ckpt.model().eval(), ckpt.step


def _train_model(entry: TrainedEntry, work: Path, out: Path, progress: bool,
                 from_run: str | Path | None = None) -> dict[str, Any]:
    from dataclasses import replace

    from interp_rand.evaluation import evaluate
    from interp_rand.reproduce import evaluate_variant, scale_for
    from interp_rand.tasks import make_task
    from interp_rand.training import train

    task = make_task(entry.task_name, **entry.task_config)
    config = entry.train
    if entry.erm_twin is not None:
        config = replace(config, init_from=str(out / entry.erm_twin))
    if from_run is not None:  # trained elsewhere: its training time is not known here
        model, step = _finished_run(entry, from_run)
        trained = {"step": step, "train_seconds": None, "trained_from": str(Path(from_run).resolve())}
    else:
        result = train(task, task.model_config(**entry.model), config, work, progress=progress)
        model = result.model.eval()
        trained = {"step": result.step, "train_seconds": round(result.seconds, 1)}
    if entry.evaluation == "seeded":
        row = evaluate_variant(task, model, scale_for(entry.task_name, "cpu"), config)
        keep = ("n_inputs", "n_seeds", "average", "worst_5pct", "majority_5", "majority_30", "sampled",
                "predictive_variance", "histogram", "majority_rules", "majority_n_groups")
        # the loss kind's other vote rules (colouring: per-vertex vote, Las Vegas; bits: per bit)
        rules = tuple(f"{rule}_" for rule in row.get("majority_rules", ()) if rule != "majority_whole")
        keep += tuple(k for k in row if rules and k.startswith(rules))
        return {**trained, **{k: row[k] for k in keep if k in row}}
    if entry.evaluation == "exhaustive":
        batch, label = task.exhaustive(), "every input"
    else:
        batch = task.sample(FRESH_INPUTS, torch.Generator().manual_seed(EVAL_SEED))
        label = f"{FRESH_INPUTS:,} fresh inputs (seed {EVAL_SEED})"
    evaluation = evaluate(model, task, batch, progress=progress).to_dict()
    return {**trained, "evaluated_on": label,
            "n_examples": len(batch), **{k: evaluation[k] for k in ("exact_match", "per_position", "breakdown")}}


def _train_agent(entry: AgentEntry, work: Path, progress: bool) -> dict[str, Any]:
    from interp_rand.gridworld.experiment import run_variant

    every = max(1, entry.scale.pgpe.generations // 10)
    on_log = None if not progress else (lambda e: e["generation"] % every == 0 and print(
        f"    generation {e['generation']}: centre fitness {e['center_fitness']:.3f}", flush=True))
    summary = run_variant(entry.scale, work, on_log=on_log)
    keep = ("average", "worst_5pct", "worst_cell", "n_distinct_routes", "first_visit_min", "first_visit_max",
            "first_visit_map")
    return {"step": entry.scale.pgpe.generations, **{k: summary[k] for k in keep}}


def _card(entry: TrainedEntry | AgentEntry, metrics: dict[str, Any], seconds: float) -> dict[str, Any]:
    recipe: dict[str, Any]
    if isinstance(entry, AgentEntry):
        recipe = {"scale": entry.scale.to_dict()}
    else:
        recipe = {"task_config": entry.task_config, "model": entry.model, "train": entry.train.to_dict(),
                  "erm_twin": entry.erm_twin, "evaluation": entry.evaluation}
    return {
        "name": entry.name, "task": entry.task_name, "variant": entry.variant, "description": entry.description,
        "built_by": f"interp-rand --threads 1 zoo build {entry.name}", "recipe": recipe, "metrics": metrics,
        "build_seconds": round(seconds, 1), "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": {"torch": torch.__version__, "python": platform.python_version(), **_commit()},
    }


def _install(work: Path, final: Path, card: dict[str, Any]) -> None:
    """Copy the final checkpoint's weights and config, the training curve and the card from the
    run ``work`` into ``final`` (atomically)."""
    source = latest_checkpoint(work)
    if source is None:
        raise RuntimeError(f"{work} holds no checkpoint after training")
    recover_folders(final.parent)
    with replace_folder(final) as tmp:
        target = tmp / "checkpoints" / source.name
        target.mkdir(parents=True)
        write_bytes(target / MODEL_FILE, (source / MODEL_FILE).read_bytes())
        meta = json.loads((source / META_FILE).read_text())
        twin = card["recipe"].get("erm_twin")
        if twin is not None:  # the twin's build path means nothing elsewhere; its zoo name does
            meta["train"]["init_from"] = PREFIX + twin
        write_json(target / META_FILE, meta)
        for name in CURVE_FILES:
            if (work / name).exists():
                write_bytes(tmp / name, (work / name).read_bytes())
        write_json(tmp / CARD_FILE, card)


def _commit() -> dict[str, Any]:
    """The commit the build ran from and whether the tree had uncommitted changes (``None``
    outside a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True,
                                  timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}
