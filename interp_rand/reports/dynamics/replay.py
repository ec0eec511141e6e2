"""Replay analyses over every checkpoint of a run: one table of quantities over steps, the
run's loss curve beside it, and the step at which each quantity first crosses its threshold.

    >>> result = replay("runs/sort-dyn", analyses=["accuracy", "circuit"], n=256, seed=0)
    >>> result.table["accuracy/exact_match"]     # one value per checkpoint, oldest first
    >>> result.crossings["accuracy/exact_match"]  # {"step": 178, "threshold": 0.99, ...}
    >>> result.write("out/sort-dyn")              # replay.json and replay.html

Every checkpoint is measured on the same examples (:func:`~.view.open_view` draws them with
the replay's seed) and the analyses share one ``cache`` across checkpoints. A run needs at
least two checkpoints: train it with a dynamics schedule (``--checkpoint-schedule log:50``,
:mod:`interp_rand.training.checkpoint_schedule`), which keeps every checkpoint it writes.

A quantity *crosses* a threshold ``Threshold(prefix, value, rising)`` (the longest matching
prefix judges) at the first checkpoint step whose value is ``>= value`` (rising) or ``<=
value`` (falling) (:func:`~.view.crossing_step`); a quantity already past it at the first
checkpoint crosses there, one never past it has ``step: None`` ("never"). NaN (an undefined
share) never crosses. ``settled`` is the step from which it stays past the threshold
(:func:`~.view.settled_step`: a passing spike does not count).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.defaults import DEFAULT_SEED
# each analysis module registers its analyses on import
from interp_rand.reports.dynamics import analyses as _analyses, progress as _measures, randomness as _seeds  # noqa: F401
from interp_rand.output.files import finite_or_none
from interp_rand.reports.dynamics.view import DYNAMICS_ANALYSES, THRESHOLDS, Threshold, open_view, thresholds_of

FORMAT = "interp-rand/replay"
TABLE_FILE = "replay.json"
FIGURE_FILE = "replay.html"
OUTPUT_FILES = (TABLE_FILE, FIGURE_FILE)  # written together
# the running training loss each checkpoint records, as a column of the table
TRAIN_LOSS_KEY = "training/train_loss"
SCHEDULE_HINT = ("train it with a dynamics schedule, which keeps every checkpoint, e.g. "
                 "`interp-rand train sort --checkpoint-schedule log:50 --out runs/sort-dyn`")


class ReplayError(ValueError):
    """An analysis failed on one checkpoint of a replay (the message names both)."""


@dataclass
class Replay:
    """Attributes:
    run: the run replayed (as given); run_dir: its folder.
    steps: the checkpoints' steps, oldest first; checkpoints: their folders.
    analyses: the analyses measured (in order); options: their options as used.
    table: quantity -> one value per step (``None`` where an analysis gave none, or NaN).
    thresholds: ``{quantity prefix: Threshold}`` judged, from :data:`~.view.THRESHOLDS`.
    crossings: quantity -> ``{"step", "settled", "threshold", "rising", "text"}`` for every
        quantity a threshold applies to (``step`` ``None`` and text "never" when not crossed).
    curve: the run's evaluation records (``metrics.jsonl``: step, loss, exact_match, ...).
    notes: analyses skipped (chosen by default, not applicable to the task) and why.
    seconds: seconds per analysis over all checkpoints, ``open`` (loading checkpoints and
        drawing the examples) and ``total``.
    n, seed: examples per checkpoint and their seed; command: what produced it.
    model: the model in words (task, layers, heads, width), for the page's title.
    """

    run: str
    run_dir: str
    steps: list[int]
    checkpoints: list[str]
    analyses: list[str]
    options: dict[str, dict[str, Any]]
    table: dict[str, list[float | None]]
    thresholds: dict[str, Threshold]
    crossings: dict[str, dict[str, Any]]
    curve: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    n: int = 256
    seed: int = DEFAULT_SEED
    command: str = ""
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "run": self.run, "run_dir": self.run_dir, "command": self.command, "model": self.model,
            "n": self.n, "seed": self.seed, "analyses": self.analyses, "options": self.options,
            "steps": self.steps, "checkpoints": self.checkpoints,
            "table": self.table, "train_loss_key": TRAIN_LOSS_KEY,
            "thresholds": {prefix: {"value": t.value, "rising": t.rising,
                                    "given": None if t.given is None else {"key": t.given[0], "share": t.given[1]}}
                           for prefix, t in self.thresholds.items()},
            "crossings": self.crossings, "curve": self.curve, "notes": self.notes, "seconds": self.seconds,
        }

    def write(self, out: str | Path) -> dict[str, Path]:
        """``replay.json`` and ``replay.html`` (the figures) in ``out``, replaced together
        (:func:`interp_rand.output.replace_files`)."""
        from interp_rand.figures.dynamics_figure import write_replay_page
        from interp_rand.output import replace_files, write_json

        out = Path(out)
        with replace_files(out, OUTPUT_FILES) as stage:
            write_json(stage / TABLE_FILE, self.to_dict(), what="the replay table")
            write_replay_page(self.to_dict(), stage / FIGURE_FILE)
        return {"table": out / TABLE_FILE, "figures": out / FIGURE_FILE}


def check_options(names: list[str], options: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Each analysis's options: its registered defaults with ``options[name]`` on top. An
    unknown analysis lists the registered ones; an unknown option lists the analysis's
    options; options for an analysis not chosen are refused."""
    options = dict(options or {})
    for name in names:
        DYNAMICS_ANALYSES.entry(name)  # unknown names: UnknownName listing the registered ones
    stray = sorted(set(options) - set(names))
    if stray:
        raise ValueError(f"options given for {stray}, which are not replayed (analyses: {', '.join(names)})")
    resolved = {}
    for name in names:
        entry = DYNAMICS_ANALYSES.entry(name)
        given = dict(options.get(name) or {})
        for option in given:
            entry.option(option)  # unknown options: UnknownName listing the analysis's options
        resolved[name] = {**entry.defaults(), **given}
    return resolved


