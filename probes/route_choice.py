"""Grid world: what the seed chooses, found from the agent's own derivatives and checked by
intervening on the seed itself (the randomness channel).

The agent's only randomness is its seed, a Normal vector ``s`` of ``d`` numbers read as its own
first token. With no treasure on the grid the first observation is the same for every seed, so
the exploration route is a function of ``s`` alone. The mechanism stated:

    first move = f(P_1 s)     # P_1: the seed directions the first move's logits change along
    route      = g(P_R s)     # P_R: the directions any move's logits change along, on its own route

where the directions are the leading eigenvectors of ``E_s[sum_t J_t^T J_t]`` (``J_t``: the
derivative in the seed of move ``t``'s logits, the moves' common part removed; an active
subspace, :func:`seed_gram`), as few as hold :data:`SUBSPACE_SHARE` of its trace
(:func:`rank_of`). Checks, each against a control that can fail it:

- *first move*: for pairs of seeds whose first moves differ, the base seed with its component
  in ``P_1`` taken from the source, ``s_b + P_1 (s_s - s_b)``: the agent's first move becomes the
  source's (IIA, target 0.9), against the mean of :data:`RANDOM_DRAWS` random subspaces of the
  same size;
- *route*: the same with ``P_R`` on pairs taking different routes, the whole episode-1 route
  becoming the source's; and the curve of that IIA as the route's top ``k`` directions are
  swapped, ``k = 1..d`` (at ``k = d`` the whole seed: 1 by construction, the swap's own check);
- *the rival* "the seed picks the first move by a hyperplane cut", ``argmax(l(0) + A s)`` with
  the agent's readout linearised at the mean seed (:func:`first_move_readout`): its agreement
  with the agent, against a constant rule (the commonest move).

Beside them, what the seed decides for the task: the number of distinct routes, the visit rate
of each cell across seeds, the worst treasure cell for an adversary who cannot see the seed
(the seed-averaged return, minimised over cells) and for one who can (per seed the worst cell,
averaged): the gap between the two is what the seed buys against an oblivious adversary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from interp_rand.display import Displayed
from interp_rand.verdicts import Claim, reaches

IIA_TARGET = 0.9
AGREEMENT_TARGET = 0.9
RANDOM_DRAWS = 5  # random subspaces averaged for each control
SUBSPACE_SHARE = 0.95  # the decision subspace: the fewest seed directions holding this share of E[J^T J]


@dataclass(repr=False)
class RouteChoice(Displayed):
    """What the seed chooses for one agent (module docstring)."""

    label: str
    n_seeds: int
    d_seed: int
    rank_first: int
    rank_route: int
    first_move: list[float]
    hyperplane_agreement: float
    constant_rule: float
    iia_first: float
    iia_first_random: float
    iia_route: float
    iia_route_random: float
    route_curve: list[float]
    n_pairs: int
    n_first_pairs: int
    n_distinct_routes: int
    routes_per_first_move: list[int]
    visit_rate: list[list[float]]
    worst_cell: list[int]
    worst_cell_return: float
    seed_aware_worst: float
    average: float
    claims: list[Claim] = field(default_factory=list)
    rivals: list[Claim] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        outcomes = {c.verdict.outcome for c in self.claims}
        return "fails" if "fails" in outcomes else ("holds" if outcomes == {"holds"} else "inconclusive")

    @property
    def route_rank(self) -> int | None:
        """The fewest of the route's top directions whose swap makes the whole route the source
        seed's on at least :data:`IIA_TARGET` of pairs (``None``: no number of them does)."""
        return next((k + 1 for k, v in enumerate(self.route_curve) if v >= IIA_TARGET), None)

    @property
    def oblivious_gap(self) -> float:
        """The worst cell's seed-averaged return minus the seed-aware adversary's: what the
        seed buys against an adversary who places the treasure without seeing it."""
        return self.worst_cell_return - self.seed_aware_worst

    def headline(self) -> str:
        moves = ", ".join(f"{p:.2f}" for p in self.first_move)
        k90 = self.route_rank
        return (f"{self.label}: {self.verdict.upper()} — the seed chooses the first move (shares {moves}) in "
                f"{self.rank_first} of its {self.d_seed} directions (IIA {self.iia_first:.3f}, random subspaces "
                f"{self.iia_first_random:.3f}) and the route in {self.rank_route} (IIA {self.iia_route:.3f}, random "
                f"{self.iia_route_random:.3f}); the route follows the source seed on >= {IIA_TARGET} of pairs from "
                + (f"{k90} directions" if k90 else "no subspace short of the whole seed")
                + f"; {self.n_distinct_routes} routes over {self.n_seeds} seeds")

    def lines(self) -> list[str]:
        x, y = self.worst_cell
        curve = " ".join(f"{v:.2f}" for v in self.route_curve)
        return [self.headline(),
                f"routes: {self.n_distinct_routes} distinct over {self.n_seeds} seeds; per first move "
                f"{self.routes_per_first_move}",
                f"route IIA with the top k route directions, k = 1..{self.d_seed}: {curve} ({self.n_pairs} pairs of seeds "
                f"taking different routes; the first move on {self.n_first_pairs} pairs whose first moves differ)",
                f"worst treasure cell ({x},{y}): seed-averaged return {self.worst_cell_return:.2f} (an adversary who "
                f"cannot see the seed); per seed its worst cell, averaged: {self.seed_aware_worst:.2f} (one who can); "
                f"the seed buys {self.oblivious_gap:.2f}; average over cells {self.average:.2f}"] + [
            c.line() for c in self.claims] + [c.line() + ("  (rejected)" if c.verdict.outcome == "fails" else "")
                                              for c in self.rivals]

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("claims", "rivals")}
        out.update(oblivious_gap=self.oblivious_gap, verdict=self.verdict, headline=self.headline(),
                   claims=[c.to_dict() for c in self.claims], rivals=[c.to_dict() for c in self.rivals])
        return out


