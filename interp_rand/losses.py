"""Answer-masked losses and predictions: the loss lives only on a task's answer positions."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from interp_rand.tasks.base import Batch

LOSS_KINDS = ("ce", "bce")


def answer_logits(logits: Tensor, batch: Batch) -> Tensor:
    """``[batch, pos, d_vocab_out] -> [batch, n_answer, d_vocab_out]``."""
    return logits[:, batch.answer_positions]


def answer_loss(logits: Tensor, batch: Batch, kind: str) -> Tensor:
    """Per-example loss ``[batch]``, averaged over answer positions only.

    ``kind="ce"``: cross-entropy against class targets ``[batch, pos]``.
    ``kind="bce"``: binary cross-entropy of every output unit against float targets
    ``[batch, pos, d_vocab_out]`` (e.g. the value bits of recall), averaged over units.
    """
    picked = answer_logits(logits, batch)
    targets = batch.answer_targets()
    if kind == "ce":
        # [batch, n_answer, vocab] -> [batch, vocab, n_answer] for cross_entropy's class axis
        per_position = F.cross_entropy(picked.transpose(1, 2), targets, reduction="none")
    elif kind == "bce":
        per_position = F.binary_cross_entropy_with_logits(
            picked, targets.to(picked.dtype), reduction="none"
        ).mean(-1)
    else:
        raise ValueError(f"loss kind {kind!r} is not one of {LOSS_KINDS}")
    return per_position.mean(-1)


def answer_correct(logits: Tensor, batch: Batch, kind: str) -> Tensor:
    """``[batch, n_answer]`` bool: is the argmax (``ce``) or every thresholded bit (``bce``)
    right at each answer position."""
    picked = answer_logits(logits, batch)
    targets = batch.answer_targets()
    if kind == "ce":
        return picked.argmax(-1) == targets
    if kind == "bce":
        return ((picked > 0) == targets.bool()).all(-1)
    raise ValueError(f"loss kind {kind!r} is not one of {LOSS_KINDS}")


__all__ = ["LOSS_KINDS", "answer_correct", "answer_logits", "answer_loss"]
