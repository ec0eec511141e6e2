"""The planted model's type and what every builder shares: the graph's fixed nodes, node
shorthands, a zeroed model to set by hand and a batch with other targets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from circuits.graph.nodes import Edge, Node
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Batch

EMBED, SEED, INPUT_MLP, LOGITS = Node("embed"), Node("seed"), Node("input_mlp"), Node("logits")


def head(layer: int, index: int) -> Node:
    return Node("head", layer, index)


def mlp(layer: int) -> Node:
    return Node("mlp", layer)


@dataclass(frozen=True)
class PlantedModel:
    """A hand-set model and its known circuit.

    Attributes:
        name: short name (the suite's row label).
        task: the task whose layout the batches follow.
        model: the hand-set ``HookedTransformer`` (eval mode).
        clean, corrupted: the batches; the metric reads the clean batch's targets at its
            ``answer_positions``.
        known: the known edge set, position-free.
        distractors: components that carry the corrupted signal but do not matter.
        description: the mechanism, in one paragraph.
    """

    name: str
    task: object
    model: HookedTransformer
    clean: Batch
    corrupted: Batch
    known: frozenset[Edge]
    distractors: tuple[Node, ...]
    description: str


def _zeroed(cfg: ModelConfig) -> HookedTransformer:
    model = HookedTransformer(cfg, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


def _with_targets(batch: Batch, targets: torch.Tensor, positions: torch.Tensor | None = None) -> Batch:
    """``batch`` with other targets (and answer positions, the loss mask following them)."""
    positions = batch.answer_positions if positions is None else positions
    loss_mask = torch.zeros_like(batch.loss_mask)
    loss_mask[:, positions] = True
    return dataclasses.replace(batch, targets=targets, loss_mask=loss_mask, answer_positions=positions)
