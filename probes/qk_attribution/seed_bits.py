"""Which keys a recall head's query reads under which seed bits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp_rand.tasks.base import Batch
from probes.qk_attribution.attribution import QKAttribution


@dataclass(frozen=True)
class SeedBitReads:
    """Which keys a recall head's query reads under which seed bits.

    Attributes:
        layer, head, query: the head and query position of the attribution.
        on, off: ``[seed_bits, N]``: the mean attention weight (its absolute value for linear
            attention) the query puts on the pair holding key identity ``j``, over the examples
            whose seed bit ``i`` is 1 (``on``) or 0 (``off``); NaN where no example has that bit.
        n_on: ``[seed_bits]`` examples with each bit set.
        control: ``[seed_bits, N]`` the same ``on - off`` with the seeds shuffled across the
            examples (a fixed permutation): what sampling noise alone gives.
    """

    layer: int
    head: int
    query: int
    on: Tensor
    off: Tensor
    n_on: Tensor
    control: Tensor

    @property
    def difference(self) -> Tensor:
        """``[seed_bits, N]`` ``on - off``: how setting seed bit ``i`` moves the read of key ``j``."""
        return self.on - self.off

    def to_dict(self, digits: int = 4) -> dict[str, Any]:
        def r(t: Tensor) -> Any:
            return [[None if v != v else round(float(v), digits) for v in row] for row in t.tolist()]

        return {"layer": self.layer, "head": self.head, "query": self.query, "on": r(self.on), "off": r(self.off),
                "difference": r(self.difference), "control": r(self.control), "n_on": [int(v) for v in self.n_on]}


def reads_by_seed_bit(attr: QKAttribution, batch: Batch, task: Any, *, seed: int = 0) -> SeedBitReads:
    """For a task with :data:`~interp_rand.tasks.base.KEY_VALUE_RECALL` (metadata ``key_order``:
    the key identity of each pair, the pairs first in the task's positions), the attention of
    ``attr``'s query on each key *identity* (not position: the pairs are shuffled) split by each
    seed bit, on the ``batch`` the attribution was computed on, with a shuffled-seed control
    (``seed``: its permutation)."""
    from interp_rand.tasks.base import KEY_VALUE_RECALL, require_capability

    require_capability(task, KEY_VALUE_RECALL, "the seed-bit reads of a head")
    key_order = batch.metadata["key_order"].long()
    n, n_pairs = key_order.shape
    if attr.pattern.shape[0] != n:
        raise ValueError(f"the attribution has {attr.pattern.shape[0]} examples and the batch {n}: "
                         "give the batch it was computed on")
    offset = attr.pattern.shape[1] - len(task.position_names())  # a seed token, if any, first
    weights = attr.pattern[:, offset:offset + n_pairs].double()
    weights = weights if attr.softmax else weights.abs()
    by_key = torch.zeros(n, n_pairs, dtype=torch.float64).scatter_(1, key_order, weights)
    bits = batch.seeds.reshape(n, -1) > 0.5
    shuffled = bits[torch.randperm(n, generator=torch.Generator().manual_seed(seed))]
    on, off = _split_means(by_key, bits)
    control_on, control_off = _split_means(by_key, shuffled)
    return SeedBitReads(attr.layer, attr.head, attr.query, on, off, bits.sum(0), control_on - control_off)


def _split_means(values: Tensor, bits: Tensor) -> tuple[Tensor, Tensor]:
    """``[bits, N]`` means of ``values: [batch, N]`` over the rows with each bit set, and unset
    (NaN where there is none)."""
    def mean(rows: Tensor) -> Tensor:
        return values[rows].mean(0) if bool(rows.any()) else torch.full(values.shape[1:], float("nan"), dtype=values.dtype)

    return torch.stack([mean(b) for b in bits.T]), torch.stack([mean(~b) for b in bits.T])
