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

A kind also owns **decoding** its outputs (its ``decoding``, :data:`CLASSES` or :data:`BITS`):
the answer id at each answer position (:meth:`LossKind.predict`: the argmax class, or the
thresholded bits packed into one integer), the output distribution over those ids
(:meth:`LossKind.distribution`: softmax, or the product of Bernoullis over every bit pattern),
the per-unit probabilities (:meth:`LossKind.marginals`: softmax, or each bit's sigmoid) and the
right answer's id (:meth:`LossKind.target_ids`). Bits are packed in **one order** everywhere,
most significant first (:func:`pack_bits` / :func:`unpack_bits`): bit ``k`` of ``n`` has
weight ``2**(n - 1 - k)``, so ids ascend like the bit vectors lexicographically, as recall's
enumerated seeds do (``RecallTask.all_seeds``). A kind registered without a decoding has
class outputs. Code that has a batch but no task (a circuit metric ``metric(logits, batch)``)
reads the decoding off the targets with :func:`decoding_for_targets`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from interp_rand.registry import Registry
from interp_rand.batch import Batch


# ---------------------------------------------------------------------- the one bit order
#: Most bits an int64 answer id holds.
MAX_PACKED_BITS = 62
#: Exact output distributions of multi-bit answers are enumerated up to this many bits
#: (``2**n`` outcomes per answer position).
MAX_ENUMERATED_BITS = 12


def pack_bits(bits: Tensor) -> Tensor:
    """``[..., n_bits]`` bool/0-1 -> ``[...]`` long, most significant bit first:
    ``sum_k bit_k << (n_bits - 1 - k)`` (the one bit order of the toolkit; :func:`unpack_bits`
    inverts it)."""
    n_bits = bits.shape[-1]
    if n_bits > MAX_PACKED_BITS:
        raise ValueError(f"cannot pack {n_bits} bits into an int64 output")
    weights = torch.ones(n_bits, dtype=torch.long, device=bits.device) << torch.arange(
        n_bits - 1, -1, -1, device=bits.device
    )
    return (bits.long() * weights).sum(-1)


def unpack_bits(ids: Tensor, n_bits: int) -> Tensor:
    """``[...]`` integer ids -> ``[..., n_bits]`` long 0/1, most significant bit first (the
    inverse of :func:`pack_bits` for ``0 <= ids < 2**n_bits``)."""
    if not 0 <= n_bits <= MAX_PACKED_BITS:
        raise ValueError(f"cannot unpack {n_bits} bits from an int64 id")
    shifts = torch.arange(n_bits - 1, -1, -1, device=ids.device)
    return (ids.long()[..., None] >> shifts) & 1


def bit_patterns(n_bits: int) -> Tensor:
    """``[2**n_bits, n_bits]`` long 0/1: row ``i`` is ``unpack_bits(i)``, i.e. ``i`` in binary
    most significant bit first (rows in lexicographic order)."""
    return unpack_bits(torch.arange(2**n_bits), n_bits)


# ---------------------------------------------------------------------- decodings
#: Class counts up to this take :meth:`ClassDecoding.marginals`' outer-axis softmax.
SMALL_SOFTMAX = 16


def argmax_class(picked: Tensor) -> Tensor:
    """``[..., K]`` -> ``[...]`` long: ``picked.argmax(-1)``, the first maximal class on ties (a
    NaN counts as maximal), computed as ``max(-1).indices``: the same index (both are documented
    to return the first maximal one; ``tests/interp_rand/test_losses.py`` checks ties, NaNs
    and layouts), but ~10x faster than ``argmax`` when the class axis is not the innermost
    in memory (the fast path's transposed logits)."""
    return picked.max(-1).indices


class ClassDecoding:
    """Outputs are classes: per answer position one of ``K = d_vocab_out``; the answer id is the
    class. ``picked``: answer-position logits ``[..., n_answer, K]``."""

    name = "classes"
    bits = False

    def predict(self, picked: Tensor) -> Tensor:
        """``[..., n_answer]`` long: the argmax class (:func:`argmax_class`)."""
        return argmax_class(picked)

    def marginals(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, K]`` float: the softmax over classes. For a few classes it runs with
        the class axis first (torch's CPU softmax over a last axis of a few entries is ~7x slower
        than over an outer one; the same values within float rounding), returned contiguous."""
        picked = picked.float()
        if picked.dim() < 2 or picked.shape[-1] > SMALL_SOFTMAX:
            return torch.softmax(picked, dim=-1)
        return torch.softmax(picked.movedim(-1, 0), dim=0).movedim(0, -1).contiguous()

    def distribution(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, K]`` float: the distribution over answer ids (the softmax)."""
        return self.marginals(picked)

    def target_ids(self, targets: Tensor) -> Tensor:
        """Class targets ``[..., n_answer]`` -> their ids ``[..., n_answer]`` long."""
        return targets.long()

    def correct(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]`` bool: the argmax class is the target."""
        return argmax_class(picked) == targets

    def as_targets(self, picked: Tensor, like: Tensor) -> Tensor:
        """The predicted answers written as targets of ``like``'s dtype (``[..., n_answer]``)."""
        return picked.argmax(-1).to(like.dtype)

    def target_logprob(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]`` log-probability of the target class."""
        return F.log_softmax(picked, -1).gather(-1, targets[..., None])[..., 0]

    def target_prob(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer, 1]`` probability of the target class (the softmax gathered)."""
        return F.softmax(picked, -1).gather(-1, targets[..., None])

    def target_logit_diff(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]``: the target's logit minus the mean of the other logits."""
        correct = picked.gather(-1, targets[..., None])[..., 0]
        others = (picked.sum(-1) - correct) / (picked.shape[-1] - 1)
        return correct - others

    def attributed_units(self, picked: Tensor) -> tuple[Tensor, tuple[str, ...], bool]:
        """What attribution explains at each answer position: ``(index [batch, n_outputs]``
        into the flattened ``[n_answer * K]`` logits, a label per output of one answer position,
        ``log_probs``): the log-probability of the predicted class."""
        n_answer, n_out = picked.shape[1], picked.shape[2]
        return torch.arange(n_answer) * n_out + picked.argmax(-1), ("predicted",), True

    def __repr__(self) -> str:
        return "CLASSES"


class BitDecoding:
    """Outputs are ``V = d_vocab_out`` independent bits per answer position (bit ``k`` is 1 when
    its logit is > 0); the answer id packs them, most significant first (:func:`pack_bits`).
    ``picked``: answer-position logits ``[..., n_answer, V]``; targets ``[..., n_answer, V]`` 0/1."""

    name = "bits"
    bits = True

    def predict(self, picked: Tensor) -> Tensor:
        """``[..., n_answer]`` long: the thresholded bits packed."""
        return pack_bits(picked > 0)

    def marginals(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, V]`` float: each bit's probability of being 1 (sigmoid), independent."""
        return torch.sigmoid(picked.float())

    def distribution(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, 2**V]`` float: the product of Bernoullis over every bit pattern,
        outcome ``i`` the pattern ``unpack_bits(i)`` (so indexed by answer id)."""
        picked = picked.float()
        V = picked.shape[-1]
        if V > MAX_ENUMERATED_BITS:
            raise ValueError(f"bce answers of {V} bits have 2**{V} outcomes; at most {MAX_ENUMERATED_BITS} bits")
        outcomes = bit_patterns(V).float()  # [2**V, V]
        log_on = F.logsigmoid(picked)  # [..., A, V]
        log_off = F.logsigmoid(-picked)
        log_p = log_on @ outcomes.T + log_off @ (1 - outcomes).T  # [..., A, 2**V]
        return log_p.exp()

    def target_ids(self, targets: Tensor) -> Tensor:
        """0/1 bit targets ``[..., n_answer, V]`` -> packed ids ``[..., n_answer]`` long."""
        return pack_bits(targets > 0.5)

    def correct(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]`` bool: every bit of the answer right."""
        return ((picked > 0) == targets.bool()).all(-1)

    def as_targets(self, picked: Tensor, like: Tensor) -> Tensor:
        """The thresholded bits written as targets of ``like``'s dtype (``[..., n_answer, V]``)."""
        return (picked > 0).to(like.dtype)

    def target_logprob(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]`` log-probability of the whole target bit pattern (the sum of each
        bit's)."""
        return (targets * F.logsigmoid(picked) + (1 - targets) * F.logsigmoid(-picked)).sum(-1)

    def target_prob(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer]`` probability of the whole target bit pattern."""
        return self.target_logprob(picked, targets).exp()

    def target_logit_diff(self, picked: Tensor, targets: Tensor) -> Tensor:
        """``[..., n_answer, V]``: per bit, the logit of its target value minus the other's
        (``±logit``)."""
        return (2 * targets - 1) * picked

    def attributed_units(self, picked: Tensor) -> tuple[Tensor, tuple[str, ...], bool]:
        """What attribution explains (see :meth:`ClassDecoding.attributed_units`): every bit's
        logit."""
        n_answer, n_out = picked.shape[1], picked.shape[2]
        index = torch.arange(n_answer * n_out).expand(len(picked), -1)
        return index, tuple(f"bit {u}" for u in range(n_out)), False

    def __repr__(self) -> str:
        return "BITS"


Decoding = ClassDecoding | BitDecoding
CLASSES = ClassDecoding()
BITS = BitDecoding()


def decoding_for_targets(targets: Tensor) -> Decoding:
    """The decoding of a batch's targets when no loss kind is at hand (a circuit metric sees
    only ``(logits, batch)``): float targets ``[batch, pos, V]`` are bits, integer ones
    ``[batch, pos]`` classes."""
    return BITS if targets.dtype.is_floating_point else CLASSES


class LossKind(NamedTuple):
    loss: Callable[[Tensor, Batch], Tensor]
    correct: Callable[[Tensor, Batch], Tensor]
    # judges discrete outputs without logits (e.g. sampled ones), for kinds with no single
    # target: ``judge(outputs [batch, k, n_answer] long, batch) -> [batch, k] bool``
    judge: Callable[[Tensor, Batch], Tensor] | None = None
    # how the outputs of k seeds combine (seeded_evaluation's rule names), see the module doc
    vote_rules: tuple[str, ...] = ("majority_whole",)
    # how its logits decode into answers (see the module doc)
    decoding: Decoding = CLASSES

    @property
    def bits(self) -> bool:
        """True when the outputs are independent bits (packed into one id per answer)."""
        return self.decoding.bits

    def predict(self, picked: Tensor) -> Tensor:
        """Answer-position logits ``[..., n_answer, K]`` -> answer ids ``[..., n_answer]`` long."""
        return self.decoding.predict(picked)

    def distribution(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, n_ids]`` the output distribution over answer ids (what total-variation
        scores compare)."""
        return self.decoding.distribution(picked)

    def marginals(self, picked: Tensor) -> Tensor:
        """``[..., n_answer, K]`` per output unit: class probabilities, or bit probabilities."""
        return self.decoding.marginals(picked)

    def target_ids(self, batch: Batch) -> Tensor | None:
        """``[batch, n_answer]`` long, the right answer's id at each answer position, in the
        encoding of :meth:`predict`; ``None`` for a kind judged without one target (it has a
        ``judge``, e.g. colouring)."""
        return None if self.judge is not None else self.decoding.target_ids(batch.answer_targets())


def _ce_loss(picked: Tensor, batch: Batch) -> Tensor:
    # [batch, n_answer, vocab] -> [batch, vocab, n_answer] for cross_entropy's class axis
    return F.cross_entropy(picked.transpose(1, 2), batch.answer_targets(), reduction="none").mean(-1)


def _ce_correct(picked: Tensor, batch: Batch) -> Tensor:
    return CLASSES.correct(picked, batch.answer_targets())


def _bce_loss(picked: Tensor, batch: Batch) -> Tensor:
    targets = batch.answer_targets().to(picked.dtype)
    return F.binary_cross_entropy_with_logits(picked, targets, reduction="none").mean((-1, -2))


def _bce_correct(picked: Tensor, batch: Batch) -> Tensor:
    return BITS.correct(picked, batch.answer_targets())


LOSS_KINDS: Registry[LossKind] = Registry("loss kind", sort=True)
# cross-entropy against class targets [batch, pos]
LOSS_KINDS.register("ce", LossKind(_ce_loss, _ce_correct))
# binary cross-entropy of every output unit against float targets [batch, pos, d_vocab_out]
# (e.g. recall's value bits); an answer position is right when every bit is; its outputs are bits
LOSS_KINDS.register("bce", LossKind(_bce_loss, _bce_correct, vote_rules=("majority_whole", "majority_per_bit"),
                                    decoding=BITS))


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


def get_loss_kind(kind: str) -> LossKind:
    """The registered loss kind ``kind`` (``ValueError`` naming the known ones otherwise)."""
    return _kind(kind)


def answer_logits(logits: Tensor, batch: Batch) -> Tensor:
    """``[batch, pos, d_vocab_out] -> [batch, n_answer, d_vocab_out]`` (``logits`` itself, not a
    copy, where every position is an answer position in order, e.g. the colouring)."""
    positions = batch.answer_positions
    if answers_every_position(positions, logits.shape[1]):
        return logits
    return logits[:, positions]


def answers_every_position(positions: Tensor, n_pos: int) -> bool:
    """``positions`` (a batch's ``answer_positions``) is ``0, 1, .., n_pos - 1``: selecting
    them is the identity."""
    return (isinstance(positions, Tensor) and positions.dim() == 1 and len(positions) == n_pos
            and bool((positions == torch.arange(n_pos, device=positions.device)).all()))


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


__all__ = ["BITS", "CLASSES", "LOSS_KINDS", "MAX_ENUMERATED_BITS", "MAX_PACKED_BITS", "SMALL_SOFTMAX", "BitDecoding",
           "ClassDecoding", "Decoding", "LossKind", "answer_correct", "answer_logits", "answer_loss",
           "answers_every_position", "argmax_class", "bit_patterns", "decoding_for_targets", "get_loss_kind",
           "loss_kinds", "output_judge", "pack_bits", "register_loss_kind", "unpack_bits", "vote_rules"]