def first_move_readout(model: Any, grid: Any) -> tuple[Tensor, Tensor]:
    """``(l0 [n_actions], A [n_actions, d_seed])``: the first-move logits at the mean seed and
    their derivative in the seed (the agent's linear readout of its seed)."""
    from interp_rand.gridworld import environment as env

    start = env.reset(grid, torch.tensor(env.NO_TREASURE)[None])
    obs = env.observe(grid, start.pos, torch.zeros(1))[:, None]  # [1, 1, d_obs]: the same for every seed

    def logits(seed: Tensor) -> Tensor:
        return model(obs, seeds=seed[None])[0, -1]

    zero = torch.zeros(grid.d_obs)
    with torch.enable_grad():
        A = torch.autograd.functional.jacobian(logits, zero)
    return logits(zero).detach(), A.detach()


def seed_gram(model: Any, grid: Any, run: Any, steps: int) -> Tensor:
    """``[d_seed, d_seed]`` ``E_seeds[sum_t J_t^T J_t]`` over the first ``steps`` moves of each
    run's own route, ``J_t`` the derivative in the seed of move ``t``'s logits with the common
    part of the moves removed (adding one number to every logit changes no argmax)."""
    with torch.enable_grad():
        x = run.seeds.clone().requires_grad_(True)
        logits = model(run.inputs[:, :steps], seeds=x)
        logits = logits - logits.mean(-1, keepdim=True)
        gram = torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64)
        for t in range(steps):
            for a in range(logits.shape[-1]):
                g = torch.autograd.grad(logits[:, t, a].sum(), x, retain_graph=True)[0].double()
                gram += g.T @ g
    return gram / len(x)


def decision_subspace(gram: Tensor, share: float = SUBSPACE_SHARE) -> tuple[Tensor, list[float]]:
    """``([d_seed, d_seed] directions, eigenvalue shares)``: the seed directions along which the
    moves' logits change (the eigenvectors of :func:`seed_gram`, an active subspace), largest
    first; :func:`rank_of` says how many hold ``share`` of it."""
    values, vectors = torch.linalg.eigh(gram)
    values, vectors = values.flip(0).clamp_min(0), vectors.flip(1)
    return vectors.float(), (values / values.sum().clamp_min(1e-30)).tolist()


def rank_of(shares: list[float], share: float = SUBSPACE_SHARE) -> int:
    """The fewest leading directions holding ``share`` of the trace."""
    return min(int((torch.tensor(shares).cumsum(0) < share).sum()) + 1, len(shares))


def _swap(base: Tensor, source: Tensor, basis: Tensor) -> Tensor:
    return base + (source - base) @ basis @ basis.T


def _routes(model: Any, grid: Any, seeds: Tensor) -> Any:
    from interp_rand.gridworld.agent import play
    from interp_rand.gridworld.environment import NO_TREASURE

    return play(model, grid, torch.tensor(NO_TREASURE).expand(len(seeds), 2), seeds)


def _same_route(a: Any, b: Any, steps: int) -> Tensor:
    return (a.moved_to[:, :steps] == b.moved_to[:, :steps]).all(-1).all(-1)


