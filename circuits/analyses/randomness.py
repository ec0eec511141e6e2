"""The randomness channel: which nodes carry seed information to the output, and where it enters.

Two measurements on any seeded model of the toolkit (the paper's ``A(x, r)``):

- :func:`randomness_usage`, the **randomness-usage score per node**: the node's activation is
  taken from a run with the *same input and another example's seed* (``seed-resample``
  patching, :class:`~circuits.interventions.ablation.Ablation`) while the rest of the model runs clean; the
  score is the mean total-variation distance between the clean and the patched output
  distributions at the answer positions. It lies in ``[0, 1]``: 0 means the node carries no
  seed information to the output (exactly 0 when the node's activation does not depend on the
  seed); the whole-model seed resample (the same input under the other seed) is the reference,
  and ``share = score / reference`` says how much of the model's seed use flows through the
  node. The fraction of answers whose decoded answer (argmax class, or bit pattern) changes
  (``flip``) is reported alongside.
- :func:`seed_entry`: for a grid of inputs x seeds, the variance of each residual-stream hook
  across seeds (same input) relative to the variance across inputs (same seed), per layer:
  the earliest hook whose seed fraction exceeds a threshold is where seed information enters
  the residual stream; the logits close the list, so an ERM model that cancels the seed
  downstream shows a high fraction early and ~0 at the logits. A ridge probe of the seed bits
  per hook (:func:`probes.linear_probe.probe_accuracy`) says where the seed is linearly
  decodable.

- :func:`success_usage`, **what the seed decides**: over inputs and pairs of distinct seeds,
  the probability that the model is right under one and wrong under the other (at most 0.5,
  reached when every input succeeds under exactly half the seeds). It measures use *for the
  task*: a network that merely passes its seed through, right or wrong by chance, is almost
  never right (a random-init recall model: 1/32), so its seed decides little; a model that
  ignores its seed scores 0; the TV score above measures sensitivity, not use.

    >>> usage = randomness_usage(model, batch, task.loss_kind)
    >>> usage.score["a1.0"], usage.reference
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import Ablation, replaced_nodes
from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from interp_rand.distances import total_variation
from interp_rand.losses import MAX_ENUMERATED_BITS, get_loss_kind  # noqa: F401 (MAX_ENUMERATED_BITS: kept importable here)
from interp_rand.model.capture import capture_into
from interp_rand.model.hook_names import residual_hooks, seed_offset
from interp_rand.seeded_evaluation.run import expand_over_seeds


# ---------------------------------------------------------------------- what the seed decides
@dataclass(frozen=True)
class SuccessUsage:
    """``decides``: the probability, over inputs and pairs of distinct seeds, that the model is
    right under one seed and wrong under the other (0: the seed decides nothing; at most
    about 0.5); ``success``: the mean success; ``inputs_seed_dependent``: the share of inputs
    right under some seeds and wrong under others."""

    decides: float
    success: float
    inputs_seed_dependent: float
    n_inputs: int
    n_seeds: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.no_grad()
def success_usage(model: Any, task: Any, batch: Any, seeds: Tensor) -> SuccessUsage:
    """What the seed decides (module docstring): every input of ``batch`` under every seed of
    ``seeds`` ``[S, d_seed]`` (:func:`interp_rand.seeded_evaluation.run.success_matrix`)."""
    from interp_rand.seeded_evaluation.run import success_matrix

    if len(seeds) < 2:
        raise ValueError("what the seed decides needs at least two seeds")
    right = success_matrix(model, task, batch, seeds, variance=False).success.float()  # [n, S]
    S = right.shape[1]
    p = right.mean(1)
    differ = 2 * p * (1 - p) * S / (S - 1)  # P(two distinct random seeds disagree), per input
    return SuccessUsage(float(differ.mean()), float(p.mean()), float(((p > 0) & (p < 1)).float().mean()),
                        right.shape[0], S)


# ---------------------------------------------------------------------- output distributions


def answer_distribution(logits: Tensor, answer_positions: Tensor, loss_kind: str) -> Tensor:
    """``[batch, n_answer, n_outcomes]`` the model's output distribution at each answer position,
    over the loss kind's answer ids (:meth:`~interp_rand.losses.LossKind.distribution`).

    ``bce`` answers are ``V`` independent bits (``logits [batch, pos, V]``): the distribution over
    all ``2**V`` bit patterns (most significant bit first). Class kinds: the softmax.
    """
    return get_loss_kind(loss_kind).distribution(logits[:, answer_positions])


def answers(logits: Tensor, answer_positions: Tensor, loss_kind: str) -> Tensor:
    """``[batch, n_answer]`` long: the decoded answer (argmax class, or the bits packed most
    significant first), :meth:`~interp_rand.losses.LossKind.predict`."""
    return get_loss_kind(loss_kind).predict(logits[:, answer_positions])


def seed_pairs(model: Any, task: Any, batch: Any, generator: torch.Generator) -> Any:
    """Clean/corrupted pairs that differ in the seed only, for finding the seed's circuit: the
    clean rows are ``batch`` with the model's own answers as targets, the corrupted rows the same
    inputs under fresh seeds (same targets). Any metric of the clean targets then measures how
    far a new seed moves the model off the answer it gave; for a model that ignores its seed
    the gap is 0 and there is no seed circuit to find."""
    from interp_rand.tasks import PairBatch

    if not hasattr(task, "sample_seeds") or batch.seeds is None:
        raise ValueError(f"seed pairs need a task with a seed channel; {getattr(task, 'name', task)!r} has none")
    with torch.no_grad():
        picked = run_model(model, batch)[:, batch.answer_positions]
    targets = batch.targets.clone()
    targets[:, batch.answer_positions] = get_loss_kind(task.loss_kind).decoding.as_targets(picked, targets)
    clean = dataclasses.replace(batch, targets=targets)
    corrupted = task.with_seeds(clean, task.sample_seeds(len(batch), generator))
    return PairBatch(clean=clean, corrupted=corrupted, changed=torch.full((len(batch),), -1, dtype=torch.long))


def _run_capturing(model: Any, batch: Any, hooks: list[str] | set[str]) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits of ``batch`` and ``{hook: activation}`` (detached) for ``hooks``."""
    cache: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_into(cache, hooks)):
        logits = run_model(model, batch)
    return logits, cache


