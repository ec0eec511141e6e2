"""What every analysis of a trained run starts from, in one call: load the run (a run folder
or ``zoo:NAME``), make its task, sample ``n`` examples with a seeded generator, give a model
trained on the fixed seed r0 its r0 (as in training) and, if asked, draw clean/corrupted pairs.

    >>> inputs = load_run_inputs("zoo:sort", n=256, seed=0, pairs="task")
    >>> inputs.model, inputs.task, inputs.pairs.clean, inputs.pairs.corrupted
Light to import (torch is imported on first use), so the command line can read :data:`PAIRS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the kinds of clean/corrupted pairs: the task's own corruption, or the same inputs under fresh seeds
PAIRS = ("task", "seed")


@dataclass
class RunInputs:
    """Attributes:
    ckpt: the run's newest :class:`~interp_rand.training.checkpoint.Checkpoint`.
    model: its model (eval mode); task: its task.
    batch: the sampled examples (seeds replaced by r0 for a fixed-seed run).
    pairs: clean/corrupted pairs drawn from ``batch`` (None unless asked for).
    generator: the generator after the draws, for whatever the caller draws next.
    """

    ckpt: Any
    model: Any
    task: Any
    batch: Any
    pairs: Any
    generator: Any  # torch.Generator


def make_pairs(kind: str, model: Any, task: Any, batch: Any, generator: Any) -> Any:
    """Clean/corrupted pairs of ``kind`` (:data:`PAIRS`): ``task`` the task's own corruption (a
    minimal input edit that changes the answer), ``seed`` the same inputs under fresh seeds with
    the model's own answers as targets (:func:`circuits.analyses.randomness.seed_pairs`)."""
    if kind == "seed":
        from circuits.analyses.randomness import seed_pairs

        return seed_pairs(model, task, batch, generator)
    if kind != "task":
        raise ValueError(f"pairs={kind!r}: expected one of {PAIRS}")
    return task.corrupt(batch, generator)


def load_run_inputs(run: str | Path, n: int, seed: int, pairs: str | None = "task", *,
                    task: str | None = None, check_architecture: bool = False) -> RunInputs:
    """Load ``run``, sample ``n`` examples of its task with ``torch.Generator().manual_seed(seed)``
    (a fixed-seed run's seeds set to r0) and draw ``pairs`` of that kind from them with the same
    generator (``None``: no pairs). ``task``: the expected task name (an error otherwise);
    ``check_architecture``: refuse, naming the run, a model whose architecture circuits cannot
    read."""
    import torch

    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.objectives import fixed_seeds_if_asked

    ckpt = load_checkpoint(run, task=task)
    model = ckpt.model().eval()
    if check_architecture:
        from circuits import architecture

        try:
            architecture(model)
        except ValueError as err:
            raise ValueError(f"{run}: {err}") from None
    made = ckpt.spec.make_task()
    generator = torch.Generator().manual_seed(seed)
    batch = fixed_seeds_if_asked(made, made.sample(n, generator), ckpt.spec.train_config)
    drawn = None if pairs is None else make_pairs(pairs, model, made, batch, generator)
    return RunInputs(ckpt, model, made, batch, drawn, generator)


__all__ = ["PAIRS", "RunInputs", "load_run_inputs", "make_pairs"]
