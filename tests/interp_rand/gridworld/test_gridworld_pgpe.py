"""PGPE training, agent checkpoints, the Ray path and the CLI."""

import argparse
import json

import pytest
import torch

from interp_rand.cli.gridworld import _scale, add_parser
from interp_rand.cli.main import main
from interp_rand.gridworld.agent import agent_model_config, sample_seeds
from interp_rand.gridworld.checkpoint import load_agent, save_agent
from interp_rand.gridworld.config import (
    AgentConfig,
    GridConfig,
    GridworldScale,
    PGPEConfig,
)
from interp_rand.gridworld.pgpe import GridworldProblem, train_agent
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.training import TrainConfig
from interp_rand.training.checkpoint import CheckpointError, RunSpec, save_checkpoint

TINY = GridworldScale(
    grid=GridConfig(size=2, episode_steps=3),
    agent=AgentConfig(d_model=8, n_layers=1, n_heads=2, d_head=4),
    pgpe=PGPEConfig(popsize=6, generations=3, m_seeds=2, eval_seeds=5, stdev_init=0.5, center_lr=0.05),
)


def test_training_is_deterministic_and_moves_the_centre(tmp_path):
    first = train_agent(TINY, log_every=1)
    second = train_agent(TINY, log_every=1)
    assert [h["generation"] for h in first.history] == [1, 2, 3]
    for a, b in zip(first.model.parameters(), second.model.parameters()):
        assert torch.equal(a, b)
    start = HookedTransformer(agent_model_config(TINY.grid, TINY.agent), seed=TINY.pgpe.seed)
    moved = sum((a - b).abs().sum() for a, b in zip(first.model.parameters(), start.parameters()))
    assert moved > 0

    path = save_agent(tmp_path / "run", TINY, first)
    loaded = load_agent(tmp_path / "run")
    assert loaded.path == path and loaded.scale == TINY
    for a, b in zip(first.model.parameters(), loaded.model().parameters()):
        assert torch.equal(a, b)
    assert loaded.metrics["history"] == first.history


def test_tie_break_trains_where_the_exact_worst_cell_is_stuck_at_the_floor(tmp_path):
    # a 3x3 grid with 5 steps: the initial agent (small weights, seed 0) misses some cell under
    # both seeds, so every member scores the floor and the exact worst cell's PGPE update is 0
    scale = GridworldScale(
        grid=GridConfig(size=3, episode_steps=5),
        agent=AgentConfig(d_model=8, n_layers=1, n_heads=2, d_head=4),
        pgpe=PGPEConfig(popsize=6, generations=3, m_seeds=2, eval_seeds=5, ranking="raw"),
    )
    start = HookedTransformer(agent_model_config(scale.grid, scale.agent), seed=0)

    def moved(trained):
        return sum((a - b).abs().sum().item() for a, b in zip(trained.model.parameters(), start.parameters()))

    exact = train_agent(scale, log_every=1)
    assert [h["center_worst_cell"] for h in exact.history] == [scale.grid.floor] * 3
    assert moved(exact) == 0.0
    broken = train_agent(scale.replace(tie_break_q=4), log_every=1)
    assert moved(broken) > 0
    assert all(h["center_fitness"] < h["center_worst_cell"] for h in broken.history)
    save_agent(tmp_path / "run", scale.replace(tie_break_q=4), broken)
    assert load_agent(tmp_path / "run").scale.pgpe.tie_break_q == 4


def test_tie_break_q_is_validated():
    for bad in (0.5, 0, True, "4"):
        with pytest.raises(ValueError, match="tie_break_q"):
            PGPEConfig(tie_break_q=bad)
    assert PGPEConfig().tie_break_q is None  # the exact worst cell by default (old checkpoints too)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    for extra, expected in (([], 4), (["--tie-break-q", "none"], None), (["--tie-break-q", "2"], 2.0)):
        assert _scale(parser.parse_args(["gridworld", "compare", *extra])).pgpe.tie_break_q == expected
    assert _scale(parser.parse_args(["gridworld", "compare", "--scale", "paper"])).pgpe.tie_break_q is None
    with pytest.raises(SystemExit):
        parser.parse_args(["gridworld", "train", "--tie-break-q", "0.5"])


def test_checkpoint_of_another_task_is_refused(tmp_path):
    cfg = ModelConfig(d_model=8, n_heads=2, n_ctx=4, d_vocab=3)
    spec = RunSpec("sort", {}, cfg, TrainConfig())
    save_checkpoint(tmp_path / "sort", 1, spec, HookedTransformer(cfg).state_dict(), {}, {}, keep=1)
    with pytest.raises(CheckpointError, match="checkpoint for task 'sort', not a grid-world agent"):
        load_agent(tmp_path / "sort")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_agent(tmp_path / "missing")
    assert main(["gridworld", "eval", str(tmp_path / "sort")]) == 2


@pytest.mark.slow
def test_ray_actors_return_the_local_fitness():
    ray = pytest.importorskip("ray")
    model_config = agent_model_config(TINY.grid, TINY.agent)
    local = GridworldProblem(TINY.grid, model_config, "worst")
    population = local.layout.flatten(local.model)[None] + 0.5 * torch.randn(
        8, local.layout.n_params, generator=torch.Generator().manual_seed(0))
    seeds = sample_seeds(TINY.grid, 3, torch.Generator().manual_seed(1))
    local.set_generation_seeds(seeds)
    batch = local.generate_batch(8)
    batch.set_values(population)
    local.evaluate(batch)
    expected = batch.evals.clone()

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = GridworldProblem(TINY.grid, model_config, "worst", num_actors=2)
        remote.set_generation_seeds(seeds)
        assert len(remote.actors) == 2
        batch = remote.generate_batch(8)
        batch.set_values(population)
        remote.evaluate(batch)
        assert torch.equal(batch.evals, expected)
        assert len(set(expected.flatten().tolist())) > 1  # members differ: not vacuous
        remote.kill_actors()
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_cli_train_eval_compare(tmp_path, capsys):
    out = tmp_path / "agent"
    args = ["--generations", "2", "--popsize", "4", "--m", "2", "--quiet"]
    assert main(["gridworld", "train", "--variant", "erm", *args, "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["run_dir"] == str(out) and -50 <= printed["worst_5pct"] <= printed["average"]
    assert main(["gridworld", "eval", str(out), "--seeds", "7"]) == 0
    evaluation = json.loads((out / "evaluation.json").read_text())
    assert evaluation["n_seeds"] == 7 and len(evaluation["first_visit_map"]) == 5  # the CPU scale is 5x5
    assert "heatmap" in (out / "first_visit.html").read_text()
    assert main(["gridworld", "compare", "--generations", "1", "--popsize", "2", "--m", "2", "--quiet",
                 "--out", str(tmp_path / "cmp")]) == 0
    rows = json.loads((tmp_path / "cmp" / "comparison.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["A^E_R", "A^q_R", "A^q_R (m=1)"]
    assert rows[1]["paper"]["worst_5pct"] == -27.0
    html = (tmp_path / "cmp" / "first_visit.html").read_text()
    assert "plotly" in html.lower() and "A^q_R (m=1)" in html
    with pytest.raises(SystemExit) as refused:  # refused while parsing: one line, exit 2
        main(["gridworld", "train", "--popsize", "1", "--out", str(tmp_path / "bad")])
    assert refused.value.code == 2 and not (tmp_path / "bad").exists()
