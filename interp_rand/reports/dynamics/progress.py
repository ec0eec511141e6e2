"""Progress measures of the algorithmic tasks over training, and their timing against the loss
curve (issue 17, point 3): does a circuit component form before the loss drops, or not?

Two replay analyses (registered in :data:`~interp_rand.reports.dynamics.view.DYNAMICS_ANALYSES`
on import, with their :data:`~interp_rand.reports.dynamics.view.THRESHOLDS`):

- ``addition_progress`` (tasks with ``CARRIES``): per sub-task digit accuracy on the view's
  examples, over all answer digits (``subtask/<name>``) and per answer place
  (``subtask/<name>@place<p>``), with the sub-tasks of :func:`addition_subtask_masks`
  (``base_add``, ``make_carry``, ``use_carry``, ``cascade``); and the head-role scores
  ``aligned_digit`` and ``carry_source`` of :func:`probes.head_roles.score_roles` for every
  head (``role/<role>@a<layer>.<head>``) and the best head (``role/<role>@best``), over all
  answer digits and per answer place (``...:place<p>``, :func:`role_measures`).
- ``sort_progress`` (tasks with ``SORTED_OUTPUT``): the ``next_larger`` role score per head and
  of the best head (over all answer positions and per answer position, ``...:answer<k>``), and exact match on the lists with duplicates and on those without
  (``subtask/with_duplicates``, ``subtask/distinct``: the ``has duplicates`` / ``all distinct``
  attention conditions of :mod:`probes.attention`).

Thresholds: 0.99 for the sub-task accuracies; 0.5 for a role score, i.e. more than half of the
head's attention (at the role's query rows) on the role's keys, more than on all other keys
together. Uniform attention puts ``m / (q + 1)`` there (``m`` target keys among the ``q + 1``
a causal query at position ``q`` sees): at most 2/8 = 0.25 for the carry roles of 3-digit
addition and 1/6 for ``next_larger`` of length-5 sort, so 0.5 is well clear of the untrained
model's level and within reach of a head that does the role but still spreads some attention
(a softmax head rarely puts all of it on its keys).

:func:`compare_to_loss` takes a replay table (rows ``{"step": int, key: float, ...}``) and the
run's ``metrics.jsonl`` rows and says, per quantity, the step it crosses its threshold and
whether that comes before the step where accuracy crosses 99% and the step where the loss
drops (defined there).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp_rand.losses import answer_correct
from interp_rand.registry import Option
from interp_rand.run_history import read_metrics
from interp_rand.reports.dynamics.view import (DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView, Measures, Threshold,
                                               crossing_step, settled_step)
from interp_rand.tasks.base import CARRIES, SORTED_OUTPUT, Batch, require_capability

SUBTASK_THRESHOLD = 0.99
ROLE_THRESHOLD = 0.5
ADDITION_ROLES = ("aligned_digit", "carry_source")
SORT_ROLES = ("next_larger",)
# attention conditions of probes.attention (sort) whose rows the sort sub-task accuracies use
SORT_SUBTASKS = {"with_duplicates": "has duplicates", "distinct": "all distinct"}


# ---------------------------------------------------------------------- shared pieces


@torch.no_grad()
def answer_correctness(model: Any, task: Any, batch: Batch, chunk_size: int = 4096) -> Tensor:
    """``[batch, n_answer]`` bool: is each answer position right (the model in eval mode)."""
    parts = []
    for start in range(0, len(batch), chunk_size):
        part = batch[start:start + chunk_size]
        parts.append(answer_correct(model(part.inputs, **part.model_kwargs()), part, task.loss_kind))
    return torch.cat(parts)


def role_measures(model: Any, task: Any, batch: Batch, roles: Sequence[str],
                  query_labels: Sequence[str] | None = None) -> Measures:
    """Head-role scores of :func:`probes.head_roles.score_roles` on ``batch``:
    ``role/<role>@a<layer>.<head>`` for every head and ``role/<role>@best`` (the highest);
    with ``query_labels`` (one per answer position), also each head's score on that answer
    position's query rows only, ``role/<role>@a<layer>.<head>:<label>`` and
    ``role/<role>@best:<label>`` (positions where the role has no row are left out): a head
    often does a role at one answer position and something else at the others."""
    from probes.attention import attention_patterns, task_slice
    from probes.head_roles import HEAD_ROLES, score_roles, template_score

    patterns = attention_patterns(model, batch)
    scored = score_roles(model, task, batch, roles=list(roles), patterns=patterns)
    task_patterns = task_slice(model, patterns)
    out: Measures = {}

    def put(role: str, scores: Tensor, suffix: str = "") -> None:
        for layer in range(scores.shape[0]):
            for head in range(scores.shape[1]):
                out[f"role/{role}@a{layer}.{head}{suffix}"] = float(scores[layer, head])
        out[f"role/{role}@best{suffix}"] = float(scores.max())

    for role in roles:
        put(role, scored.scores[role])
        if query_labels is None:
            continue
        target, weight = HEAD_ROLES.get(role).template(task, batch)
        for k, label in enumerate(query_labels):
            only = torch.zeros_like(weight, dtype=torch.float)
            only[:, int(batch.answer_positions[k])] = weight[:, int(batch.answer_positions[k])].float()
            if bool(only.sum() > 0):
                put(role, template_score(task_patterns, target.float(), only), f":{label}")
    return out


def _masked_mean(values: Tensor, mask: Tensor) -> float | None:
    return float(values[mask].float().mean()) if bool(mask.any()) else None


# ---------------------------------------------------------------------- addition


def addition_subtask_masks(batch: Batch, min_cascade: int = 2) -> dict[str, Tensor]:
    """``[batch, n_answer]`` bool per sub-task, from the addition metadata (answer digits in
    written order):

    - ``base_add``: the digit's place gets no carry in (``carry_in = 0``): its digit is
      ``(a_p + b_p) mod 10``;
    - ``make_carry``: the place produces a carry out (``carry_out = 1``);
    - ``use_carry``: the place receives a carry in (``carry_in = 1``);
    - ``cascade``: the digit lies in a carry cascade of length >= ``min_cascade`` and receives
      its carry (``cascade_len >= min_cascade`` and ``carry_in = 1``, the carry case study's
      rule, :func:`~interp_rand.reports.case_studies.carry.digit_accuracy`): the run's 9-pairs
      and the place receiving the final carry. With 3 digits the only such cascade is places
      1-2 with its carry landing in place 3, so these digits are always 0, 0 and 1: the
      sub-task is then met by a model that writes those constants, before it adds anything.
    """
    meta = batch.metadata
    carry_in = meta["carry_in"] == 1
    return {
        "base_add": ~carry_in,
        "make_carry": meta["carry_out"] == 1,
        "use_carry": carry_in,
        "cascade": (meta["cascade_len"] >= min_cascade) & carry_in,
    }


def addition_subtask_accuracy(task: Any, batch: Batch, correct: Tensor, min_cascade: int = 2) -> Measures:
    """``subtask/<name>`` (share of right digits over every answer digit in the sub-task) and
    ``subtask/<name>@place<p>`` per answer place, for :func:`addition_subtask_masks`; a
    sub-task no digit of ``batch`` belongs to (at a place, or at all) has no key."""
    places = [int(p) for p in task.answer_places()]
    out: Measures = {}
    for name, mask in addition_subtask_masks(batch, min_cascade).items():
        overall = _masked_mean(correct, mask)
        if overall is not None:
            out[f"subtask/{name}"] = overall
        for k, place in enumerate(places):
            value = _masked_mean(correct[:, k], mask[:, k])
            if value is not None:
                out[f"subtask/{name}@place{place}"] = value
    return out


@DYNAMICS_ANALYSES.add(
    "addition_progress",
    description="addition: digit accuracy per sub-task (base add, make carry, use carry, cascades >= 2) per "
                "answer place, and the aligned-digit and carry-source attention score of every head",
    options=(Option("min_cascade", "int", 2, "cascade length from which a digit counts as a cascade digit",
                    minimum=1),),
)
def addition_progress(view: CheckpointView, min_cascade: int = 2) -> Measures:
    """The addition progress measures of one checkpoint (see the module docstring)."""
    require_capability(view.task, CARRIES, "addition_progress")
    if not isinstance(min_cascade, int) or isinstance(min_cascade, bool) or min_cascade < 1:
        raise ValueError(f"addition_progress: min_cascade={min_cascade!r} must be an integer >= 1")
    correct = answer_correctness(view.model, view.task, view.batch)
    return {**addition_subtask_accuracy(view.task, view.batch, correct, min_cascade),
            **role_measures(view.model, view.task, view.batch, ADDITION_ROLES,
                             [f"place{int(p)}" for p in view.task.answer_places()])}


THRESHOLDS.register("addition_progress", (Threshold("subtask/", SUBTASK_THRESHOLD), Threshold("role/", ROLE_THRESHOLD)))


# ---------------------------------------------------------------------- sort


def sort_subtask_accuracy(task: Any, batch: Batch, correct: Tensor) -> Measures:
    """``subtask/with_duplicates`` and ``subtask/distinct``: exact match (every answer position
    right) on the lists with a repeated value and on those without; a group with no list in
    ``batch`` has no key."""
    from probes.attention import ATTENTION_CONDITIONS

    exact = correct.all(-1)
    out: Measures = {}
    for name, condition in SORT_SUBTASKS.items():
        value = _masked_mean(exact, ATTENTION_CONDITIONS.get((task.name, condition))(task, batch))
        if value is not None:
            out[f"subtask/{name}"] = value
    return out


@DYNAMICS_ANALYSES.add(
    "sort_progress",
    description="sort: the next-larger attention score of every head and the best one, and exact match on lists "
                "with and without duplicates",
)
def sort_progress(view: CheckpointView) -> Measures:
    """The sort progress measures of one checkpoint (see the module docstring)."""
    require_capability(view.task, SORTED_OUTPUT, "sort_progress")
    correct = answer_correctness(view.model, view.task, view.batch)
    return {**sort_subtask_accuracy(view.task, view.batch, correct),
            **role_measures(view.model, view.task, view.batch, SORT_ROLES,
                             [f"answer{k}" for k in range(len(view.batch.answer_positions))])}


THRESHOLDS.register("sort_progress", (Threshold("subtask/", SUBTASK_THRESHOLD), Threshold("role/", ROLE_THRESHOLD)))


# ---------------------------------------------------------------------- against the loss curve


def loss_drop_step(metrics: Sequence[Mapping[str, Any]], fraction: float = 0.1, key: str = "loss") -> int | None:
    """The step where the loss drops: the first evaluation step at which the held-out loss
    (``metrics.jsonl``'s ``loss``) is at or below ``fraction`` of its value at the run's
    first evaluation (the earliest row); ``None`` if it never gets there."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction!r} must lie in (0, 1)")
    rows = sorted((r for r in metrics if r.get(key) is not None), key=lambda r: r["step"])
    if not rows:
        raise ValueError(f"no metrics row has {key!r}; got keys {sorted({k for r in metrics for k in r})}")
    return crossing_step(rows, key, fraction * float(rows[0][key]), rising=False)


