"""Training objectives: one signature, one registry.

An objective turns (model, task, batch, generator) into the scalar to minimise. ERM is the
plain answer-masked mean; the q-norm over shared seeds of PAPER.md plugs in here as another
registered class (it needs the model and the generator to draw its m seeds, hence the
signature).
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import torch
from torch import Tensor, nn

from interp_rand.tasks.base import Batch, Task
from interp_rand.losses import answer_loss


class Objective(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]

    def __call__(self, model: nn.Module, task: Task, batch: Batch, generator: torch.Generator) -> Tensor:
        """Scalar loss for one optimiser step."""
        ...


class ERM:
    """Expected loss: the mean answer loss over the batch (q = 1 in PAPER.md's terms)."""

    name: ClassVar[str] = "erm"
    description: ClassVar[str] = "mean answer-masked loss over the batch (empirical risk)"

    def __call__(self, model: nn.Module, task: Task, batch: Batch, generator: torch.Generator) -> Tensor:
        logits = model(batch.inputs, **batch.model_kwargs())
        return answer_loss(logits, batch, task.loss_kind).mean()


_OBJECTIVES: dict[str, type] = {ERM.name: ERM}


def objective_names() -> list[str]:
    return sorted(_OBJECTIVES)


def make_objective(name: str) -> Objective:
    """The registered objective ``name``; unknown names list what exists."""
    try:
        return _OBJECTIVES[name]()
    except KeyError:
        raise ValueError(
            f"unknown objective {name!r}; registered objectives: {', '.join(objective_names())}"
        ) from None


def register_objective(cls: type) -> type:
    """Class decorator adding an objective to the registry under ``cls.name``."""
    _OBJECTIVES[cls.name] = cls
    return cls
