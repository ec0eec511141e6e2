"""Agent evaluation (returns, first-visit map, routes) and the first-visit figure."""

import json

import torch

from interp_rand.figures.first_visit import first_visit_figure
from interp_rand.gridworld.agent import agent_model_config
from interp_rand.gridworld.config import AgentConfig, GridConfig
from interp_rand.gridworld.evaluation import evaluate_agent, lower_quantile, save_json
from interp_rand.gridworld.population import ParameterLayout
from interp_rand.model import HookedTransformer

GRID = GridConfig(size=3, episode_steps=6)


def noisy_agent(seed=0, scale=1.5):
    model = HookedTransformer(agent_model_config(GRID, AgentConfig(d_model=16, n_heads=2, d_head=8)), seed=seed)
    layout = ParameterLayout(model)
    noise = torch.randn(layout.n_params, generator=torch.Generator().manual_seed(seed))
    return layout.load(model, layout.flatten(model) + scale * noise)


def test_first_visits_follow_each_seeds_route(tmp_path):
    evaluation = evaluate_agent(noisy_agent(), GRID, n_seeds=12, seed=3)
    assert evaluation.returns.shape == evaluation.first_visit.shape == (8, 12)
    assert evaluation.routes.shape == (12, 6, 2)
    # before finding the treasure the agent cannot know where it is, so a treasure at cell c is
    # found exactly when the seed's treasure-free route first reaches c
    for s in range(12):
        route = evaluation.routes[s].tolist()
        for c, cell in enumerate(evaluation.cells.tolist()):
            expected = route.index(cell) + 1 if cell in route else GRID.episode_steps + 1
            assert evaluation.first_visit[c, s].item() == expected
    assert ((evaluation.returns >= -12) & (evaluation.returns <= 2)).all()
    summary = evaluation.summary()
    assert summary["worst_5pct"] <= summary["average"] and summary["worst_cell"] == summary["worst_5pct"]
    assert summary["first_visit_map"][0][0] is None
    assert summary["first_visit_min"] <= summary["first_visit_max"]
    assert sum(r["seeds"] for r in summary["routes"]) <= 12 and summary["n_distinct_routes"] >= 1
    assert summary["n_distinct_routes"] > 1  # a noisy seeded agent: the seed changes its route
    path = save_json(summary, tmp_path / "e.json")
    assert json.loads(path.read_text())["n_seeds"] == 12


def test_lower_quantile_convention():
    values = torch.arange(40, dtype=torch.float32)
    assert lower_quantile(values) == 1.0  # floor(0.05 * 39) = 1: the second smallest
    assert lower_quantile(torch.tensor([5.0, -3.0, 2.0])) == -3.0


def test_first_visit_figure_side_by_side():
    flat = [[None, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0]]
    steep = [[None, 1.0, 2.0], [8.0, 7.0, 3.0], [9.0, 6.0, 4.0]]
    fig = first_visit_figure({"A^E_R": steep, "A^q_R": flat}, episode_steps=9)
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 2
    assert all(t.zmin == 1 and t.zmax == 10 for t in heatmaps)
    assert [a.text for a in fig.layout.annotations][:2] == ["A^E_R", "A^q_R"]