# ---------------------------------------------------------------------- usage score


@dataclass(frozen=True)
class RandomnessUsage:
    """Seed-resample patching of every node.

    Attributes:
        score: ``{node name: mean TV}`` between clean and node-patched output distributions.
        flip: ``{node name: fraction of answers whose decoded answer changes}``.
        reference: mean TV of the whole-model seed resample (same input, the other seed).
        reference_flip: answer-change fraction of the whole-model seed resample.
        share: ``{node name: score / reference}`` (``None`` where the reference is 0).
        per_position: ``{node name: [score at task position p for p in positions]}`` (empty
            unless asked for).
        n_examples, n_resamples: examples per resample and resamples averaged.
    """

    score: dict[str, float]
    flip: dict[str, float]
    reference: float
    reference_flip: float
    share: dict[str, float | None]
    per_position: dict[str, list[float]]
    n_examples: int
    n_resamples: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.no_grad()
def randomness_usage(
    model: Any,
    batch: Any,
    loss_kind: str,
    *,
    n_resamples: int = 2,
    per_position: bool = False,
    sites: list[Node] | None = None,
    seed: int = 0,
    progress: bool = False,
) -> RandomnessUsage:
    """Randomness-usage score of every node (module docstring).

    Each node is patched with :func:`~circuits.interventions.ablation.replaced_nodes` from the writer values
    of :meth:`Ablation.source_values` (``seed-resample``), as every node ablation is.

    Args:
        batch: a :class:`~interp_rand.tasks.Batch` with seeds (``len >= 2``).
        loss_kind: the task's registered loss kind, which decodes the answers (``bce``: bit
            answers; ``ce`` and colouring: class answers).
        n_resamples: seed permutations averaged (``Ablation("seed-resample", seed + i)``).
        per_position: also patch each node at one task position at a time (labels
            ``name@p``, ``p`` a task position: a seed token, if any, is not counted).
        sites: nodes to patch (default: every writer of the model's :class:`ModelGraph`).
        progress: report the patched runs on stderr (:mod:`interp_rand.progress`).
    """
    from interp_rand.progress import bar

    if batch.seeds is None:
        raise ValueError("randomness_usage needs a batch with seeds (a model with a seed channel)")
    if n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples} must be >= 1")
    n_pos = batch.inputs.shape[1]
    graph = ModelGraph.of(model, n_pos)
    sites = graph.writers if sites is None else sites
    offset = graph.arch.seed_offset
    answer_pos = batch.answer_positions
    clean_logits = run_model(model, batch)
    clean_p = answer_distribution(clean_logits, answer_pos, loss_kind)
    clean_a = answers(clean_logits, answer_pos, loss_kind)

    def effect(logits: Tensor) -> tuple[float, float]:
        tv = total_variation(clean_p, answer_distribution(logits, answer_pos, loss_kind))
        flip = answers(logits, answer_pos, loss_kind) != clean_a
        return float(tv.mean()), float(flip.float().mean())

    patched = {node.name: node for node in sites}
    if per_position:
        patched |= {f"{node.name}@{p}": node.at(p + offset) for node in sites for p in range(n_pos)}
    totals = {label: [0.0, 0.0] for label in patched}
    ref = [0.0, 0.0]
    shown = bar(desc=f"seed-resample patching: {len(patched)} sites x {n_resamples} resamples",
                total=n_resamples * len(patched), enabled=progress)
    for r in range(n_resamples):
        ablation = Ablation("seed-resample", seed=seed + r)
        for i, v in enumerate(effect(run_model(model, ablation.source_batch(batch)))):
            ref[i] += v / n_resamples
        values = ablation.source_values(model, graph, batch)
        for label, node in patched.items():
            with replaced_nodes(model, [node], values):
                for i, v in enumerate(effect(run_model(model, batch))):
                    totals[label][i] += v / n_resamples
            shown.update()
    shown.close()
    names = [node.name for node in sites]
    score = {name: totals[name][0] for name in names}
    return RandomnessUsage(
        score=score,
        flip={name: totals[name][1] for name in names},
        reference=ref[0],
        reference_flip=ref[1],
        share={k: (v / ref[0] if ref[0] > 0 else None) for k, v in score.items()},
        per_position={name: [totals[f"{name}@{p}"][0] for p in range(n_pos)] for name in names} if per_position else {},
        n_examples=len(batch),
        n_resamples=n_resamples,
    )


