"""Tasks: one protocol (:class:`Task`), one registry, batches with metadata for analysis.

Randomized tasks (their model reads random seeds) also speak :class:`RandomizedTask`, and those
with a paper experiment hold it as ``experiment`` (:class:`Experiment`, :func:`experiments`).
Analyses that fit only some tasks ask for a capability (:func:`has_capability`,
:data:`CAPABILITIES`), never for a task's name."""

from interp_rand.tasks.base import (
    CAPABILITIES,
    CARRIES,
    CYCLE_NEIGHBOURS,
    KEY_VALUE_RECALL,
    SORTED_OUTPUT,
    Batch,
    PairBatch,
    Task,
    has_capability,
    make_task,
    register_task,
    require_capability,
    task_class,
    task_names,
    tasks_with,
)
from interp_rand.tasks.randomized import Experiment, RandomizedTask, experiments

# Importing a task module registers it.
from interp_rand.tasks.addition import AdditionTask
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask
from interp_rand.tasks.sort import SortTask
from interp_rand.tasks.spec import TaskSpec, require_task

__all__ = [
    "CAPABILITIES",
    "CARRIES",
    "CYCLE_NEIGHBOURS",
    "KEY_VALUE_RECALL",
    "SORTED_OUTPUT",
    "TaskSpec",
    "require_task",
    "AdditionTask",
    "Batch",
    "ColoringTask",
    "Experiment",
    "PairBatch",
    "RandomizedTask",
    "RecallTask",
    "SortTask",
    "Task",
    "experiments",
    "has_capability",
    "make_task",
    "register_task",
    "require_capability",
    "task_class",
    "task_names",
    "tasks_with",
]
