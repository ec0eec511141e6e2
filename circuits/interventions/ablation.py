"""Ablations: what an ablated component writes instead of its own output.

``zero`` (nothing), ``mean`` (its mean over a reference set, per position), ``resample`` (its
value on the corrupted inputs), and the two this toolkit needs for randomized models:
``seed-resample`` (same input, another example's seed) and ``input-resample`` (same seed,
another example's input). Resampling permutes the batch with a seeded generator, so the
replacement comes from the data distribution itself.

    >>> with ablate_nodes(model, [Node("head", 1, 0)], Ablation("mean"), batch):
    ...     logits = model(batch.inputs)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import architecture, run_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.graph.writers import capture_hooks, stack_writers

ABLATION_KINDS = ("zero", "mean", "resample", "seed-resample", "input-resample")


@dataclass(frozen=True)
class Ablation:
    """How ablated components are replaced.

    Attributes:
        kind: one of ``ABLATION_KINDS``.
        seed: seeds the permutation of ``seed-resample`` / ``input-resample``.
    """

    kind: str = "resample"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ABLATION_KINDS:
            raise ValueError(f"Ablation.kind={self.kind!r} is not allowed; choose from {ABLATION_KINDS}")

    def source_batch(self, clean: Any, corrupted: Any = None) -> Any:
        """The batch whose activations replace ablated ones (``None`` for zero/mean)."""
        if self.kind in ("zero", "mean"):
            return None
        if self.kind == "resample":
            if corrupted is None:
                raise ValueError("resample ablation needs corrupted inputs (corrupted=...)")
            check_pair(clean, corrupted)
            return corrupted
        perm = _derangement(len(clean), self.seed)
        if self.kind == "seed-resample":
            if isinstance(clean, Tensor) or clean.seeds is None:
                raise ValueError("seed-resample ablation needs a batch with seeds (a model with a seed channel)")
            return dataclasses.replace(clean, seeds=clean.seeds[perm])
        if isinstance(clean, Tensor):
            return clean[perm]
        mask = None if clean.attention_mask is None else clean.attention_mask[perm]
        return dataclasses.replace(clean, inputs=clean.inputs[perm], attention_mask=mask)

    @torch.no_grad()
    def source_values(self, model: Any, graph: ModelGraph, clean: Any, corrupted: Any = None, reference: Any = None) -> dict[str, Tensor]:
        """Raw writer hook values (``hook_embed``, ``attn.hook_z`` …) used for ablated writers."""
        source = self.source_batch(clean, corrupted)
        acts: dict[str, Tensor] = {}
        if source is None:
            source = reference if self.kind == "mean" and reference is not None else clean
        with model.hooks(fwd_hooks=capture_hooks(graph, acts)):
            run_model(model, source)
        if self.kind == "zero":
            return {k: torch.zeros_like(v[:1]) for k, v in acts.items()}
        if self.kind == "mean":
            return {k: v.mean(0, keepdim=True) for k, v in acts.items()}
        return acts

    def replacement(self, model: Any, graph: ModelGraph, clean: Any, corrupted: Any = None, reference: Any = None) -> Tensor:
        """``[batch or 1, P, n_writers, d_model]`` writer values for ablated edges."""
        with torch.no_grad():
            return stack_writers(model, graph, self.source_values(model, graph, clean, corrupted, reference))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _derangement(n: int, seed: int) -> Tensor:
    """A seeded permutation of ``range(n)`` moving every index (a cyclic shift of a shuffle)."""
    if n < 2:
        raise ValueError("resampling within the batch needs at least 2 examples")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = order.roll(1)
    return perm


def check_pair(clean: Any, corrupted: Any) -> None:
    """Clean and corrupted must line up example by example."""
    a = clean if isinstance(clean, Tensor) else clean.inputs
    b = corrupted if isinstance(corrupted, Tensor) else corrupted.inputs
    if a.shape != b.shape:
        raise ValueError(
            f"clean and corrupted inputs must have the same shape; got {tuple(a.shape)} and {tuple(b.shape)}"
        )


def node_hook_name(node: Node) -> str:
    """The hook at which ``node``'s output is replaced (:meth:`ModelGraph.writer_hook`)."""
    return ModelGraph.writer_hook(node)


@contextmanager
def replaced_nodes(model: Any, nodes: list[Node], values: dict[str, Tensor]) -> Iterator[None]:
    """Within the context, each node's output (at its residual-stream position, or all) is taken
    from ``values`` (raw hook values as :meth:`Ablation.source_values` returns)."""
    by_hook: dict[str, list[Node]] = {}
    for node in nodes:
        by_hook.setdefault(node_hook_name(node), []).append(node)
    missing = [name for name in by_hook if name not in model.hook_dict]
    if missing:
        raise ValueError(f"model has no hook point(s) {missing}")
    graph = ModelGraph.structure(architecture(model))

    def make(name: str, group: list[Node]):
        def hook(value: Tensor, hook: Any) -> Tensor:
            source = values[name].to(value.dtype).expand_as(value)
            out = value.clone()
            for node in group:
                pos = graph.hook_position(node)
                if pos is None:
                    continue
                if node.kind == "head":
                    out[:, pos, node.head] = source[:, pos, node.head]
                else:
                    out[:, pos] = source[:, pos]
            return out

        return hook

    with model.hooks(fwd_hooks=[(name, make(name, group)) for name, group in by_hook.items()]):
        yield


@contextmanager
def ablate_nodes(model: Any, nodes: list[Node], ablation: Ablation, clean: Any, corrupted: Any = None, reference: Any = None) -> Iterator[None]:
    """Scoped node ablation: within the context every forward has ``nodes`` ablated."""
    graph = ModelGraph.of(model, _n_positions(clean))
    values = ablation.source_values(model, graph, clean, corrupted, reference)
    with replaced_nodes(model, nodes, values):
        yield


def _n_positions(batch: Any) -> int:
    return (batch if isinstance(batch, Tensor) else batch.inputs).shape[1]


__all__ = ["ABLATION_KINDS", "Ablation", "ablate_nodes", "check_pair", "node_hook_name", "replaced_nodes"]
