"""The explore-then-exploit grid world of the paper (Task 3) as a batched torch environment.

Every row of the batch is one independent run (an agent, a treasure cell and a seed), and all
rows step together as tensors. Coordinates are ``(x, y)`` with ``(0, 0)`` the bottom-left start
cell. A run is two episodes of ``episode_steps`` steps; an episode ends early when the treasure
is found, and the agent is then put back on the start cell. Each step costs -1, the step that
finds the treasure pays ``treasure_reward``; after the second episode every step pays 0.

    >>> grid = GridConfig(size=3, episode_steps=4)
    >>> state = reset(grid, torch.tensor([[1, 0]]))   # treasure right of the start
    >>> state, reward, moved_to = step(grid, state, torch.tensor([RIGHT]))
    >>> reward.tolist(), state.episode.tolist(), state.pos.tolist()
    ([1.0], [1], [[0, 0]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp_rand.gridworld.config import GridConfig

LEFT, UP, RIGHT, DOWN = 0, 1, 2, 3
ACTION_NAMES = ("left", "up", "right", "down")
# [4, 2] (dx, dy) per action, in the order above.
MOVES = torch.tensor([[-1, 0], [0, 1], [1, 0], [0, -1]])
# A treasure placed here is never found: the run shows the agent's pure exploration route.
NO_TREASURE = (-1, -1)


@dataclass(frozen=True)
class GridState:
    """The state of ``n`` runs.

    Attributes:
        pos: ``[n, 2]`` long, current cell ``(x, y)``.
        treasure: ``[n, 2]`` long, the treasure's cell.
        episode: ``[n]`` long, 0 or 1 while running, 2 once both episodes are over.
        steps: ``[n]`` long, steps taken in the current episode.
    """

    pos: Tensor
    treasure: Tensor
    episode: Tensor
    steps: Tensor

    @property
    def active(self) -> Tensor:
        """``[n]`` bool: runs whose next step counts."""
        return self.episode < 2


def treasure_cells(grid: GridConfig) -> Tensor:
    """``[n_cells, 2]`` long: every cell but the start, ordered by ``y`` then ``x``."""
    ys, xs = torch.meshgrid(torch.arange(grid.size), torch.arange(grid.size), indexing="ij")
    cells = torch.stack([xs.flatten(), ys.flatten()], dim=-1)
    return cells[1:]  # cell 0 is the start (0, 0)


def reset(grid: GridConfig, treasure: Tensor) -> GridState:
    """Runs at the start of episode 1, one per row of ``treasure: [n, 2]``."""
    if treasure.dim() != 2 or treasure.shape[1] != 2:
        raise ValueError(f"treasure must be [n, 2] cells (x, y); got {tuple(treasure.shape)}")
    treasure = treasure.long()
    inside = ((treasure >= 0) & (treasure < grid.size)).all(-1)
    absent = (treasure == torch.tensor(NO_TREASURE, device=treasure.device)).all(-1)
    at_start = (treasure == 0).all(-1)
    if not bool((inside & ~at_start | absent).all()):
        raise ValueError(
            f"treasure cells must lie on the {grid.size}x{grid.size} grid and not on the start (0, 0), "
            f"or be NO_TREASURE {NO_TREASURE}; got {treasure[~(inside & ~at_start | absent)][:3].tolist()}"
        )
    n = treasure.shape[0]
    zeros = torch.zeros(n, dtype=torch.long, device=treasure.device)
    return GridState(pos=torch.zeros_like(treasure), treasure=treasure, episode=zeros, steps=zeros.clone())


def step(grid: GridConfig, state: GridState, actions: Tensor) -> tuple[GridState, Tensor, Tensor]:
    """One step of every run.

    Args:
        actions: ``[n]`` long in ``{LEFT, UP, RIGHT, DOWN}``; moves off the grid stay put.

    Returns:
        ``(next_state, reward [n] float, moved_to [n, 2] long)``: ``moved_to`` is the cell the
        step reached (before a reset to the start); inactive runs get reward 0 and stay.
    """
    active = state.active
    target = (state.pos + MOVES.to(actions.device)[actions]).clamp(0, grid.size - 1)
    moved_to = torch.where(active[:, None], target, state.pos)
    found = active & (moved_to == state.treasure).all(-1)
    reward = torch.where(found, grid.treasure_reward, -1.0) * active
    steps = state.steps + active.long()
    over = active & (found | (steps >= grid.episode_steps))
    next_state = GridState(
        pos=torch.where(over[:, None], torch.zeros_like(moved_to), moved_to),
        treasure=state.treasure,
        episode=state.episode + over.long(),
        steps=torch.where(over, torch.zeros_like(steps), steps),
    )
    return next_state, reward.float(), moved_to


def observe(grid: GridConfig, pos: Tensor, reward: Tensor) -> Tensor:
    """``[n, d_obs]`` observation tokens: ``[one_hot(x), one_hot(y), reward]``."""
    x = torch.nn.functional.one_hot(pos[:, 0], grid.size).float()
    y = torch.nn.functional.one_hot(pos[:, 1], grid.size).float()
    return torch.cat([x, y, reward[:, None].float()], dim=-1)


__all__ = [
    "ACTION_NAMES",
    "DOWN",
    "LEFT",
    "MOVES",
    "NO_TREASURE",
    "RIGHT",
    "UP",
    "GridState",
    "observe",
    "reset",
    "step",
    "treasure_cells",
]
