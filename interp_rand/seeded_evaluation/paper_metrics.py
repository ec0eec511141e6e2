"""The paper's metrics of a seeded model in one call: :func:`evaluate_seeded` (used by
``interp-rand eval --seeds`` and by the experiment runner, :mod:`interp_rand.reproduce`)."""

from __future__ import annotations

from typing import Any

import torch

from interp_rand.seeded_evaluation.metrics import summarize
from interp_rand.seeded_evaluation.run import success_matrix


def evaluate_seeded(task, model, batch, n_seeds: int | str, generator: torch.Generator, *,
                    fixed: bool = False) -> dict[str, Any]:
    """The paper's metrics of ``model`` on ``batch`` under ``n_seeds`` seeds drawn with
    ``generator``, or under every seed with ``n_seeds="all"`` (recall's 1,024: exact over the
    seed distribution); a fixed-seed model (``fixed``) is run on its one seed r0, and its
    sampled baseline still draws as many samples per input."""
    if n_seeds == "all":
        seeds = task.all_seeds()
    elif isinstance(n_seeds, int) and not isinstance(n_seeds, bool) and n_seeds >= 1:
        seeds = task.sample_seeds(n_seeds, generator)
    else:
        raise ValueError(f"n_seeds={n_seeds!r} must be an integer >= 1 or 'all'")
    n_samples = len(seeds)
    if fixed:
        seeds = task.fixed_seed()[None]
    # the sampled baseline is drawn from generator while the model runs (no probabilities kept),
    # judged by the kind's own judge (colouring: any valid colouring) or its targets; then the
    # majority groups from the same generator, as when summarize drew both
    run = success_matrix(model, task, batch, seeds, sample=generator, n_samples=n_samples)
    return summarize(run, majority_ks=(5, 30), generator=generator)


__all__ = ["evaluate_seeded"]
