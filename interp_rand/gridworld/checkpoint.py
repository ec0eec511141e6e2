"""Agent checkpoints in the toolkit's checkpoint format (``interp_rand.training.checkpoint``):
a ``checkpoints/step_XXXXXXX`` folder with ``model.safetensors`` (the agent, TransformerLens
names), ``trainer.safetensors`` (PGPE's final centre and std) and ``checkpoint.json`` whose task
is ``gridworld``. Loading a checkpoint of any other task raises :class:`CheckpointError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file

from interp_rand.gridworld.agent import agent_model_config, check_fits
from interp_rand.gridworld.config import GridworldScale
from interp_rand.gridworld.pgpe import TrainedAgent
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.training.checkpoint import (
    FORMAT,
    META_FILE,
    MODEL_FILE,
    VERSION,
    CheckpointError,
    latest_checkpoint,
    save_checkpoint,
)
from interp_rand.zoo.location import resolve_run

TASK_NAME = "gridworld"


@dataclass(frozen=True)
class AgentRunSpec:
    """What ``checkpoint.json`` records of an agent run (the ``RunSpec`` layout: task, model,
    train), with the PGPE settings as the training config."""

    scale: GridworldScale
    model_config: ModelConfig

    def to_dict(self) -> dict[str, Any]:
        data = self.scale.to_dict()
        return {"task": {"name": TASK_NAME, "config": data["grid"]}, "model": self.model_config.to_dict(),
                "train": {"agent": data["agent"], "pgpe": data["pgpe"]}}


@dataclass(frozen=True)
class AgentCheckpoint:
    path: Path
    scale: GridworldScale
    model: HookedTransformer
    metrics: dict[str, Any]


def save_agent(run_dir: Path, scale: GridworldScale, trained: TrainedAgent) -> Path:
    """Write the trained agent as ``run_dir/checkpoints/step_<generations>`` (atomically)."""
    spec = AgentRunSpec(scale, trained.model.cfg)
    center = trained.model.state_dict()
    metrics = {"history": trained.history}
    return save_checkpoint(Path(run_dir), scale.pgpe.generations, spec, center,  # type: ignore[arg-type]
                           {"stdev": trained.stdev}, metrics, keep=1)


def load_agent(path: str | Path) -> AgentCheckpoint:
    """An agent checkpoint folder, or the newest checkpoint of a run directory.

    Raises :class:`CheckpointError` naming the file and the problem (missing, truncated, not
    an interp-rand checkpoint, or a checkpoint of another task); ``"zoo:NAME"`` names a
    packaged agent."""
    path = resolve_run(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    if not (path / META_FILE).exists():
        latest = latest_checkpoint(path)
        if latest is None:
            raise CheckpointError(f"{path} is neither an agent checkpoint folder nor a run directory with checkpoints")
        path = latest
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path / META_FILE} is not valid JSON (truncated?): {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise CheckpointError(f"{path / META_FILE} is not an interp-rand checkpoint of version {VERSION}")
    task = (meta.get("task") or {}).get("name")
    if task != TASK_NAME:
        raise CheckpointError(
            f"{path} is a checkpoint for task {task!r}, not a grid-world agent (task {TASK_NAME!r}); "
            "train one with `interp-rand gridworld train`"
        )
    try:
        scale = GridworldScale.from_dict({"grid": meta["task"]["config"], **meta["train"]})
        model_config = ModelConfig.from_dict(meta["model"])
        check_fits(scale.grid, model_config)
        if model_config != agent_model_config(scale.grid, scale.agent):
            raise ValueError("its model config does not match its agent config")
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path / META_FILE} has an invalid grid-world config: {err}") from None
    try:
        state = load_file(path / MODEL_FILE)
    except (FileNotFoundError, SafetensorError, OSError) as err:
        raise CheckpointError(f"{path / MODEL_FILE} is missing or not readable: {err}") from None
    model = HookedTransformer(model_config)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise CheckpointError(f"{path / MODEL_FILE} does not fit its model config: {err}") from None
    return AgentCheckpoint(path=path, scale=scale, model=model.eval(), metrics=meta.get("metrics", {}))


__all__ = ["AgentCheckpoint", "load_agent", "save_agent"]