@torch.no_grad()
def route_choice(model: Any, grid: Any, evaluation: Any, label: str, *, n_seeds: int = 1000, n_pairs: int = 500,
                 seed: int = 0) -> RouteChoice:
    """The rule, its checks and what the seed decides (module docstring). ``evaluation``: the
    agent's :class:`~interp_rand.gridworld.evaluation.AgentEvaluation` (every treasure cell x
    its seeds), for the visit rates and the two adversaries."""
    from interp_rand.gridworld.agent import sample_seeds

    model.eval()
    generator = torch.Generator().manual_seed(seed)
    seeds = sample_seeds(grid, n_seeds, generator)
    run = _routes(model, grid, seeds)
    first = run.actions[:, 0]
    steps = grid.episode_steps
    n_actions = int(model.cfg.d_vocab_out)
    shares = torch.bincount(first, minlength=n_actions).double() / n_seeds
    l0, A = first_move_readout(model, grid)
    hyperplane = (l0 + seeds @ A.T).argmax(-1)
    first_dirs, first_spectrum = decision_subspace(seed_gram(model, grid, run, 1))
    route_dirs, route_spectrum = decision_subspace(seed_gram(model, grid, run, steps))
    r_first, r_route = rank_of(first_spectrum), rank_of(route_spectrum)

    # pairs of seeds (base i, source j): for the route, taking different routes; for the first move, different first moves
    i = torch.randint(n_seeds, (20 * n_pairs,), generator=generator)
    j = torch.randint(n_seeds, (20 * n_pairs,), generator=generator)
    routes_differ = (~_same_route(_index(run, i), _index(run, j), steps)).nonzero()[:, 0][:n_pairs]
    moves_differ = (first[i] != first[j]).nonzero()[:, 0][:n_pairs]
    d = grid.d_obs

    def route_iia(basis: Tensor) -> float:
        b, s = i[routes_differ], j[routes_differ]
        if not len(b):  # every seed took one route: nothing to swap (the claim is then inconclusive)
            return float("nan")
        patched = _routes(model, grid, _swap(seeds[b], seeds[s], basis))
        return float(_same_route(patched, _index(run, s), steps).double().mean())

    def first_iia(basis: Tensor) -> float:
        b, s = i[moves_differ], j[moves_differ]
        if not len(b):  # every seed took one first move
            return float("nan")
        patched = _routes(model, grid, _swap(seeds[b], seeds[s], basis))
        return float((patched.actions[:, 0] == first[s]).double().mean())

    def random_mean(iia: Any, k: int) -> float:
        """The mean IIA of :data:`RANDOM_DRAWS` random ``k``-dim subspaces (one draw varies too much)."""
        return sum(iia(torch.linalg.qr(torch.randn(d, k, generator=generator))[0]) for _ in range(RANDOM_DRAWS)) / RANDOM_DRAWS

    curve = [route_iia(route_dirs[:, :k]) for k in range(1, d + 1)]
    iia_first, iia_first_random = first_iia(first_dirs[:, :r_first]), random_mean(first_iia, r_first)
    iia_route, iia_route_random = curve[r_route - 1], random_mean(route_iia, r_route)

    routes = run.moved_to[:, :steps]
    keys = [tuple(map(tuple, r)) for r in routes.tolist()]
    per_move = [len({k for k, m in zip(keys, first.tolist()) if m == a}) for a in range(n_actions)]
    visited = torch.zeros(n_seeds, grid.size, grid.size, dtype=torch.bool)
    visited[torch.arange(n_seeds)[:, None].expand(routes.shape[:2]), routes[..., 1], routes[..., 0]] = True
    returns = evaluation.returns  # [C, S]
    per_cell = returns.mean(1)
    worst = int(per_cell.argmin())
    agreement, constant = float((hyperplane == first).double().mean()), float(shares.max())
    claims = [
        reaches(f"the first move is chosen in {r_first} of the seed's {d} directions (those its logits move along, "
                f"{SUBSPACE_SHARE:.0%} of E[J^T J]): swapping them moves the first move to the source seed's",
                iia_first, target=IIA_TARGET, controls={f"random {r_first}-dim subspaces (mean of {RANDOM_DRAWS})": iia_first_random}),
        reaches(f"the route is chosen in {r_route} of the seed's {d} directions (those its moves' logits move "
                f"along): swapping them makes the whole episode-1 route the source seed's", iia_route,
                target=IIA_TARGET, controls={f"random {r_route}-dim subspaces (mean of {RANDOM_DRAWS})": iia_route_random}),
    ]
    rivals = [
        reaches("rival: the first move is a hyperplane cut of the seed, argmax(l(0) + A s) with the agent's readout "
                "linearised at the mean seed", agreement, target=AGREEMENT_TARGET,
                controls={"a constant rule (the commonest move)": constant}),
    ]
    return RouteChoice(
        label=label, n_seeds=n_seeds, d_seed=d, rank_first=r_first, rank_route=r_route, first_move=shares.tolist(),
        hyperplane_agreement=agreement, constant_rule=constant, iia_first=iia_first,
        iia_first_random=iia_first_random, iia_route=iia_route, iia_route_random=iia_route_random,
        route_curve=curve, n_pairs=len(routes_differ), n_first_pairs=len(moves_differ), n_distinct_routes=len(set(keys)),
        routes_per_first_move=per_move, visit_rate=visited.double().mean(0).tolist(),
        worst_cell=[int(v) for v in evaluation.cells[worst].tolist()], worst_cell_return=float(per_cell[worst]),
        seed_aware_worst=float(returns.min(0).values.mean()), average=float(returns.mean()), claims=claims,
        rivals=rivals)


def _index(run: Any, rows: Tensor) -> Any:
    return dataclasses.replace(run, **{f.name: getattr(run, f.name)[rows] for f in dataclasses.fields(run)})


__all__ = ["RouteChoice", "decision_subspace", "first_move_readout", "rank_of", "route_choice", "seed_gram"]