# ---------------------------------------------------------------------- where seeds enter


residual_stream_hooks = residual_hooks  # the residual stream in forward order (the core's)


@dataclass(frozen=True)
class SeedEntry:
    """Seed vs input variance of the residual stream, per hook (forward order, then logits).

    Attributes:
        hooks: the hooks measured; the last is ``"logits"`` (answer positions only).
        seed_fraction: per hook ``seed_var / (seed_var + input_var)``, where ``seed_var`` is the
            variance across seeds for a fixed input (summed over features, averaged over inputs
            and positions) and ``input_var`` the variance across inputs for a fixed seed.
        seed_fraction_by_position: per hook, the same per task position.
        entry: the first hook whose seed fraction exceeds ``threshold`` (``None``: none does).
        threshold: the bound used for ``entry``.
        probe_accuracy: per hook, held-out accuracy of ridge probes of the seed bits (mean
            over bits and positions; continuous noise is probed as above/below 0.5); empty when
            not measured. ``probe_chance``: the majority-class rate of the same held-out rows.
        n_inputs, n_seeds: the grid.
    """

    hooks: list[str]
    seed_fraction: list[float]
    seed_fraction_by_position: list[list[float]]
    entry: str | None
    threshold: float
    probe_accuracy: list[float]
    probe_chance: float | None
    n_inputs: int
    n_seeds: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _seed_grid(task: Any, inputs: Any, seeds: Tensor) -> Any:
    """Every input under every seed: ``[n_inputs * n_seeds]`` rows, input-major (the core's
    grid, :func:`~interp_rand.seeded_evaluation.run.expand_over_seeds`), seeds as the task keeps them."""
    grid = expand_over_seeds(inputs, seeds)
    return task.with_seeds(grid, grid.seeds)


def _variance_split(act: Tensor) -> tuple[Tensor, Tensor]:
    """``act [X, S, P, d]`` -> per-position seed and input variances ``[P]`` each."""
    seed_var = act.var(1, unbiased=False).sum(-1).mean(0)  # across seeds, fixed input
    input_var = act.var(0, unbiased=False).sum(-1).mean(0)  # across inputs, fixed seed
    return seed_var, input_var


