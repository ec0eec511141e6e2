"""Causal models of a task's variables: what the variable's value is on each input, and the
registry of them (see the package's doc)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from interp_rand.registry import Registry
from interp_rand.tasks.base import Batch
from probes.variables import variable_labels


@dataclass(frozen=True)
class CausalModel:
    """How a variable acts on the answer.

    ``counterfactual(task, batch, instance, new) -> [batch, m]`` long: the targets at the
    answer indices ``outputs(task, batch, instance) -> [m]`` (into ``batch.answer_positions``)
    when the variable's ``instance`` takes the row-wise values ``new`` ``[batch]`` on the base
    ``batch``; a negative target marks a row where the variable has no effect (never paired).
    """

    task: str
    variable: str
    description: str
    outputs: Callable[[Any, Batch, int], Tensor]
    counterfactual: Callable[[Any, Batch, int, Tensor], Tensor]


CAUSAL_MODELS: Registry[CausalModel] = Registry("causal model")


def register_causal_model(model: CausalModel) -> CausalModel:
    """Add ``model`` to :data:`CAUSAL_MODELS` under ``(task, variable)``."""
    return CAUSAL_MODELS.register((model.task, model.variable), model, description=model.description)


def from_variable(task_name: str, variable: str, description: str) -> CausalModel:
    """The causal model a probe variable declares: its ``counterfactual`` rule at its
    ``output_index`` (one answer position per instance)."""

    def labels(task, batch: Batch):
        out = variable_labels(task, batch, variable)
        if out.counterfactual is None or out.output_index is None:
            raise ValueError(f"probe variable {task_name}.{variable} declares no counterfactual rule")
        return out

    def outputs(task, batch: Batch, instance: int) -> Tensor:
        index = int(labels(task, batch).output_index[instance])
        if index < 0:
            raise ValueError(f"{task_name}.{variable} acts on every answer position; name one")
        return torch.tensor([index])

    def counterfactual(task, batch: Batch, instance: int, new: Tensor) -> Tensor:
        return labels(task, batch).counterfactual(batch, instance, new)[:, None]

    return CausalModel(task_name, variable, description, outputs, counterfactual)


for _task, _variable, _description in (
    ("addition", "carry_in", "the digit of place p becomes (a_p + b_p + carry) % 10; the top digit is the carry"),
    ("addition", "carry_out", "the digit of place p + 1 becomes (a + b + carry) % 10 there"),
    ("addition", "digit", "the answer digit becomes the new value"),
    ("sort", "next", "the answer at that position becomes the new value"),
):
    register_causal_model(from_variable(_task, _variable, _description))


def get_causal_model(task_name: str, variable: str) -> CausalModel:
    """The causal model of ``task_name``'s ``variable``; an unknown one lists those registered."""
    return CAUSAL_MODELS.get((task_name, variable))
