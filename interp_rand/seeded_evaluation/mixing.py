"""Recall, per seed: does a randomized model mix deterministic strategies? (the paper's task 1)

The mixing-strategies picture: under a memory limit a deterministic model stores some fixed
set of about ``C`` keys (its capacity); a randomized model can store about as many keys under
*each* seed, but *different* keys under different seeds, so that the union over seeds covers
every key. From a stored-set matrix ``stored [n_inputs, n_seeds, N]``
(e.g. :func:`probes.stored_set.stored_matrix`), :func:`mixing_strategies` measures

- the stored-set size per seed (mean, spread, histogram) against the deterministic capacity:
  the mean stored-set size of a deterministic model on the *same task size* (``capacity``,
  e.g. the ERM or fixed-seed twin's), or, when none is given, the stated estimate
  ``max stored-set size over seeds`` (per input, averaged over inputs);
- how different the sets of two seeds are: the mean Jaccard index between the stored sets of
  two distinct seeds of the same input (1 = the same set under every seed), against a
  control that keeps every set's size but draws its positions uniformly (the Jaccard of
  independent random sets of those sizes);
- the coverage of the union: per input, the fraction of key positions stored under at least
  one seed.

``set_diversity = (1 - mean_jaccard) / (1 - jaccard_control)`` puts the Jaccard on the scale
the set sizes allow (0: the same set under every seed, as a deterministic model; 1: as
different as random sets of those sizes; near-full sets cannot differ much, so a fixed Jaccard
bound would not do). ``mixes`` is the verdict: sizes per seed at least ``size_tolerance`` of
the capacity *and* a diversity of at least ``diversity_bound``.

    >>> stats = mixing_strategies(stored, capacity=erm_mean_size, generator=g)
    >>> stats.size_ratio, stats.set_diversity, stats.union_coverage, stats.mixes
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

@dataclass(frozen=True)
class MixingStrategies:
    """Per-seed stored sets against the deterministic capacity (module docstring).

    Attributes:
        mean_size: mean stored-set size over (input, seed); size_std: its standard deviation;
            size_histogram: ``[N + 1]`` fraction of (input, seed) with each size.
        max_size_over_seeds: per input the largest stored set over seeds, averaged over inputs.
        capacity: the deterministic capacity compared with; capacity_source: where it comes
            from: ``"given"`` (or a deterministic run's name) or ``"max over seeds"`` (the estimate).
        size_ratio: ``mean_size / capacity`` (``None`` when the capacity is 0).
        mean_jaccard: mean Jaccard index of the stored sets of two distinct seeds of the same
            input (two empty sets count 1); jaccard_control: the same for sets of the same sizes
            with uniformly drawn positions.
        set_diversity: ``(1 - mean_jaccard) / (1 - jaccard_control)`` (``None`` when the
            control is 1: sets of those sizes cannot differ).
        union_coverage: mean over inputs of the fraction of positions stored under some seed.
        never_stored: mean over inputs of the fraction of positions stored under no seed.
        mixes: ``size_ratio >= size_tolerance`` and ``set_diversity >= diversity_bound``.
        size_tolerance, diversity_bound: the thresholds of ``mixes``.
        n_inputs, n_seeds, n_positions: the matrix's shape.
    """

    mean_size: float
    size_std: float
    size_histogram: list[float]
    max_size_over_seeds: float
    capacity: float
    capacity_source: str
    size_ratio: float | None
    mean_jaccard: float
    jaccard_control: float
    set_diversity: float | None
    union_coverage: float
    never_stored: float
    mixes: bool
    size_tolerance: float
    diversity_bound: float
    n_inputs: int
    n_seeds: int
    n_positions: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def against(self, capacity: float, source: str = "given") -> MixingStrategies:
        """The same statistics judged against another capacity (e.g. the ``--compare`` model's)."""
        ratio, mixes = _verdict(self.mean_size, capacity, self.set_diversity, self.size_tolerance, self.diversity_bound)
        return dataclasses.replace(self, capacity=float(capacity), capacity_source=source, size_ratio=ratio, mixes=mixes)


def _verdict(mean_size: float, capacity: float, diversity: float | None, tolerance: float,
             bound: float) -> tuple[float | None, bool]:
    ratio = mean_size / capacity if capacity > 0 else None
    return ratio, bool(ratio is not None and ratio >= tolerance and diversity is not None and diversity >= bound)


def pairwise_jaccard(stored: Tensor) -> Tensor:
    """``stored [n_inputs, n_seeds, N]`` bool -> ``[n_inputs]`` mean Jaccard index over the
    ordered pairs of distinct seeds of each input (two empty sets count 1)."""
    n_seeds = stored.shape[1]
    if n_seeds < 2:
        raise ValueError("the Jaccard index between seeds needs at least 2 seeds")
    off_diagonal = ~torch.eye(n_seeds, dtype=torch.bool)
    out = []
    for one in stored.float():  # one input at a time: [seeds, seeds] is 1024 x 1024 for recall
        inter = one @ one.T  # [seeds, seeds]
        size = one.sum(-1)
        union = size[:, None] + size[None, :] - inter
        jac = torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(inter))
        out.append(jac[off_diagonal].double().mean())
    return torch.stack(out)


def _random_positions(stored: Tensor, generator: torch.Generator) -> Tensor:
    """Every stored set moved to uniformly drawn positions, its size kept."""
    scores = torch.rand(stored.shape, generator=generator)
    ranks = scores.argsort(-1).argsort(-1)  # a uniform permutation of 0..N-1 per (input, seed)
    return ranks < stored.sum(-1, keepdim=True)


def mixing_strategies(
    stored: Tensor,
    capacity: float | None = None,
    *,
    generator: torch.Generator | None = None,
    size_tolerance: float = 0.8,
    diversity_bound: float = 0.5,
) -> MixingStrategies:
    """Per-seed stored sets of ``stored [n_inputs, n_seeds >= 2, N]`` (module docstring).

    Args:
        capacity: the deterministic model's mean stored-set size on the same task size;
            ``None``: the estimate ``max stored-set size over seeds``.
        generator: draws the uniform-position control (default seed 0).
    """
    if stored.dim() != 3 or stored.shape[1] < 2 or stored.shape[2] < 2:
        raise ValueError(f"stored must be [n_inputs, n_seeds >= 2, N >= 2]; got {tuple(stored.shape)}")
    if capacity is not None and capacity < 0:
        raise ValueError(f"capacity={capacity} must be >= 0")
    stored = stored.bool()
    n_inputs, n_seeds, N = stored.shape
    sizes = stored.sum(-1).double()  # [inputs, seeds]
    mean_size = float(sizes.mean())
    max_size = float(sizes.max(1).values.mean())
    source = "given" if capacity is not None else "max over seeds"
    capacity = max_size if capacity is None else float(capacity)
    jaccard = float(pairwise_jaccard(stored).mean())
    generator = generator or torch.Generator().manual_seed(0)
    control = float(pairwise_jaccard(_random_positions(stored, generator)).mean())
    union = stored.any(1).double().mean(-1)  # [inputs]
    diversity = (1 - jaccard) / (1 - control) if control < 1 - 1e-12 else None
    ratio, mixes = _verdict(mean_size, capacity, diversity, size_tolerance, diversity_bound)
    histogram = torch.bincount(sizes.long().flatten(), minlength=N + 1).double() / sizes.numel()
    return MixingStrategies(
        mean_size=mean_size,
        size_std=float(sizes.std(unbiased=False)),
        size_histogram=histogram.mul(1e4).round().div(1e4).tolist(),
        max_size_over_seeds=max_size,
        capacity=capacity,
        capacity_source=source,
        size_ratio=ratio,
        mean_jaccard=jaccard,
        jaccard_control=control,
        set_diversity=diversity,
        union_coverage=float(union.mean()),
        never_stored=float(1 - union.mean()),
        mixes=mixes,
        size_tolerance=size_tolerance,
        diversity_bound=diversity_bound,
        n_inputs=n_inputs,
        n_seeds=n_seeds,
        n_positions=N,
    )


def deterministic_capacity(stored: Tensor) -> float:
    """The capacity a deterministic model shows in ``stored [n_inputs, n_seeds, N]``: its mean
    stored-set size (for a fixed-seed model pass its one seed, ``n_seeds = 1``)."""
    if stored.dim() != 3:
        raise ValueError(f"stored must be [n_inputs, n_seeds, N]; got {tuple(stored.shape)}")
    return float(stored.double().sum(-1).mean())


__all__ = ["MixingStrategies", "deterministic_capacity", "mixing_strategies", "pairwise_jaccard"]
