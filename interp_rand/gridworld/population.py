"""Fitness of a whole PGPE population at once: population x treasure cells x seeds runs step
together, and the members' forward passes are one ``vmap`` over ``functional_call`` (no Python
loop over members): of the model's fast path (:class:`~interp_rand.model.fast.FastForward`,
decoding one token per step with a key/value cache, :class:`PopulationPolicy`) or, for
reference, of the hooked model itself. Neither is a second implementation of the forward pass.
:func:`population_returns_loop` is the per-member loop kept as the reference the benchmark and
the tests compare against.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from interp_rand.gridworld.agent import LogitsFn, RecomputePolicy, cell_seed_grid, rollout
from interp_rand.gridworld.config import VARIANTS, GridConfig
from interp_rand.model.fast import DecodeCache, FastForward
from interp_rand.model.transformer import HookedTransformer


class ParameterLayout:
    """Flat parameter vectors ``[n_params]`` <-> the model's named parameters (in
    ``named_parameters`` order), so PGPE searches one vector per member."""

    def __init__(self, model: HookedTransformer):
        self.names = [name for name, _ in model.named_parameters()]
        self.shapes = [tuple(p.shape) for _, p in model.named_parameters()]
        self.sizes = [math.prod(s) for s in self.shapes]
        self.n_params = sum(self.sizes)

    def flatten(self, model: HookedTransformer) -> Tensor:
        """``[n_params]`` the model's current weights."""
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """``[..., n_params]`` -> ``{name: [..., *shape]}`` (views)."""
        if flat.shape[-1] != self.n_params:
            raise ValueError(f"parameter vectors must have {self.n_params} entries; got {flat.shape[-1]}")
        lead = flat.shape[:-1]
        pieces = flat.split(self.sizes, dim=-1)
        return {n: p.reshape(*lead, *s) for n, p, s in zip(self.names, pieces, self.shapes)}

    def load(self, model: HookedTransformer, flat: Tensor) -> HookedTransformer:
        """Copy ``flat: [n_params]`` into ``model`` (in place) and return it."""
        with torch.no_grad():
            for param, value in zip(model.parameters(), self.unflatten(flat).values()):
                param.copy_(value)
        return model


def _population_logits_fn(model: HookedTransformer, params: dict[str, Tensor], n_members: int) -> LogitsFn:
    """A :data:`LogitsFn` over ``n_members * runs`` rows, member-major: rows ``[i * runs,
    (i + 1) * runs)`` are played by member ``i`` (its weights: ``params[name][i]``)."""

    def one_member(member_params: dict[str, Tensor], inputs: Tensor, seeds: Tensor) -> Tensor:
        return functional_call(model, member_params, (inputs,), {"seeds": seeds})

    batched = vmap(one_member)

    def logits(inputs: Tensor, seeds: Tensor) -> Tensor:
        # [P * runs, t, d] -> [P, runs, t, d]: one vmapped forward for all members
        out = batched(params, inputs.unflatten(0, (n_members, -1)), seeds.unflatten(0, (n_members, -1)))
        return out.flatten(0, 1)

    return logits


class _FastModule(nn.Module):
    """The model's fast path as a module holding the model (``model.<name>`` parameters), so
    that ``functional_call`` can swap one member's weights in for a decoding step."""

    def __init__(self, model: HookedTransformer):
        super().__init__()
        self.model = model
        self.fast = FastForward(model)

    def forward(self, obs: Tensor, seeds: Tensor, cache: DecodeCache) -> Tensor:
        return self.fast(obs, seeds=seeds, cache=cache)


def _row_hash(columns: Tensor) -> Tensor:
    """``[N, c]`` int64 in ``[0, 2^32)`` -> ``[N]`` in ``[0, 2^40)``: two fixed random linear
    hashes modulo primes below 2^20 and 2^20 side by side."""
    out = torch.zeros(columns.shape[0], dtype=torch.long, device=columns.device)
    for seed, prime in enumerate((1_048_573, 1_048_571)):
        weights = torch.randint(1, prime, (columns.shape[1],), generator=torch.Generator().manual_seed(seed))
        out = (out << 20) | ((columns * weights.to(columns.device)) % prime).sum(-1) % prime
    return out


