"""The primitive library: named steps that a sequence task's algorithms are built from.

A :class:`Primitive` computes the answer at output ``k`` of a batch seen as a :class:`Frame`
(the tokens; for each output the position ``q_k`` where the model predicts it, the token there,
the tokens visible up to it; the *source*, the tokens before the first answer position). It
says what it reads, so that the search can give it a site: ``reads="source"`` (the list before
the answer, gathered by attention at ``q_k``, order-free), ``"sequence"`` (the same list in
order: operands), ``"match"`` (the list in order, matched against the current token: an
induction, whose source positions compute their own part, e.g. a previous-token head),
``"prefix"`` (every token up to ``q_k``), ``"position"`` (the one token at ``at(frame, k)``,
which the primitive copies) or ``"none"``; ``cue=True`` when it also reads the current token at
``q_k``. Families group them:

- ``order``: the k-th order statistic (k-th smallest, from the histogram), the k-th largest,
  the running maximum and minimum;
- ``search``: the next larger element after the current token (a successor search through the
  list), the successor token ``c + 1``;
- ``copy``: copy the source in order, reversed, the current token, the previous token; by
  content: the source token after (induction) or before the current token's occurrence;
- ``count``: how often the current token occurs in the source, the majority token so far;
- ``position``: the output's index; the token at the first answer position plus the index
  (count up by position).

A task declares which families apply (``families``: a task class attribute or a
:class:`~interp_rand.tasks.spec.TaskSpec` field); a task that declares none is tried on every
family. A user adds a primitive in a few lines::

    @register_primitive("order", "second_largest_so_far", "the second largest token up to q_k", reads="prefix")
    def _second(frame: Frame, k: int) -> Tensor:
        return frame.prefix(k).sort(1).values[:, -2]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from interp_rand.registry import Registry

READS = ("source", "sequence", "match", "prefix", "position", "none")
HASH_MODULUS = 4_398_046_511_093  # the largest prime below 2^42: code * 1_000_003 stays below 2^63


@dataclass(frozen=True)
class Frame:
    """A batch of a sequence task as the primitives see it.

    ``tokens`` ``[batch, P]`` the input tokens; ``answer_positions`` ``[K]`` where each output is
    predicted (``q_k``, a task position). The source is every token before ``q_0`` from
    ``start`` on (a task's ``source_start``: 1 behind a BOS token, as D-RASP's benchmark models
    read); a task whose first answer is predicted at position 0 (a running maximum) has an empty
    source and its primitives read the prefix."""

    batch: Any
    task: Any = None

    @property
    def tokens(self) -> Tensor:
        return self.batch.inputs

    @property
    def n_outputs(self) -> int:
        return len(self.batch.answer_positions)

    def q(self, k: int) -> int:
        return int(self.batch.answer_positions[k])

    @property
    def start(self) -> int:
        """Where the source begins (the task's ``source_start``; 0 by default)."""
        return int(getattr(self.task, "source_start", 0) or 0)

    @property
    def source(self) -> Tensor:
        return self.tokens[:, self.start: self.q(0)]

    def prefix(self, k: int) -> Tensor:
        return self.tokens[:, self.start: self.q(k) + 1]

    def current(self, k: int) -> Tensor:
        return self.tokens[:, self.q(k)]

    def read(self, reads: str, k: int) -> Tensor:
        """``[batch]``: a code of what a primitive reading ``reads`` gathers at output ``k``:
        the multiset of the source or of the prefix (order-free, as attention reads it), 0 for
        ``"none"``."""
        if reads == "none":
            return torch.zeros(len(self.tokens), dtype=torch.long)
        if reads in ("sequence", "match"):  # order matters (operands, an induction match): the position joins each token
            width = self.source.shape[1]
            return multiset_code(self.source.long() * (width + 1) + torch.arange(width))
        return multiset_code(self.source if reads == "source" else self.prefix(k))


def multiset_code(values: Tensor) -> Tensor:
    """``[batch]`` one integer per row for the row's multiset of values: a polynomial hash of the
    sorted values modulo a prime near ``2^42``, the same for a multiset in any batch (equal
    multisets share a code; two different ones collide with probability about ``n / 2^42``)."""
    code = torch.zeros(len(values), dtype=torch.long)
    for column in (values.long().sort(1).values + 1).T:  # Horner's rule in exact int64 steps
        code = (code * 1_000_003 + column) % HASH_MODULUS
    return code


@dataclass(frozen=True)
class Primitive:
    """A named step: ``compute(frame, k) -> [batch]`` the answer at output ``k``.

    Attributes:
        family, name: where it is registered (``order``, ``order_statistic``).
        description: the step in words with ``k`` as the output index (the pseudocode line).
        compute: the step.
        reads: what it gathers (:data:`READS`).
        cue: it also reads the current token at ``q_k``.
        needs: a method the task must have (``operand_digits`` for the digit primitives).
        at: ``at(frame, k) -> int`` the position a ``reads="position"`` primitive copies from.
    """

    family: str
    name: str
    description: str
    compute: Callable[[Frame, int], Tensor]
    reads: str = "source"
    cue: bool = False

    needs: str = ""
    at: Callable[[Frame, int], int] | None = None

    def __post_init__(self) -> None:
        if self.reads not in READS:
            raise ValueError(f"Primitive.reads={self.reads!r} is not allowed; choose from {READS}")
        if (self.reads == "position") != (self.at is not None):
            raise ValueError("a primitive reads='position' exactly when it says where: at(frame, k)")

    def applies(self, frame: Frame) -> bool:
        """A primitive reading the source needs one (tokens before the first answer); one that
        ``needs`` a task method (``operand_digits``) needs a task that has it."""
        if self.needs and not hasattr(frame.task, self.needs):
            return False
        return self.reads not in ("source", "sequence", "match") and self.at is None or frame.source.shape[1] > 0


PRIMITIVES: Registry[Primitive] = Registry("primitive")


def register_primitive(family: str, name: str, description: str, *, reads: str = "source", cue: bool = False,
                       needs: str = ""):
    """Decorator: register ``fn(frame, k) -> [batch]`` as primitive ``name`` of ``family``."""

    def add(fn: Callable[[Frame, int], Tensor]) -> Callable[[Frame, int], Tensor]:
        PRIMITIVES.register(name, Primitive(family, name, description, fn, reads, cue, needs), description=description)
        return fn

    return add


def register_copy(family: str, name: str, description: str, at: Callable[[Frame, int], int]) -> None:
    """Register the primitive that copies the token at position ``at(frame, k)``."""
    PRIMITIVES.register(name, Primitive(family, name, description, lambda frame, k: frame.tokens[:, at(frame, k)],
                                        "position", at=at), description=description)


def families() -> list[str]:
    return list(dict.fromkeys(PRIMITIVES.get(n).family for n in PRIMITIVES.names()))


def primitives_of(task: Any, chosen: tuple[str, ...] | list[str] | None = None) -> list[Primitive]:
    """The primitives of the families ``chosen``, else of those ``task`` declares
    (``task.families``), else of every family; an unknown family is refused with the list."""
    wanted = chosen or getattr(task, "families", None) or families()
    unknown = [f for f in wanted if f not in families()]
    if unknown:
        raise ValueError(f"unknown primitive families {unknown}; the library has: {', '.join(families())}")
    return [PRIMITIVES.get(n) for n in PRIMITIVES.names() if PRIMITIVES.get(n).family in wanted]


# ---------------------------------------------------------------------- order
def order_statistic(values: Tensor, k: int) -> Tensor:
    """``[batch]`` the ``k``-th smallest of each row (``min{v : #{x <= v} > k}``), clamped to the row."""
    return values.sort(1).values[:, min(k, values.shape[1] - 1)]


@register_primitive("order", "order_statistic", "y_k = the k-th smallest source token: min{v : #{x <= v} > k}")
def _order_statistic(frame: Frame, k: int) -> Tensor:
    return order_statistic(frame.source, k)


@register_primitive("order", "order_statistic_desc", "y_k = the k-th largest source token")
def _order_statistic_desc(frame: Frame, k: int) -> Tensor:
    return order_statistic(-frame.source, k).neg()


@register_primitive("order", "running_max", "y_k = max of the tokens up to q_k", reads="prefix")
def _running_max(frame: Frame, k: int) -> Tensor:
    return frame.prefix(k).max(1).values


@register_primitive("order", "running_min", "y_k = min of the tokens up to q_k", reads="prefix")
def _running_min(frame: Frame, k: int) -> Tensor:
    return frame.prefix(k).min(1).values


# ---------------------------------------------------------------------- search
@register_primitive("search", "next_larger", "y_k = c_k again if copies of c_k remain unwritten, else the "
                    "smallest source token above c_k", cue=True)
def _next_larger(frame: Frame, k: int) -> Tensor:
    x, c = frame.source, frame.current(k)
    if k == 0:  # the search starts below every token
        return x.min(1).values
    written = frame.tokens[:, frame.q(0) + 1: frame.q(k)]  # the answers written before c_k
    copies = (x == c[:, None]).sum(1)
    used = (written == c[:, None]).sum(1) + 1  # c_k itself is written
    big = torch.iinfo(torch.long).max
    above = torch.where(x > c[:, None], x, torch.full_like(x, big)).min(1).values
    return torch.where((copies > used) | (above == big), c, above)


@register_primitive("search", "successor", "y_k = c_k + 1 (the next token id)", reads="none", cue=True)
def _successor(frame: Frame, k: int) -> Tensor:
    return frame.current(k) + 1


# ---------------------------------------------------------------------- copy
register_copy("copy", "copy_source", "y_k = the k-th source token (copy in order)",
              lambda frame, k: frame.start + min(k, frame.source.shape[1] - 1))
register_copy("copy", "reverse_source", "y_k = the k-th source token from the end (reverse)",
              lambda frame, k: frame.start + max(frame.source.shape[1] - 1 - k, 0))


@register_primitive("copy", "copy_current", "y_k = c_k (the token at q_k)", reads="none", cue=True)
def _copy_current(frame: Frame, k: int) -> Tensor:
    return frame.current(k)


register_copy("copy", "copy_previous", "y_k = the token before q_k", lambda frame, k: max(frame.q(k) - 1, 0))


def _induction(frame: Frame, k: int, step: int) -> Tensor:
    """The source token ``step`` places after (``-1``: before) the last occurrence of the current
    token ``c_k`` in the source; where ``c_k`` does not occur (the separator at the first
    output), the first source token (``step = +1``) or the last (``step = -1``)."""
    x, c = frame.source, frame.current(k)
    width = x.shape[1]
    where = torch.arange(width).expand_as(x)
    last = torch.where(x == c[:, None], where, torch.full_like(where, -1)).max(1).values  # [batch]
    found = last >= 0
    at = torch.where(found, last + step, torch.full_like(last, 0 if step > 0 else width - 1)).clamp(0, width - 1)
    return x.gather(1, at[:, None])[:, 0]


@register_primitive("copy", "induction_next", "y_k = the source token after c_k's occurrence in the source (an "
                    "induction head: match c_k, copy its successor; the first source token at the separator)",
                    reads="match", cue=True)
def _induction_next(frame: Frame, k: int) -> Tensor:
    return _induction(frame, k, +1)


@register_primitive("copy", "induction_previous", "y_k = the source token before c_k's occurrence in the source "
                    "(match c_k, copy its predecessor: a reverse by content; the last source token at the separator)",
                    reads="match", cue=True)
def _induction_previous(frame: Frame, k: int) -> Tensor:
    return _induction(frame, k, -1)


# ---------------------------------------------------------------------- count
@register_primitive("count", "count_current", "y_k = how often c_k occurs in the source (its histogram count)",
                    cue=True)
def _count_current(frame: Frame, k: int) -> Tensor:
    return (frame.source == frame.current(k)[:, None]).sum(1)


@register_primitive("count", "majority", "y_k = the most frequent token up to q_k (ties: the smallest)",
                    reads="prefix")
def _majority(frame: Frame, k: int) -> Tensor:
    prefix = frame.prefix(k)
    counts = torch.nn.functional.one_hot(prefix.long(), int(prefix.max()) + 1).sum(1)
    return counts.argmax(1)


# ---------------------------------------------------------------------- digits (addition)
def _digit_sum(frame: Frame, k: int, lookahead: int | None) -> Tensor:
    """The answer digit at output ``k``'s place from the operand tokens (edits count): the pair
    sum plus the carry into the place, found by a full ripple (``lookahead=None``) or by looking
    at most ``lookahead`` places down (0: no carry)."""
    a, b = frame.task.operand_digits(frame.batch)  # [batch, n] place-ordered
    n = a.shape[1]
    zero = torch.zeros_like(a[:, :1])
    pair = torch.cat([a + b, zero], 1)  # place n: no digits
    place = int(frame.task.answer_places()[k])
    reach = place if lookahead is None else min(lookahead, place)
    carry = torch.zeros_like(pair[:, 0])
    for below in range(place - reach, place):  # ripple up from the lowest place looked at
        carry = (pair[:, below] + carry >= 10).long()
    return (pair[:, place] + carry) % 10 if place < n else carry


@register_primitive("digits", "digit_sum", "y_k = (a_p + b_p + carry into p) % 10 at output k's place p, the carry "
                    "rippled from the lowest place", reads="sequence", needs="operand_digits")
def _digit_sum_full(frame: Frame, k: int) -> Tensor:
    return _digit_sum(frame, k, None)


@register_primitive("digits", "digit_sum_no_carry", "y_k = (a_p + b_p) % 10: no carry", reads="sequence",
                    needs="operand_digits")
def _digit_sum_none(frame: Frame, k: int) -> Tensor:
    return _digit_sum(frame, k, 0)


@register_primitive("digits", "digit_sum_lookahead_1", "y_k = (a_p + b_p + [a_{p-1} + b_{p-1} >= 10]) % 10: the "
                    "carry from one place below only", reads="sequence", needs="operand_digits")
def _digit_sum_one(frame: Frame, k: int) -> Tensor:
    return _digit_sum(frame, k, 1)


@register_primitive("digits", "digit_sum_lookahead_2", "y_k = the digit with the carry looked up two places below "
                    "(a cascade of one sum-9 place)", reads="sequence", needs="operand_digits")
def _digit_sum_two(frame: Frame, k: int) -> Tensor:
    return _digit_sum(frame, k, 2)


# ---------------------------------------------------------------------- position
@register_primitive("position", "index", "y_k = k (the output's index)", reads="none")
def _index(frame: Frame, k: int) -> Tensor:
    return torch.full((len(frame.tokens),), k, dtype=torch.long)


_COUNT_BY_POSITION = ("y_k = the token at the first answer position + k + 1 (count up by the output's position "
                      "from there, not from the token written just before)")
PRIMITIVES.register("count_by_position", Primitive("position", "count_by_position", _COUNT_BY_POSITION,
                                                   lambda frame, k: frame.tokens[:, frame.q(0)] + k + 1, "position",
                                                   at=lambda frame, k: frame.q(0)), description=_COUNT_BY_POSITION)


__all__ = ["Frame", "PRIMITIVES", "Primitive", "READS", "families", "multiset_code", "order_statistic",
           "primitives_of", "register_copy", "register_primitive"]
