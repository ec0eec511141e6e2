"""A task described in a few functions, for a model trained elsewhere on a task the toolkit does
not ship: no :class:`~interp_rand.tasks.base.Task` subclass, no registry entry. Enough for the
attention report, the probes and circuits (and evaluation):

    >>> spec = TaskSpec("running-max", sample_fn=make_batch, positions=("x0", "x1", "x2", "x3"),
    ...                 corrupt_fn=change_one_token, variables={"max_so_far": max_so_far})
    >>> circuit_report(model=model, task=spec); build_report(model, spec); probe_task(model, spec, batch)

``sample_fn(n, generator) -> Batch`` makes examples (its ``answer_positions`` and ``loss_mask`` say
where the answers are); ``corrupt_fn(batch, generator) -> PairBatch`` the clean/corrupted pairs
circuits patch between; ``variables``: probe variables, ``name -> fn(task, batch, model) ->
probes.variables.VariableLabels``. :func:`require_task` is the one-line refusal of a missing
task for every report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from interp_rand.tasks.base import Batch, PairBatch

LOSS_KINDS = ("ce", "bce")


@dataclass(frozen=True)
class TaskSpec:
    """Attributes:
    name: what the reports call the task.
    sample_fn: ``fn(n, generator) -> Batch``.
    positions: one name per input position.
    corrupt_fn: ``fn(batch, generator) -> PairBatch`` (circuits need it; ``None``: none).
    loss_kind: ``"ce"`` (class ids as targets) or ``"bce"`` (bits).
    metric: the circuit metric that fits it (``"logprob"``, ``"logit_diff"`` ...).
    variables: probe variables, ``name -> fn(task, batch, model) -> VariableLabels``.
    description: one line for the reports.
    families: the primitive families ``explain`` builds candidates from (``()``: all of them).
    """

    name: str
    sample_fn: Callable[[int, torch.Generator], Batch]
    positions: tuple[str, ...]
    corrupt_fn: Callable[[Batch, torch.Generator], PairBatch] | None = None
    loss_kind: str = "ce"
    metric: str = "logprob"
    variables: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    description: str = ""
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TaskSpec.name={self.name!r} must be a non-empty string")
        if not callable(self.sample_fn):
            raise ValueError("TaskSpec.sample_fn must be fn(n, generator) -> Batch")
        if self.corrupt_fn is not None and not callable(self.corrupt_fn):
            raise ValueError("TaskSpec.corrupt_fn must be fn(batch, generator) -> PairBatch or None")
        if self.loss_kind not in LOSS_KINDS:
            raise ValueError(f"TaskSpec.loss_kind={self.loss_kind!r} is not allowed; choose from {LOSS_KINDS}")
        object.__setattr__(self, "positions", tuple(self.positions))
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "variables", dict(self.variables))

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        batch = self.sample_fn(n, generator)
        if not isinstance(batch, Batch):
            raise ValueError(f"TaskSpec {self.name!r}: sample returned {type(batch).__name__}, not a Batch")
        if batch.inputs.shape[1] != len(self.positions):
            raise ValueError(f"TaskSpec {self.name!r}: sample gave {batch.inputs.shape[1]} positions, "
                             f"positions names {len(self.positions)}")
        return batch

    def corrupt(self, batch: Batch, generator: torch.Generator) -> PairBatch:
        if self.corrupt_fn is None:
            raise ValueError(f"TaskSpec {self.name!r} has no corruption; circuits need "
                             "TaskSpec(corrupt_fn=fn(batch, generator) -> PairBatch)")
        return self.corrupt_fn(batch, generator)

    def position_names(self) -> list[str]:
        return list(self.positions)

    def token_labels(self, batch: Batch, row: int) -> list[str]:
        tokens = batch.inputs[row]
        return [f"{name}: {t.tolist() if tokens.dim() > 1 else int(t)}" for name, t in zip(self.positions, tokens)]

    def config_dict(self) -> dict[str, Any]:
        return {"spec": self.name, "positions": list(self.positions), "loss_kind": self.loss_kind}


def require_task(task: Any, what: str) -> Any:
    """``task``, or the one-line refusal naming what ``what`` (a report) needs."""
    if task is None:
        raise ValueError(f"{what} needs a task: a registered one (make_task(NAME)) or "
                         "interp_rand.tasks.TaskSpec(name, sample_fn=fn(n, generator) -> Batch, positions=[...], "
                         "corrupt_fn=fn(batch, generator) -> PairBatch, loss_kind=, metric=, variables=)")
    return task


__all__ = ["LOSS_KINDS", "TaskSpec", "require_task"]
