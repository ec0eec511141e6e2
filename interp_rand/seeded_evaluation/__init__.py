"""Evaluation of seeded (randomized) models: every input against many seeds, and the paper's
metrics on the resulting success matrix.

:func:`success_matrix` runs a model on every (input ``i``, seed ``j``) pair and keeps, per pair,
whether the answer is fully right (bool) and a discrete output per answer position (in the
smallest integer type that holds them: ``uint8`` for colours); the output distribution only on
request (``keep_probs=True``): what the metrics read of it, the predictive variance and the
output-sampled baseline (``sample=generator``), is computed chunk by chunk while the model runs.
``seeds="all"`` runs every seed the task can enumerate (recall's 1,024). The metrics are plain
functions of that :class:`SeedRun`:

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

Two behavioural analyses of what seeded models output (not what their activations encode):
:func:`mixing_strategies` (recall: do different seeds store different key sets?,
:mod:`.mixing`) and :func:`rule_comparison` (colouring: the learned rule against the classical
compare-your-neighbours' routine, :mod:`.symmetry_rule`). :func:`logits_of` /
:func:`model_args` (:mod:`.forward`) are the one way to run a model, ours or a
``TransformerBridge``, on a batch.

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
from interp_rand.seeded_evaluation.forward import logits_of, model_args
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
from interp_rand.seeded_evaluation.mixing import MixingStrategies, deterministic_capacity, mixing_strategies
from interp_rand.seeded_evaluation.run import (
    BIT_LOSS_KINDS,
    SeedRun,
    expand_over_seeds,
    resolve_seeds,
    success_matrix,
)
from interp_rand.seeded_evaluation.symmetry_rule import RuleComparison, classical_coloring, rule_comparison

__all__ = [
    "BIT_LOSS_KINDS",
    "DEFAULT_N_GROUPS",
    "MixingStrategies",
    "RULES",
    "RuleComparison",
    "SeedRun",
    "average_success",
    "classical_coloring",
    "deterministic_capacity",
    "draw_seed_groups",
    "evaluate_seeded",
    "expand_over_seeds",
    "group_success",
    "las_vegas_exact",
    "logits_of",
    "majority_success",
    "mixing_strategies",
    "model_args",
    "per_input_success",
    "predictive_variance",
    "resolve_seeds",
    "rule_comparison",
    "sampled_success",
    "save_summary",
    "success_histogram",
    "success_matrix",
    "summarize",
    "worst_case_success",
]
