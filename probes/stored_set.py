"""The stored-set map of an associative-recall model (the paper's task 1).

Under a memory limit a recall model cannot store every pair; a randomized model can let the
seed decide *which* pairs it stores, so that every pair is stored under some seeds. For fixed
key/value inputs, :func:`stored_set_map` queries every key position under every one of the
``2**seed_bits`` seeds (all at once, in chunks) and records whether the model recalls the
value (all bits right): ``stored [n_inputs, n_seeds, N]``. :func:`stored_set_stats` turns such
a matrix into

- per-position coverage (fraction of seeds, and inputs, under which the position is stored);
- the distribution of stored-set sizes;
- its distance from an ideal uniform random subset of the same mean size: the total variation
  between the normalised coverage profile and the uniform one, and the mean absolute gap
  between observed pairwise co-storage and the independent-uniform prediction ``c**2``;
- seed dependence: the fraction of (input, position) cells whose storage changes with the seed
  (0 for a model that ignores the seed), and per-input worst-position coverage (the worst-case
  recall rate over that input's keys, which randomization raises);
- which seed bits decide: per bit and position, storage rate with the bit on minus off.

    >>> stats = stored_set_map(model, task, n_inputs=16, generator=torch.Generator().manual_seed(0))
    >>> stats.coverage, stats.coverage_tv

It applies to the tasks that declare the ``KEY_VALUE_RECALL`` capability (:func:`applies_to`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp_rand.tasks.base import KEY_VALUE_RECALL, has_capability, require_capability
from interp_rand.distances import total_variation
from interp_rand.losses import get_loss_kind
from probes.activations import logits_of

# The tasks this analysis fits: those whose task declares this capability (recall).
NEEDS = KEY_VALUE_RECALL


def applies_to(task: Any) -> bool:
    """Does the stored-set map fit ``task``: key/value pairs with a query and enumerable seeds
    (the task declares :data:`~interp_rand.tasks.base.KEY_VALUE_RECALL`)?"""
    return has_capability(task, NEEDS)


@dataclass(frozen=True)
class StoredSetStats:
    """Summary of a stored-set matrix ``stored [n_inputs, n_seeds, N]`` (module docstring).

    Attributes:
        coverage: ``[N]`` per key position, the fraction of (input, seed) storing it.
        mean_size: mean stored-set size; ``size_histogram``: ``[N + 1]`` fraction of (input,
            seed) with each size 0..N.
        coverage_tv: TV between ``coverage / sum`` and uniform ``1/N`` (0 = every position as
            likely stored; ``1 - 1/N`` at most).
        costorage_gap: mean over position pairs ``p < q`` of ``|P(p and q stored) - c**2|``,
            ``c = mean_size / N`` (0 for independent uniform storage).
        seed_dependent: fraction of (input, position) cells stored under some seeds but not all.
        worst_position_coverage: mean over inputs of the smallest per-position coverage across
            seeds (0 when some key of most inputs is never stored).
        bit_effect: ``[n_bits, N]`` storage rate with seed bit ``j`` = 1 minus with it = 0 (empty
            when the seeds are not given).
        map: ``[n_seeds, N]`` storage rate over inputs, seeds in enumeration order.
        example_input: the input with the most seed-dependent positions; example_map: its
            ``[n_seeds, N]`` 0/1 stored sets (which seeds store which keys).
        n_inputs, n_seeds, n_positions: the matrix's shape.
    """

    coverage: list[float]
    mean_size: float
    size_histogram: list[float]
    coverage_tv: float
    costorage_gap: float
    seed_dependent: float
    worst_position_coverage: float
    bit_effect: list[list[float]]
    map: list[list[float]]
    example_input: int
    example_map: list[list[int]]
    n_inputs: int
    n_seeds: int
    n_positions: int

    def to_dict(self, include_map: bool = True) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not include_map:
            out.pop("map")
            out.pop("example_map")
        return out


def _round(t: Tensor, digits: int = 4) -> list:
    return t.double().mul(10**digits).round().div(10**digits).tolist()


def stored_set_stats(stored: Tensor, seeds: Tensor | None = None) -> StoredSetStats:
    """Statistics of ``stored: [n_inputs, n_seeds, N]`` bool (module docstring).

    ``seeds: [n_seeds, n_bits]`` 0/1, the seeds of the rows, for ``bit_effect``.
    """
    if stored.dim() == 2:
        stored = stored[None]
    if stored.dim() != 3 or stored.shape[1] < 1 or stored.shape[2] < 2:
        raise ValueError(f"stored must be [n_inputs, n_seeds, N >= 2]; got {tuple(stored.shape)}")
    s = stored.double()
    n_inputs, n_seeds, N = s.shape
    coverage = s.mean((0, 1))  # [N]
    sizes = s.sum(-1).long()  # [inputs, seeds]
    mean_size = float(sizes.double().mean())
    histogram = torch.bincount(sizes.flatten(), minlength=N + 1).double() / sizes.numel()
    total = coverage.sum()
    profile = coverage / total if total > 0 else torch.full_like(coverage, 1.0 / N)
    coverage_tv = float(total_variation(profile, 1.0 / N))
    joint = torch.einsum("isp,isq->pq", s, s) / (n_inputs * n_seeds)  # [N, N]
    upper = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
    c = mean_size / N
    costorage_gap = float((joint[upper] - c * c).abs().mean())
    per_cell = s.mean(1)  # [inputs, N] coverage across seeds per input and position
    seed_dependent = float(((per_cell > 0) & (per_cell < 1)).double().mean())
    worst = float(per_cell.min(-1).values.mean())
    example = int(((per_cell > 0) & (per_cell < 1)).sum(-1).argmax())
    bit_effect: list[list[float]] = []
    if seeds is not None:
        if seeds.shape[0] != n_seeds:
            raise ValueError(f"seeds must have one row per seed ({n_seeds}); got {tuple(seeds.shape)}")
        on = seeds.double().T  # [bits, seeds]
        rate = s.mean(0)  # [seeds, N]
        with_on = (on @ rate) / on.sum(1, keepdim=True).clamp_min(1)
        with_off = ((1 - on) @ rate) / (1 - on).sum(1, keepdim=True).clamp_min(1)
        bit_effect = _round(with_on - with_off)
    return StoredSetStats(
        coverage=_round(coverage),
        mean_size=mean_size,
        size_histogram=_round(histogram),
        coverage_tv=coverage_tv,
        costorage_gap=costorage_gap,
        seed_dependent=seed_dependent,
        worst_position_coverage=worst,
        bit_effect=bit_effect,
        map=_round(s.mean(0), 3),
        example_input=example,
        example_map=stored[example].int().tolist(),
        n_inputs=n_inputs,
        n_seeds=n_seeds,
        n_positions=N,
    )


@torch.no_grad()
def stored_matrix(model: Any, task: Any, key_order: Tensor, values: Tensor, seeds: Tensor,
                  chunk: int = 8192) -> Tensor:
    """``[n_inputs, n_seeds, N]`` bool: does ``model`` recall the value at key position ``p``
    of input ``i`` under seed ``s`` (all value bits right)?

    Args:
        key_order: ``[n_inputs, N]``; values: ``[n_inputs, N, value_bits]`` (as
            ``RecallTask.build``); seeds: ``[n_seeds, seed_bits]``.
    """
    n_inputs, N = key_order.shape
    n_seeds = len(seeds)
    # one row per (input, seed, queried position), input-major then seed then position
    i = torch.arange(n_inputs).repeat_interleave(n_seeds * N)
    s = torch.arange(n_seeds).repeat_interleave(N).repeat(n_inputs)
    p = torch.arange(N).repeat(n_inputs * n_seeds)
    correct = torch.empty(len(i), dtype=torch.bool)
    for start in range(0, len(i), chunk):
        rows = slice(start, start + chunk)
        correct[rows] = recalled(model, task, key_order[i[rows]], values[i[rows]], p[rows], seeds[s[rows]])
    return correct.view(n_inputs, n_seeds, N)


@torch.no_grad()
def recalled(model: Any, task: Any, key_order: Tensor, values: Tensor, query: Tensor, seeds: Tensor | None) -> Tensor:
    """``[rows]`` bool: does ``model`` give every value bit of key position ``query[r]`` right
    when row ``r`` (``RecallTask.build``'s arguments, one seed per row) queries it?"""
    batch = task.build(key_order, values, query, seeds)
    logits = logits_of(model, batch)[:, key_order.shape[1]]  # [rows, value_bits] at the query
    target = values[torch.arange(len(query)), query]
    return get_loss_kind(task.loss_kind).decoding.correct(logits, target)


def stored_set_map(model: Any, task: Any, n_inputs: int, generator: torch.Generator,
                   seeds: Tensor | None = None) -> tuple[StoredSetStats, Tensor]:
    """Sample ``n_inputs`` key/value inputs, query every position under every seed
    (``task.all_seeds()`` unless ``seeds`` are given): the stats and ``stored``."""
    require_capability(task, NEEDS, "the stored-set map")
    batch = task.sample(n_inputs, generator)
    seeds = task.all_seeds() if seeds is None else seeds
    stored = stored_matrix(model, task, batch.metadata["key_order"], batch.metadata["values"], seeds)
    return stored_set_stats(stored, seeds), stored


__all__ = ["NEEDS", "StoredSetStats", "applies_to", "stored_matrix", "stored_set_map", "stored_set_stats"]
