"""A task at another length: the one owner of what "length" means for each task.

A task whose size can change without changing its token alphabet declares which config field
is its length (``length_field``: ``"length"`` for sort, ``"n_digits"`` for addition); a
:class:`~interp_rand.tasks.spec.TaskSpec` declares a range of lengths and samples at any of
them. :func:`at_length` gives the same task at another length: training on a range of lengths
(``TrainConfig.min_length``, one length per batch) and the length-generalisation study
(:mod:`circuits.analyses.length_generalization`) both go through it.

Recall and colouring declare none: their token width grows with the size (recall's one-hot
keys, colouring's one-hot vertex ids), so a model trained at one size cannot read another.

    >>> at_length(make_task("sort", length=8, vocab=10), 20).n_ctx
    40
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


def length_field(task: Any) -> str:
    """The config field that is ``task``'s length; ``ValueError`` for a task that has none."""
    field = getattr(task, "length_field", None)
    if field is None:
        name = getattr(task, "name", type(task).__name__)
        raise ValueError(f"task {name!r} has no length that can change without changing its tokens; tasks with "
                         f"one: {', '.join(tasks_with_lengths()) or 'none'}, or a TaskSpec with lengths=(A, B)")
    return field


def length_of(task: Any) -> int:
    """``task``'s length (its ``length_field``'s value)."""
    return int(getattr(task, length_field(task)))


def at_length(task: Any, length: int) -> Any:
    """``task`` at ``length`` (validated: a length the task cannot take is refused, naming its
    field and what is allowed)."""
    field = length_field(task)
    if hasattr(task, "at_length"):  # a task that keeps more than its field (recall's keys, a TaskSpec's sampler)
        return task.at_length(length)
    if int(getattr(task, field)) == length:
        return task
    return dataclasses.replace(task, **{field: length})


def parse_lengths(text: str) -> range:
    """``"A-B"`` (or ``"A"``) -> ``range(A, B + 1)``; ``ValueError`` naming the form otherwise."""
    parts = str(text).split("-")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (None, None)
    except ValueError:
        low = high = None
    if low is None or high is None or low < 1 or high < low:
        raise ValueError(f"lengths {text!r} must be A-B with 1 <= A <= B (or one length A)")
    return range(low, high + 1)


def tasks_with_lengths() -> list[str]:
    """The registered tasks that declare a length field."""
    from interp_rand.tasks.base import TASKS

    return [name for name in TASKS.names() if getattr(TASKS.get(name), "length_field", None)]


def training_task(task: Any, min_length: int | None, curriculum: int, step: int, generator: torch.Generator) -> Any:
    """The task a training step samples from: ``task`` itself (``min_length`` ``None``), or
    ``task`` at a length drawn uniformly (from ``generator``) between ``min_length`` and the
    longest allowed at ``step``: ``task``'s own length, or with a ``curriculum`` of that many
    steps one that grows linearly from ``min_length`` to it."""
    if min_length is None:
        return task
    top = length_of(task)
    if curriculum and step < curriculum:
        top = min_length + (top - min_length) * (step + 1) // curriculum
    return at_length(task, int(torch.randint(min_length, top + 1, (1,), generator=generator)))


def check_training_lengths(task: Any, min_length: int | None) -> None:
    """``ValueError`` unless ``task`` can train from ``min_length`` to its own length."""
    if min_length is None:
        return
    top = length_of(task)
    if min_length > top:
        raise ValueError(f"TrainConfig.min_length={min_length} exceeds the task's {length_field(task)}={top}: "
                         f"training draws lengths from min_length to the task's own")
    at_length(task, min_length)  # the shortest must be a valid task


__all__ = ["at_length", "check_training_lengths", "length_field", "length_of", "parse_lengths",
           "tasks_with_lengths", "training_task"]
