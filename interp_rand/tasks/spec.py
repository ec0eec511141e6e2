"""A task described in a few functions, for a model trained elsewhere on a task the toolkit does
not ship: no :class:`~interp_rand.tasks.base.Task` subclass, no registry entry. Enough for the
attention report, the probes and circuits (and evaluation):

    >>> spec = TaskSpec("running-max", sample_fn=make_batch, positions=("x0", "x1", "x2", "x3"),
    ...                 corrupt_fn=change_one_token, variables={"max_so_far": max_so_far})
    >>> circuit_report(model=model, task=spec); build_report(model, spec); probe_task(model, spec, batch)

A spec trained elsewhere on a range of lengths declares it (``lengths=(1, 50)``): its
``sample_fn(n, generator, length=L)`` then samples at any of them and ``positions`` may be
``fn(L) -> names``; ``spec.at_length(L)`` (or :func:`interp_rand.tasks.lengths.at_length`) is the
spec at one length, so every analysis, and the length-generalisation study, runs at each.

``sample_fn(n, generator) -> Batch`` makes examples (its ``answer_positions`` and ``loss_mask`` say
where the answers are); ``corrupt_fn(batch, generator) -> PairBatch`` the clean/corrupted pairs
circuits patch between; ``variables``: probe variables, ``name -> fn(task, batch, model) ->
probes.variables.VariableLabels``. :func:`require_task` is the one-line refusal of a missing
task for every report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
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
    lengths: ``(shortest, longest)`` the spec can sample at (``sample_fn`` takes ``length=``);
        ``None``: one length.
    length: the length it samples at (default: the longest of ``lengths``).
    source_start: positions before the input proper (a BOS token: 1), which ``explain``'s
        primitives do not read as part of the source.
    """

    name: str
    sample_fn: Callable[[int, torch.Generator], Batch]
    positions: tuple[str, ...] | Callable[[int], Any]
    corrupt_fn: Callable[[Batch, torch.Generator], PairBatch] | None = None
    loss_kind: str = "ce"
    metric: str = "logprob"
    variables: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    description: str = ""
    families: tuple[str, ...] = ()
    lengths: tuple[int, int] | None = None
    length: int | None = None
    source_start: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TaskSpec.name={self.name!r} must be a non-empty string")
        if not callable(self.sample_fn):
            raise ValueError("TaskSpec.sample_fn must be fn(n, generator) -> Batch")
        if self.corrupt_fn is not None and not callable(self.corrupt_fn):
            raise ValueError("TaskSpec.corrupt_fn must be fn(batch, generator) -> PairBatch or None")
        if self.loss_kind not in LOSS_KINDS:
            raise ValueError(f"TaskSpec.loss_kind={self.loss_kind!r} is not allowed; choose from {LOSS_KINDS}")
        if not isinstance(self.source_start, int) or self.source_start < 0:
            raise ValueError(f"TaskSpec.source_start={self.source_start!r} must be an integer >= 0")
        if self.lengths is not None:
            if (not isinstance(self.lengths, (tuple, list)) or len(self.lengths) != 2
                    or not all(isinstance(v, int) and v >= 1 for v in self.lengths) or self.lengths[0] > self.lengths[1]):
                raise ValueError(f"TaskSpec.lengths={self.lengths!r} must be (shortest, longest), 1 <= shortest <= longest")
            object.__setattr__(self, "lengths", tuple(self.lengths))
            if self.length is None:
                object.__setattr__(self, "length", self.lengths[1])
            if not isinstance(self.length, int) or self.length < 1:
                raise ValueError(f"TaskSpec.length={self.length!r} must be a positive integer")
        elif self.length is not None:
            raise ValueError("TaskSpec.length needs lengths=(shortest, longest): the range the spec samples at")
        if callable(self.positions):
            if self.lengths is None:
                raise ValueError("TaskSpec.positions as fn(length) -> names needs lengths=(shortest, longest)")
            object.__setattr__(self, "_positions_fn", self.positions)
            object.__setattr__(self, "positions", tuple(self.positions(self.length)))
        object.__setattr__(self, "positions", tuple(self.positions))
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "variables", dict(self.variables))

    @property
    def length_field(self) -> str | None:
        """``"length"`` for a spec with ``lengths`` (:mod:`interp_rand.tasks.lengths`), else ``None``."""
        return None if self.lengths is None else "length"

    def at_length(self, length: int) -> "TaskSpec":
        """This spec sampling at ``length`` (any positive length: a study may go beyond the
        trained range; ``sample_fn`` refuses what it cannot make)."""
        if self.lengths is None:
            raise ValueError(f"TaskSpec {self.name!r} has one length; declare lengths=(shortest, longest) and a "
                             "sample_fn(n, generator, length=L) to run it at others")
        if not isinstance(length, int) or length < 1:
            raise ValueError(f"length={length!r} must be a positive integer")
        positions = getattr(self, "_positions_fn", None)
        if positions is None and length != self.length:
            raise ValueError(f"TaskSpec {self.name!r} names its positions for one length; give positions as "
                             "fn(length) -> names to run it at others")
        return dataclasses.replace(self, length=length, positions=positions or self.positions)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        batch = self.sample_fn(n, generator) if self.lengths is None else self.sample_fn(n, generator, length=self.length)
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
        out = {"spec": self.name, "positions": list(self.positions), "loss_kind": self.loss_kind}
        return out if self.lengths is None else {**out, "lengths": list(self.lengths), "length": self.length}


def require_task(task: Any, what: str) -> Any:
    """``task``, or the one-line refusal naming what ``what`` (a report) needs."""
    if task is None:
        raise ValueError(f"{what} needs a task: a registered one (make_task(NAME)) or "
                         "interp_rand.tasks.TaskSpec(name, sample_fn=fn(n, generator) -> Batch, positions=[...], "
                         "corrupt_fn=fn(batch, generator) -> PairBatch, loss_kind=, metric=, variables=)")
    return task


__all__ = ["LOSS_KINDS", "TaskSpec", "require_task"]
