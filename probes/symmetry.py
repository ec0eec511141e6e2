"""Symmetry breaking in distributed colouring (the paper's task 2): does a vertex's colour depend
on its own and its neighbours' noise?

On a cycle every vertex looks alike up to its id, so a deterministic local algorithm must
colour from ids alone (and fails on some cycles); a randomized one can compare its noise with
its neighbours' (e.g. "a local maximum of the noise takes colour 2"). Two measurements over
sampled cycles and noise:

- :func:`colour_noise_information`: the mutual information (bits) between a vertex's colour and
  the rank of its noise among itself and its two neighbours (0 lowest .. 2 highest), against a
  shuffled control (the same colours paired with another row's ranks: the estimator's bias);
  also given the vertex id (``I(colour; rank | id)``), so colours fixed by id do not count.
- :func:`noise_resample_effect`: resample the noise of the vertex at ring distance ``d`` from
  ``v`` (``d = 0``: ``v`` itself, ``1``: a neighbour, ...) and count how often ``v``'s argmax
  colour changes. An ``L``-block model under the cycle mask sees only distance ``<= L``:
  beyond that the effect is exactly 0 (the receptive-field check).

    >>> info = colour_noise_information(model, task, batch)
    >>> effect = noise_resample_effect(model, task, batch, generator)
    >>> effect.change_rate   # [d = 0, 1, 2, ...]
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp_rand.distances import total_variation
from interp_rand.seeded_evaluation.forward import logits_of
from interp_rand.tasks.coloring import neighbours, noise_rank


def mutual_information(a: Tensor, b: Tensor) -> float:
    """Plug-in mutual information in bits between two long label vectors of equal length."""
    a, b = a.flatten().long(), b.flatten().long()
    na, nb = int(a.max()) + 1, int(b.max()) + 1
    joint = torch.bincount(a * nb + b, minlength=na * nb).double().view(na, nb)
    joint /= joint.sum()
    pa, pb = joint.sum(1, keepdim=True), joint.sum(0, keepdim=True)
    nz = joint > 0
    return float((joint[nz] * (joint[nz] / (pa @ pb)[nz]).log2()).sum())


def conditional_mutual_information(a: Tensor, b: Tensor, given: Tensor) -> float:
    """``I(a; b | given)`` in bits: the mutual information within each value of ``given``,
    weighted by its frequency."""
    a, b, given = a.flatten(), b.flatten(), given.flatten()
    total = 0.0
    for g in torch.unique(given):
        rows = given == g
        total += float(rows.double().mean()) * mutual_information(a[rows], b[rows])
    return total


def entropy(a: Tensor) -> float:
    """Entropy in bits of a long label vector."""
    p = torch.bincount(a.flatten().long()).double()
    p = p[p > 0] / p.sum()
    return float(-(p * p.log2()).sum())


@dataclass(frozen=True)
class ColourNoiseInformation:
    """Mutual information (bits) between colours and noise ranks (module docstring).

    Attributes:
        mi: ``I(colour; rank)``; mi_shuffled: the same with ranks of another row (control).
        mi_given_id: ``I(colour; rank | vertex id)``.
        colour_entropy: ``H(colour)`` (the most ``mi`` can be).
        rank_accuracy: accuracy of predicting the colour from the rank alone (the most frequent
            colour per rank); majority_accuracy: the most frequent colour overall (control).
        colour_given_rank: ``[3, n_colors]`` P(colour | rank).
        n_vertices_seen: vertex samples used.
    """

    mi: float
    mi_shuffled: float
    mi_given_id: float
    colour_entropy: float
    rank_accuracy: float
    majority_accuracy: float
    colour_given_rank: list[list[float]]
    n_vertices_seen: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.no_grad()
def colour_noise_information(model: Any, task: Any, batch: Any, generator: torch.Generator | None = None) -> ColourNoiseInformation:
    """How much a vertex's colour tells about its noise rank among its neighbours."""
    colour = logits_of(model, batch).argmax(-1)  # [batch, N]
    rank = noise_rank(batch)
    ids = torch.arange(colour.shape[1]).expand_as(colour)
    generator = generator or torch.Generator().manual_seed(0)
    shuffled = rank[torch.randperm(len(rank), generator=generator)]
    n_colors = int(task.n_colors)
    joint = torch.zeros(3, n_colors, dtype=torch.float64)
    joint.index_put_((rank.flatten(), colour.flatten()), torch.ones(colour.numel(), dtype=torch.float64), accumulate=True)
    given = joint / joint.sum(1, keepdim=True).clamp_min(1)
    counts = torch.bincount(colour.flatten(), minlength=n_colors).double()
    return ColourNoiseInformation(
        mi=mutual_information(colour, rank),
        mi_shuffled=mutual_information(colour, shuffled),
        mi_given_id=conditional_mutual_information(colour, rank, ids),
        colour_entropy=entropy(colour),
        rank_accuracy=float(joint.max(1).values.sum() / joint.sum()),
        majority_accuracy=float(counts.max() / counts.sum()),
        colour_given_rank=given.mul(1e4).round().div(1e4).tolist(),
        n_vertices_seen=colour.numel(),
    )


