"""The randomness channel over training: how much each node uses the seed, against a
random-initialised control, and (recall) the stored set under the memory limit beside the
worst-case success. Two analyses of :data:`~interp_rand.reports.dynamics.view.DYNAMICS_ANALYSES`,
registered on import:

- ``seed_usage``: per node the randomness-usage score of
  :func:`circuits.analyses.randomness.randomness_usage` (seed-resample patching of the node: the
  mean total-variation distance it moves the output distribution at the answer positions), the
  same score on a random-initialised model of the same config
  (:func:`probes.controls.random_init_like`, measured once per replay and kept in
  ``view.cache``), and their difference. Keys ``seed/<node>``, ``seed_control/<node>``,
  ``seed_above_control/<node>`` (threshold 0: the step at which the node's seed use rises above
  what an untrained model shows by accident), and the whole-model seed resample (the usage
  score's reference) as ``seed_model/usage``, ``seed_model/control``,
  ``seed_model/above_control``. The first node to cross is the key of
  ``seed_above_control/`` with the earliest crossing (:func:`first_node`), the seed channel's
  own node ``seed`` left out (patching it is the whole-model resample).
- ``stored_set`` (tasks with ``KEY_VALUE_RECALL``): the stored-set matrix of
  :func:`probes.stored_set.stored_matrix` on the view's first ``n_inputs`` key/value inputs
  under every seed (or ``n_seeds`` drawn once), summarised by
  :func:`interp_rand.seeded_evaluation.mixing.mixing_strategies`,
  :func:`~interp_rand.seeded_evaluation.mixing.pairwise_jaccard`,
  :func:`~interp_rand.seeded_evaluation.mixing.deterministic_capacity` and
  :func:`probes.stored_set.stored_set_stats` (``stored/...``), how much the stored sets changed
  since the previous checkpoint replayed (``stored/change_from_previous``), and the paper's
  average and worst-5% success on the view's batch
  (:func:`~interp_rand.seeded_evaluation.paper_metrics.evaluate_seeded`, ``success/...``), so the
  replay shows whether the stored set starts to vary with the seed (``stored/mixes`` crossing
  0.5) before or after the worst-case success rises (``success/worst_5pct`` crossing 0.1).

    >>> view = open_view("zoo:recall-Aq_R", n=256, seed=0)
    >>> DYNAMICS_ANALYSES.get("seed_usage")(view)["seed_above_control/a0.0"]
"""

from __future__ import annotations

import math
from typing import Any

import torch

from interp_rand.registry import Option
from interp_rand.reports.dynamics.view import DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView, Measures, Threshold
from interp_rand.tasks.base import KEY_VALUE_RECALL, require_capability

# the worst-5% success that counts as "risen" in the stored_set analysis's thresholds: the
# deterministic recall models sit at 0.00 beyond their capacity (docs/reproduction.md)
WORST_RISEN = 0.1
# mixing_strategies' verdict (1.0: sizes near the capacity and sets as diverse as the bound)
MIXES_AT = 0.5


def _require_seed_channel(view: CheckpointView, analysis: str) -> None:
    task = view.task
    if not hasattr(task, "sample_seeds") or view.batch.seeds is None:
        raise ValueError(f"{analysis} needs a task with a seed channel (recall, coloring); "
                         f"got {getattr(task, 'name', task)!r}")


def _control_scores(view: CheckpointView, n_resamples: int) -> tuple[dict[str, float], float]:
    """The random-init control's usage scores per node and its whole-model reference, measured
    once per replay (and per model config) and kept in ``view.cache``."""
    from circuits.analyses.randomness import randomness_usage
    from probes.controls import random_init_like

    key = f"seed_usage/control/{n_resamples}/{view.model.cfg!r}"
    if key not in view.cache:
        control = randomness_usage(random_init_like(view.model), view.batch, view.task.loss_kind,
                                   n_resamples=n_resamples, seed=view.seed)
        view.cache[key] = (dict(control.score), control.reference)
    return view.cache[key]


@DYNAMICS_ANALYSES.add(
    "seed_usage",
    description="seed use per node (seed-resample patching, mean TV of the answers) against a random-init control",
    options=(Option("n_resamples", "int", 2, "seed permutations averaged per node", minimum=1),),
)
def seed_usage(view: CheckpointView, n_resamples: int = 2) -> Measures:
    """``seed/<node>``, ``seed_control/<node>``, ``seed_above_control/<node>`` and
    ``seed_model/{usage,control,above_control}`` (module docstring)."""
    from circuits.analyses.randomness import randomness_usage

    _require_seed_channel(view, "seed_usage")
    usage = randomness_usage(view.model, view.batch, view.task.loss_kind, n_resamples=n_resamples, seed=view.seed)
    control, control_reference = _control_scores(view, n_resamples)
    out: Measures = {}
    for node, value in usage.score.items():
        out[f"seed/{node}"] = value
        out[f"seed_control/{node}"] = control[node]
        out[f"seed_above_control/{node}"] = value - control[node]
    out["seed_model/usage"] = usage.reference
    out["seed_model/control"] = control_reference
    out["seed_model/above_control"] = usage.reference - control_reference
    return out