@torch.no_grad()
def seed_entry(
    model: Any,
    task: Any,
    inputs: Any,
    seeds: Tensor,
    *,
    threshold: float = 1e-3,
    probe_batch: Any = None,
    generator: torch.Generator | None = None,
) -> SeedEntry:
    """Where seed information enters the residual stream (module docstring).

    Args:
        inputs: a Batch of ``X`` inputs (its seeds are replaced); seeds: ``[S, *seed_shape]``.
        probe_batch: a batch with random seeds for the seed-bit probes (``None``: no probes).
        generator: the probes' train/test split (75/25).
    """
    if len(inputs) < 2 or len(seeds) < 2:
        raise ValueError("seed_entry needs at least 2 inputs and 2 seeds")
    hooks = residual_stream_hooks(model)
    grid = _seed_grid(task, inputs, seeds)
    logits, cache = _run_capturing(model, grid, hooks)
    offset = seed_offset(model)
    X, S = len(inputs), len(seeds)
    fractions, by_pos = [], []
    for h in hooks:
        act = cache[h][:, offset:].float()
        seed_var, input_var = _variance_split(act.reshape(X, S, *act.shape[1:]))
        fractions.append(float(seed_var.mean() / (seed_var.mean() + input_var.mean()).clamp_min(1e-30)))
        by_pos.append((seed_var / (seed_var + input_var).clamp_min(1e-30)).tolist())
    picked = logits[:, grid.answer_positions].float()
    seed_var, input_var = _variance_split(picked.reshape(X, S, *picked.shape[1:]))
    fractions.append(float(seed_var.mean() / (seed_var.mean() + input_var.mean()).clamp_min(1e-30)))
    by_pos.append((seed_var / (seed_var + input_var).clamp_min(1e-30)).tolist())
    names = hooks + ["logits"]
    entry = next((h for h, f in zip(names, fractions) if f > threshold), None)
    accuracy, chance = [], None
    if probe_batch is not None:
        accuracy, chance = seed_probe(model, probe_batch, hooks, generator or torch.Generator().manual_seed(0))
    return SeedEntry(names, fractions, by_pos, entry, threshold, accuracy, chance, X, S)


def seed_labels(seeds: Tensor) -> Tensor:
    """Seed bits as long labels (continuous noise: above 0.5), same shape as ``seeds``."""
    binary = bool(((seeds == 0) | (seeds == 1)).all())
    return seeds.long() if binary else (seeds > 0.5).long()


@torch.no_grad()
def seed_probe(model: Any, batch: Any, hooks: list[str], generator: torch.Generator) -> tuple[list[float], float]:
    """Held-out accuracy of ridge probes of the seed bits at each hook (mean over bits and
    positions), and the majority-class rate of the held-out rows (chance)."""
    from probes.linear_probe import probe_accuracy

    _, cache = _run_capturing(model, batch, hooks)
    offset = seed_offset(model)
    n = len(batch)
    train = torch.rand(n, generator=generator) < 0.75
    labels = seed_labels(batch.seeds)  # [n, d_seed] shared or [n, P, d_seed] per position
    test_labels = labels[~train].float()
    chance = float(torch.maximum(test_labels.mean(0), 1 - test_labels.mean(0)).mean())
    out = []
    for h in hooks:
        act = cache[h][:, offset:].float()  # [n, P, d]
        if labels.dim() == 2:
            acc = probe_accuracy(act, [(labels, 2)], train)[0][0]  # [P, d_seed]
        else:
            acc = torch.cat([probe_accuracy(act[:, p : p + 1], [(labels[:, p], 2)], train)[0][0]
                             for p in range(act.shape[1])])
        out.append(float(acc.mean()))
    return out, chance


__all__ = [
    "RandomnessUsage",
    "SeedEntry",
    "SuccessUsage",
    "success_usage",
    "answer_distribution",
    "answers",
    "randomness_usage",
    "residual_stream_hooks",
    "seed_entry",
    "seed_labels",
    "seed_pairs",
    "seed_probe",
    "total_variation",
]
