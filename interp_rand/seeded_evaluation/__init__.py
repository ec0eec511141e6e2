"""Evaluation of seeded (randomized) models: every input against many seeds, and the paper's
metrics on the resulting success matrix.

:func:`success_matrix` runs a model on every (input ``i``, seed ``j``) pair and keeps, per pair,
whether the answer is fully right, a discrete output per answer position, and the output
distribution; ``seeds="all"`` runs every seed the task can enumerate (recall's 1,024). The
metrics are plain functions of that :class:`SeedRun`:

===========================  =================================================================
:func:`per_input_success`    fraction of seeds whose argmax output is fully correct
:func:`average_success`      mean of per-input success over inputs
:func:`worst_case_success`   the ``fraction``-quantile (lower) of per-input success
:func:`majority_success`     majority-k: success of ``k`` seeds' outputs combined by a rule
                             (whole-output majority, per-vertex vote, Las Vegas), over many
                             random groups of ``k`` seeds (:mod:`.amplification`)
:func:`las_vegas_exact`      verify-and-retry over ``k`` seeds, counted exactly
:func:`sampled_success`      the "-sampled" baseline: outputs drawn from the output distribution
:func:`predictive_variance`  variance over seeds of the output probabilities
:func:`success_histogram`    histogram of per-input success over ``[0, 1]``
:func:`summarize`            all of the above as a JSON-serialisable dict
===========================  =================================================================

Pure computation: no plotting. Everything is vectorised over inputs and seeds; the only loop
is over chunks of rows (the model's forward pass) and of inputs (majority-k), for memory.
"""

from interp_rand.seeded_evaluation.amplification import (
    DEFAULT_N_GROUPS,
    RULES,
    draw_seed_groups,
    group_success,
    las_vegas_exact,
    majority_success,
)
from interp_rand.seeded_evaluation.metrics import (
    average_success,
    per_input_success,
    predictive_variance,
    sampled_success,
    save_summary,
    success_histogram,
    summarize,
    worst_case_success,
)
from interp_rand.seeded_evaluation.paper_metrics import evaluate_seeded
from interp_rand.seeded_evaluation.run import (
    BIT_LOSS_KINDS,
    SeedRun,
    expand_over_seeds,
    resolve_seeds,
    success_matrix,
)

__all__ = [
    "BIT_LOSS_KINDS",
    "DEFAULT_N_GROUPS",
    "RULES",
    "SeedRun",
    "average_success",
    "draw_seed_groups",
    "evaluate_seeded",
    "expand_over_seeds",
    "group_success",
    "las_vegas_exact",
    "majority_success",
    "per_input_success",
    "predictive_variance",
    "resolve_seeds",
    "sampled_success",
    "save_summary",
    "success_histogram",
    "success_matrix",
    "summarize",
    "worst_case_success",
]
