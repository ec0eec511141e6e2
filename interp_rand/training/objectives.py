"""Training objectives: one signature, one registry.

An objective turns (model, task, batch, generator) into the scalar to minimise. It is built
from the run's :class:`TrainConfig` (``make_objective(config)``), so objectives with options
(the q-norm's ``q`` and ``m_seeds``, the seed mode) read them from there.

Seeds. For a task with a randomness channel, ``seed_source`` decides what the model sees:
``"fresh"`` (random seeds, the ``A_R`` variants of the paper) or ``"fixed"`` (the task's constant
seed ``r0``: deterministic by construction, the ``A_r0`` variants).
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import torch
from torch import Tensor, nn

from interp_rand.losses import answer_loss
from interp_rand.registry import Registry
from interp_rand.tasks.base import Batch, Task
from interp_rand.training.config import TrainConfig


class Objective(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self, config: TrainConfig) -> None: ...

    def check(self, task: Task) -> None:
        """``ValueError`` (one line) if this objective cannot train ``task``; the trainer asks
        before any work (before the run folder is locked). Optional: an objective without it
        takes every task."""
        ...

    def __call__(
        self, model: nn.Module, task: Task, batch: Batch, generator: torch.Generator, step: int = 0
    ) -> Tensor:
        """Scalar loss for optimiser step ``step`` (0-based; for objectives with a schedule)."""
        ...


def fixed_seeds_if_asked(task: Task, batch: Batch, config: TrainConfig) -> Batch:
    """``batch`` with every seed replaced by the task's ``r0`` when ``seed_source="fixed"``."""
    if config.seed_source != "fixed" or batch.seeds is None:
        return batch
    r0 = task.fixed_seed()
    return task.with_seeds(batch, r0.expand(len(batch), *r0.shape))


class ERM:
    """Expected loss: the mean answer loss over the batch (q = 1 in the paper's terms). With a
    seeded task each example keeps its own fresh seed (or ``r0`` in ``seed_source="fixed"``)."""

    name: ClassVar[str] = "erm"
    description: ClassVar[str] = "mean answer-masked loss over the batch (empirical risk)"

    def __init__(self, config: TrainConfig) -> None:
        self.config = config

    def check(self, task: Task) -> None:
        """Any task: ERM needs no seed channel."""

    def __call__(
        self, model: nn.Module, task: Task, batch: Batch, generator: torch.Generator, step: int = 0
    ) -> Tensor:
        batch = fixed_seeds_if_asked(task, batch, self.config)
        logits = model(batch.inputs, **batch.model_kwargs())
        return answer_loss(logits, batch, task.loss_kind).mean()


OBJECTIVES: Registry[type] = Registry("objective", sort=True)


def register_objective(cls: type) -> type:
    """Class decorator adding an objective to :data:`OBJECTIVES` under ``cls.name`` (a second
    class under a taken name is refused)."""
    return OBJECTIVES.register(cls.name, cls, description=getattr(cls, "description", ""))


register_objective(ERM)


def objective_names() -> list[str]:
    return OBJECTIVES.names()


def make_objective(config: TrainConfig) -> Objective:
    """The registered objective ``config.objective``, built from ``config``; unknown names
    list what exists."""
    return OBJECTIVES.get(config.objective)(config)
