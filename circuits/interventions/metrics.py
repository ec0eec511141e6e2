"""Metrics: ``metric(logits [batch, pos, d_vocab_out], batch) -> scalar``, with a registry.

Every metric averages per-example values, so EAP scores on a batch are the average of
per-example scores (TransformerLens's convention). Class targets (``[batch, pos]`` long) are read
as a softmax over ``d_vocab_out``; float targets ``[batch, pos, d_vocab_out]`` (multi-label
tasks, ``loss_kind="bce"``, e.g. recall's value bits) as independent bits, so "the correct
answer" is the whole bit pattern. The arithmetic of each belongs to the decoding of
:mod:`interp_rand.losses` (``target_logprob``, ``target_logit_diff``, ``target_prob``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from interp_rand.losses import Decoding, decoding_for_targets
from interp_rand.registry import Registry

Metric = Callable[[Tensor, Any], Tensor]
METRICS: Registry[Metric] = Registry("metric", sort=True)


def register_metric(name: str, description: str | None = None) -> Callable[[Metric], Metric]:
    """Decorator adding ``metric(logits, batch) -> scalar`` to :data:`METRICS` under ``name``
    (described by ``description``, else its docstring's first paragraph); a taken name is refused."""

    def add(fn: Metric) -> Metric:
        doc = description if description is not None else " ".join((fn.__doc__ or "").split("\n\n")[0].replace("``", "").split())
        return METRICS.register(name, fn, description=doc)

    return add


def metric_names() -> list[str]:
    return METRICS.names()


def get_metric(name_or_fn: str | Metric) -> Metric:
    """``name_or_fn`` itself if callable, else the registered metric of that name (an unknown
    name lists the registered ones)."""
    if callable(name_or_fn):
        return name_or_fn
    return METRICS.get(name_or_fn)


def _answer_logits(logits: Tensor, batch: Any) -> tuple[Tensor, Tensor, Decoding]:
    """``[batch, n_answer, vocab]`` logits and ``[batch, n_answer]`` class targets (or
    ``[batch, n_answer, vocab]`` bit targets) at the answers, and their decoding (a metric sees
    no task: :func:`~interp_rand.losses.decoding_for_targets` reads it off the targets)."""
    pos = batch.answer_positions
    target = batch.targets[:, pos]
    return logits[:, pos], target, decoding_for_targets(target)


@register_metric("logprob", "mean log-probability of the correct answer at the answer positions")
def logprob(logits: Tensor, batch: Any) -> Tensor:
    """Mean log-probability of the correct answer over answer positions (higher is better): of
    the correct class, or of the correct bit pattern (the sum of each bit's log-probability)."""
    answer, target, decoding = _answer_logits(logits, batch)
    return decoding.target_logprob(answer, target).mean()


@register_metric("logit_diff", "mean correct logit minus the mean other logit at the answer positions")
def logit_diff(logits: Tensor, batch: Any) -> Tensor:
    """Mean of (correct logit − mean of the other logits) over answer positions; for bits, the
    mean over bits of (logit of the correct value − logit of the other), ``±logit``."""
    answer, target, decoding = _answer_logits(logits, batch)
    return decoding.target_logit_diff(answer, target).mean()


@register_metric("prob", "mean probability of the correct answer at the answer positions")
def prob(logits: Tensor, batch: Any) -> Tensor:
    """Mean probability of the correct answer over answer positions."""
    answer, target, decoding = _answer_logits(logits, batch)
    return decoding.target_prob(answer, target).mean()


def evaluate_metric(metric: Metric, logits: Tensor, batch: Any) -> Tensor:
    """Call ``metric`` and insist on a scalar, naming the shape otherwise."""
    value = metric(logits, batch)
    if not isinstance(value, Tensor) or value.dim() != 0:
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"the metric must return a scalar tensor; got {shape}")
    if not torch.isfinite(value):
        raise ValueError(f"the metric returned a non-finite value {float(value)}")
    return value


__all__ = ["METRICS", "Metric", "evaluate_metric", "get_metric", "logit_diff", "logprob", "metric_names", "prob", "register_metric"]