@dataclass(frozen=True)
class Crossing:
    """When one quantity crossed its threshold, against the accuracy and the loss.

    ``step`` is ``None`` when the quantity never crossed; ``settled`` is the step from which it
    stays crossed (:func:`settled_step`); ``before_accuracy``/``before_loss``
    are ``step < accuracy_step`` / ``step < loss_step`` (a reference that never happens counts
    as later than every step), ``None`` when the quantity never crossed."""

    key: str
    threshold: float
    rising: bool
    step: int | None
    accuracy_step: int | None
    loss_step: int | None
    before_accuracy: bool | None
    before_loss: bool | None
    settled: int | None = None

    def relation(self, reference: str = "accuracy") -> str:
        """``"before"``, ``"same step"``, ``"after"`` or ``"never crosses"`` against the
        ``"accuracy"`` or ``"loss"`` step."""
        ref = self.accuracy_step if reference == "accuracy" else self.loss_step
        if self.step is None:
            return "never crosses"
        if ref is None or self.step < ref:
            return "before"
        return "same step" if self.step == ref else "after"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "threshold": self.threshold, "rising": self.rising, "step": self.step,
                "settled": self.settled,
                "accuracy_step": self.accuracy_step, "loss_step": self.loss_step,
                "before_accuracy": self.before_accuracy, "before_loss": self.before_loss,
                "vs_accuracy": self.relation("accuracy"), "vs_loss": self.relation("loss")}


