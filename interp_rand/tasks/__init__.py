"""Tasks: one protocol (:class:`Task`), one registry, batches with metadata for analysis."""

from interp_rand.tasks.base import Batch, PairBatch, Task, make_task, register_task, task_class, task_names

__all__ = ["Batch", "PairBatch", "Task", "make_task", "register_task", "task_class", "task_names"]
