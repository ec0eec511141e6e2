"""Evaluation of seeded (randomized) models: every input against many seeds, and PAPER.md's
metrics on the resulting success matrix.

:func:`success_matrix` runs a model on every (input ``i``, seed ``j``) pair and keeps, per pair,
whether the answer is fully right, a discrete output per answer position, and the output
distribution. The metrics are plain functions of that :class:`SeedRun`:

===========================  =================================================================
:func:`per_input_success`    fraction of seeds whose argmax output is fully correct
:func:`average_success`      mean of per-input success over inputs
:func:`worst_case_success`   the ``fraction``-quantile (lower) of per-input success
:func:`majority_success`     success of the most frequent output over groups of ``k`` seeds
:func:`sampled_success`      the "-sampled" baseline: outputs drawn from the output distribution
:func:`predictive_variance`  variance over seeds of the output probabilities
:func:`success_histogram`    histogram of per-input success over ``[0, 1]``
:func:`summarize`            all of the above as a JSON-serialisable dict
===========================  =================================================================

Pure computation: no plotting. Everything is vectorised over inputs and seeds; the only loop
is over row chunks of the model's forward pass (memory).
"""

from interp_rand.seeded_evaluation.metrics import (
    average_success,
    majority_success,
    per_input_success,
    predictive_variance,
    sampled_success,
    save_summary,
    success_histogram,
    summarize,
    worst_case_success,
)
from interp_rand.seeded_evaluation.run import BIT_LOSS_KINDS, SeedRun, expand_over_seeds, success_matrix

__all__ = [
    "BIT_LOSS_KINDS",
    "SeedRun",
    "average_success",
    "expand_over_seeds",
    "majority_success",
    "per_input_success",
    "predictive_variance",
    "sampled_success",
    "save_summary",
    "success_histogram",
    "success_matrix",
    "summarize",
    "worst_case_success",
]
