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

import torch
from torch import Tensor

from interp_rand.seeded_evaluation.run import SeedRun

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


def smallest_int(low: int, high: int) -> torch.dtype:
    """The smallest integer dtype holding every value in ``[low, high]``."""
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    return torch.long


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
    if n_answer * math.log2(max(base, 2)) >= 62:  # tuple_ids ranks every distinct tuple: do as it does
        ids, weights = tuple_ids(outputs), None
    else:
        ids, weights = None, torch.tensor([base ** (n_answer - 1 - a) for a in range(n_answer)],
                                          dtype=torch.long, device=outputs.device)
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_seeds * n_answer))
    for start in range(0, n, rows):
        part = slice(start, min(start + rows, n))
        chunk = ids[part] if weights is None else ((outputs[part] - low) * weights).sum(-1)  # [c, S]
        ordered, order = chunk.sort(-1)
        new = torch.ones_like(ordered, dtype=torch.bool)
        new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        ranks[part].scatter_(1, order, (new.cumsum(1) - 1).to(ranks.dtype))
    return ranks


def majority_rates(run: SeedRun, k: int, generator: torch.Generator | None = None, *,
                   rules: Sequence[str] | None = None, n_groups: int = DEFAULT_N_GROUPS,
                   judged: SeedRun | None = None, workers: int | None = None) -> dict[str, Tensor]:
    """``{rule: [n] float}``: :func:`majority_success` of every rule in ``rules`` (default the
    run's ``vote_rules``) on the same groups, equal to
    ``group_success(judged, draw_seed_groups(n, S, k, n_groups, generator), rule).float().mean(-1)``
    (the same draws from ``generator``, the same numbers) but with the groups drawn and voted one
    chunk of inputs at a time: no ``[n, G, k]`` index tensor, the outputs gathered in the
    smallest dtype, a whole output's vote counted over per-input ranks (no sort per group), and
    the per-vertex votes judged in slices of groups. ``judged``: the run whose judge decides the
    per-vertex votes (default ``run``). ``workers``: chunks voted on side by side, each in its own
    thread with one intra-op thread (default ``torch.get_num_threads()``; the result does not
    depend on it). What :func:`~interp_rand.seeded_evaluation.summarize`
    uses: on the exhaustive colouring set (181,440 cycles x 100 seeds) it holds a few hundred MB
    where the group tensors alone took 5 GB."""
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
    ranks = _dense_ranks(run.outputs) if "majority_whole" in rules else None
    if "majority_per_bit" in rules:
        if run.target_outputs is None:
            raise ValueError("majority_per_bit needs target outputs (a bit kind judged against its targets)")
        n_bits = max(1, int(max(run.outputs.max(), run.target_outputs.max())).bit_length())
        bit = torch.arange(n_bits, device=device)
    result = {rule: torch.empty(n, n_groups, dtype=torch.bool, device=device) for rule in rules}
    voted = (torch.empty(n, n_groups, n_answer, dtype=small, device=device)
             if "majority_per_vertex" in rules else None)

    def vote(start: int, stop: int, keys: Tensor) -> None:
        """Every rule on inputs ``start:stop``, whose groups' keys are ``keys``."""
        part = slice(start, stop)
        g = keys.topk(k, dim=-1).indices.to(device)  # [c, G, k], as draw_seed_groups draws them
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
    try:
        if workers > 1:  # whole chunks side by side, one intra-op thread each (on a shared machine,
            torch.set_num_threads(1)  # ops split over 2 threads ran ~2.5x slower: each waits for the other)
        with ThreadPoolExecutor(workers) as pool:
            pending: list[Any] = []
            for start in range(0, n, rows):
                stop = min(start + rows, n)
                # drawn here, in order: the generator's stream is consumed as draw_seed_groups does
                keys = torch.rand(stop - start, n_groups, n_seeds, generator=generator)
                pending.append(pool.submit(vote, start, stop, keys))
                while len(pending) > 2 * workers:  # a bounded number of chunks in flight (memory)
                    pending.pop(0).result()
            for done in pending:
                done.result()
    finally:
        torch.set_num_threads(threads)
    if voted is not None:  # judged in slices of groups, each in the outputs' own encoding (long)
        step = max(1, _CHUNK_ELEMENTS * 4 // max(1, n * n_answer))
        for first in range(0, n_groups, step):
            last = min(first + step, n_groups)
            result["majority_per_vertex"][:, first:last] = judged.judge_outputs(voted[:, first:last].long() + low)
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
