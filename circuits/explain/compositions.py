"""Compositions: a candidate's answer restated as a few intermediate steps, each a variable of
its own that the search localises, so that an explanation says where each step of the
algorithm happens and not only where the answer is written.

A primitive's answer is one function of the input (``digit_sum``: the digit of a place with
its carry). A :class:`Composition` of it names the steps the model may take to get there
(``class_j``: the carry class of place ``j``; ``carry2_k``: the carry into output ``k``'s
place; ``y_k`` from them), each :class:`Step` computed from its parents, so that two
compositions of the same answer are different hypotheses about the same function: they
predict the same answers and differ in which intermediate values exist, where, and what each
is computed from. The treeified scrub of each one's card (each site recomputed by the model
from its parents' sites, every other location resampled) and its interchange per step are
the experiments between them.

Every step but the outputs' is searched over every component at every position it may be
computed at (up to its last consumer) *and* over a 1-dim subspace of every residual hook
there (:func:`circuits.mechanisms.leads.site_sweep`); the outputs' steps ``y_k`` as in
:mod:`circuits.explain.localise` (components at the output's own position).

The library's compositions, for the ``digits`` family (any digit count, either order):

- ``lookahead_carry``: ``T_j`` the carry class of each place (kill / pass / make); the carry into
  output ``k``'s place ``p``, ``C_k``, read from ``T_0 .. T_{p-1}`` at once; ``y_k = (B_k +
  C_k) % 10`` with ``B_k`` the pair's base add; the top digit one step more, ``[T_{n-1} == 2 or
  (T_{n-1} == 1 and C_k)]``;
- ``ripple_carry``: the same, but the carry into ``p`` is made from ``T_{p-1}`` and the carry
  into ``p - 1`` (itself a step of output ``k``), down to the carry into place 1 (``T_0 == 2``).

With three digits the two coincide (the carry into place 1 is ``T_0 == 2`` either way), and the
search says so; from four digits on they are rivals. A user adds a composition with
:func:`register_composition`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from circuits.explain.primitives import Frame
from interp_rand.registry import Registry


@dataclass(frozen=True)
class Step:
    """One intermediate value: ``compute(batch, **parents) -> [batch]``.

    Attributes:
        name: unique within the composition; the outputs' steps are ``y_0 .. y_{K-1}``.
        family, instance: the step's kind (``class``, ``carry``) and its index, for the pseudocode.
        description: the step in words (a pseudocode line).
        upto: the last task position the step may be computed at (its last consumer's).
        reads: task positions whose tokens the step is, read off the input: its site is their
            embeddings, not searched (an operand pair a step reads jointly with something else).
        Steps and outputs may also name ``cue_k``, the token at output ``k``'s position (the
        digit written just before it), as a parent.
    """

    name: str
    family: str
    instance: int
    description: str
    compute: Callable[..., Tensor]
    parents: tuple[str, ...] = ()
    upto: int = 0
    reads: tuple[int, ...] = ()


@dataclass(frozen=True)
class Composition:
    """Named steps of one primitive's answer: ``steps(frame) -> [Step]`` (outputs included,
    parents before children)."""

    name: str
    primitive: str
    description: str
    steps: Callable[[Frame], list[Step]]


COMPOSITIONS: Registry[Composition] = Registry("composition")


def register_composition(name: str, primitive: str, description: str):
    """Decorator: register ``steps(frame) -> [Step]`` as a composition of ``primitive``."""

    def add(fn: Callable[[Frame], list[Step]]) -> Callable[[Frame], list[Step]]:
        COMPOSITIONS.register(name, Composition(name, primitive, description, fn), description=description)
        return fn

    return add


def compositions_of(primitive: str) -> list[Composition]:
    return [COMPOSITIONS.get(n) for n in COMPOSITIONS.names() if COMPOSITIONS.get(n).primitive == primitive]


# ---------------------------------------------------------------------- digits
def carry_class(total: Tensor) -> Tensor:
    """``0`` for a pair sum <= 8 (kills a carry), ``1`` for 9 (passes one on), ``2`` for >= 10 (makes one)."""
    return (total >= 9).long() + (total >= 10).long()


def carry_step(T: Tensor, carry: Tensor) -> Tensor:
    """The carry out of a place of class ``T`` given the carry into it."""
    return ((T == 2) | ((T == 1) & (carry == 1))).long()


def _pair(task: Any, j: int) -> Callable[..., Tensor]:
    def total(batch: Any) -> Tensor:
        a, b = task.operand_digits(batch)
        return a[:, j] + b[:, j]
    return total


def _lookahead(*classes: Tensor) -> Tensor:
    carry = classes[0].new_zeros(classes[0].shape)
    for T in classes:  # place 0 first
        carry = carry_step(T, carry)
    return carry


def _digit_steps(frame: Frame, ripple: bool, written: bool = False) -> list[Step]:
    """The steps of ``lookahead_carry`` / ``ripple_carry``; ``written``: the digit just below the
    final carry (most significant first) is read jointly with that carry as written, ``R_k = a_p
    + b_p - 10 w_k`` (``w_k``: the token at its position), and is ``R_k + C_k``."""
    task = frame.task
    a, _ = task.operand_digits(frame.batch)
    n, places = a.shape[1], [int(p) for p in task.answer_places()]
    last = frame.q(len(places) - 1)
    # place 0 has no carry in: only whether it makes one matters (T_0 == 2, the carry out of place 0)
    steps = [Step("class_0", "class", 0, "T_0 = 2 if a_0+b_0 >= 10 else 0  (place 0 makes a carry or not)",
                  lambda batch: 2 * (_pair(task, 0)(batch) >= 10).long(), upto=last)]  # upto: see last_use
    steps += [Step(f"class_{j}", "class", j, f"T_{j} = 0 if a_{j}+b_{j} <= 8, 1 if 9, 2 if >= 10  (the carry class of "
                   f"place {j})", lambda batch, j=j: carry_class(_pair(task, j)(batch)), upto=last)
              for j in range(1, n)]
    for k, p in enumerate(places):
        q = frame.q(k)
        top = p == n  # the final carry: one carry step over the top place's class
        below = p - 1 if top else p  # the highest place whose carry the output needs
        carry = None
        if below >= 1:
            if ripple:  # carry into place i from T_{i-1} and the carry into i - 1, each a step of output k
                for i in range(1, below + 1):
                    parents = (f"class_{i - 1}",) + ((f"carry{i - 1}_{k}",) if i >= 2 else ())
                    steps.append(Step(f"carry{i}_{k}", "carry", k, f"C{i}_k = carry out of place {i - 1} from T_{i - 1} "
                                      f"and C{i - 1}_k (ripple)",
                                      lambda batch, i=i, k=k, **v: carry_step(
                                          v[f"class_{i - 1}"], v[f"carry{i - 1}_{k}"] if i >= 2 else 0),
                                      parents, upto=q))
            else:
                parents = tuple(f"class_{j}" for j in range(below))
                steps.append(Step(f"carry{below}_{k}", "carry", k, f"C_k = carry into place {below} looked ahead over "
                                  f"T_0..T_{below - 1} at once",
                                  lambda batch, parents=parents, **v: _lookahead(*(v[x] for x in parents)),
                                  parents, upto=q))
            carry = f"carry{below}_{k}"
        if top:
            parents = (f"class_{n - 1}",) + ((carry,) if carry else ())
            steps.append(Step(f"y_{k}", "y", k, f"y_k = the final carry: T_{n - 1} == 2 or (T_{n - 1} == 1 and C_k)",
                              lambda batch, carry=carry, **v: carry_step(v[f"class_{n - 1}"], v[carry] if carry else 0),
                              parents, upto=q))
            continue
        if written and k >= 1 and places[k - 1] == n:  # the written final carry is read with the pair
            names = task.position_names()
            steps.append(Step(f"pair_{p}", "pair", p, f"P_p = a_p + b_p (the operand tokens, read)",
                              lambda batch, p=p: _pair(task, p)(batch), upto=q,
                              reads=(names.index(f"a{p}"), names.index(f"b{p}"))))
            steps.append(Step(f"base_{k}", "base", k, "R_k = P_p - 10 w_k, w_k the final carry as written at r_k",
                              lambda batch, p=p, k=k, **v: v[f"pair_{p}"] - 10 * v[f"cue_{k}"],
                              (f"pair_{p}", f"cue_{k}"), upto=q))
            parents = (f"base_{k}",) + ((carry,) if carry else ())
            steps.append(Step(f"y_{k}", "y", k, "y_k = R_k + C_k",
                              lambda batch, k=k, carry=carry, **v: v[f"base_{k}"] + (v[carry] if carry else 0),
                              parents, upto=q))
            continue
        steps.append(Step(f"base_{k}", "base", k, f"B_k = (a_p + b_p) % 10 at output k's place p",
                          lambda batch, p=p: _pair(task, p)(batch) % 10, upto=q))
        parents = (f"base_{k}",) + ((carry,) if carry else ())
        steps.append(Step(f"y_{k}", "y", k, "y_k = (B_k + C_k) % 10" if carry else "y_k = B_k",
                          lambda batch, k=k, carry=carry, **v: (v[f"base_{k}"] + (v[carry] if carry else 0)) % 10,
                          parents, upto=q))
    return last_use(steps)


def last_use(steps: list[Step]) -> list[Step]:
    """Each step's ``upto`` set to its last consumer's (a step is computed by the time its last
    reader reads it, and at no later position)."""
    latest: dict[str, int] = {}
    for step in steps:
        for parent in step.parents:
            latest[parent] = max(latest.get(parent, 0), step.upto)
    return [dataclasses.replace(s, upto=latest[s.name]) if s.name in latest else s for s in steps]


@register_composition("lookahead_carry", "digit_sum", "each digit from its pair's base add and the carry into its "
                      "place, the carry looked ahead over the lower places' carry classes at once")
def _lookahead_carry(frame: Frame) -> list[Step]:
    return _digit_steps(frame, ripple=False)


@register_composition("lookahead_carry_written", "digit_sum", "as lookahead_carry, with the digit below the final "
                      "carry read jointly with that carry as written (R = a_p + b_p - 10 w, the digit R + C)")
def _lookahead_carry_written(frame: Frame) -> list[Step]:
    return _digit_steps(frame, ripple=False, written=True)


@register_composition("ripple_carry", "digit_sum", "each digit from its pair's base add and the carry into its place, "
                      "the carry rippled up one place at a time (the carry into p from T_{p-1} and the carry into p-1)")
def _ripple_carry(frame: Frame) -> list[Step]:
    return _digit_steps(frame, ripple=True)


__all__ = ["COMPOSITIONS", "Composition", "Step", "carry_class", "carry_step", "compositions_of", "last_use",
           "register_composition"]
