"""What one analysis of a checkpoint receives and returns, and the registry of such analyses.

An analysis is a function ``analysis(view: CheckpointView, **options) -> Measures``: it reads
the checkpoint's model (and the held-out examples the view fixes for the whole replay, so every
checkpoint is measured on the same inputs) and returns flat named numbers, one dict per
checkpoint. Keys are ``"group/label"`` (``"accuracy/n_distinct=3"``, ``"edge/a0.1->logits"``,
``"probe/carry_out@L1"``): a figure draws one line per key of a small group and a heatmap
(keys × steps) for a large one. An analysis registers itself with the thresholds its
quantities are judged by::

    @DYNAMICS_ANALYSES.add("accuracy", description="exact match by metadata group")
    def accuracy(view, **options) -> Measures: ...

    THRESHOLDS["accuracy"] = (Threshold("accuracy/", 0.99),)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from interp_rand.registry import Registry

# one checkpoint's quantities: "group/label" -> value
Measures = dict[str, float]


@dataclass(frozen=True)
class Threshold:
    """The step at which a quantity crosses ``value`` is reported for every key starting with
    ``prefix``; ``rising``: crossing upwards (else downwards, e.g. a loss)."""

    prefix: str
    value: float
    rising: bool = True


@dataclass
class CheckpointView:
    """One checkpoint of a run, as an analysis sees it.

    Attributes:
        step: the training step of the checkpoint.
        checkpoint: the :class:`~interp_rand.training.checkpoint.Checkpoint`.
        model: its model, in eval mode.
        task: the run's task.
        batch: held-out examples, the same for every checkpoint of the replay.
        pairs: clean/corrupted pairs drawn from ``batch`` (the task's corruption), the same for
            every checkpoint.
        seed: the replay's seed (for anything else an analysis draws).
        cache: per-replay storage shared across checkpoints (e.g. a random-init control
            measured once), keyed by the analysis.
    """

    step: int
    checkpoint: Any
    model: Any
    task: Any
    batch: Any
    pairs: Any
    seed: int
    cache: dict[str, Any] = field(default_factory=dict)


def open_view(checkpoint: str | Path, *, n: int, seed: int,
              cache: dict[str, Any] | None = None) -> CheckpointView:
    """The view of one checkpoint folder (or ``zoo:NAME``): its model, task and ``n`` held-out
    examples with their task-corruption pairs, drawn with ``seed`` exactly as
    :func:`~interp_rand.reports.inputs.load_run_inputs` draws them, so every checkpoint of a
    run (one task config) gets the same examples. ``cache``: the replay's shared storage."""
    from interp_rand.reports.inputs import load_run_inputs

    inputs = load_run_inputs(checkpoint, n=n, seed=seed, pairs="task")
    return CheckpointView(step=inputs.ckpt.step, checkpoint=inputs.ckpt, model=inputs.model,
                          task=inputs.task, batch=inputs.batch, pairs=inputs.pairs, seed=seed,
                          cache={} if cache is None else cache)


DYNAMICS_ANALYSES: Registry[Callable[..., Measures]] = Registry("dynamics analysis",
                                                                plural="dynamics analyses")
# analysis name -> the thresholds its crossing steps are reported for
THRESHOLDS: dict[str, tuple[Threshold, ...]] = {}

__all__ = ["DYNAMICS_ANALYSES", "THRESHOLDS", "CheckpointView", "Measures", "Threshold", "open_view"]