def run_checkpoints(run: str | Path) -> tuple[Path, list[Path]]:
    """The run folder of ``run`` (a folder or ``zoo:NAME``) and its checkpoints, oldest first;
    ``ValueError`` for fewer than two, saying how to train a run with a schedule."""
    from interp_rand.training.checkpoint import list_checkpoints
    from interp_rand.run_names import resolve_run

    folder = resolve_run(run)
    if not folder.is_dir():
        raise ValueError(f"{run}: no such run folder")
    found = list_checkpoints(folder)
    if len(found) < 2:
        raise ValueError(f"{run} has {len(found)} checkpoint(s); a replay needs at least 2: {SCHEDULE_HINT}")
    return folder, found


def _read_curve(folder: Path) -> list[dict[str, Any]]:
    from interp_rand.run_history import METRICS_FILE, read_metrics

    path = folder / METRICS_FILE
    return read_metrics(path) if path.is_file() else []


def replay(run: str | Path, analyses: list[str] | None = None, *, n: int = 256, seed: int = DEFAULT_SEED,
           options: dict[str, dict[str, Any]] | None = None, progress: bool = False,
           command: str = "", skip_unfit: bool | None = None, cache: dict[str, Any] | None = None) -> Replay:
    """Run each of ``analyses`` (default: every registered one that applies to the run's task)
    on every checkpoint of ``run``, oldest first, on ``n`` examples drawn with ``seed``.

    ``options``: ``{analysis: {option: value}}`` on top of the registered defaults. An
    analysis chosen by default (and given no options) that refuses the task (``ValueError`` at
    the first checkpoint) is skipped with a note; one the user chose, or any failure after the first checkpoint,
    raises :class:`ReplayError` naming the analysis and the checkpoint. ``skip_unfit``: skip
    (True) or refuse (False) every chosen analysis that refuses the task (default: skip only
    those chosen by default). ``cache``: the views' shared storage (e.g. a random-init control
    measured once), to share it across the replays of several runs of one config."""
    by_default = analyses is None
    names = list(DYNAMICS_ANALYSES.names()) if by_default else list(dict.fromkeys(analyses))
    if not names:
        raise ValueError(f"no analyses chosen; registered: {', '.join(DYNAMICS_ANALYSES.names()) or '(none)'}")
    if n < 2:
        raise ValueError(f"n={n!r}: a replay needs at least 2 examples per checkpoint")
    resolved = check_options(names, options)
    folder, paths = run_checkpoints(run)
    cache = {} if cache is None else cache
    skip = by_default if skip_unfit is None else skip_unfit
    rows: list[dict[str, float]] = []
    steps: list[int] = []
    notes: list[str] = []
    seconds = {name: 0.0 for name in names} | {"open": 0.0}
    began = time.perf_counter()
    with _progress.bar(paths, desc=f"replaying {', '.join(names)} over {len(paths)} checkpoints",
                       enabled=progress, unit="checkpoint") as checkpoints:
        for index, path in enumerate(checkpoints):
            tick = time.perf_counter()
            view = open_view(path, n=n, seed=seed, cache=cache)
            seconds["open"] += time.perf_counter() - tick
            checkpoints.set_postfix_str(f"step {view.step}")
            row: dict[str, float] = {}
            train_loss = view.checkpoint.metrics.get("train_loss")
            if train_loss is not None:
                row[TRAIN_LOSS_KEY] = float(train_loss)
            for name in list(names):
                tick = time.perf_counter()
                try:
                    measures = DYNAMICS_ANALYSES.get(name)(view, **resolved[name])
                except ValueError as err:
                    if skip and index == 0 and (skip_unfit or name not in (options or {})):
                        names.remove(name)
                        notes.append(f"{name} skipped: {err}")
                        _progress.note(f"{name} does not apply, skipped: {err}", progress)
                        continue
                    raise ReplayError(f"analysis {name!r} failed on checkpoint {path} (step {view.step}): {err}") \
                        from err
                except Exception as err:
                    err.add_note(f"while replaying analysis {name!r} on checkpoint {path} (step {view.step})")
                    raise
                seconds[name] += time.perf_counter() - tick
                clash = sorted(set(measures) & set(row))
                if clash:
                    raise ReplayError(f"analysis {name!r} gives quantities another analysis gave: {clash[:5]}")
                row.update(measures)
            rows.append(row)
            steps.append(view.step)
            cfg = view.model.cfg
            model = (f"{view.task.name} model, {cfg.n_layers} layer{'s' if cfg.n_layers != 1 else ''} x "
                     f"{cfg.n_heads} heads, d_model {cfg.d_model}")
    if not names:
        raise ValueError(f"none of the analyses applies to {run}: " + "; ".join(notes))
    keys = list(dict.fromkeys(key for row in rows for key in row))
    table = {key: [finite_or_none(None if row.get(key) is None else float(row[key])) for row in rows] for key in keys}
    thresholds = {t.prefix: t for name in names for t in thresholds_of(name)}
    stepped = [{"step": step, **row} for step, row in zip(steps, rows)]
    crossings = crossings_of(stepped, list(table), thresholds)
    seconds = {k: round(v, 3) for k, v in seconds.items() if k in names or k == "open"}
    seconds["total"] = round(time.perf_counter() - began, 3)
    return Replay(run=str(run), run_dir=str(folder), steps=steps, checkpoints=[str(p) for p in paths],
                  analyses=names, options={name: resolved[name] for name in names}, table=table,
                  thresholds=thresholds, crossings=crossings, curve=_read_curve(folder), notes=notes,
                  seconds=seconds, n=n, seed=seed, model=model,
                  command=command or f"replay({str(run)!r}, analyses={names!r}, n={n}, seed={seed})")


