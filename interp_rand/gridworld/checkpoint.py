"""Agent checkpoints in the toolkit's checkpoint format (``interp_rand.training.checkpoint``):
a ``checkpoints/step_XXXXXXX`` folder with ``model.safetensors`` (the agent, TransformerLens
names), ``trainer.safetensors`` (PGPE's final centre and std) and ``checkpoint.json`` whose task
is ``gridworld``. Loading a checkpoint of any other task raises :class:`CheckpointError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand.gridworld.agent import agent_model_config, check_fits
from interp_rand.gridworld.config import GridworldScale
from interp_rand.gridworld.pgpe import TrainedAgent
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.training.checkpoint import (
    META_FILE,
    MODEL_FILE,
    CheckpointError,
    load_model,
    read_meta,
    save_checkpoint,
)

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
    """A grid-world agent's checkpoint, read like a training
    :class:`~interp_rand.training.checkpoint.Checkpoint`: its metadata now, its weights when
    :meth:`model` is called (so ``zoo.load(name).model()`` is the model for every zoo entry)."""

    path: Path
    step: int
    scale: GridworldScale
    model_config: ModelConfig
    metrics: dict[str, Any]

    def model(self) -> HookedTransformer:
        """The agent with this checkpoint's weights, in eval mode."""
        return load_model(self.path, self.model_config)


def save_agent(run_dir: Path, scale: GridworldScale, trained: TrainedAgent) -> Path:
    """Write the trained agent as ``run_dir/checkpoints/step_<generations>`` (atomically)."""
    spec = AgentRunSpec(scale, trained.model.cfg)
    center = trained.model.state_dict()
    metrics = {"history": trained.history}
    return save_checkpoint(Path(run_dir), scale.pgpe.generations, spec, center,  # type: ignore[arg-type]
                           {"stdev": trained.stdev}, metrics, keep=1)


def load_agent(path: str | Path) -> AgentCheckpoint:
    """An agent checkpoint folder, or the newest checkpoint of a run directory; the weights
    are read by :meth:`AgentCheckpoint.model`.

    The folder and its metadata are read by the core's reader
    (:func:`~interp_rand.training.checkpoint.read_meta`), the weights by its
    :func:`~interp_rand.training.checkpoint.load_model`. Raises :class:`CheckpointError` naming
    the file and the problem (missing, truncated, not an interp-rand checkpoint, or a
    checkpoint of another task); ``"zoo:NAME"`` names a packaged agent."""
    path, meta = read_meta(path)
    task_meta = meta.get("task")
    task = task_meta.get("name") if isinstance(task_meta, dict) else None
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
        step = int(meta["step"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path / META_FILE} has an invalid grid-world config: {err}") from None
    if not (path / MODEL_FILE).exists():
        raise CheckpointError(f"{path / MODEL_FILE} is missing")
    return AgentCheckpoint(path=path, step=step, scale=scale, model_config=model_config, metrics=meta.get("metrics", {}))


__all__ = ["AgentCheckpoint", "load_agent", "save_agent"]
