"""Accuracy of a model on a task: exact match, per answer position, and per metadata value.

Exact match is computed with teacher forcing. For a causal model this equals greedy
autoregressive decoding: if every answer position is right given the right prefix, greedy
decoding reproduces that prefix step by step, and conversely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from interp_rand.progress import bar

from interp_rand.display import Displayed, bars_svg
from interp_rand.tasks.base import Batch, Task
from interp_rand.losses import answer_correct, answer_loss

# A per-example metadata tensor with at most this many distinct values gets a breakdown.
_MAX_BREAKDOWN_VALUES = 32


@dataclass(repr=False)
class EvalResult(Displayed):
    """Accuracy figures. ``correct`` (``[batch, n_answer]`` bool) stays out of JSON. In a
    notebook: exact match and loss, and the accuracy per answer position as bars."""

    n_examples: int
    loss: float
    exact_match: float
    per_position: list[float]
    breakdown: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    correct: Tensor | None = field(default=None, repr=False)

    def headline(self) -> str:
        """One line: exact match and loss over the examples, and the weakest answer position."""
        weakest = min(range(len(self.per_position)), key=self.per_position.__getitem__, default=None)
        worst = "" if weakest is None else f"; weakest answer position {weakest}: {self.per_position[weakest]:.4f}"
        return f"exact match {self.exact_match:.4f} on {self.n_examples} examples, loss {self.loss:.4g}{worst}"

    def lines(self) -> list[str]:
        """The headline, the accuracy per answer position, and per metadata value."""
        out = [self.headline(), "per answer position: " + ", ".join(f"{a:.4f}" for a in self.per_position)]
        for key, values in self.breakdown.items():
            out.append(f"by {key}: " + ", ".join(f"{v} {row['exact_match']:.3f} (n {int(row['n'])})"
                                                 for v, row in values.items()))
        return out

    def small_figure(self) -> str | None:
        """The accuracy per answer position as bars."""
        return bars_svg([(f"answer position {k}", a) for k, a in enumerate(self.per_position)], lo=0.0, hi=1.0,
                        caption="accuracy per answer position")

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_examples": self.n_examples,
            "loss": self.loss,
            "exact_match": self.exact_match,
            "per_position": self.per_position,
            "breakdown": self.breakdown,
        }


def check_model_fits_task(model: nn.Module, task: Task) -> None:
    """Raise ``ValueError`` if ``model`` (ours, with a ``ModelConfig``) cannot read ``task``'s
    batches or write its answers: input kind, vocabulary, output width, seed width, context."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "input_kind"):
        return  # not our model (e.g. a TransformerBridge): nothing to compare against
    if not hasattr(task, "model_config"):
        return  # a TaskSpec names no model sizes: a misfit fails in the forward pass, naming the shapes
    expected = task.model_config()
    problems = [
        f"{name}={getattr(cfg, name)!r} (task {task.name!r} needs {getattr(expected, name)!r})"
        for name in ("input_kind", "d_vocab", "d_input", "d_vocab_out", "d_seed")
        if getattr(cfg, name) != getattr(expected, name)
    ]
    if cfg.max_positions is not None and cfg.max_positions < expected.n_ctx:  # a learned table's rows
        problems.append(f"n_ctx={cfg.n_ctx} (task {task.name!r} needs >= {expected.n_ctx})")
    if problems:
        raise ValueError(f"this model does not fit task {task.name!r}: " + "; ".join(problems))


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, batch: Batch, chunk_size: int = 4096,
             progress: bool = False) -> EvalResult:
    """Evaluate ``model`` on ``batch`` in chunks (no gradients, eval mode restored after).

    ``breakdown[key][value] = {"n": count, "exact_match": share}`` for each per-example
    metadata tensor ``[batch]`` with few distinct values (e.g. ``max_cascade`` of addition).
    """
    check_model_fits_task(model, task)
    was_training = model.training
    model.eval()
    losses, corrects = [], []
    try:
        starts = range(0, len(batch), chunk_size)
        for start in bar(starts, desc=f"evaluating {task.name} ({len(batch)} examples)", unit="chunk",
                         enabled=progress and len(starts) > 1):
            part = batch[start : start + chunk_size]
            logits = model(part.inputs, **part.model_kwargs())
            if not torch.isfinite(logits).all():
                raise FloatingPointError("the model produced non-finite logits during evaluation")
            losses.append(answer_loss(logits, part, task.loss_kind))
            corrects.append(answer_correct(logits, part, task.loss_kind))
    finally:
        model.train(was_training)
    correct = torch.cat(corrects)
    exact = correct.all(-1)
    return EvalResult(
        n_examples=len(batch),
        loss=torch.cat(losses).mean().item(),
        exact_match=exact.float().mean().item(),
        per_position=correct.float().mean(0).tolist(),
        breakdown=_breakdown(exact, batch.metadata),
        correct=correct,
    )


def _breakdown(exact: Tensor, metadata: dict[str, Tensor]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for key, values in metadata.items():
        if values.dim() != 1 or values.is_floating_point():
            continue
        distinct = values.unique()
        if len(distinct) > _MAX_BREAKDOWN_VALUES:
            continue
        out[key] = {
            str(int(v)): {
                "n": int((values == v).sum()),
                "exact_match": exact[values == v].float().mean().item(),
            }
            for v in distinct
        }
    return out