@dataclass(frozen=True)
class NoiseResampleEffect:
    """Effect on a vertex's colour of resampling one vertex's noise, by ring distance.

    Attributes:
        distance: ``[0, 1, ..., N // 2]``.
        change_rate: per distance, the fraction of (example, vertex) whose argmax colour changes
            when the noise of one vertex at that distance is redrawn.
        tv: per distance, the mean total variation of the vertex's colour distribution.
        receptive_field: the model's number of blocks (distances beyond it cannot matter).
        n_examples: examples used (every vertex is resampled once per example).
    """

    distance: list[int]
    change_rate: list[float]
    tv: list[float]
    receptive_field: int
    n_examples: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.no_grad()
def noise_resample_effect(model: Any, task: Any, batch: Any, generator: torch.Generator) -> NoiseResampleEffect:
    """Redraw the noise of each vertex ``u`` in turn (fresh ``Uniform[0, 1)``) and record how
    every vertex's colour changes, grouped by the ring distance between the two."""
    N = int(task.n_vertices)
    clean = logits_of(model, batch).float()
    clean_p, clean_c = clean.softmax(-1), clean.argmax(-1)
    ring = batch.metadata["ring_position"]  # [batch, N] ring position of each vertex id
    gap = (ring[:, :, None] - ring[:, None, :]).abs()
    dist = torch.minimum(gap, N - gap)  # [batch, u, v]
    n_d = N // 2 + 1
    changed = torch.zeros(n_d, dtype=torch.float64)
    tv = torch.zeros(n_d, dtype=torch.float64)
    count = torch.zeros(n_d, dtype=torch.float64)
    for u in range(N):
        seeds = batch.seeds.clone()
        seeds[:, u] = task.sample_seeds(len(batch), generator)[:, u]
        logits = logits_of(model, task.with_seeds(batch, seeds)).float()
        flip = (logits.argmax(-1) != clean_c).double()  # [batch, v]
        shift = total_variation(logits.softmax(-1), clean_p).double()
        d = dist[:, u]  # [batch, v]
        changed.index_add_(0, d.flatten(), flip.flatten())
        tv.index_add_(0, d.flatten(), shift.flatten())
        count.index_add_(0, d.flatten(), torch.ones(d.numel(), dtype=torch.float64))
    count = count.clamp_min(1)
    return NoiseResampleEffect(
        distance=list(range(n_d)),
        change_rate=(changed / count).tolist(),
        tv=(tv / count).tolist(),
        receptive_field=int(model.cfg.n_layers),
        n_examples=len(batch),
    )


def bias_bound(n_samples: int, n_a: int, n_b: int) -> float:
    """First-order bias (bits) of the plug-in MI of independent variables:
    ``(n_a - 1)(n_b - 1) / (2 n ln 2)``."""
    return (n_a - 1) * (n_b - 1) / (2 * n_samples * math.log(2))


__all__ = [
    "ColourNoiseInformation",
    "NoiseResampleEffect",
    "bias_bound",
    "colour_noise_information",
    "conditional_mutual_information",
    "entropy",
    "mutual_information",
    "neighbours",
    "noise_rank",
    "noise_resample_effect",
]
