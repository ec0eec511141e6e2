"""The batched grid world on hand-worked runs, and its config's bad-input errors."""

import pytest
import torch

from interp_rand.gridworld import environment as env
from interp_rand.gridworld.agent import rollout
from interp_rand.gridworld.config import (
    GRIDWORLD_CPU,
    GRIDWORLD_PAPER,
    GridConfig,
    PGPEConfig,
)

R, U, L, D = env.RIGHT, env.UP, env.LEFT, env.DOWN


class ScriptedPolicy:
    """Plays a fixed action list per run, whatever it observes."""

    def __init__(self, actions):
        self.actions = torch.tensor(actions)
        self.t = 0

    def __call__(self, obs):
        logits = torch.nn.functional.one_hot(self.actions[:, self.t % self.actions.shape[1]], 4).float()
        self.t += 1
        return logits


def play_script(grid, treasure, actions):
    n = len(treasure)
    return rollout(lambda seeds: ScriptedPolicy(actions), grid, torch.tensor(treasure), torch.zeros(n, grid.d_obs))


def test_snake_finds_treasure_and_exploits():
    grid = GridConfig(size=3, episode_steps=9, treasure_reward=1.0)
    snake = [R, R, U, L, L, U, R, R, D]  # row by row: visits (1,0),(2,0),(2,1),(1,1),(0,1),(0,2),(1,2),(2,2)
    # treasure (1,1): found at step 4 of episode 1 (3 x -1, then +1); the second episode goes
    # on with the script, snake[4:] = L, U, R from the start: (0,0) wall, (0,1), (1,1) found:
    # -1 - 1 + 1.
    run = play_script(grid, [[1, 1]], [snake])
    assert run.rewards[0, :7].tolist() == [-1, -1, -1, 1, -1, -1, 1]
    assert run.returns.tolist() == [-3.0]
    assert run.episode[0, :4].tolist() == [0, 0, 0, 0] and run.episode[0, 4:7].tolist() == [1, 1, 1]
    assert (run.episode[0, 7:] == 2).all() and (run.rewards[0, 7:] == 0).all()
    assert run.moved_to[0, 3].tolist() == [1, 1]
    # the observation after finding shows the treasure's cell with the treasure reward
    obs = run.inputs[0, 4]
    assert obs[1] == 1 and obs[3 + 1] == 1 and obs[-1] == 1.0


def test_walls_hold_and_floor_is_minus_two_episodes():
    grid = GridConfig(size=3, episode_steps=5)
    run = play_script(grid, [[2, 2], [2, 0]], [[L] * 10, [D] * 10])
    # both agents push into walls and never move, so they never find the treasure
    assert run.returns.tolist() == [-10.0, -10.0]
    assert (run.moved_to == 0).all()
    # a long episode that finds nothing resets to the start when its steps run out
    run = play_script(grid, [[0, 2]], [[R, R, R, R, R, U, U, U, U, U]])
    assert run.moved_to[0, 4].tolist() == [2, 0] and run.moved_to[0, 5].tolist() == [0, 1]
    assert run.returns.tolist() == [-5.0 - 1.0 + 1.0]


def test_paper_grid_floor_and_snake_on_five_by_five():
    # 5x5, 25 + 25 steps (the paper): a run that never finds the treasure scores the floor -50; a
    # boustrophedon snake (24 moves) visits every cell in episode 1, so it finds the last one,
    # (4, 4), at step 24 (23 x -1, then +1) and walks straight back in 8 steps (7 x -1, +1).
    grid = GRIDWORLD_PAPER.grid
    snake = ([R] * 4 + [U] + [L] * 4 + [U]) * 2 + [R] * 4
    assert len(snake) == 24
    run = play_script(grid, [[4, 4], [4, 4]], [snake + [R] * 4 + [U] * 4 + [R] * 18, [L] * 50])
    assert run.returns.tolist() == [-22.0 - 6.0, -50.0]
    assert run.episode[0, 23].item() == 0 and run.episode[0, 24].item() == 1


def test_treasure_cells_exclude_start_and_cover_grid():
    cells = env.treasure_cells(GridConfig(size=4, episode_steps=6))
    assert cells.shape == (15, 2)
    assert [0, 0] not in cells.tolist() and len({tuple(c) for c in cells.tolist()}) == 15


@pytest.mark.parametrize("kwargs, match", [
    ({"size": 1}, "size=1"),
    ({"size": 5, "episode_steps": 7}, "too short"),
    ({"size": 3, "episode_steps": 0}, "episode_steps=0"),
])
def test_bad_grids(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GridConfig(**kwargs)


def test_bad_treasure_and_population():
    grid = GridConfig(size=3, episode_steps=4)
    with pytest.raises(ValueError, match="not on the start"):
        env.reset(grid, torch.tensor([[0, 0]]))
    with pytest.raises(ValueError, match="not on the start"):
        env.reset(grid, torch.tensor([[3, 1]]))
    with pytest.raises(ValueError, match="popsize=1 must be an integer >= 2"):
        PGPEConfig(popsize=1)
    with pytest.raises(ValueError, match="even"):
        PGPEConfig(popsize=7)
    with pytest.raises(ValueError, match="variant='q'"):
        PGPEConfig(variant="q")


def test_named_scales_follow_the_paper():
    paper = GRIDWORLD_PAPER
    assert (paper.grid.size, paper.grid.episode_steps, paper.grid.total_steps) == (5, 25, 50)
    assert (paper.pgpe.popsize, paper.pgpe.center_lr, paper.pgpe.stdev_lr, paper.pgpe.stdev_init,
            paper.pgpe.m_seeds) == (300, 0.01, 0.01, 0.03, 10)
    assert (paper.agent.n_layers, paper.agent.n_heads, paper.agent.d_head, paper.agent.d_model) == (2, 4, 10, 80)
    # The CPU scale plays the paper's game (grid, episodes, reward, m) with a smaller agent and
    # population: only the departures named next to GRIDWORLD_CPU differ.
    cpu = GRIDWORLD_CPU
    assert cpu.grid == paper.grid
    assert (cpu.pgpe.m_seeds, cpu.pgpe.center_lr, cpu.pgpe.stdev_lr, cpu.pgpe.stdev_init) == (10, 0.01, 0.01, 0.03)
    assert (cpu.agent.n_layers, cpu.agent.n_heads) == (2, 4)
    assert cpu.pgpe.popsize < paper.pgpe.popsize and cpu.agent.d_model < paper.agent.d_model
    assert paper.grid.floor == cpu.grid.floor == -50.0 and paper.grid.d_obs == 11 and paper.grid.n_cells == 24