THRESHOLDS.register("seed_usage", (Threshold("seed_above_control/", 0.0, strict=True),
                                   Threshold("seed_model/above_control", 0.0, strict=True)))


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


@torch.no_grad()
def _set_change(before: torch.Tensor, after: torch.Tensor) -> float:
    """1 - the mean Jaccard index of the stored sets of the same (input, seed) in two stored
    matrices ``[n_inputs, n_seeds, N]`` (two empty sets count as the same)."""
    inter = (before & after).sum(-1).double()
    union = (before | after).sum(-1).double()
    jaccard = torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(union))
    return float(1 - jaccard.mean())


@DYNAMICS_ANALYSES.add(
    "stored_set",
    description="recall: the stored set per seed (Jaccard across seeds, capacity, coverage) beside the worst-5% success",
    options=(Option("n_inputs", "int", 16, "key/value inputs of the stored-set matrix (the view's first ones)",
                    minimum=1),
             Option("n_seeds", "int", 0, "seeds of the stored-set matrix (0: every seed)", minimum=0),
             Option("eval_seeds", "int", 0, "seeds per input of the success metrics (0: every seed)", minimum=0)),
)
def stored_set(view: CheckpointView, n_inputs: int = 16, n_seeds: int = 0, eval_seeds: int = 0) -> Measures:
    """``stored/...`` and ``success/{average,worst_5pct}`` (module docstring)."""
    from interp_rand.seeded_evaluation.mixing import deterministic_capacity, mixing_strategies, pairwise_jaccard
    from interp_rand.seeded_evaluation.paper_metrics import evaluate_seeded
    from probes.stored_set import stored_matrix, stored_set_stats

    require_capability(view.task, KEY_VALUE_RECALL, "the stored_set analysis")
    task, model = view.task, view.model
    n_inputs = min(n_inputs, len(view.batch))
    key_order = view.batch.metadata["key_order"][:n_inputs]
    values = view.batch.metadata["values"][:n_inputs]
    seeds = task.all_seeds() if n_seeds == 0 else task.sample_seeds(n_seeds, torch.Generator().manual_seed(view.seed))
    stored = stored_matrix(model, task, key_order, values, seeds)
    mixing = mixing_strategies(stored, generator=torch.Generator().manual_seed(view.seed))
    stats = stored_set_stats(stored)
    previous = view.cache.get("stored_set/previous")
    same_matrix = previous is not None and previous[1].shape == stored.shape and previous[0] < view.step
    view.cache["stored_set/previous"] = (view.step, stored)
    fixed = view.checkpoint is not None and view.checkpoint.spec.train_config.seed_source == "fixed"
    success = evaluate_seeded(task, model, view.batch, "all" if eval_seeds == 0 else eval_seeds,
                              torch.Generator().manual_seed(view.seed), fixed=fixed)
    return {
        "stored/mean_jaccard_across_seeds": float(pairwise_jaccard(stored).mean()),
        "stored/jaccard_control": mixing.jaccard_control,
        "stored/set_diversity": _nan(mixing.set_diversity),
        "stored/capacity": deterministic_capacity(stored),
        "stored/max_size_over_seeds": mixing.max_size_over_seeds,
        "stored/mixes": float(mixing.mixes),
        "stored/union_coverage": mixing.union_coverage,
        "stored/seed_dependent": stats.seed_dependent,
        "stored/worst_position_coverage": stats.worst_position_coverage,
        "stored/coverage_tv": stats.coverage_tv,
        "stored/change_from_previous": _set_change(previous[1], stored) if same_matrix else math.nan,
        "success/average": float(success["average"]),
        "success/worst_5pct": float(success["worst_5pct"]),
    }


THRESHOLDS.register("stored_set", (Threshold("stored/mixes", MIXES_AT), Threshold("success/worst_5pct", WORST_RISEN)))


# the seed channel's own node: patching it is the whole-model seed resample, so it uses the
# seed whenever anything does; the first *component* to use the seed is asked among the others
CHANNEL_NODES = ("seed",)


def first_node(crossing: dict[str, Any], prefix: str = "seed_above_control/",
               skip: tuple[str, ...] = CHANNEL_NODES) -> tuple[str, Any] | None:
    """``(node, where)`` of the earliest crossing among the keys starting with ``prefix`` in
    ``crossing`` (``{key: step or q, or None: never}``), nodes in ``skip`` (the seed channel
    itself) left out, ties in the keys' order; ``None`` when no node crosses."""
    found = [(where, i, key[len(prefix):]) for i, (key, where) in enumerate(crossing.items())
             if key.startswith(prefix) and where is not None and key[len(prefix):] not in skip]
    if not found:
        return None
    where, _, node = min(found)
    return node, where


__all__ = ["CHANNEL_NODES", "MIXES_AT", "WORST_RISEN", "first_node", "seed_usage", "stored_set"]