def crossings_of(rows: list[dict[str, Any]], keys: list[str], thresholds: dict[str, Threshold]) -> dict[str, dict]:
    """Per key a threshold applies to (the longest matching prefix judges): its first crossing
    ``step``, the ``settled`` step, the threshold and ``rule`` (:meth:`Threshold.describe`,
    naming the denominator a ratio's crossing waits for) over ``rows`` (``{"step", key: value}``)."""
    crossings = {}
    for key in keys:
        matching = [t for prefix, t in thresholds.items() if key.startswith(prefix)]
        if not matching:
            continue
        threshold = max(matching, key=lambda t: len(t.prefix))
        step = threshold.first(rows, key)
        crossings[key] = {"step": step, "threshold": threshold.value, "rising": threshold.rising,
                          "settled": threshold.settled(rows, key), "rule": threshold.describe(),
                          "text": "never" if step is None else f"step {step}"}
    return crossings


def load_replay(path: str | Path) -> dict[str, Any]:
    """A written ``replay.json`` (a folder holding one, or the file) as a dict."""
    path = Path(path)
    path = path / TABLE_FILE if path.is_dir() else path
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a replay table (format {data.get('format')!r}, expected {FORMAT!r})")
    return data


__all__ = ["FIGURE_FILE", "Replay", "ReplayError", "TABLE_FILE", "check_options", "crossings_of", "load_replay", "replay",
           "run_checkpoints"]
