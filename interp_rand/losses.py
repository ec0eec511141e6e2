"""Answer-masked losses and correctness: the loss lives only on a task's answer positions.

Loss kinds plug in through one registry: a kind is a pair of functions on the answer-position
logits ``[batch, n_answer, d_vocab_out]`` and the batch, one giving the per-example loss
``[batch]``, the other per-answer correctness ``[batch, n_answer]``. A task names its kind in
``Task.loss_kind``; a task with its own loss (e.g. colouring's edge-conflict loss) registers a
kind next to its code with :func:`register_loss_kind`.

A kind also says how the outputs of several seeds combine into one answer (its ``vote_rules``,
named as in :mod:`interp_rand.seeded_evaluation.amplification`): every kind takes the most
frequent whole output (``"majority_whole"``); a kind whose ``judge`` is a verifier needing no
target (colouring: validity is checked edge by edge) can also vote per answer position and
retry until the verifier passes (``"majority_per_vertex"``, ``"las_vegas"``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch.nn.functional as F
from torch import Tensor

from interp_rand.registry import Registry
from interp_rand.tasks.base import Batch


class LossKind(NamedTuple):
    loss: Callable[[Tensor, Batch], Tensor]
    correct: Callable[[Tensor, Batch], Tensor]
    # judges discrete outputs without logits (e.g. sampled ones), for kinds with no single
    # target: ``judge(outputs [batch, k, n_answer] long, batch) -> [batch, k] bool``
    judge: Callable[[Tensor, Batch], Tensor] | None = None
    # how the outputs of k seeds combine (seeded_evaluation's rule names), see the module doc
    vote_rules: tuple[str, ...] = ("majority_whole",)


def _ce_loss(picked: Tensor, batch: Batch) -> Tensor:
    # [batch, n_answer, vocab] -> [batch, vocab, n_answer] for cross_entropy's class axis
    return F.cross_entropy(picked.transpose(1, 2), batch.answer_targets(), reduction="none").mean(-1)


def _ce_correct(picked: Tensor, batch: Batch) -> Tensor:
    return picked.argmax(-1) == batch.answer_targets()


def _bce_loss(picked: Tensor, batch: Batch) -> Tensor:
    targets = batch.answer_targets().to(picked.dtype)
    return F.binary_cross_entropy_with_logits(picked, targets, reduction="none").mean((-1, -2))


def _bce_correct(picked: Tensor, batch: Batch) -> Tensor:
    return ((picked > 0) == batch.answer_targets().bool()).all(-1)


LOSS_KINDS: Registry[LossKind] = Registry("loss kind", sort=True)
# cross-entropy against class targets [batch, pos]
LOSS_KINDS.register("ce", LossKind(_ce_loss, _ce_correct))
# binary cross-entropy of every output unit against float targets [batch, pos, d_vocab_out]
# (e.g. recall's value bits); an answer position is right when every bit is
LOSS_KINDS.register("bce", LossKind(_bce_loss, _bce_correct, vote_rules=("majority_whole", "majority_per_bit")))


def register_loss_kind(name: str, loss: Callable[[Tensor, Batch], Tensor],
                       correct: Callable[[Tensor, Batch], Tensor],
                       judge: Callable[[Tensor, Batch], Tensor] | None = None,
                       vote_rules: tuple[str, ...] = ("majority_whole",)) -> None:
    """Add a loss kind to :data:`LOSS_KINDS`: ``loss(picked, batch) -> [batch]``,
    ``correct(picked, batch) -> [batch, n_answer]`` where ``picked`` is the answer-position
    logits; and, for kinds whose right answer is not one target, ``judge(outputs [batch, k,
    n_answer], batch) -> [batch, k]`` (whole outputs fully right); ``vote_rules``: how outputs
    of several seeds combine (see the module doc). Registering the same functions again is a
    no-op; other functions under a taken name are refused."""
    LOSS_KINDS.register(name, LossKind(loss, correct, judge, tuple(vote_rules)))


def loss_kinds() -> list[str]:
    return LOSS_KINDS.names()


def _kind(kind: str) -> LossKind:
    return LOSS_KINDS.get(kind)


def answer_logits(logits: Tensor, batch: Batch) -> Tensor:
    """``[batch, pos, d_vocab_out] -> [batch, n_answer, d_vocab_out]``."""
    return logits[:, batch.answer_positions]


def answer_loss(logits: Tensor, batch: Batch, kind: str) -> Tensor:
    """Per-example loss ``[batch]`` from answer positions only, averaged over them."""
    return _kind(kind).loss(answer_logits(logits, batch), batch)


def answer_correct(logits: Tensor, batch: Batch, kind: str) -> Tensor:
    """``[batch, n_answer]`` bool: is each answer position right."""
    return _kind(kind).correct(answer_logits(logits, batch), batch)


def output_judge(kind: str, batch: Batch) -> Callable[[Tensor], Tensor] | None:
    """``outputs [batch, k, n_answer] -> [batch, k]`` bool for kind ``kind`` on ``batch`` (the
    ``correct_fn`` of :func:`~interp_rand.seeded_evaluation.sampled_success`), or ``None`` when
    the kind is judged against its targets."""
    judge = _kind(kind).judge
    return None if judge is None else (lambda outputs: judge(outputs, batch))


def vote_rules(kind: str) -> tuple[str, ...]:
    """The rules by which the outputs of several seeds of kind ``kind`` combine (majority-k)."""
    return _kind(kind).vote_rules


__all__ = ["LOSS_KINDS", "LossKind", "answer_correct", "answer_logits", "answer_loss", "loss_kinds", "output_judge",
           "register_loss_kind", "vote_rules"]
