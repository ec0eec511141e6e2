"""The registry of probe variables: per task, named functions from a batch (and, where a
variable is defined by the model's behaviour, the model) to labels.

A variable has ``k`` *instances* (one per answer digit, list element, seed bit, vertex ...):
``labels: [batch, k]`` long in ``0 .. n_classes-1``. Each instance also names

- ``control_types``: the input type whose random-but-fixed label is the Hewitt & Liang (2019)
  control task (e.g. the digit pair at that place),
- ``output_index`` (optional): which answer position the variable should act on, so that the
  causal check reads the right output, and
- ``counterfactual`` (optional): the answer the model should give at that position if the
  variable had another value (a carry flipped -> the carried digit moves by one).

Adding a variable is one function and one decorator line::

    @register_variable("addition", "carry_in", "carry into the place of each answer digit")
    def _carry_in(task, batch, model) -> VariableLabels: ...
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from interp_rand.registry import Registry, UnknownName
from interp_rand.tasks.base import Batch

# (batch, instance, new_labels [batch]) -> [batch] long expected output class at output_index[instance]
Counterfactual = Callable[[Batch, int, Tensor], Tensor]


@dataclass(frozen=True)
class VariableLabels:
    """Labels of one variable on one batch.

    Attributes:
        labels: ``[batch, k]`` long class ids.
        n_classes: number of classes (the same for every instance).
        instance_names: ``k`` names (``"place 3"``, ``"bit 0"`` ...).
        control_types: ``[batch, k]`` long input-type ids for the control task.
        output_index: ``[k]`` long index into ``batch.answer_positions`` (``-1``: every
            answer position), or ``None``.
        counterfactual: see the module docstring, or ``None``; with ``output_index`` it is the
            variable's causal model, which interchange interventions score
            (:mod:`probes.interchange`) and a mechanism reads (``Variable.from_probe``).
        name: ``task.variable`` (set by :func:`variable_labels`).
    """

    labels: Tensor
    n_classes: int
    instance_names: tuple[str, ...]
    control_types: Tensor
    output_index: Tensor | None = None
    counterfactual: Counterfactual | None = None
    name: str = ""

    def __post_init__(self) -> None:
        k = len(self.instance_names)
        if self.labels.dim() != 2 or self.labels.shape[1] != k:
            raise ValueError(f"labels must be [batch, k={k}]; got {tuple(self.labels.shape)}")
        if self.control_types.shape != self.labels.shape:
            raise ValueError(
                f"control_types {tuple(self.control_types.shape)} must match labels {tuple(self.labels.shape)}"
            )
        if self.labels.numel() and (int(self.labels.min()) < 0 or int(self.labels.max()) >= self.n_classes):
            raise ValueError(f"labels must lie in 0..{self.n_classes - 1}")


@dataclass(frozen=True)
class ProbeVariable:
    """A registered variable: ``compute(task, batch, model) -> VariableLabels``; ``needs_model``
    when the labels are the model's own behaviour (colour chosen, key recalled)."""

    task: str
    name: str
    description: str
    compute: Callable[[Any, Batch, Any], VariableLabels]
    needs_model: bool = False


# keyed by (task name, variable name), in registration order
PROBE_VARIABLES: Registry[ProbeVariable] = Registry("probe variable")
# keyed by task name: fn(task, batch) -> [batch] long group ids
INPUT_GROUPINGS: Registry[Callable[[Any, Batch], Tensor]] = Registry("input grouping")


def register_variable(task: str, name: str, description: str, *, needs_model: bool = False):
    """Decorator: register ``fn(task, batch, model) -> VariableLabels`` as ``task``'s ``name``
    in :data:`PROBE_VARIABLES` (a taken name is refused)."""

    def add(fn):
        PROBE_VARIABLES.register((task, name), ProbeVariable(task, name, description, fn, needs_model),
                                 description=description)
        return fn

    return add


def register_groups(task: str):
    """Decorator: ``fn(task, batch) -> [batch] long`` group ids for the held-out split, in
    :data:`INPUT_GROUPINGS` (one per task)."""

    def add(fn):
        INPUT_GROUPINGS.register(task, fn)
        return fn

    return add


def variable_names(task_name: str) -> list[str]:
    """The variables registered for a task, in registration order."""
    return [name for task, name in PROBE_VARIABLES.names() if task == task_name]


def task_variables(task) -> list[str]:
    """The probe variables of ``task``: a :class:`~interp_rand.tasks.spec.TaskSpec`'s own
    (``variables``), else those registered for its name."""
    own = getattr(task, "variables", None)
    return list(own) if isinstance(own, dict) else variable_names(task.name)


def get_variable(task_name: str, name: str) -> ProbeVariable:
    """The variable ``name`` of ``task_name``; an unknown name lists those that exist."""
    if (task_name, name) not in PROBE_VARIABLES:
        known = variable_names(task_name)
        raise UnknownName(
            f"task {task_name!r} provides no probe variable {name!r}; it provides: "
            f"{', '.join(known) or '(none)'}", name, known
        )
    return PROBE_VARIABLES.get((task_name, name))


def variable_labels(task, batch: Batch, name: str, model=None) -> VariableLabels:
    """Compute variable ``name`` of ``task`` on ``batch`` (``model`` where it needs one; a
    :class:`~interp_rand.tasks.spec.TaskSpec`'s own variables are always given it)."""
    own = getattr(task, "variables", None)
    if isinstance(own, dict):
        if name not in own:
            raise UnknownName(f"task {task.name!r} provides no probe variable {name!r}; it provides: "
                              f"{', '.join(own) or '(none)'}", name, list(own))
        out = own[name](task, batch, model)
    else:
        variable = get_variable(task.name, name)
        if variable.needs_model and model is None:
            raise ValueError(f"probe variable {task.name}.{name} is defined by the model's outputs; pass model=")
        out = variable.compute(task, batch, model)
    if not isinstance(out, VariableLabels):
        raise ValueError(f"variable {name!r} of task {task.name!r} returned {type(out).__name__}, not VariableLabels")
    if out.labels.shape[0] != len(batch):
        raise ValueError(f"variable {name!r} gave {out.labels.shape[0]} labels for {len(batch)} examples")
    return dataclasses.replace(out, name=f"{task.name}.{name}")


def input_groups(task, batch: Batch) -> Tensor:
    """``[batch]`` long group ids: examples with the same task input (operand pair, list
    multiset, pairs and query, cycle) share one, whatever their seeds. Tasks without a
    registered grouping group by identical ``inputs`` and ``attention_mask``."""
    if task.name in INPUT_GROUPINGS:
        return INPUT_GROUPINGS.get(task.name)(task, batch)
    return rows_to_groups(batch.inputs, batch.attention_mask)


def rows_to_groups(*parts: Tensor | None) -> Tensor:
    """``[batch]`` long: one id per distinct row of the concatenated (flattened) ``parts``."""
    rows = torch.cat([p.reshape(len(p), -1).float() for p in parts if p is not None], dim=1)
    return torch.unique(rows, dim=0, return_inverse=True)[1]


__all__ = [
    "INPUT_GROUPINGS",
    "PROBE_VARIABLES",
    "ProbeVariable",
    "VariableLabels",
    "get_variable",
    "input_groups",
    "register_groups",
    "register_variable",
    "rows_to_groups",
    "variable_labels",
    "variable_names",
]