def _split_groups(group: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Regroup runs by (their group, ``values``): ``group [P, R]`` long, member ``i``'s groups
    numbered ``0 .. n_i - 1``; ``values [P, R, d]`` float. A group whose runs all get the same
    values keeps its number; a group that splits keeps it for one part, and its other parts
    become new groups numbered ``n_i, n_i + 1, ...`` (so a member's groups stay ``0 .. n'_i - 1``,
    at most ``R``).

    Returns ``(group [P, R], parents [k], children [k])``: the new groups, and for each new
    group its member's ``(member, parent group)`` as ``parents [k, 2]`` and ``(member, child
    group)`` as ``children [k, 2]``. Runs are told apart by their group and a hash of their
    values' exact bits (one ``unique`` over integers, ~30x cheaper here than ``unique(dim=0)``
    over float rows); each run is checked against its new group's first run, and on a
    (vanishingly rare) collision the exact row-wise ``unique`` decides instead."""
    n_members, n_runs = group.shape
    device = group.device
    count = group.max(1).values + 1  # [P] each member's groups
    if int(count.max()) > 1 << 16:
        raise ValueError(f"at most {1 << 16} groups per member; got {int(count.max())}")
    flat = values.reshape(n_members * n_runs, -1).contiguous()
    if flat.element_size() % 4:  # 16-bit floats: float32 holds them exactly
        flat = flat.float()
    bits = flat.view(torch.int32).long() & 0xFFFFFFFF  # every value's exact bits (float64: two columns)
    member, old = torch.arange(n_members, device=device).repeat_interleave(n_runs), group.reshape(-1)
    columns = torch.cat([member[:, None], old[:, None], bits], 1)
    _, inverse = torch.unique((member << 56) | (old << 40) | _row_hash(columns), return_inverse=True)
    first = torch.zeros(int(inverse.max()) + 1, dtype=torch.long, device=device)
    first.scatter_(0, inverse, torch.arange(len(inverse), device=device))  # a run of each pair
    if not torch.equal(columns[first[inverse]], columns):  # a hash collision: the exact rows decide
        _, inverse = torch.unique(columns, dim=0, return_inverse=True)
        first = torch.zeros(int(inverse.max()) + 1, dtype=torch.long, device=device)
        first.scatter_(0, inverse, torch.arange(len(inverse), device=device))
    # the pairs are sorted by (member, old group): a pair that is not its group's first is new
    pair_member, pair_group = member[first], old[first]
    new = torch.ones_like(pair_member, dtype=torch.bool)
    new[0] = False
    new[1:] = (pair_member[1:] == pair_member[:-1]) & (pair_group[1:] == pair_group[:-1])
    # numbered per member from its count on
    rank = torch.cumsum(new.long(), 0)
    start = torch.zeros(n_members, dtype=torch.long, device=device).scatter_reduce_(
        0, pair_member, rank - new.long(), reduce="amin", include_self=False)
    number = torch.where(new, count[pair_member] + rank - 1 - start[pair_member], pair_group)
    parents = torch.stack([pair_member[new], pair_group[new]], 1)
    children = torch.stack([pair_member[new], number[new]], 1)
    return number[inverse].view(n_members, n_runs), parents, children


class PopulationPolicy:
    """``P`` members decoding ``R`` runs each, member-major rows (row ``i * R + r`` is run ``r``
    of member ``i``), as a :class:`~interp_rand.gridworld.agent.Policy`: each step is one
    ``vmap`` over the members of the model's :class:`~interp_rand.model.fast.FastForward` with
    the member's weights (``functional_call``), reading only the newest token and the members'
    key/value caches (:class:`~interp_rand.model.fast.DecodeCache` buffers batched over members).

    With ``share_prefixes`` (the default), runs of a member whose seed and observations so far
    are identical are decoded once, as one group: the model sees nothing else (the treasure's
    cell shows only once a run has found it), so their logits are the same numbers. Until its
    treasure is found a run follows its seed's route, so a member's ``cells x m`` runs are mostly
    ``m`` distinct prefixes (at the CPU scale's initial population: 13-22 of 240 by step 40).
    Each step splits a group whose runs saw different observations, the new group's cache rows
    copied from its parent's.

    Args:
        model: the agents' model (its weights are not used, only its structure).
        params: ``{name: [P, *shape]}`` stacked weights (``ParameterLayout.unflatten``).
        seeds: ``[P * R, d_seed]`` each run's seed (the token at position 0).
        share_prefixes: decode each member's distinct prefixes once (``False``: every run).
    """

    def __init__(self, model: HookedTransformer, params: dict[str, Tensor], seeds: Tensor,
                 share_prefixes: bool = True):
        self.n_members = next(iter(params.values())).shape[0]
        if seeds.shape[0] % self.n_members:
            raise ValueError(f"seeds must be [members * runs, d_seed] for {self.n_members} members; "
                             f"got {tuple(seeds.shape)}")
        self.n_runs = seeds.shape[0] // self.n_members
        self.module = _FastModule(model)
        self.params = {f"model.{name}": p for name, p in params.items()}
        self.seeds = seeds.view(self.n_members, self.n_runs, -1)
        self.share_prefixes = share_prefixes
        runs = torch.arange(self.n_runs, device=seeds.device).expand(self.n_members, self.n_runs)
        # [P, R] each run's group, [P, groups] a run of each group; buffers for up to R groups
        # per member, [n_ctx, d_head, P, R, head] (members at dim 2), of which the first
        # `width` are in use
        self.group, self.width = (torch.zeros_like(runs), 1) if share_prefixes else (runs, self.n_runs)
        if share_prefixes:  # before any observation: the distinct seeds
            self._split(self.seeds)
        self.cache = DecodeCache.empty(model.cfg, (self.n_members, self.n_runs), device=seeds.device)
        self.length = 0
        self._step = vmap(self._member, in_dims=(0, 2, 2, 0, 0))

    def _split(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """Regroup by ``values [P, R, d]``; returns the new groups' ``(member, parent)`` and
        ``(member, child)`` pairs, ``[k, 2]`` each (:func:`_split_groups`)."""
        self.group, parents, children = _split_groups(self.group, values)
        self.width = int(self.group.max()) + 1
        return parents, children

    def _member(self, params: dict[str, Tensor], keys: list[Tensor], values: list[Tensor], obs: Tensor,
                seeds: Tensor) -> Tensor:
        cache = DecodeCache(keys, values, self.length)
        logits = functional_call(self.module, params, (obs, seeds, cache))
        self._length = cache.length  # vmap runs this once for all members: a plain int
        return logits

    def __call__(self, obs: Tensor) -> Tensor:
        """``obs: [P * R, d_obs]`` the newest observation -> ``[P * R, 4]`` logits at it."""
        obs = obs.view(self.n_members, self.n_runs, -1)
        members = torch.arange(self.n_members, device=obs.device)[:, None]
        if self.share_prefixes:
            parents, children = self._split(obs)
            if self.length and len(parents):  # new groups start from their parent's cache
                for buffer in self.cache.keys + self.cache.values:
                    buffer[: self.length, :, children[:, 0], children[:, 1]] = (
                        buffer[: self.length, :, parents[:, 0], parents[:, 1]])
        # a run of each group (a member with fewer groups repeats its run 0: unused rows)
        first = torch.zeros(self.n_members, self.width, dtype=torch.long, device=obs.device)
        first.scatter_(1, self.group, torch.arange(self.n_runs, device=obs.device).expand_as(self.group))
        used = [buffer[:, :, :, : self.width] for buffer in self.cache.keys], \
            [buffer[:, :, :, : self.width] for buffer in self.cache.values]
        logits = self._step(self.params, *used, obs[members, first][:, :, None], self.seeds[members, first])
        self.length = self._length
        return logits[:, :, -1][members, self.group].flatten(0, 1)


def _member_logits_fn(model: HookedTransformer, params: dict[str, Tensor]) -> LogitsFn:
    """A :data:`LogitsFn` of ``model`` with ``params`` (one member's weights) swapped in."""
    return lambda inputs, seeds: functional_call(model, params, (inputs,), {"seeds": seeds})


@torch.no_grad()
def population_returns(
    model: HookedTransformer,
    layout: ParameterLayout,
    flat_params: Tensor,
    grid: GridConfig,
    cells: Tensor,
    seeds: Tensor,
    max_runs: int = 32_768,
    cached: bool = True,
    share_prefixes: bool = True,
) -> Tensor:
    """Accumulated reward of every member on every cell under every seed.

    Args:
        flat_params: ``[P, n_params]`` one weight vector per member.
        cells: ``[C, 2]`` treasure cells; ``seeds``: ``[m, d_seed]`` (shared by all members).
        max_runs: at most this many runs (members x cells x seeds) step together; larger
            populations are split into chunks of whole members (memory bound, not a loop over
            single members unless one member alone exceeds it).
        cached: decode with :class:`PopulationPolicy` (the fast path, one token per step,
            key/value cache); with ``False``, ``vmap`` over ``functional_call`` of the hooked
            model, re-reading the prefix every step (slower).
        share_prefixes: with ``cached``, decode each member's runs that share their seed and
            observations so far once (:class:`PopulationPolicy`; the same returns).

    Returns:
        ``[P, C, m]`` float.
    """
    if flat_params.dim() != 2:
        raise ValueError(f"flat_params must be [population, n_params]; got {tuple(flat_params.shape)}")
    treasure, run_seeds = cell_seed_grid(cells.to(flat_params.device), seeds.to(flat_params.device))
    per_member = treasure.shape[0]
    chunk = max(1, max_runs // per_member)
    out = []
    for start in range(0, flat_params.shape[0], chunk):
        part = flat_params[start : start + chunk]
        n = part.shape[0]
        params = layout.unflatten(part)
        if cached:
            make = partial(PopulationPolicy, model, params, share_prefixes=share_prefixes)
        else:
            make = partial(RecomputePolicy, _population_logits_fn(model, params, n))
        played = rollout(make, grid, treasure.repeat(n, 1), run_seeds.repeat(n, 1))
        out.append(played.returns.view(n, cells.shape[0], seeds.shape[0]))
    return torch.cat(out)


@torch.no_grad()
def population_returns_loop(
    model: HookedTransformer, layout: ParameterLayout, flat_params: Tensor, grid: GridConfig,
    cells: Tensor, seeds: Tensor,
) -> Tensor:
    """As :func:`population_returns`, one member at a time through the hooked model itself
    (``functional_call``, each step re-reading the prefix): the reference."""
    treasure, run_seeds = cell_seed_grid(cells, seeds)
    out = []
    for flat in flat_params:
        make = partial(RecomputePolicy, _member_logits_fn(model, layout.unflatten(flat)))
        played = rollout(make, grid, treasure, run_seeds)
        out.append(played.returns.view(cells.shape[0], seeds.shape[0]))
    return torch.stack(out)


def tie_break_weight(m: int) -> float:
    """Weight of the tie-break term of the worst-cell fitness with ``m`` seeds: ``1 / (2 m)``.
    With integer per-run returns the worst cell's seed average moves in steps of ``1 / m``; the
    tie-break term lies in [0, 1], so it changes the fitness by at most half such a step."""
    return 1.0 / (2 * m)


def fitness(returns: Tensor, variant: str, grid: GridConfig | None = None,
            tie_break_q: float | None = None) -> Tensor:
    """``[P, C, m]`` returns -> ``[P]`` fitness: the seed average is taken first (it is what
    rewards randomization, the paper), then the worst cell (``worst``, q = inf) or the mean over
    cells (``erm``).

    With ``tie_break_q`` (``worst`` only; needs ``grid``), ties of the worst cell are broken:
    ``worst - tie_break_weight(m) * ||loss||_q``, where ``loss`` is each cell's seed-averaged
    shortfall from the best return of a run (``2 * treasure_reward``: both episodes find the
    treasure on their first step) divided by the range down to the floor, so in [0, 1], and
    ``||.||_q`` is the power mean ``(mean_c loss_c^q)^(1/q)``, also in [0, 1]. A better worst
    cell always wins (by at least ``1/m - 1/(2m)``); among equal worst cells the lower q-norm of
    the losses wins. Computed in float64 (the term is small against the returns)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed; choose from {VARIANTS}")
    per_cell = returns.mean(-1)  # [P, C]
    if variant == "erm":
        return per_cell.mean(-1)
    if tie_break_q is None:
        return per_cell.min(-1).values
    if grid is None:
        raise ValueError("fitness with tie_break_q needs the grid (its floor and best return)")
    if float(grid.treasure_reward) != int(grid.treasure_reward):
        raise ValueError(f"tie_break_q needs an integer GridConfig.treasure_reward (returns in steps of 1); "
                         f"got {grid.treasure_reward}")
    per_cell = returns.double().mean(-1)
    best = 2.0 * grid.treasure_reward
    loss = ((best - per_cell) / (best - grid.floor)).clamp(0.0, 1.0)
    soft_worst = loss.pow(tie_break_q).mean(-1).pow(1.0 / tie_break_q)  # [P] in [0, 1]
    return per_cell.min(-1).values - tie_break_weight(returns.shape[-1]) * soft_worst


__all__ = ["ParameterLayout", "PopulationPolicy", "fitness", "population_returns", "population_returns_loop", "tie_break_weight"]
