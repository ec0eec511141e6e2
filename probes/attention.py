"""Attention patterns over a dataset: per head, averaged, and conditioned on task metadata
(e.g. problems with a long carry cascade versus none).

    >>> patterns = attention_patterns(model, batch)      # [batch, layer, head, q, k]
    >>> conditional_patterns(task, batch, patterns)["no carry"].shape   # [layer, head, q, k]
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from interp_rand.model.mixer import capability_hook
from interp_rand.registry import Registry
from interp_rand.tasks.base import Batch
from probes.activations import model_args, seed_offset

# keyed by (task name, condition name), in registration order: fn(task, batch) -> [batch] bool
ATTENTION_CONDITIONS: Registry[Callable[[object, Batch], Tensor]] = Registry("attention condition")


def register_condition(task: str, name: str):
    """Decorator: ``fn(task, batch) -> [batch] bool``, a metadata condition of ``task``
    (used for conditional average patterns and for choosing example patterns), in
    :data:`ATTENTION_CONDITIONS` (a taken name is refused)."""

    def add(fn):
        ATTENTION_CONDITIONS.register((task, name), fn)
        return fn

    return add


def conditions(task) -> list[tuple[str, Callable]]:
    """The registered ``(name, fn)`` conditions of a task (possibly none)."""
    return [(entry.name[1], entry.value) for entry in ATTENTION_CONDITIONS.entries() if entry.name[0] == task.name]


@torch.no_grad()
def attention_patterns(model: nn.Module, batch: Batch, *, batch_size: int = 1024) -> Tensor:
    """``[batch, layer, head, query, key]`` attention patterns of every head, at the model's
    own positions (a seed token, if any, is position 0; see :func:`task_slice`)."""
    names = [capability_hook(model, layer, "pattern") for layer in range(int(model.cfg.n_layers))]
    missing = [layer for layer, n in enumerate(names) if n is None]
    if missing:
        mixer = type(model.blocks[missing[0]].attn).__name__
        raise ValueError(f"attention patterns need a mixer with a pattern; blocks {missing} ({mixer}) have none")
    wanted = set(names)
    chunks = []
    for start in range(0, len(batch), batch_size):
        part = batch[slice(start, start + batch_size)]
        args, kwargs = model_args(model, part)
        _, cache = model.run_with_cache(*args, names_filter=lambda n: n in wanted, **kwargs)
        chunks.append(torch.stack([cache[n].float() for n in names], dim=1))  # [b, L, H, q, k]
    return torch.cat(chunks)


def task_slice(model: nn.Module, patterns: Tensor) -> Tensor:
    """``patterns`` restricted to the task's positions (drops a seed token's row and column)."""
    off = seed_offset(model)
    return patterns[..., off:, off:]


def mean_pattern(patterns: Tensor, where: Tensor | None = None) -> Tensor:
    """``[layer, head, q, k]`` average over the examples selected by ``where`` (``[batch]``
    bool; all by default). Raises ``ValueError`` when no example is selected."""
    if where is not None:
        if not bool(where.any()):
            raise ValueError("no example satisfies the condition; nothing to average")
        patterns = patterns[where]
    return patterns.mean(0)


def conditional_patterns(task, batch: Batch, patterns: Tensor) -> dict[str, Tensor]:
    """``{"all": mean, condition name: mean over the examples where it holds}``; conditions no
    example satisfies are left out."""
    out = {"all": mean_pattern(patterns)}
    for name, fn in conditions(task):
        where = fn(task, batch)
        if bool(where.any()):
            out[name] = mean_pattern(patterns, where)
    return out


# ---------------------------------------------------------------------- task conditions


@register_condition("addition", "cascade >= 2")
def _long_cascade(task, batch: Batch) -> Tensor:
    return batch.metadata["max_cascade"] >= 2


@register_condition("addition", "no carry")
def _no_carry(task, batch: Batch) -> Tensor:
    return batch.metadata["carry_in"].sum(1) == 0


@register_condition("sort", "has duplicates")
def _duplicates(task, batch: Batch) -> Tensor:
    return batch.metadata["n_distinct"] < task.length


@register_condition("sort", "all distinct")
def _distinct(task, batch: Batch) -> Tensor:
    return batch.metadata["n_distinct"] == task.length


@register_condition("recall", "recent query")
def _recent(task, batch: Batch) -> Tensor:
    return task.n_pairs - 1 - batch.metadata["query_index"] < max(1, task.n_pairs // 4)


@register_condition("recall", "distant query")
def _distant(task, batch: Batch) -> Tensor:
    return task.n_pairs - 1 - batch.metadata["query_index"] >= task.n_pairs // 2


__all__ = [
    "ATTENTION_CONDITIONS",
    "attention_patterns",
    "conditional_patterns",
    "conditions",
    "mean_pattern",
    "register_condition",
    "task_slice",
]
