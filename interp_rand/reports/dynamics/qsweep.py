"""The q transition (``interp-rand qsweep``): where the seed starts to be used as the q-norm's
exponent grows, which node first, and whether the stored set changes before or after the
worst-case success rises.

- **The sweep.** The task's ``A^q_R`` recipe (its experiment's scale,
  :func:`interp_rand.reproduce.variant_runs`) is trained at each ``q`` of ``qs`` with the same
  budget (steps, batch, seeds, training seed; ``steps`` may be overridden to fit the CPU, which
  is recorded as a departure), one run folder per ``q`` (``OUT/q{q}``). Each run's final
  checkpoint gets the randomness analyses (:mod:`interp_rand.reports.dynamics.randomness`:
  ``seed_usage``, and ``stored_set`` where the task has ``KEY_VALUE_RECALL``) on the same
  examples, with one random-init control for all runs (same model config), and the paper's
  seeded evaluation (:func:`interp_rand.reproduce.evaluate_variant`). ``replay=True`` also
  replays the analyses over each run's checkpoints.
- **The ramp.** One run at the largest ``q`` with ``q_ramp_steps`` (the exponent grows
  geometrically from 1 to ``q``, :meth:`interp_rand.training.qnorm.QNorm.q_at`) and dense
  checkpoints, replayed: the step (and the exponent at that step) at which seed usage rises
  above its control, the first node, and the steps at which the stored set starts to mix
  seeds (``stored/mixes``) and the worst-5% success rises (``success/worst_5pct``).

A crossing is reported twice (:func:`crossing`): ``first``, the first ``q`` or step above the
threshold, and ``sustained``, the first one from which every later one stays above (a single
noisy point does not count as a rise). A run folder whose result file (``qsweep_result.json``)
was written with the same settings is skipped; an unfinished run resumes from its newest
checkpoint (the trainer's resume; the run lock allows one writer per folder).

    >>> result = q_sweep("coloring", (1, 4, 16), "out/qsweep", steps=1000)
    >>> result.summary["seed_above_control"]["sustained_q"], result.summary["first_node"]
    >>> result.write("out/qsweep")   # qsweep.json and qsweep.html
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.output.files import json_text
from interp_rand.defaults import DEFAULT_SEED
# registers the analyses and their THRESHOLDS, which the summaries read even when every run
# was finished before (and nothing else imported it)
from interp_rand.reports.dynamics import randomness  # noqa: F401
from interp_rand.output.files import finite_or_none
from interp_rand.reports.dynamics.view import Threshold

# the paper's sweep (issue 17)
QS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 100.0)
RESULT_FILE = "qsweep_result.json"
ANALYSES = ("seed_usage", "stored_set")
# the recall experiment trains one N at a time: the sweep uses the zoo's (where the paper's
# picture reproduces at the CPU scale); other tasks use their experiment's first setting
DEFAULT_SETTINGS: dict[str, dict[str, Any]] = {"recall": {"n_pairs": 12}}


# ---------------------------------------------------------------------- inputs


def check_qs(qs: Sequence[float]) -> tuple[float, ...]:
    """``qs`` as sorted floats; refused unless every value is a finite number >= 1 (1 is ERM,
    the q-norm's smallest exponent) and none repeats."""
    values = []
    for q in qs:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not math.isfinite(q) or q < 1:
            raise ValueError(f"qsweep: every q must be a finite number >= 1 (1 is the mean loss, ERM); got {q!r}")
        values.append(float(q))
    if not values:
        raise ValueError("qsweep: give at least one q")
    if len(set(values)) != len(values):
        raise ValueError(f"qsweep: q values repeat in {list(qs)}")
    return tuple(sorted(values))


def recipe(task_name: str, scale: Any, train_seed: int = 0):
    """The ``A^q_R`` :class:`~interp_rand.reproduce.VariantRun` of ``task_name``'s experiment at
    ``scale`` (an :class:`~interp_rand.tasks.randomized.ExperimentScale`); a task without an
    experiment, or whose experiment has no randomized ``A^q_R`` variant, is refused."""
    from interp_rand.reproduce import EXPERIMENTS, variant_runs

    if task_name not in EXPERIMENTS:
        raise ValueError(f"qsweep: task must have a randomized experiment (one of {sorted(EXPERIMENTS)}); "
                         f"got {task_name!r}")
    for run in variant_runs(task_name, scale, train_seed):
        if run.variant == "A^q_R" and run.config.q == scale.q and run.config.seed_source == "fresh":
            return run
    raise ValueError(f"qsweep: the {task_name!r} experiment has no randomized A^q_R variant")


def run_config(base: Any, q: float, *, steps: int, checkpoints: int | None, ramp_steps: int = 0) -> Any:
    """``base`` (a ``TrainConfig``) at exponent ``q`` and ``steps`` steps; ``checkpoints``: keep
    that many log-spaced checkpoints for a replay (``checkpoint_schedule="log:N"``), ``None``:
    the final one only; ``ramp_steps``: the q ramp's length (0: constant q)."""
    change: dict[str, Any] = dict(q=float(q), steps=steps, q_ramp_steps=ramp_steps, init_from=None,
                                  eval_every=max(1, steps // 10), checkpoint_every=steps)
    if checkpoints is not None:
        change["checkpoint_schedule"] = f"log:{checkpoints}"
    return dataclasses.replace(base, **change)


# ---------------------------------------------------------------------- crossings


def crossing(xs: Sequence[float], values: Sequence[float], threshold: float, rising: bool = True) -> dict[str, Any]:
    """``{"first", "sustained"}``: the first ``x`` whose value is beyond ``threshold`` (below
    it when not ``rising``), and the first ``x`` from which it stays beyond
    (:func:`~interp_rand.reports.dynamics.view.crossing_step` and ``settled_step``, strict;
    ``None``: never; NaN values are skipped)."""
    found = crossings(xs, [{"value": v} for v in values], (Threshold("value", threshold, rising, strict=True),))
    return {k: found["value"][k] for k in ("first", "sustained")}


def crossings(xs: Sequence[float], rows: Sequence[dict[str, float]], thresholds: Sequence[Any]) -> dict[str, dict]:
    """Per key of ``rows`` (one measures dict per ``x``: a q of the sweep or a step of the ramp)
    under the longest-prefix one of ``thresholds`` (:class:`~interp_rand.reports.dynamics.view.Threshold`):
    its first and sustained crossing (:meth:`Threshold.first`, :meth:`Threshold.settled`)."""
    table = [{"x": x, **{k: (math.nan if v is None else v) for k, v in row.items()}} for x, row in zip(xs, rows)]
    out = {}
    for key in dict.fromkeys(k for row in rows for k in row):
        matching = [t for t in thresholds if key.startswith(t.prefix)]
        if matching:
            t = max(matching, key=lambda t: len(t.prefix))
            out[key] = {"first": t.first(table, key, at="x"), "sustained": t.settled(table, key, at="x"),
                        "threshold": t.value, "rising": t.rising}
    return out


def _first(cross: dict[str, dict], which: str, prefix: str = "seed_above_control/") -> dict[str, Any] | None:
    from interp_rand.reports.dynamics.randomness import first_node

    found = first_node({k: v[which] for k, v in cross.items()}, prefix)
    if found is None:
        return None
    tied = [k[len(prefix):] for k, v in cross.items() if k.startswith(prefix) and v[which] == found[1]]
    return {"node": found[0], "at": found[1], "all_at_that_point": tied}


# ---------------------------------------------------------------------- measuring a run


def analyse(view: Any, analyses: Sequence[str], options: dict[str, dict[str, Any]]) -> tuple[dict[str, float], list[str]]:
    """The measures of every analysis in ``analyses`` that fits the view's task, and a note per
    analysis skipped because it does not (its ``ValueError``)."""
    from interp_rand.reports.dynamics.view import DYNAMICS_ANALYSES

    measures: dict[str, float] = {}
    notes: list[str] = []
    for name in analyses:
        try:
            measures.update(DYNAMICS_ANALYSES.get(name)(view, **options.get(name, {})))
        except ValueError as err:
            notes.append(f"{name} skipped: {err}")
    return measures, notes


def replay_run(run_dir: Path, analyses: Sequence[str], *, n: int, seed: int, options: dict[str, dict[str, Any]],
               cache: dict[str, Any], progress: bool = False, label: str = "") -> list[dict[str, Any]]:
    """``[{"step", "q_at_step", "measures"}]`` of every checkpoint of ``run_dir`` (oldest first)
    by :func:`~interp_rand.reports.dynamics.replay.replay` (the same examples at every
    checkpoint; analyses that do not fit the task skipped; the random-init control measured
    once for the whole sweep, ``cache``)."""
    from interp_rand.reports.dynamics.replay import TRAIN_LOSS_KEY, replay
    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.qnorm import QNorm

    _progress.note(f"{label}: replaying the checkpoints of {run_dir}", progress)
    result = replay(run_dir, list(analyses), n=n, seed=seed, options=options, progress=progress,
                    skip_unfit=True, cache=cache)
    schedule = QNorm(load_checkpoint(run_dir).spec.train_config)
    return [{"step": step, "q_at_step": schedule.q_at(step),
             "measures": {k: v[i] for k, v in result.table.items() if v[i] is not None and k != TRAIN_LOSS_KEY}}
            for i, step in enumerate(result.steps)]


def measure_run(task: Any, scale: Any, model_config: Any, config: Any, run_dir: Path, *, analyses: Sequence[str],
                n: int, seed: int, options: dict[str, dict[str, Any]], eval_inputs: int, replay: bool,
                cache: dict[str, Any], progress: bool, label: str) -> dict[str, Any]:
    """Train ``config`` into ``run_dir`` (resuming; skipped entirely when its result file holds
    the same settings), then measure its final checkpoint (and replay its checkpoints); the
    result, also written to ``run_dir/qsweep_result.json``."""
    from interp_rand.reports.dynamics.view import open_view
    from interp_rand.reproduce import evaluate_variant
    from interp_rand.seeded_evaluation import save_summary
    from interp_rand.training import train
    from interp_rand.training.checkpoint import latest_checkpoint
    from interp_rand.output.lock import run_lock

    settings = finite_or_none({"task": {"name": task.name, "config": task.config_dict()}, "model": model_config.to_dict(),
                       "train": config.to_dict(), "analyses": list(analyses), "options": options, "n": n,
                       "seed": seed, "eval_inputs": eval_inputs, "replay": replay})
    done = run_dir / RESULT_FILE
    if done.exists():
        try:
            previous = json.loads(done.read_text())
        except json.JSONDecodeError:
            previous = {}
        if previous.get("settings") == settings:
            _progress.note(f"{label}: finished before ({done}); skipped", progress)
            return {**previous, "skipped": True}
    _progress.note(f"{label}: training {config.steps} steps into {run_dir}", progress)
    result = train(task, model_config, config, run_dir, progress=progress)
    with run_lock(run_dir):  # one writer of the result, as of the checkpoints
        _progress.note(f"{label}: measuring step {result.step}", progress)
        view = open_view(latest_checkpoint(run_dir), n=n, seed=seed, cache=cache)
        measures, notes = analyse(view, analyses, options)
        evaluation = evaluate_variant(task, view.model, scale, config, n_inputs=eval_inputs)
        out = {"q": config.q, "run_dir": str(run_dir), "step": view.step, "train_seconds": round(result.seconds, 1),
               "measures": measures, "notes": notes,
               "evaluation": {k: evaluation[k] for k in ("average", "worst_5pct", "n_inputs", "n_seeds")},
               "settings": settings}
        if replay:
            out["replay"] = replay_run(run_dir, analyses, n=n, seed=seed, options=options, cache=cache,
                                       progress=progress, label=label)
        out = finite_or_none(out)
        save_summary(out, done)
    return {**out, "skipped": False}


# ---------------------------------------------------------------------- the sweep


@dataclass
class QSweepResult:
    """Attributes:
    task: the task's name; task_config: its settings; qs: the exponents, ascending.
    steps: the training budget of every run; recipe_steps: the recipe's own.
    departures: what differs from the recipe (steps, evaluation size, ...), one line each.
    rows: one per q (:func:`measure_run`'s result: ``measures``, ``evaluation``, ``run_dir``).
    summary: the sweep's answers (:func:`sweep_summary`).
    ramp: the q ramp's replay and answers (:func:`ramp_summary`), or ``None``.
    """

    task: str
    task_config: dict[str, Any]
    qs: tuple[float, ...]
    steps: int
    recipe_steps: int
    departures: list[str]
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    ramp: dict[str, Any] | None = None
    command: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        rows = [{k: v for k, v in row.items() if k != "settings"} for row in self.rows]
        return finite_or_none({**dataclasses.asdict(self), "rows": rows})

    FILES = ("qsweep.json", "qsweep.html")  # what write() writes, together

    def to_json(self) -> str:
        return json_text(self.to_dict(), indent=1)

    def text(self) -> str:
        """The sweep's key numbers, one line each."""
        s = self.summary
        lines = [f"{self.task} q sweep at {self.steps} steps ({', '.join(self.departures) or 'the recipe as it is'})",
                 f"{'q':>6} {'average':>8} {'worst-5%':>9} {'seed use':>9} {'control':>8}  nodes above control"]
        for row in self.rows:
            m = row["measures"]
            above = [k.split("/", 1)[1] for k, v in m.items() if k.startswith("seed_above_control/") and v is not None
                     and v > 0]
            lines.append(f"{row['q']:>6g} {row['evaluation']['average']:>8.3f} {row['evaluation']['worst_5pct']:>9.3f} "
                         f"{_f(m.get('seed_model/usage'))} {_f(m.get('seed_model/control'), 8)}  "
                         f"{', '.join(above) or '-'}")
        control = s["seed_above_control"]
        lines.append(f"seed use above its random-init control from q = {_g(control['first_q'])} (first), "
                     f"{_g(control['sustained_q'])} (sustained); first node: {_node(s['first_node'])}")
        if s.get("seed_above_q1"):
            e = s["seed_above_q1"]
            lines.append(f"seed use above the q = 1 run (ERM) from q = {_g(e['first_q'])} (first), "
                         f"{_g(e['sustained_q'])} (sustained); first node: {_node(e['first_node'])}")
        if self.ramp is not None:
            r = self.ramp["summary"]
            lines.append(f"ramp ({r['checkpoints']} checkpoints, q 1 -> {r['q']:g} over {r['ramp_steps']} steps): "
                         f"seed use above control from step {_g(r['seed_step'])} (q {_g(r['seed_q'])}), first node "
                         f"{_node(r['first_node'])}")
            if r.get("stored_vs_worst") is not None:
                lines.append(f"ramp: stored set mixes seeds from step {_g(r['stored_step'])}, worst-5% > "
                             f"{r['worst_threshold']:g} from step {_g(r['worst_step'])}: {r['stored_vs_worst']}")
        return "\n".join(lines)

    def write(self, out: str | Path) -> tuple[Path, Path]:
        """``qsweep.json`` and ``qsweep.html`` in ``out``; returns their paths."""
        from interp_rand.figures.qsweep_figure import write_qsweep_page

        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, self.FILES) as stage:
            write_text(stage / "qsweep.json", self.to_json())
            write_qsweep_page(self.to_dict(), stage / "qsweep.html")
        return out / "qsweep.json", out / "qsweep.html"


def _f(value: Any, width: int = 9) -> str:
    return f"{value:>{width}.3f}" if isinstance(value, float) else f"{'-':>{width}}"


def _g(value: Any) -> str:
    return "never" if value is None else f"{value:g}"


def _node(found: dict[str, Any] | None) -> str:
    return "none" if found is None else f"{found['node']} (at {found['at']:g})"


def sweep_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's answers from its rows (ascending q): per node the crossing of
    ``seed_above_control/`` (threshold 0) over q, the first q (first and sustained) and the first
    node; the same against the q = 1 run when the sweep has one (ERM: what training alone
    leaves of the seed's use); the worst-5% and average success per q."""
    from interp_rand.reports.dynamics.view import THRESHOLDS

    qs = [row["q"] for row in rows]
    measures = [row["measures"] for row in rows]
    cross = crossings(qs, measures, THRESHOLDS.get("seed_usage"))
    per_node = {k[len("seed_above_control/"):]: v for k, v in cross.items() if k.startswith("seed_above_control/")}
    whole = cross.get("seed_model/above_control", {"first": None, "sustained": None})
    out: dict[str, Any] = {
        "seed_above_control": {"by_node": per_node, "whole_model": whole, "first_q": _min_at(per_node, "first"),
                               "sustained_q": _min_at(per_node, "sustained")},
        "first_node": _first(cross, "first"),
        "first_node_sustained": _first(cross, "sustained"),
        "worst_5pct_by_q": {f"{row['q']:g}": row["evaluation"]["worst_5pct"] for row in rows},
        "average_by_q": {f"{row['q']:g}": row["evaluation"]["average"] for row in rows},
    }
    if 1.0 in qs and len(qs) > 1:
        base = measures[qs.index(1.0)]
        versus = [{f"seed_above_q1/{k[len('seed/'):]}": v - base[k] for k, v in m.items()
                   if k.startswith("seed/") and k in base and v is not None and base[k] is not None}
                  for m in measures]
        c = crossings(qs, versus, (Threshold("seed_above_q1/", 0.0, strict=True),))
        by_node = {k[len("seed_above_q1/"):]: v for k, v in c.items()}
        out["seed_above_q1"] = {"by_node": by_node, "first_q": _min_at(by_node, "first"),
                                "sustained_q": _min_at(by_node, "sustained"),
                                "first_node": _first(c, "first", "seed_above_q1/")}
    return out


def _min_at(by_node: dict[str, dict], which: str) -> float | None:
    found = [v[which] for v in by_node.values() if v[which] is not None]
    return min(found) if found else None


def ramp_summary(rows: list[dict[str, Any]], q: float, ramp_steps: int) -> dict[str, Any]:
    """The ramp's answers from its replay (ascending steps): crossing steps per key (the
    analyses' thresholds), the step (and exponent) at which seed use rises above its control
    (sustained), the first node, and whether the stored set starts to mix seeds before or after
    the worst-5% success rises (their sustained crossing steps)."""
    from interp_rand.reports.dynamics.randomness import WORST_RISEN
    from interp_rand.reports.dynamics.view import thresholds_of

    steps = [row["step"] for row in rows]
    q_at = {row["step"]: row["q_at_step"] for row in rows}
    measures = [row["measures"] for row in rows]
    thresholds = [t for name in ANALYSES for t in thresholds_of(name)]
    cross = crossings(steps, measures, thresholds)
    first = _first(cross, "sustained")
    seed_step = first["at"] if first else None
    out: dict[str, Any] = {"q": q, "ramp_steps": ramp_steps, "checkpoints": len(rows), "crossings": cross,
                           "first_node": first, "first_node_first": _first(cross, "first"),
                           "seed_step": seed_step, "seed_q": q_at.get(seed_step),
                           "stored_vs_worst": None, "worst_threshold": WORST_RISEN}
    if "stored/mixes" in cross and "success/worst_5pct" in cross:
        stored, worst = cross["stored/mixes"]["sustained"], cross["success/worst_5pct"]["sustained"]
        out.update(stored_step=stored, worst_step=worst)
        if stored is None or worst is None:
            out["stored_vs_worst"] = "undetermined (one of them never rises for good)"
        else:
            out["stored_vs_worst"] = ("the stored set changes first" if stored < worst else
                                      "the worst-case success rises first" if worst < stored else "at the same checkpoint")
    return out


def q_sweep(task_name: str, qs: Sequence[float] = QS, out: str | Path = "qsweep", *, steps: int | None = None,
            scale: str | Any = "cpu", train_seed: int = 0, task_config: dict[str, Any] | None = None,
            n: int = 256, seed: int = DEFAULT_SEED, eval_inputs: int | None = None, replay: bool = False,
            replay_checkpoints: int = 10, ramp: bool = False, ramp_checkpoints: int = 30,
            ramp_steps: int | None = None, options: dict[str, dict[str, Any]] | None = None,
            progress: bool = False, command: str | None = None) -> QSweepResult:
    """The q sweep (and, with ``ramp``, the q ramp) of ``task_name`` (module docstring), runs in
    ``out/q{q}`` and ``out/ramp``.

    Args:
        scale: the experiment's scale name, or an ``ExperimentScale`` (tests).
        steps: every run's budget (default: the recipe's).
        task_config: the task's settings (default: recall N = 12, else the experiment's first).
        n: examples of the analyses (the same for every run); seed: their draw.
        eval_inputs: fresh inputs of each run's seeded evaluation (default: the experiment's).
        replay: also replay the analyses over about ``replay_checkpoints`` checkpoints per run.
        ramp_steps: the ramp's length (default: the whole run, ``steps``).
        options: per analysis, its options (``{"stored_set": {"n_inputs": 8}}``).
    """
    from interp_rand.reproduce import experiment, scale_for
    from interp_rand.tasks import make_task

    qs = check_qs(qs)
    if task_name not in _experiments():
        raise ValueError(f"qsweep: task must have a randomized experiment (one of {sorted(_experiments())}); "
                         f"got {task_name!r}")
    exp = experiment(task_name)
    scale_obj = scale_for(task_name, scale) if isinstance(scale, str) else scale
    base = recipe(task_name, scale_obj, train_seed)
    if base.erm_twin is not None:
        note = "from scratch (the recipe starts A^q_R from its ERM twin)"
    else:
        note = None
    recipe_steps = base.config.steps
    steps = recipe_steps if steps is None else steps
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"qsweep: steps must be an integer >= 1; got {steps!r}")
    for name, value in (("n", n), ("replay_checkpoints", replay_checkpoints), ("ramp_checkpoints", ramp_checkpoints)):
        if not isinstance(value, int) or value < 2:
            raise ValueError(f"qsweep: {name} must be an integer >= 2; got {value!r}")
    task_config = dict(DEFAULT_SETTINGS.get(task_name) or exp.settings(scale_obj)[0]) if task_config is None \
        else dict(task_config)
    task = make_task(task_name, **task_config)
    model_config = task.model_config(**scale_obj.model_overrides())
    eval_inputs = exp.eval_inputs if eval_inputs is None else eval_inputs
    departures = [f"steps {steps} instead of the recipe's {recipe_steps}"] if steps != recipe_steps else []
    if eval_inputs != exp.eval_inputs:
        departures.append(f"evaluation on {eval_inputs} inputs instead of {exp.eval_inputs}")
    if note:
        departures.append(note)
    top, length = qs[-1], steps if ramp_steps is None else ramp_steps
    if ramp and (not isinstance(length, int) or not 1 <= length <= steps):  # before any run is trained
        raise ValueError(f"qsweep: ramp_steps must be an integer in [1, steps={steps}]; got {ramp_steps!r}")
    options = dict(options or {})
    out = Path(out)
    cache: dict[str, Any] = {}  # one random-init control for every run (same model config)
    common = dict(analyses=ANALYSES, n=n, seed=seed, options=options, eval_inputs=eval_inputs, cache=cache,
                  progress=progress)
    rows = []
    for i, q in enumerate(qs):
        config = run_config(base.config, q, steps=steps, checkpoints=replay_checkpoints if replay else None)
        label = f"q = {q:g} ({i + 1} of {len(qs)})"
        rows.append(measure_run(task, scale_obj, model_config, config, out / f"q{q:g}", replay=replay, label=label,
                                **common))
    ramp_out = None
    if ramp:
        config = run_config(base.config, top, steps=steps, checkpoints=ramp_checkpoints, ramp_steps=length)
        row = measure_run(task, scale_obj, model_config, config, out / "ramp", replay=True,
                          label=f"ramp to q = {top:g}", **common)
        ramp_out = {"run": {k: v for k, v in row.items() if k not in ("replay", "settings")},
                    "replay": row["replay"], "summary": ramp_summary(row["replay"], top, length)}
        departures.append(f"ramp: q grows geometrically from 1 to {top:g} over {length} steps (the paper: constant q)")
    return QSweepResult(task_name, task_config, qs, steps, recipe_steps, departures, rows, sweep_summary(rows),
                        ramp_out, command)


def _experiments() -> Any:
    from interp_rand.reproduce import EXPERIMENTS

    return EXPERIMENTS


__all__ = ["ANALYSES", "QS", "QSweepResult", "RESULT_FILE", "check_qs", "crossing", "crossings", "measure_run",
           "q_sweep", "ramp_summary", "recipe", "replay_run", "run_config", "sweep_summary"]
