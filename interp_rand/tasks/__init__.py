"""Tasks: one protocol (:class:`Task`), one registry, batches with metadata for analysis."""

from interp_rand.tasks.base import Batch, PairBatch, Task, make_task, register_task, task_class, task_names

# Importing a task module registers it.
from interp_rand.tasks.addition import AdditionTask
from interp_rand.tasks.sort import SortTask

__all__ = [
    "AdditionTask",
    "Batch",
    "PairBatch",
    "SortTask",
    "Task",
    "make_task",
    "register_task",
    "task_class",
    "task_names",
]