def _threshold_for(key: str, thresholds: Sequence[Threshold]) -> Threshold | None:
    matching = [t for t in thresholds if key.startswith(t.prefix)]
    return max(matching, key=lambda t: len(t.prefix)) if matching else None


def compare_to_loss(table: Sequence[Mapping[str, Any]], metrics: Sequence[Mapping[str, Any]], *,
                    thresholds: Sequence[Threshold] | None = None, accuracy: float = 0.99,
                    accuracy_key: str = "exact_match", loss_fraction: float = 0.1,
                    keys: Sequence[str] | None = None) -> list[Crossing]:
    """For each quantity of a replay ``table`` (rows ``{"step": int, key: float, ...}``), the
    step it first crosses its threshold (:func:`crossing_step`; and the step from which it
    stays crossed, :func:`settled_step`) and whether the first crossing comes before

    - the **accuracy step**: the first evaluation step in ``metrics`` (the run's
      ``metrics.jsonl`` rows, :func:`read_metrics`) whose ``accuracy_key`` (held-out exact
      match) is at or above ``accuracy`` (0.99), and
    - the **loss step** (:func:`loss_drop_step`): the first evaluation step whose held-out loss
      is at or below ``loss_fraction`` (10%) of the loss at the run's first evaluation.

    ``thresholds``: the thresholds to judge keys by, the longest matching prefix winning
    (default: every registered one, :data:`THRESHOLDS`); keys with none are left out.
    ``keys``: only these (default: every key of the table, in first-seen order). "Before" is
    strict; a component measured every ``s`` steps is resolved to ``s`` steps only.
    """
    if not table:
        raise ValueError("the replay table has no rows")
    missing = [i for i, row in enumerate(table) if "step" not in row]
    if missing:
        raise ValueError(f"replay table rows {missing[:5]} have no 'step'")
    if thresholds is None:
        thresholds = [t for group in THRESHOLDS.entries() for t in group.value]
    if not any(accuracy_key in r for r in metrics):
        raise ValueError(f"no metrics row has {accuracy_key!r}; got keys {sorted({k for r in metrics for k in r})}")
    accuracy_step = crossing_step(metrics, accuracy_key, accuracy)
    loss_step = loss_drop_step(metrics, loss_fraction)
    if keys is None:
        keys = list(dict.fromkeys(k for row in table for k in row if k != "step"))
    out = []
    for key in keys:
        threshold = _threshold_for(key, thresholds)
        if threshold is None:
            continue
        step = crossing_step(table, key, threshold.value, threshold.rising)

        def before(ref: int | None) -> bool | None:
            return None if step is None else (ref is None or step < ref)

        out.append(Crossing(key, threshold.value, threshold.rising, step, accuracy_step, loss_step,
                            before(accuracy_step), before(loss_step),
                            settled_step(table, key, threshold.value, threshold.rising)))
    return out


def format_crossings(crossings: Sequence[Crossing]) -> str:
    """A plain-text table of :func:`compare_to_loss`'s answer, one quantity a line."""
    if not crossings:
        return "(no quantity with a threshold)"
    first = crossings[0]
    width = max(len(c.key) for c in crossings)
    lines = [f"accuracy step: {first.accuracy_step}; loss-drop step: {first.loss_step}",
             f"{'quantity':<{width}}  threshold  crosses at  stays from  vs accuracy     vs loss"]
    for c in crossings:
        sign = ">=" if c.rising else "<="
        lines.append(f"{c.key:<{width}}  {sign} {c.threshold:<6g}  {str(c.step):>10}  {str(c.settled):>10}  "
                     f"{c.relation('accuracy'):<14}  {c.relation('loss')}")
    return "\n".join(lines)


__all__ = ["ADDITION_ROLES", "ROLE_THRESHOLD", "SORT_ROLES", "SUBTASK_THRESHOLD", "Crossing", "addition_progress",
           "addition_subtask_accuracy", "addition_subtask_masks", "answer_correctness", "compare_to_loss",
           "crossing_step", "format_crossings", "loss_drop_step", "role_measures", "settled_step",
           "sort_progress", "sort_subtask_accuracy"]
