"""Agent checkpoints go through the core's checkpoint reader (``read_meta`` + ``load_model``):
the same errors, and the agent is ``.model()`` as for every other checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from interp_rand.gridworld import checkpoint as agent_checkpoint
from interp_rand.gridworld.agent import agent_model_config
from interp_rand.gridworld.checkpoint import AgentCheckpoint, load_agent, save_agent
from interp_rand.gridworld.config import AgentConfig, GridConfig, GridworldScale, PGPEConfig
from interp_rand.gridworld.pgpe import TrainedAgent
from interp_rand.model import HookedTransformer
from interp_rand.training import checkpoint as core
from interp_rand.training.checkpoint import META_FILE, MODEL_FILE, VERSION, CheckpointError, step_dir

TINY = GridworldScale(
    grid=GridConfig(size=2, episode_steps=3),
    agent=AgentConfig(d_model=8, n_layers=1, n_heads=2, d_head=4),
    pgpe=PGPEConfig(popsize=6, generations=3, m_seeds=2, eval_seeds=5, stdev_init=0.5, center_lr=0.05),
)


@pytest.fixture
def run(tmp_path):
    model = HookedTransformer(agent_model_config(TINY.grid, TINY.agent), seed=4).eval()
    n_params = sum(p.numel() for p in model.parameters())
    save_agent(tmp_path / "run", TINY, TrainedAgent(model, torch.full((n_params,), 0.1), [{"generation": 3}]))
    return tmp_path / "run", model


def test_agent_checkpoint_is_read_like_a_training_checkpoint(run):
    path, model = run
    ckpt = load_agent(path)
    assert isinstance(ckpt, AgentCheckpoint)
    assert ckpt.path == step_dir(path, TINY.pgpe.generations) and ckpt.step == TINY.pgpe.generations
    assert ckpt.scale == TINY and ckpt.model_config == model.cfg
    assert ckpt.metrics == {"history": [{"generation": 3}]}
    # the model is a method, as Checkpoint.model(): a fresh eval-mode copy each call
    first, second = ckpt.model(), ckpt.model()
    assert first is not second and not first.training
    for (name, a), b in zip(model.state_dict().items(), first.state_dict().values()):
        assert torch.equal(a, b), name
    x = torch.randn(3, 4, TINY.grid.d_obs)
    seeds = torch.randn(3, TINY.grid.d_obs)
    assert torch.equal(first(x, seeds=seeds), model(x, seeds=seeds))


def test_the_core_reader_is_the_one_reader(run, monkeypatch):
    path, _ = run
    calls = []
    read_meta, load_model = core.read_meta, core.load_model
    monkeypatch.setattr(agent_checkpoint, "read_meta", lambda p: calls.append("meta") or read_meta(p))
    monkeypatch.setattr(agent_checkpoint, "load_model", lambda *a: calls.append("model") or load_model(*a))
    load_agent(path).model()
    assert calls == ["meta", "model"]


def _meta(path):
    return step_dir(path, TINY.pgpe.generations) / META_FILE


@pytest.mark.parametrize("garbage", [b'{"format": "interp-rand/check', b"\xff\xfe\x00\x81 not text"])
def test_truncated_json_is_the_core_error(run, garbage):
    path, _ = run
    _meta(path).write_bytes(garbage)
    with pytest.raises(CheckpointError, match="is not valid JSON") as err:
        load_agent(path)
    assert str(_meta(path)) in str(err.value)


def test_foreign_json_and_wrong_version_are_the_core_errors(run):
    path, _ = run
    meta = json.loads(_meta(path).read_text())
    _meta(path).write_text(json.dumps({**meta, "version": VERSION + 7}))
    with pytest.raises(CheckpointError, match=f"has version {VERSION + 7}; this build reads {VERSION}"):
        load_agent(path)
    _meta(path).write_text(json.dumps({**meta, "format": "someone-else"}))
    with pytest.raises(CheckpointError, match="is not an interp-rand checkpoint"):
        load_agent(path)


def test_an_empty_folder_and_a_missing_one(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_agent(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="neither a checkpoint folder"):
        load_agent(tmp_path)


def test_invalid_grid_world_config(run):
    path, _ = run
    meta = json.loads(_meta(path).read_text())
    meta["model"]["d_model"] = 16  # no longer the agent config's model
    _meta(path).write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="invalid grid-world config.*does not match its agent config"):
        load_agent(path)
    del meta["step"]
    meta["model"]["d_model"] = 8
    _meta(path).write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="invalid grid-world config.*step"):
        load_agent(path)


def test_missing_truncated_and_unfit_weights(run):
    path, _ = run
    model_file = step_dir(path, TINY.pgpe.generations) / MODEL_FILE
    data = model_file.read_bytes()
    model_file.write_bytes(data[: len(data) // 2])
    ckpt = load_agent(path)  # metadata only: the weights are read by .model()
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        ckpt.model()
    model_file.unlink()
    with pytest.raises(CheckpointError, match="is missing") as err:
        load_agent(path)
    assert str(model_file) in str(err.value)
