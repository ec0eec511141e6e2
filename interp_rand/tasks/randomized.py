"""The seed interface: an optional extension of :class:`~interp_rand.tasks.base.Task` for
tasks whose model receives random seeds through the randomness channel (the paper).

A randomized task draws a fresh seed per example in ``sample`` and tells the trainer and the
evaluator what its seeds look like, so that they can redraw them (the q-norm's m shared seeds),
pin them (the deterministic variants' fixed seed ``r0``) or enumerate them (recall's 1,024 bit
patterns), always through :meth:`RandomizedTask.with_seeds`.

Seed shapes: ``seed_shape = (d_seed,)`` is one seed shared by every position of an example
(the model sees ``seeds: [batch, d_seed]``); ``seed_shape = (n_pos, d_seed)`` is one seed per
position (``seeds: [batch, n_pos, d_seed]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from interp_rand.tasks.base import Batch, Task, task_class, task_names

# ``fixed_seed()`` is the first seed drawn from a generator seeded with this, so ``r0`` is a
# typical draw of the seed distribution (all-zero bits or all-zero noise would be atypical).
FIXED_SEED_GENERATOR_SEED = 0


@runtime_checkable
class RandomizedTask(Task, Protocol):
    """A task whose examples come with random seeds (in addition to :class:`Task`).

    ``sample(n, generator)`` returns batches whose ``seeds`` are fresh draws, one per example.
    """

    @property
    def d_seed(self) -> int:
        """Width of the randomness channel (the model's ``d_seed``)."""
        ...

    @property
    def seed_shape(self) -> tuple[int, ...]:
        """``(d_seed,)`` for one seed shared by all positions, ``(n_pos, d_seed)`` per position."""
        ...

    def sample_seeds(self, m: int, generator: torch.Generator) -> Tensor:
        """``[m, *seed_shape]`` float: fresh seeds from the task's seed distribution."""
        ...

    def fixed_seed(self) -> Tensor:
        """``[*seed_shape]``: the constant seed ``r0`` of the deterministic variants, i.e.
        ``sample_seeds(1, torch.Generator().manual_seed(FIXED_SEED_GENERATOR_SEED))[0]``."""
        ...

    def all_seeds(self) -> Tensor:
        """``[n_seeds, *seed_shape]`` every possible seed, where they can be enumerated;
        ``ValueError`` otherwise."""
        ...

    def with_seeds(self, batch: Batch, seeds: Tensor) -> Batch:
        """``batch`` with its ``seeds`` replaced by ``seeds: [len(batch), *seed_shape]``."""
        ...


@dataclass(frozen=True)
class ExperimentScale:
    """The optimiser settings and seed budget of one named scale of a randomized experiment
    (a CPU-scaled or the paper-scale one); each task adds the fields of its sweep. Its training
    config is ``TrainConfig.from_scale(scale, **overrides)`` (the training layer reads the scale).

    Attributes:
        steps, batch_size, lr, warmup_steps, min_lr_ratio, weight_decay, beta1, beta2,
            adam_eps, grad_clip: as in ``TrainConfig`` (``lr`` is the peak; the schedule
            anneals to ``lr * min_lr_ratio``).
        m_seeds: ``m``, seeds drawn per step and shared by the batch (q-norm objective).
        q: the norm's exponent for the q-norm variants (``q = 1`` is ERM).
        eval_seeds: seeds per input when measuring per-input success, or ``"all"`` (every seed,
            where the task can enumerate them).
        q_ramp_steps: as in ``TrainConfig`` (0 = the paper's constant q); keyword-only.
        qnorm_from_erm: start each q-norm variant from the trained ERM variant with the same
            seed source (``TrainConfig.init_from``) instead of from scratch; keyword-only. Not
            in the paper: a CPU-scale shortcut, see the task's CPU scale.
        qnorm_steps: steps of a q-norm variant (``None``: ``steps``); keyword-only.
    """

    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    min_lr_ratio: float
    weight_decay: float
    beta1: float
    beta2: float
    adam_eps: float
    grad_clip: float
    m_seeds: int
    q: float
    eval_seeds: int | str
    q_ramp_steps: int = dataclasses.field(default=0, kw_only=True)
    qnorm_from_erm: bool = dataclasses.field(default=False, kw_only=True)
    qnorm_steps: int | None = dataclasses.field(default=None, kw_only=True)

    def model_overrides(self) -> dict[str, Any]:
        """Settings of the task's default model that this scale changes (none here; the
        tasks' scales add their own)."""
        return {}


@dataclass(frozen=True)
class Experiment:
    """A randomized task's paper experiment, as ``interp-rand reproduce TASK`` runs it and the
    zoo's randomized models follow it: one entry per task, held by the task class as its
    ``experiment`` class attribute (``RecallTask.experiment``), so that adding a task's
    experiment is this one entry (:func:`experiments` collects them).

    Attributes:
        sweep_key: the table's and figure's x column (``"N"``, ``"q"``).
        settings: the task configs trained at a scale (recall: one per ``N`` of
            ``scale.n_pairs``; colouring: the one cycle size).
        sweep_value: a run's x value from its task config and training config (its
            ``TrainConfig``: the training layer is above the tasks, so it is not named here).
        scales: the named scales (``"cpu"``, ``"paper"``) of the experiment.
        eval_inputs: fresh inputs of each run's seeded evaluation (``reproduce``'s runs and
            the zoo's model cards).
        paper_points: the paper's values (values marked ≈ there were read off its plots), each
            ``{"variant", sweep_key: x, "metric", "value"}``, with ``"bound": "≤"`` where the
            paper gives an upper bound, not a value; ``metric`` is a column of the table.
        paper_note: the line under the table saying what the paper reports besides.
        extra_q: exponents below the scale's ``q`` at which ``A^q_R`` also trains (colouring's
            sweep over q; its q = 1 point is ``A^E_R``).
    """

    sweep_key: str
    settings: Callable[[ExperimentScale], list[dict[str, Any]]]
    sweep_value: Callable[[dict[str, Any], Any], float]
    scales: Mapping[str, ExperimentScale]
    eval_inputs: int
    paper_points: tuple[dict[str, Any], ...]
    paper_note: str
    extra_q: tuple[float, ...] = ()


def experiments() -> dict[str, Experiment]:
    """``{task name: its Experiment}`` for every registered task that has one, by name."""
    out = {}
    for name in task_names():
        experiment = getattr(task_class(name), "experiment", None)
        if experiment is not None:
            out[name] = experiment
    return out


def first_seed(task: RandomizedTask) -> Tensor:
    """``[*seed_shape]`` the fixed seed ``r0``: the first draw of a generator seeded with
    :data:`FIXED_SEED_GENERATOR_SEED` (CPU, so it is the same on every machine)."""
    generator = torch.Generator().manual_seed(FIXED_SEED_GENERATOR_SEED)
    return task.sample_seeds(1, generator)[0]


def replace_seeds(batch: Batch, seeds: Tensor, seed_shape: tuple[int, ...]) -> Batch:
    """``batch`` with ``seeds`` (``[len(batch), *seed_shape]``, real or bool) as float seeds on
    the device of ``batch.inputs`` (so a CPU ``fixed_seed()`` can be used with a GPU batch).

    Raises ``ValueError`` naming the expected shape if ``seeds`` does not fit.
    """
    expected = (len(batch), *seed_shape)
    if not isinstance(seeds, Tensor) or tuple(seeds.shape) != expected:
        got = tuple(seeds.shape) if isinstance(seeds, Tensor) else type(seeds).__name__
        raise ValueError(f"seeds must have shape [batch, *seed_shape] = {list(expected)}; got {got}")
    if seeds.is_complex():
        raise ValueError(f"seeds must be real, got dtype {seeds.dtype}")
    dtype = seeds.dtype if seeds.is_floating_point() else torch.float32
    return dataclasses.replace(batch, seeds=seeds.to(device=batch.inputs.device, dtype=dtype))


__all__ = ["Experiment", "ExperimentScale", "experiments", "FIXED_SEED_GENERATOR_SEED", "RandomizedTask", "first_seed", "replace_seeds"]
