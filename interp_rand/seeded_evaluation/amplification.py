"""Majority-k: what ``k`` seeds of one input give when their outputs are combined (the paper,
Metrics), estimated over many independent groups of ``k`` seeds per input.

Per input, :func:`draw_seed_groups` draws ``G`` groups (default :data:`DEFAULT_N_GROUPS`), each
``k`` distinct seeds of the run's ``S`` in a random order, independently of the other groups
and inputs; the per-input majority-k success is the fraction of its groups whose combined
output is right. With ``seeds="all"`` in ``success_matrix`` the groups are drawn from every
seed the task has (recall: all 1,024), so they are draws from the true seed distribution.

A rule combines the ``k`` outputs of a group (the loss kind says which apply, ``vote_rules``):

=======================  ===================================================================
``majority_whole``       the most frequent whole output (the tuple over answer positions; ties
                         to the lexicographically smallest); right if the seeds giving it are
                         right. Every kind.
``majority_per_vertex``  each answer position (a vertex, in colouring) takes its most
                         frequent value (ties to the smallest); the combined output is judged
                         by the kind's judge (a valid colouring?). It may be wrong although
                         every seed's output is right.
``majority_per_bit``     for bit outputs (recall's value bits): each output bit takes its most
                         frequent value over the ``k`` seeds (ties to 0); right if the voted
                         bits equal the target. Amplifies each bit's margin separately, so an
                         input whose wrong outputs disagree among themselves is rescued.
``las_vegas``            verify and retry: right if any of the ``k`` seeds' outputs is; needs
                         a verifier that does not know the answer (colouring: each edge checks
                         its two colours). Per input ``1 - (1 - p)^k`` for per-seed success
                         ``p`` and a large pool; :func:`las_vegas_exact` counts it exactly
                         over the ``S`` seeds run (``1 - C(S - s, k) / C(S, k)``).
=======================  ===================================================================

Which rule is the paper's colouring "majority vote ≈ 100%"? The paper: ERM ≈ 89% average, 0%
worst-case; ``A^q_R`` ≈ 86% average, ≈ 70% worst-case. Only ``las_vegas`` follows from these
numbers alone:

- ``las_vegas``: on 95% of cycles ``p >= 0.7``, so ``1 - 0.3^k`` is >= 0.998 for ``k = 5`` and
  ``1 - 2e-16`` for ``k = 30``: ≈ 100% worst-case, as reported. A cycle ERM never colours
  stays at 0 under every rule, so the ≈ 100% can only be ``A^q_R``'s.
- ``majority_whole`` reaches 1 on a cycle only if one valid colouring is more frequent than
  every single invalid one. A 10-cycle has ``2^10 + 2 = 1,026`` proper 3-colourings among
  ``3^10``; a model that breaks symmetry with its vertices' noise spreads its right mass over
  several of them, and when every output has probability well below ``1/k`` a group's outputs
  are mostly distinct, the tie-break decides and the result stays ≈ ``p`` (no amplification;
  an invalid colouring that recurs even wins). The paper's own bound, ``k > (2/Δ²) ln(|wrong|/δ)``
  with ``|wrong| = 3^10 - 1,026 = 58,023`` and ``δ = 0.05``, guarantees ``k = 30`` only for a
  margin ``Δ > 0.96`` of the top output over the rest, i.e. an almost deterministic output;
  with ``p ≈ 0.7`` the margin is at most 0.7. So ≈ 100% is not implied for this rule; it holds
  only if the model concentrates its right outputs on one colouring per cycle.
- ``majority_per_vertex``: as ``k`` grows, each vertex's vote tends to the argmax of its
  colour marginal, a deterministic function of the ids it sees, i.e. a deterministic local
  algorithm; no such algorithm colours every cycle (the premise of the task, and why ERM's
  worst case is 0%). So its worst case tends to a deterministic model's, not to 100%.

Measured here on the zoo's ``coloring-Aq_R`` (CPU scale, 2,000 fresh cycles x 100 seeds, 100
groups): per-seed 0.62 average / 0.40 worst-5%; its right outputs spread over a median of 14
distinct valid colourings per cycle, the most frequent holding a median 13% of the seeds. k = 30:
``majority_whole`` 0.87 / 0.50, ``majority_per_vertex`` 0.56 / 0.12, ``las_vegas`` 1.00 / 1.00
(k = 5: 0.62 / 0.31, 0.55 / 0.25, 0.98 / 0.92). The ERM twin ``coloring-AE_R`` is 0.79 / 0.00
under every rule. Only Las Vegas reproduces "≈ 100%".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from torch import Tensor

from interp_rand.seeded_evaluation.run import SeedRun, smallest_int
from interp_rand.seeded_evaluation.uniform_stream import UniformStream, as_uniform

RULES = ("majority_whole", "majority_per_vertex", "majority_per_bit", "las_vegas")
#: Groups of ``k`` seeds per input: per-input majority success in steps of 1%.
DEFAULT_N_GROUPS = 100
# elements per chunk of inputs (random keys, gathered outputs): bounds the extra memory
_CHUNK_ELEMENTS = 1 << 22


#: Value ranges up to this many values are counted (one comparison pass per value), wider ones
#: sorted: counting the 3 colours of ``majority_per_vertex`` took 0.26 s where the sort took
#: 1.06 s (``[400, 100, 10, 30]``, 1 thread, 2026-12-02), about a tenth of a sort per value.
COUNTED_VALUES = 8


def _mode(values: Tensor, dim: int = -1) -> Tensor:
    """The most frequent value along ``dim`` (``values`` long; ``dim`` removed); ties go to the
    smallest value. Counted per value where the values span at most :data:`COUNTED_VALUES`
    (colours, bits), else found by a sort; both give the same result."""
    if values.numel() == 0:
        return values.new_zeros(values.shape[:dim % values.dim()] + values.shape[dim % values.dim() + 1:])
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span <= COUNTED_VALUES:
        count = smallest_int(0, values.shape[dim])  # counts in the smallest type: ~2.5x faster sums than int64
        counts = torch.stack([(values == low + v).to(count).sum(dim, dtype=count) for v in range(span)], -1)
        # argmax takes the first maximum: the smallest tied value
        return counts.argmax(-1) + low
    ranked = values.movedim(dim, -1).contiguous().sort(-1).values
    counts = torch.searchsorted(ranked, ranked, right=True) - torch.searchsorted(ranked, ranked)
    # argmax takes the first maximum: in ascending order, the smallest tied value
    return ranked.gather(-1, counts.argmax(-1, keepdim=True)).squeeze(-1)


def tuple_ids(outputs: Tensor) -> Tensor:
    """``[..., n_answer]`` long -> ``[...]`` long ids, equal iff the output tuples are equal and
    ordered like the tuples lexicographically (answer position 0 most significant)."""
    flat = outputs.reshape(-1, outputs.shape[-1])
    if flat.numel() == 0:
        return flat.new_zeros(flat.shape[0]).view(outputs.shape[:-1])
    shifted = flat - flat.min()
    base = int(shifted.max()) + 1
    n_answer = flat.shape[1]
    if n_answer * math.log2(max(base, 2)) < 62:
        weights = torch.tensor([base ** (n_answer - 1 - a) for a in range(n_answer)], dtype=torch.long)
        ids = (shifted * weights.to(flat.device)).sum(-1)
    else:  # too many combinations for one int64: rank the distinct tuples (sorted lexicographically)
        ids = torch.unique(flat, dim=0, return_inverse=True)[1]
    return ids.view(outputs.shape[:-1])


def _check_k(k: int, n_seeds: int) -> None:
    if not isinstance(k, int) or not 1 <= k <= n_seeds:
        raise ValueError(f"k={k!r} must be an integer in [1, S={n_seeds}]")


def draw_seed_groups(n_inputs: int, n_seeds: int, k: int, n_groups: int = DEFAULT_N_GROUPS,
                     generator: torch.Generator | None = None) -> Tensor:
    """``[n_inputs, n_groups, k]`` long seed indices: per input, ``n_groups`` independent groups,
    each ``k`` distinct seeds out of ``range(n_seeds)`` uniformly, in a random order (a group's
    first ``j`` seeds are a uniform ``j``-subset too). Groups of one input may share seeds.

    Drawn with ``generator`` (CPU; default a generator seeded 0, so the result is reproducible),
    in chunks of inputs so that at most about ``2**22`` random keys exist at once.
    """
    _check_k(k, n_seeds)
    if not isinstance(n_groups, int) or n_groups < 1:
        raise ValueError(f"n_groups={n_groups!r} must be an integer >= 1")
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    groups = torch.empty(n_inputs, n_groups, k, dtype=torch.long)
    rows = max(1, _CHUNK_ELEMENTS // (n_groups * n_seeds))
    for start in range(0, n_inputs, rows):
        stop = min(start + rows, n_inputs)
        keys = torch.rand(stop - start, n_groups, n_seeds, generator=generator)
        # the k largest of S iid keys, in decreasing order: a uniform ordered k-subset
        groups[start:stop] = keys.topk(k, dim=-1).indices
    return groups


def group_success(run: SeedRun, groups: Tensor, rule: str = "majority_whole") -> Tensor:
    """``[n, G]`` bool: is the output that ``rule`` combines from each group right.

    ``groups``: ``[n, G, k]`` seed indices into ``run``'s ``S`` seeds (:func:`draw_seed_groups`,
    or any hand-made groups). ``rule`` must be one of ``run.vote_rules`` (the loss kind's).
    """
    if rule not in RULES:
        raise ValueError(f"rule={rule!r} must be one of {RULES}")
    if rule not in run.vote_rules:
        raise ValueError(f"rule={rule!r} does not apply to loss kind {run.loss_kind!r}; its rules: "
                         f"{run.vote_rules}")
    n, n_seeds = run.success.shape
    if groups.dim() != 3 or groups.shape[0] != n:
        raise ValueError(f"groups must be [n={n}, G, k]; got {tuple(groups.shape)}")
    if groups.numel() and not (0 <= int(groups.min()) and int(groups.max()) < n_seeds):
        raise ValueError(f"groups index seeds outside [0, S={n_seeds})")
    groups = groups.to(run.success.device)
    _, n_groups, k = groups.shape
    n_answer = run.outputs.shape[-1]
    ids = tuple_ids(run.outputs) if rule == "majority_whole" else None  # [n, S]
    voted = run.outputs.new_empty(n, n_groups, n_answer) if rule == "majority_per_vertex" else None
    if rule == "majority_per_bit":
        if run.target_outputs is None:
            raise ValueError("majority_per_bit needs target outputs (a bit kind judged against its targets)")
        # outputs are bits packed by interp_rand.losses.pack_bits; each bit is voted on alone
        n_bits = max(1, int(max(run.outputs.max(), run.target_outputs.max())).bit_length())
        bit = torch.arange(n_bits, device=run.outputs.device)
    result = torch.empty(n, n_groups, dtype=torch.bool, device=run.success.device)
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_groups * k * n_answer))
    for start in range(0, n, rows):
        part = slice(start, min(start + rows, n))
        g = groups[part]  # [c, G, k]
        flat = g.flatten(1)  # [c, G*k]
        ok = run.success[part].gather(1, flat).view(g.shape)
        if rule == "las_vegas":
            result[part] = ok.any(-1)
        elif rule == "majority_per_bit":
            picked = run.outputs[part].gather(1, flat[..., None].expand(-1, -1, n_answer)).view(*g.shape, n_answer)
            ones = ((picked[..., None] >> bit) & 1).sum(2)  # [c, G, n_answer, n_bits]: seeds voting 1
            voted_bits = ((2 * ones > k).long() << bit).sum(-1)  # [c, G, n_answer], ties to 0
            result[part] = (voted_bits == run.target_outputs[part][:, None]).all(-1)
        elif rule == "majority_whole":
            group_ids = ids[part].gather(1, flat).view(g.shape)
            winner = _mode(group_ids)  # [c, G]
            seed_of_winner = (group_ids == winner[..., None]).int().argmax(-1, keepdim=True)
            # correctness of the winner is that of a seed that produced it: any kind works
            result[part] = ok.gather(-1, seed_of_winner).squeeze(-1)
        else:
            picked = run.outputs[part].gather(1, flat[..., None].expand(-1, -1, n_answer))
            picked = picked.view(*g.shape, n_answer)  # [c, G, k, n_answer]
            voted[part] = _mode(picked, dim=2)  # [c, G, n_answer]
    if rule == "majority_per_vertex":
        result = run.judge_outputs(voted)
    return result


def _dense_ranks(outputs: Tensor) -> Tensor:
    """``[n, S, n_answer]`` -> ``[n, S]`` per input, the rank of each seed's whole output among
    that input's distinct outputs in the order of :func:`tuple_ids` (0 the smallest), in the
    smallest dtype: equal iff the outputs are equal, ordered as the tuples are. Computed in
    chunks of inputs (the tuple ids of all ``n * S`` outputs are never held at once)."""
    n, n_seeds, n_answer = outputs.shape
    ranks = torch.empty(n, n_seeds, dtype=smallest_int(0, max(0, n_seeds - 1)), device=outputs.device)
    if outputs.numel() == 0:
        return ranks.zero_()
    low = int(outputs.min())
    base = int(outputs.max()) - low + 1
    bits = n_answer * math.log2(max(base, 2))
    if bits >= 62:  # tuple_ids ranks every distinct tuple: do as it does
        ids, weights = tuple_ids(outputs), None
    else:  # (int32 where the ids fit: the colouring's 3**10)
        code = torch.int32 if bits < 31 else torch.long
        ids, weights = None, torch.tensor([base ** (n_answer - 1 - a) for a in range(n_answer)],
                                          dtype=code, device=outputs.device)
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_seeds * n_answer))
    for start in range(0, n, rows):
        part = slice(start, min(start + rows, n))
        chunk = ids[part] if weights is None else ((outputs[part] - low) * weights).sum(-1, dtype=weights.dtype)
        ordered, order = chunk.sort(-1)
        new = torch.ones_like(ordered, dtype=torch.bool)
        new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        ranks[part].scatter_(1, order, (new.cumsum(1) - 1).to(ranks.dtype))
    return ranks


#: Groups are voted by counting (:class:`_GroupCounts`) where the packed counts take at most this
#: many float32 columns; otherwise through their seeds' indices (the top-``k`` of each group).
MAX_COUNT_COLUMNS = 256


class _GroupCounts:
    """Every rule on a chunk of inputs from counts, without the groups' seed indices.

    A group is the ``k`` seeds whose keys are the largest of its ``S`` (what ``topk`` picks in
    :func:`draw_seed_groups`): a 0/1 mask ``[c, G, S]``, ``keys >= `` the ``k``-th largest key
    (``np.partition``; a group whose ``k``-th and ``k+1``-th keys tie, about one in 10**5, is
    picked by ``topk`` itself, as before). One float32 ``bmm`` of the mask with per-seed features
    ``[c, S, F]`` counts, per group, its seeds (``k``: the tie check), its right seeds
    (``las_vegas``), the seeds giving each whole output (its rank, ``majority_whole``), each value
    at each answer position (``majority_per_vertex``) and each set bit (``majority_per_bit``).
    Counts of at most ``k`` take ``b = k.bit_length()`` bits; ``24 // b`` of them share a column
    (field ``j`` weighs ``2**(b * j)``), so every partial sum is an integer below ``2**24``:
    exact in float32 whatever the order of summation. The votes are then those of
    :func:`group_success` (the most frequent whole output, the smallest on ties; each position's
    most frequent value, the smallest on ties; each bit's majority, ties to 0).

    ``majority_whole`` is judged by the rightness of the winning output, read per input from any
    seed that gives it: valid where every seed giving one output is equally right (always, for
    runs of :func:`~interp_rand.seeded_evaluation.success_matrix`; checked, else :meth:`plan`
    declines and the indices are used)."""

    def __init__(self, run: SeedRun, k: int, rules: Sequence[str], ranks: Tensor | None, low: int,
                 n_values: int, n_bits: int, ok_of_rank: Tensor | None):
        self.run, self.k, self.rules = run, k, tuple(rules)
        self.ranks, self.low, self.ok_of_rank = ranks, low, ok_of_rank
        self.b = k.bit_length()
        self.per_column = 24 // self.b
        n_answer = run.outputs.shape[-1]
        column = 2  # 0: the group's size, 1: its right seeds
        # rule -> (start, groups_of, per_group, n_counted): value v of group a (an answer
        # position; 1 for whole outputs) in column start + a * per_group + v // per_column, field
        # v % per_column (weight 2**(b * field)); the whole outputs' ranks last, as many columns
        # as a chunk's ranks take (:meth:`whole_block`)
        self.blocks: dict[str, tuple[int, int, int, int]] = {}
        for rule, n_counted, groups_of in (("majority_per_vertex", n_values, n_answer),
                                           ("majority_per_bit", n_bits, n_answer),
                                           ("majority_whole", 0 if ok_of_rank is None else ok_of_rank.shape[1], 1)):
            if rule in rules:
                per_group = -(-n_counted // self.per_column)
                self.blocks[rule] = (column, groups_of, per_group, n_counted)
                column += groups_of * per_group
        self.n_columns = column  # the most (a chunk holding every rank)
        self.weight = (1 << (self.b * torch.arange(self.per_column))).float()  # of each field
        # one column per answer position holding all its values' counts (b * values <= 20 bits):
        # the vote read from a table of every packed column (the first most frequent value)
        self.vote_table = None
        if "majority_per_vertex" in rules and self.blocks["majority_per_vertex"][2] == 1 and self.b * n_values <= 20:
            packed = torch.arange(1 << (self.b * n_values))
            counts = (packed[:, None] >> (self.b * torch.arange(n_values))) & ((1 << self.b) - 1)
            self.vote_table = counts.argmax(-1).to(smallest_int(0, n_values - 1))

    @classmethod
    def plan(cls, run: SeedRun, k: int, rules: Sequence[str], ranks: Tensor | None, low: int,
             n_bits: int) -> "_GroupCounts | None":
        """The counting of ``run``'s groups of ``k``, or ``None`` where the indices are needed
        (a run off the CPU, too many columns, a whole output not equally right over its seeds)."""
        if run.success.device.type != "cpu" or run.outputs.device.type != "cpu" or k.bit_length() > 24:
            return None
        ok_of_rank = None
        if "majority_whole" in rules:
            index = ranks.long()
            width = int(index.max()) + 1 if index.numel() else 1
            ok_of_rank = torch.zeros(run.n_inputs, width, dtype=torch.bool).scatter_(1, index, run.success)
            if not torch.equal(ok_of_rank.gather(1, index), run.success):
                return None
        n_values = int(run.outputs.max()) - low + 1 if "majority_per_vertex" in rules and run.outputs.numel() else 1
        counts = cls(run, k, rules, ranks, low, n_values, n_bits, ok_of_rank)
        return counts if counts.n_columns <= MAX_COUNT_COLUMNS else None

    def _place(self, feats: Tensor, block: tuple[int, int, int, int], values: Tensor) -> None:
        """Write the weights of ``values [c, S, groups_of]`` long (each seed counts one value per
        group) into ``block``'s columns of ``feats`` (zeros there)."""
        start, groups_of, per_group, _ = block
        weight = self.weight.index_select(0, (values % self.per_column).flatten()).view(values.shape)
        if per_group == 1:
            feats[..., start : start + groups_of] = weight
        else:  # the value's column of its group
            column = start + torch.arange(groups_of) * per_group + values // self.per_column
            feats.scatter_(2, column, weight)

    def whole_block(self, part: slice) -> tuple[int, int, int, int]:
        """The ``majority_whole`` block of inputs ``part``: the ranks they hold (fewer columns
        than the run's every rank: a third fewer on the exhaustive colouring set)."""
        start, _, _, n_ranks = self.blocks["majority_whole"]
        ranks = self.ranks[part]
        n_ranks = min(n_ranks, int(ranks.max()) + 1) if ranks.numel() else 1
        return start, 1, -(-n_ranks // self.per_column), n_ranks

    def features(self, part: slice) -> tuple[Tensor, dict[str, tuple[int, int, int, int]]]:
        """``[c, S, F]`` float32: each seed's counted values, packed (class doc), and the blocks."""
        run = self.run
        success = run.success[part]
        c, n_seeds = success.shape
        blocks = dict(self.blocks)
        if "majority_whole" in blocks:
            blocks["majority_whole"] = self.whole_block(part)
        last = blocks.get("majority_whole", (self.n_columns, 0, 0, 0))  # the last block
        feats = torch.zeros(c, n_seeds, last[0] + last[1] * last[2])
        feats[..., 0] = 1
        feats[..., 1] = success
        if "majority_whole" in blocks:
            self._place(feats, blocks["majority_whole"], self.ranks[part].long()[..., None])
        if "majority_per_vertex" in blocks:
            self._place(feats, blocks["majority_per_vertex"], run.outputs[part].long() - self.low)
        if "majority_per_bit" in blocks:
            start, groups_of, per_group, n_bits = blocks["majority_per_bit"]
            bit = torch.arange(n_bits)
            on = ((run.outputs[part].long()[..., None] >> bit) & 1).float()  # [c, S, A, n_bits]
            weights = (on * self.weight[bit % self.per_column]).view(c, n_seeds, groups_of, n_bits)
            block = feats[..., start : start + groups_of * per_group].view(c, n_seeds, groups_of, per_group)
            block.index_add_(3, bit // self.per_column, weights)
        return feats, blocks

    def vote(self, start: int, stop: int, keys: np.ndarray, result: dict[str, Tensor], voted: Tensor | None) -> None:
        """Every rule on inputs ``start:stop``, whose groups' keys are ``keys [c, G, S]``."""
        k, part = self.k, slice(start, stop)
        c, n_groups, n_seeds = keys.shape
        kth = np.partition(keys, n_seeds - k, axis=-1)[..., n_seeds - k, None]  # each group's k-th largest key
        mask = np.empty(keys.shape, dtype=np.float32)
        np.greater_equal(keys, kth, out=mask, casting="unsafe")
        feats, blocks = self.features(part)
        counts = torch.bmm(torch.from_numpy(mask), feats)  # [c, G, F]
        tied = (counts[..., 0] != k).nonzero()  # groups whose k-th and k+1-th keys are equal
        if len(tied):
            i, g = tied.unbind(1)
            top = as_uniform(keys[i.numpy(), g.numpy()]).topk(k, dim=-1).indices  # as draw_seed_groups picks
            picked = torch.zeros(len(tied), n_seeds).scatter_(1, top, 1.0)
            counts[i, g] = torch.bmm(picked[:, None], feats[i]).squeeze(1)

        def unpack(rule: str) -> Tensor:
            """``[c, G, groups_of, n_counted]`` int32: the rule's counts (one contiguous pass per
            field: ~2x faster than a broadcast shift)."""
            first, groups_of, per_group, n_counted = blocks[rule]
            packed = counts[..., first : first + groups_of * per_group].to(torch.int32)
            fields = torch.empty(*packed.shape, self.per_column, dtype=torch.int32)
            for j in range(self.per_column):
                torch.bitwise_and(packed >> (self.b * j), (1 << self.b) - 1, out=fields[..., j])
            return fields.view(c, n_groups, groups_of, per_group * self.per_column)[..., :n_counted]

        for rule in self.rules:
            if rule == "las_vegas":
                result[rule][part] = counts[..., 1] > 0  # a right seed in the group
            elif rule == "majority_whole":
                winner = unpack(rule)[..., 0, :].argmax(-1)  # the first maximum: the smallest tied output
                result[rule][part] = self.ok_of_rank[part].gather(1, winner)
            elif rule == "majority_per_vertex":
                if self.vote_table is not None:  # [c, G, A]: each position's packed column, looked up
                    first, groups_of, _, _ = blocks[rule]
                    voted[part] = self.vote_table[counts[..., first : first + groups_of].long()].to(voted.dtype)
                else:
                    voted[part] = unpack(rule).argmax(-1).to(voted.dtype)  # the first maximum: the smallest value
            else:  # majority_per_bit: each bit on where more than half the seeds set it (ties to 0)
                on = (2 * unpack(rule) > k).long()  # [c, G, A, n_bits]
                voted_bits = (on << torch.arange(on.shape[-1])).sum(-1)
                result[rule][part] = (voted_bits == self.run.target_outputs[part][:, None]).all(-1)


def majority_rates(run: SeedRun, k: int, generator: torch.Generator | None = None, *,
                   rules: Sequence[str] | None = None, n_groups: int = DEFAULT_N_GROUPS,
                   judged: SeedRun | None = None, workers: int | None = None,
                   ranks: Tensor | None = None) -> dict[str, Tensor]:
    """``{rule: [n] float}``: :func:`majority_success` of every rule in ``rules`` (default the
    run's ``vote_rules``) on the same groups, equal to
    ``group_success(judged, draw_seed_groups(n, S, k, n_groups, generator), rule).float().mean(-1)``
    (the same draws from ``generator``, the same numbers) but one chunk of inputs at a time and
    without the groups' seed indices: the keys of ``draw_seed_groups`` drawn in order by numpy
    from the generator's own stream (:mod:`~interp_rand.seeded_evaluation.uniform_stream`: the
    same numbers as ``torch.rand``, ~1.5x faster), each group found as the seeds whose keys reach
    its ``k``-th largest (``np.partition``, ~6x faster than ``topk``) and every rule counted over
    those seeds at once (:class:`_GroupCounts`: one float32 ``bmm`` per chunk; the seed indices
    and ``topk`` only where it does not apply). The per-vertex votes are judged in slices of
    groups. ``judged``: the run whose judge decides the per-vertex votes (default ``run``).
    ``workers``: chunks voted on side by side, each in its own thread with one intra-op thread,
    while the main thread draws the next keys (default ``torch.get_num_threads()``; the result
    does not depend on it). ``ranks``: the run's :func:`_dense_ranks`, where the caller has them
    (``summarize`` finds them once for every ``k``). What
    :func:`~interp_rand.seeded_evaluation.summarize` uses."""
    _check_k(k, run.n_seeds)
    if not isinstance(n_groups, int) or n_groups < 1:
        raise ValueError(f"n_groups={n_groups!r} must be an integer >= 1")
    rules = tuple(run.vote_rules if rules is None else rules)
    for rule in rules:
        if rule not in RULES:
            raise ValueError(f"rule={rule!r} must be one of {RULES}")
        if rule not in run.vote_rules:
            raise ValueError(f"rule={rule!r} does not apply to loss kind {run.loss_kind!r}; its rules: "
                             f"{run.vote_rules}")
    judged = run if judged is None else judged
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    n, n_seeds = run.success.shape
    n_answer = run.outputs.shape[-1]
    device = run.success.device
    low, small = 0, torch.long
    if "majority_per_vertex" in rules and run.outputs.numel():
        low = int(run.outputs.min())
        small = smallest_int(0, int(run.outputs.max()) - low)
    if "majority_whole" not in rules:
        ranks = None
    elif ranks is None:
        ranks = _dense_ranks(run.outputs)
    n_bits = 0
    if "majority_per_bit" in rules:
        if run.target_outputs is None:
            raise ValueError("majority_per_bit needs target outputs (a bit kind judged against its targets)")
        n_bits = max(1, int(max(run.outputs.max(), run.target_outputs.max())).bit_length())
        bit = torch.arange(n_bits, device=device)
    result = {rule: torch.empty(n, n_groups, dtype=torch.bool, device=device) for rule in rules}
    voted = (torch.empty(n, n_groups, n_answer, dtype=small, device=device)
             if "majority_per_vertex" in rules else None)
    counting = _GroupCounts.plan(run, k, rules, ranks, low, n_bits)

    def vote(start: int, stop: int, keys: np.ndarray) -> None:
        """Every rule on inputs ``start:stop``, whose groups' keys are ``keys``."""
        if counting is not None:
            counting.vote(start, stop, keys, result, voted)
            return
        part = slice(start, stop)
        g = as_uniform(keys).topk(k, dim=-1).indices.to(device)  # [c, G, k], as draw_seed_groups draws them
        del keys
        flat = g.flatten(1)  # [c, G*k]
        ok = run.success[part].gather(1, flat).view(g.shape)
        for rule in rules:
            if rule == "las_vegas":
                result[rule][part] = ok.any(-1)
            elif rule == "majority_whole":
                group_ranks = ranks[part].gather(1, flat).view(g.shape)  # [c, G, k] small
                width = int(group_ranks.max()) + 1 if group_ranks.numel() else 1
                counts = torch.zeros(*g.shape[:2], width, dtype=smallest_int(0, k), device=device)
                counts.scatter_add_(-1, group_ranks.long(), torch.ones_like(counts[..., :1]).expand(g.shape))
                winner = counts.argmax(-1, keepdim=True)  # the first maximum: the smallest tied output
                seed_of_winner = (group_ranks == winner).to(torch.uint8).argmax(-1, keepdim=True)
                result[rule][part] = ok.gather(-1, seed_of_winner).squeeze(-1)
            elif rule == "majority_per_vertex":
                # [c, n_answer, k, G] (values shifted by low: the same ties): the counts sum over a
                # middle axis, vectorised along the groups (a sum over k contiguous values is ~5x slower)
                outputs = (run.outputs[part] - low).to(small).transpose(1, 2)  # [c, n_answer, S]
                by_seed = g.transpose(1, 2).reshape(stop - start, 1, k * n_groups).expand(-1, n_answer, -1)
                picked = outputs.gather(2, by_seed).view(stop - start, n_answer, k, n_groups)
                voted[part] = _mode(picked, dim=2).transpose(1, 2).to(small)
            else:  # majority_per_bit
                picked = run.outputs[part].gather(1, flat[..., None].expand(-1, -1, n_answer)).view(*g.shape, n_answer)
                ones = ((picked[..., None] >> bit) & 1).sum(2)  # [c, G, n_answer, n_bits]: seeds voting 1
                voted_bits = ((2 * ones > k).long() << bit).sum(-1)  # [c, G, n_answer], ties to 0
                result[rule][part] = (voted_bits == run.target_outputs[part][:, None]).all(-1)

    rows = max(1, _CHUNK_ELEMENTS // (n_groups * n_seeds))  # the chunks of draw_seed_groups: the same draws
    workers = torch.get_num_threads() if workers is None else workers
    threads = torch.get_num_threads()
    stream = UniformStream(generator)
    try:
        if workers > 1:  # whole chunks side by side, one intra-op thread each (on a shared machine,
            torch.set_num_threads(1)  # ops split over 2 threads ran ~2.5x slower: each waits for the other)
        with ThreadPoolExecutor(workers) as pool:
            pending: list[Any] = []
            for start in range(0, n, rows):
                stop = min(start + rows, n)
                # drawn here, in order: the generator's stream is consumed as draw_seed_groups does
                keys = stream.keys((stop - start, n_groups, n_seeds))
                pending.append(pool.submit(vote, start, stop, keys))
                while len(pending) > 2 * workers:  # a bounded number of chunks in flight (memory)
                    pending.pop(0).result()
            for done in pending:
                done.result()
    finally:
        stream.close()
        torch.set_num_threads(threads)
    if voted is not None:  # judged in slices of groups, each in the outputs' own encoding (long)
        step = max(1, _CHUNK_ELEMENTS * 4 // max(1, n * n_answer))
        for first in range(0, n_groups, step):
            last = min(first + step, n_groups)
            outputs = voted[:, first:last].long()
            result["majority_per_vertex"][:, first:last] = judged.judge_outputs(outputs + low if low else outputs)
    return {rule: result[rule].float().mean(-1) for rule in rules}


def majority_success(run: SeedRun, k: int, generator: torch.Generator | None = None, *,
                     rule: str = "majority_whole", n_groups: int = DEFAULT_N_GROUPS,
                     groups: Tensor | None = None) -> Tensor:
    """PAPER's **majority-k**: ``[n]`` float, per input the fraction of its groups of ``k``
    seeds whose output combined by ``rule`` is right (see the module doc for the rules).

    The groups are ``groups`` (``[n, G, k]``) when given, else ``n_groups`` groups drawn with
    ``generator`` by :func:`draw_seed_groups` (default generator: seeded 0).
    """
    if groups is None:
        groups = draw_seed_groups(run.n_inputs, run.n_seeds, k, n_groups, generator)
    elif groups.shape[-1:] != (k,):
        raise ValueError(f"groups must hold k={k} seeds each; got {tuple(groups.shape)}")
    return group_success(run, groups, rule).float().mean(-1)


def las_vegas_exact(run: SeedRun, k: int) -> Tensor:
    """``[n]`` float: per input, the exact probability that among ``k`` of its ``S`` seeds in a
    uniformly random order (without replacement) some seed's output is right,
    ``1 - C(S - s, k) / C(S, k)`` for ``s`` right seeds; ``1 - (1 - s/S)^k`` as ``S`` grows.
    The ``las_vegas`` rule without group sampling."""
    if "las_vegas" not in run.vote_rules:
        raise ValueError(f"las_vegas does not apply to loss kind {run.loss_kind!r}; its rules: {run.vote_rules}")
    n_seeds = run.n_seeds
    _check_k(k, n_seeds)
    wrong = n_seeds - run.success.sum(1, dtype=torch.float64)  # [n]
    i = torch.arange(k, dtype=torch.float64, device=wrong.device)
    # P(the first k seeds are all wrong) = prod_i (wrong - i) / (S - i), 0 once wrong < k
    all_wrong = ((wrong[:, None] - i).clamp(min=0) / (n_seeds - i)).prod(-1)
    return (1 - all_wrong).float()
