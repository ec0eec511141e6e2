"""What one analysis of a checkpoint receives and returns, and the registry of such analyses.

An analysis is a function ``analysis(view: CheckpointView, **options) -> Measures``: it reads
the checkpoint's model (and the held-out examples the view fixes for the whole replay, so every
checkpoint is measured on the same inputs) and returns flat named numbers, one dict per
checkpoint. Keys are ``"group/label"`` (``"accuracy/n_distinct=3"``, ``"edge/a0.1->logits"``,
``"probe/carry_out@L1"``): a figure draws one line per key of a small group and a heatmap
(keys × steps) for a large one. An analysis registers itself with the thresholds its
quantities are judged by::

    @DYNAMICS_ANALYSES.add("accuracy", description="exact match by metadata group")
    def accuracy(view, **options) -> Measures: ...

    THRESHOLDS.register("accuracy", (Threshold("accuracy/", 0.99),))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from interp_rand.registry import Registry

# one checkpoint's quantities: "group/label" -> value
Measures = dict[str, float]


@dataclass(frozen=True)
class Threshold:
    """The step at which a quantity crosses ``value`` is reported for every key starting with
    ``prefix``; ``rising``: crossing upwards (else downwards, e.g. a loss); ``strict``: past
    means beyond ``value``, not at it (a quantity identically 0 never crosses 0)."""

    prefix: str
    value: float
    rising: bool = True
    strict: bool = False
    #: ``(key, share)`` for a quantity that is a ratio: a row counts only where its denominator
    #: ``key`` is meaningfully above zero, ``|row[key]| >= share * |its value in the last row|``
    #: (a faithfulness share divides by the model's own metric gap; where that gap is still a
    #: small part of the trained model's, the share is a ratio of two near-zero numbers and a
    #: crossing there says nothing). None: every row counts.
    given: tuple[str, float] | None = None

    def counts(self, rows: Iterable[Mapping[str, Any]], at: str = "step") -> Callable[[Mapping[str, Any]], bool] | None:
        """The rows this threshold judges (:attr:`given`), as a predicate; None: all of them."""
        if self.given is None:
            return None
        key, share = self.given
        rows = sorted(rows, key=lambda r: r[at])
        measured = [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]
        if not measured:
            return lambda row: False
        bar = share * abs(measured[-1])
        return lambda row: row.get(key) is not None and math.isfinite(row[key]) and abs(row[key]) >= bar and bar > 0

    def describe(self) -> str:
        """The rule in words, e.g. ``>= 0.8 where |gap/metric| >= 0.1 x its last value``."""
        text = f"{'>=' if self.rising else '<='} {self.value:g}"
        return text if self.given is None else f"{text} where |{self.given[0]}| >= {self.given[1]:g} x its last value"

    def first(self, rows: Iterable[Mapping[str, Any]], key: str, at: str = "step") -> Any:
        """:func:`crossing_step` of ``key`` under this threshold."""
        rows = list(rows)
        return crossing_step(rows, key, self.value, self.rising, strict=self.strict, at=at, where=self.counts(rows, at))

    def settled(self, rows: Iterable[Mapping[str, Any]], key: str, at: str = "step") -> Any:
        """:func:`settled_step` of ``key`` under this threshold."""
        rows = list(rows)
        return settled_step(rows, key, self.value, self.rising, strict=self.strict, at=at, where=self.counts(rows, at))


def _past(x: float, value: float, rising: bool, strict: bool) -> bool:
    if rising:
        return x > value if strict else x >= value
    return x < value if strict else x <= value


def crossing_step(rows: Iterable[Mapping[str, Any]], key: str, value: float, rising: bool = True, *,
                  strict: bool = False, at: str = "step", where: Callable[[Mapping[str, Any]], bool] | None = None) -> Any:
    """The first ``row[at]`` (rows in that order: a step, or a q of a sweep) at which
    ``row[key]`` is at or past ``value`` (``>=`` when ``rising``, else ``<=``; ``>``/``<`` when
    ``strict``); ``None`` when it never is. Rows without the key (or with a non-finite value)
    are skipped; a row ``where`` rejects is not past. With checkpoints every ``s`` steps, a
    crossing reported at step ``t`` happened after the previous measured step and at or before ``t``."""
    for row in sorted(rows, key=lambda r: r[at]):
        x = row.get(key)
        if x is None or not math.isfinite(x):
            continue
        if _past(x, value, rising, strict) and (where is None or where(row)):
            return row[at]
    return None


def settled_step(rows: Iterable[Mapping[str, Any]], key: str, value: float, rising: bool = True, *,
                 strict: bool = False, at: str = "step", where: Callable[[Mapping[str, Any]], bool] | None = None) -> Any:
    """The first ``row[at]`` from which ``rows[key]`` stays at or past ``value`` up to the last
    row that has it (:func:`crossing_step` counts a passing spike; this does not); ``None`` when
    the last value is not past it. A row ``where`` rejects is not past."""
    settled = None
    for row in sorted(rows, key=lambda r: r[at]):
        x = row.get(key)
        if x is None or not math.isfinite(x):
            continue
        if _past(x, value, rising, strict) and (where is None or where(row)):
            settled = row[at] if settled is None else settled
        else:
            settled = None
    return settled




@dataclass
class CheckpointView:
    """One checkpoint of a run, as an analysis sees it.

    Attributes:
        step: the training step of the checkpoint.
        checkpoint: the :class:`~interp_rand.training.checkpoint.Checkpoint`.
        model: its model, in eval mode.
        task: the run's task.
        batch: held-out examples, the same for every checkpoint of the replay.
        pairs: clean/corrupted pairs drawn from ``batch`` (the task's corruption), the same for
            every checkpoint.
        seed: the replay's seed (for anything else an analysis draws).
        cache: per-replay storage shared across checkpoints (e.g. a random-init control
            measured once), keyed by the analysis.
    """

    step: int
    checkpoint: Any
    model: Any
    task: Any
    batch: Any
    pairs: Any
    seed: int
    cache: dict[str, Any] = field(default_factory=dict)


def open_view(checkpoint: str | Path, *, n: int, seed: int,
              cache: dict[str, Any] | None = None) -> CheckpointView:
    """The view of one checkpoint folder (or ``zoo:NAME``): its model, task and ``n`` held-out
    examples with their task-corruption pairs, drawn with ``seed`` exactly as
    :func:`~interp_rand.reports.inputs.load_run_inputs` draws them, so every checkpoint of a
    run (one task config) gets the same examples. ``cache``: the replay's shared storage."""
    from interp_rand.reports.inputs import load_run_inputs

    inputs = load_run_inputs(checkpoint, n=n, seed=seed, pairs="task")
    return CheckpointView(step=inputs.ckpt.step, checkpoint=inputs.ckpt, model=inputs.model,
                          task=inputs.task, batch=inputs.batch, pairs=inputs.pairs, seed=seed,
                          cache={} if cache is None else cache)


DYNAMICS_ANALYSES: Registry[Callable[..., Measures]] = Registry("dynamics analysis",
                                                                plural="dynamics analyses")
# analysis name -> the thresholds its crossing steps are reported for
THRESHOLDS: Registry[tuple[Threshold, ...]] = Registry("analysis's thresholds", plural="analyses' thresholds")


def thresholds_of(name: str) -> tuple[Threshold, ...]:
    """The thresholds registered for analysis ``name`` (none: ``()``)."""
    return THRESHOLDS.get(name) if name in THRESHOLDS else ()

__all__ = ["DYNAMICS_ANALYSES", "THRESHOLDS", "CheckpointView", "Measures", "Threshold", "crossing_step", "open_view",
           "settled_step", "thresholds_of"]
