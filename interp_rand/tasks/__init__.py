"""Tasks: one protocol (:class:`Task`), one registry, batches with metadata for analysis.

Randomized tasks (their model reads random seeds) also speak :class:`RandomizedTask`."""

from interp_rand.tasks.base import Batch, PairBatch, Task, make_task, register_task, task_class, task_names
from interp_rand.tasks.randomized import RandomizedTask

# Importing a task module registers it.
from interp_rand.tasks.addition import AdditionTask
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask
from interp_rand.tasks.sort import SortTask

__all__ = [
    "AdditionTask",
    "Batch",
    "ColoringTask",
    "PairBatch",
    "RandomizedTask",
    "RecallTask",
    "SortTask",
    "Task",
    "make_task",
    "register_task",
    "task_class",
    "task_names",
]
