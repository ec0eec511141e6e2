"""Route dependence on the seed token: the statistics on hand-made data, and a tiny agent."""

from __future__ import annotations

import json

import pytest
import torch

from interp_rand.gridworld.agent import agent_model_config
from interp_rand.gridworld.config import AgentConfig, GridConfig
from interp_rand.model.transformer import HookedTransformer
from probes.route_seed import route_seed_dependence, route_statistics


def test_first_move_decided_by_the_first_direction():
    g = torch.Generator().manual_seed(0)
    projections = torch.randn(400, 2, generator=g)
    moves = (projections[:, 0] > projections[:, 0].median()).long()  # right (1) or left (0) by sign
    visited = torch.zeros(400, 3, 3, dtype=torch.bool)
    visited[:, 0, 0] = True  # every route starts at (0, 0)
    visited[:, 0, 1] = moves.bool()  # the cell (1, 0) visited exactly by the right-movers
    stats = route_statistics(projections, moves, visited, n_actions=4)
    assert stats["first_move"] == [0.5, 0.5, 0.0, 0.0]
    assert stats["first_move_mi"][0] == pytest.approx(1.0)  # the quartile tells the sign
    assert stats["first_move_mi"][1] < 0.05 and stats["first_move_mi_shuffled"][0] < 0.05
    assert stats["visit_correlation"][0][0][0] == 0  # visited by all: no correlation
    # the point-biserial correlation of a Normal with its sign: sqrt(2 / pi) = 0.80
    assert stats["visit_correlation"][0][0][1] == pytest.approx((2 / torch.pi) ** 0.5, abs=0.05) and stats["max_visit_correlation"][1] < 0.2


def test_tiny_agent_runs_and_serialises():
    grid = GridConfig(size=3, episode_steps=6)
    agent = AgentConfig(d_model=16, n_layers=1, n_heads=2, d_head=8)
    model = HookedTransformer(agent_model_config(grid, agent), seed=0).eval()
    dep = route_seed_dependence(model, grid, n_seeds=64, seed=1)
    assert len(dep.explained_variance) == 2 and sum(dep.first_move) == pytest.approx(1.0)
    assert sum(map(sum, dep.visit_rate)) >= 1  # every route reaches at least one cell
    assert 1 <= dep.n_distinct_routes <= 64 and all(0 <= c <= 1 for c in dep.max_visit_correlation)
    json.dumps(dep.to_dict())
    with pytest.raises(ValueError, match="n_seeds"):
        route_seed_dependence(model, grid, n_seeds=4)
