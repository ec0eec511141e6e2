"""Evaluating a grid-world agent: accumulated reward over every treasure cell x many seeds
(average and worst-5%, as ``interp_rand.seeded_evaluation`` defines them for success), the
first-visit-time map and the distinct exploration routes across seeds, saved as JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp_rand.gridworld import environment as env
from interp_rand.gridworld.agent import cell_seed_grid, play, sample_seeds
from interp_rand.gridworld.config import GridConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.seeded_evaluation.metrics import lower_quantile


@dataclass(frozen=True)
class AgentEvaluation:
    """One agent on every treasure cell under ``S`` seeds.

    Attributes:
        grid: the grid.
        cells: ``[C, 2]`` treasure cells (``treasure_cells`` order).
        returns: ``[C, S]`` accumulated reward of both episodes.
        first_visit: ``[C, S]`` long, the episode-1 step at which the agent reached the cell
            (found the treasure there); ``episode_steps + 1`` if it never did.
        routes: ``[S, episode_steps, 2]`` long, each seed's episode-1 route with no treasure
            on the grid (before finding it, the agent cannot tell where the treasure is, so
            every run follows a prefix of its seed's route).
    """

    grid: GridConfig
    cells: Tensor
    returns: Tensor
    first_visit: Tensor
    routes: Tensor

    def first_visit_map(self) -> list[list[float | None]]:
        """``[size][size]`` (row ``y``, column ``x``) seed-mean first-visit step per cell;
        ``None`` at the start cell."""
        grid_map: list[list[float | None]] = [[None] * self.grid.size for _ in range(self.grid.size)]
        for (x, y), value in zip(self.cells.tolist(), self.first_visit.float().mean(1).tolist()):
            grid_map[y][x] = value
        return grid_map

    def distinct_routes(self) -> list[tuple[list[list[int]], int]]:
        """Distinct episode-1 routes with how many seeds take each, most frequent first."""
        counts = Counter(tuple(map(tuple, r)) for r in self.routes.tolist())
        return [([list(c) for c in route], n) for route, n in counts.most_common()]

    def summary(self, max_routes: int = 10) -> dict[str, Any]:
        per_cell = self.returns.mean(1)  # [C] seed-averaged return
        visit = self.first_visit.float().mean(1)
        routes = self.distinct_routes()
        return {
            "n_cells": int(self.cells.shape[0]),
            "n_seeds": int(self.returns.shape[1]),
            "average": self.returns.mean().item(),
            "worst_5pct": lower_quantile(per_cell),
            "worst_cell": per_cell.min().item(),
            "worst_5pct_pooled": lower_quantile(self.returns),
            "floor": self.grid.floor,
            "seed_std": self.returns.std(1, unbiased=False).mean().item(),
            "first_visit_max": visit.max().item(),
            "first_visit_min": visit.min().item(),
            "first_visit_map": self.first_visit_map(),
            "per_cell_return": {f"{x},{y}": v for (x, y), v in zip(self.cells.tolist(), per_cell.tolist())},
            "n_distinct_routes": len(routes),
            "routes": [{"seeds": n, "cells": route} for route, n in routes[:max_routes]],
        }


@torch.no_grad()
def evaluate_agent(model: HookedTransformer, grid: GridConfig, n_seeds: int, seed: int = 0) -> AgentEvaluation:
    """Play ``model`` on every treasure cell under ``n_seeds`` seeds drawn from ``seed``."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds={n_seeds} must be >= 1")
    device = model.W_U.device
    cells = env.treasure_cells(grid).to(device)
    seeds = sample_seeds(grid, n_seeds, torch.Generator().manual_seed(seed)).to(device)
    n_cells = cells.shape[0]
    run = play(model, grid, *cell_seed_grid(cells, seeds))
    # [C * S, T] -> first episode-1 step that stood on the treasure (1-based)
    on_treasure = (run.moved_to == run.treasure[:, None]).all(-1) & (run.episode == 0)
    steps = torch.arange(1, grid.total_steps + 1, device=device).expand_as(on_treasure)
    first = torch.where(on_treasure, steps, grid.episode_steps + 1).min(1).values
    absent = torch.tensor(env.NO_TREASURE, device=device).expand(n_seeds, 2)
    explore = play(model, grid, absent, seeds)
    return AgentEvaluation(
        grid=grid, cells=cells.cpu(), returns=run.returns.view(n_cells, n_seeds).cpu(),
        first_visit=first.view(n_cells, n_seeds).cpu(), routes=explore.moved_to[:, : grid.episode_steps].cpu(),
    )


def save_json(data: Any, path: str | Path) -> Path:
    """Write ``data`` as strict JSON atomically (:func:`interp_rand.output.write_json`)."""
    from interp_rand.output import write_json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json(path, data)


__all__ = ["AgentEvaluation", "evaluate_agent", "lower_quantile", "save_json"]
