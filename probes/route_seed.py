"""Grid world: how the exploration route depends on the seed token (the paper's task 3).

The agent's only randomness is its seed token (a Normal vector, projected by ``W_seed``).
With no treasure on the grid every run follows its seed's exploration route. Over ``S``
seeds, :func:`route_seed_dependence` takes the seed token's embedding, its top principal
directions, and asks how the route depends on the projections:

- the first move: the mutual information (bits) between the first action and the quartile of
  the projection on each direction, against a shuffled control (moves of other seeds);
- the visited cells: per cell, the correlation between "the route visits the cell" and the
  projection on each direction (0 where every or no route visits it).

Only the grid world's public functions are read (:func:`interp_rand.gridworld.agent.play`,
``sample_seeds``): the statistics themselves live in :func:`route_statistics`, which takes
plain tensors.

    >>> dep = route_seed_dependence(agent, grid, n_seeds=512, seed=0)
    >>> dep.first_move_mi, dep.max_visit_correlation
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from probes.symmetry import mutual_information

N_BINS = 4


@dataclass(frozen=True)
class RouteSeedDependence:
    """Route statistics against the seed token's principal directions (module docstring).

    Attributes:
        explained_variance: per direction, its share of the seed embedding's variance.
        first_move: ``[n_actions]`` fraction of seeds taking each first action.
        first_move_mi: per direction, ``I(first move; projection quartile)`` in bits;
            first_move_mi_shuffled: the same with the moves of other seeds (control).
        visit_rate: ``[size][size]`` (row ``y``, column ``x``) fraction of routes visiting each cell.
        visit_correlation: per direction ``[size][size]`` correlation of visiting with the projection.
        max_visit_correlation: per direction, the largest ``|correlation|`` over cells.
        n_distinct_routes: distinct routes among the seeds.
        n_seeds: seeds used.
    """

    explained_variance: list[float]
    first_move: list[float]
    first_move_mi: list[float]
    first_move_mi_shuffled: list[float]
    visit_rate: list[list[float]]
    visit_correlation: list[list[list[float]]]
    max_visit_correlation: list[float]
    n_distinct_routes: int
    n_seeds: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _quartiles(x: Tensor) -> Tensor:
    """``[S]`` long bin 0..N_BINS-1 of each value among the others (equal-count bins)."""
    return (x.argsort().argsort() * N_BINS) // len(x)


def route_statistics(projections: Tensor, first_moves: Tensor, visited: Tensor, n_actions: int,
                     generator: torch.Generator | None = None) -> dict[str, Any]:
    """The first-move and visit statistics of :class:`RouteSeedDependence`.

    Args:
        projections: ``[S, k]`` seed projections on ``k`` directions.
        first_moves: ``[S]`` long first actions.
        visited: ``[S, size, size]`` bool, indexed ``[seed, y, x]``.
    """
    S, k = projections.shape
    generator = generator or torch.Generator().manual_seed(0)
    shuffled = first_moves[torch.randperm(S, generator=generator)]
    bins = [_quartiles(projections[:, i]) for i in range(k)]
    v = visited.double().flatten(1)  # [S, cells]
    v = v - v.mean(0)
    p = projections.double() - projections.double().mean(0)  # [S, k]
    norm = v.norm(dim=0)[None] * p.norm(dim=0)[:, None]  # [k, cells]
    corr = torch.where(norm > 0, (p.T @ v) / norm.clamp_min(1e-30), torch.zeros_like(norm))
    size = visited.shape[-1]
    return {
        "first_move": (torch.bincount(first_moves, minlength=n_actions).double() / S).tolist(),
        "first_move_mi": [mutual_information(first_moves, b) for b in bins],
        "first_move_mi_shuffled": [mutual_information(shuffled, b) for b in bins],
        "visit_rate": visited.double().mean(0).tolist(),
        "visit_correlation": corr.view(k, size, size).tolist(),
        "max_visit_correlation": corr.abs().max(-1).values.tolist(),
    }


@torch.no_grad()
def route_seed_dependence(model: Any, grid: Any, n_seeds: int = 512, n_components: int = 2, seed: int = 0) -> RouteSeedDependence:
    """Roll ``model`` out with no treasure under ``n_seeds`` seeds drawn from ``seed``."""
    from interp_rand.gridworld.agent import play, sample_seeds
    from interp_rand.gridworld.environment import NO_TREASURE

    if n_seeds < 2 * N_BINS:
        raise ValueError(f"n_seeds={n_seeds} must be >= {2 * N_BINS}")
    seeds = sample_seeds(grid, n_seeds, torch.Generator().manual_seed(seed))
    run = play(model, grid, torch.tensor(NO_TREASURE).expand(n_seeds, 2), seeds)
    embed = model.seed_embed(seeds.to(model.seed_embed.W_seed.dtype)).double()  # [S, d_model]
    centred = embed - embed.mean(0)
    _, sv, vh = torch.linalg.svd(centred, full_matrices=False)
    k = min(n_components, len(sv))
    projections = centred @ vh[:k].T  # [S, k]
    routes = run.moved_to[:, : grid.episode_steps]  # [S, T, 2] cells (x, y)
    visited = torch.zeros(n_seeds, grid.size, grid.size, dtype=torch.bool)
    rows = torch.arange(n_seeds)[:, None].expand(routes.shape[:2])
    visited[rows, routes[..., 1], routes[..., 0]] = True
    stats = route_statistics(projections, run.actions[:, 0], visited, int(model.cfg.d_vocab_out))
    variance = sv.pow(2)
    return RouteSeedDependence(
        explained_variance=(variance[:k] / variance.sum().clamp_min(1e-30)).tolist(),
        n_distinct_routes=len({tuple(map(tuple, r)) for r in routes.tolist()}),
        n_seeds=n_seeds,
        **stats,
    )


__all__ = ["RouteSeedDependence", "route_seed_dependence", "route_statistics"]
