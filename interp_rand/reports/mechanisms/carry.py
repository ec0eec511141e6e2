"""Carry propagation in ``zoo:addition``: the algorithm the model runs, as a :class:`Mechanism`.

The run adds two 3-digit numbers, answer written most significant digit first, so the top
digit ``s3`` (the final carry) is predicted at ``=`` before any answer digit is written, and
each later digit is predicted with the digits above it already written. Per place ``p`` the
model uses the carry-lookahead *class* of its digit pair, ``T_p = 0`` (``a_p + b_p <= 8``: kills
a carry), ``1`` (``= 9``: passes one on, the cascade condition) or ``2`` (``>= 10``: makes one),
and the pair's *base add* ``BA_p = (a_p + b_p) mod 10`` (Quirke & Barez's base add, make carry
and make sum-9, the last two in one ternary class):

- **layer 0** computes the pair of a place at the position that needs it: at the operand
  positions ``b1`` and ``b0`` (heads ``a0.1``/``a0.3`` attend ``a1, b1``; all four attend
  ``a0, b0``) it writes the class ``T1`` and the carry ``gen0 = T0 == 2``, each on **one**
  direction of ``blocks.1.hook_resid_pre``; at each answer position the four layer-0 heads
  read that position's own pair (``T2`` at ``=``, ``R2``, ``BA1``, ``BA0`` after it);
- **layer 1 attention** gathers the carry into the digit's place (``a1.2`` reads ``b1``,
  ``a1.0``/``a1.1`` and others read ``b0``): after it, one direction of
  ``blocks.1.hook_resid_mid`` at the answer position holds ``c2 = T1 == 2 or (T1 == 1 and
  gen0)`` (the whole cascade through place 1, in one step: lookahead, not ripple) or ``c1 =
  gen0``;
- **MLP 1** turns class or base add and carry into the digit. The one twist is ``s2``: the
  layer-0 heads at the position predicting it are queried by the top digit already *written*
  there (the token ``s3``, ``embed@8``) and read place 2 jointly with it, ``R2 = a2 + b2 - 10
  s3_written`` (the digit the written ``s3`` leaves for place 2); MLP 1 adds the carry it
  gathered, ``X2 = R2 + c2``. On every real input ``X2`` is a digit and ``s2 = X2`` (``R2`` is
  the base add, or ``-1`` for a sum-9 pair under a carry: a sum-9 place 2 is settled by the
  written ``s3``, and the carry only moves ``-1`` to ``0`` or leaves ``9`` at ``9``). A wrong
  ``s3`` written puts ``X2`` off the digits, and ``s2`` is held at the wrap on the token's side
  near it (``X2 == 10``: ``9``; a pair sum of 6 to 9 under ``s3 = 1``, ``-4 <= R2 <= -1``:
  ``0``) and wraps further out (``X2 >= 11``: ``X2 - 10``; ``R2 <= -5``: ``max(X2 + 9, 0)``,
  one below the true digit). Measured over all 10^6 problems (``a, b`` in 000..999): with the
  right ``s3`` the rule is the model's ``s2`` on all of them; with ``s3`` flipped on 0.750
  (750,251; the sum-9-only rule it replaces, ``R2 = 9 + 10 s3_written`` on a sum-9 pair and
  ``BA2`` else, 0.445), and no rule of ``(a2 + b2, c2, s3_written)`` reaches more than 0.780
  (each cell's commonest ``s2``): the rest depends on the digits ``a2``, ``b2`` themselves (their
  cells reach 0.936). The model's commonest ``s2`` (its share when below 1) per pair sum
  ``a2 + b2``, with ``s3`` flipped::

      s3=1 c2=0  0:0 1:0 2:1(.98) 3:2(.50) 4:3(.60) 5:5(.34) 6:0(.71) 7:0(.98) 8:0 9:0
      s3=1 c2=1  0:0 1:1(.61) 2:2 3:3(.51) 4:4(.59) 5:5(.39) 6:0(.66) 7:0(.97) 8:0
      s3=0 c2=0  10:9(.89) 11:1(.75) 12:2(.95) 13:3(.97) 14:4(.60) 15:5(.93) 16:6(.97) 17:7 18:9(.63)
      s3=0 c2=1  9:9 10:1(.50) 11:1(.79) 12:3(.38) 13:4(.35) 14:5(.60) 15:6 16:7 17:8 18:9

  The predictions (:func:`carry_predictions`): a wrong ``s3`` breaks a sum-9 place 2 (0 of
  100,000 right) and any other place 2 the rule holds at the wrap (0.027 of 285,450 right):
  both hold; the rule's claims past the wrap do not (right on 0.659 of 404,550 where it says
  ``s2`` stays right, on 0.320 of 204,950 where it says one below), and the written ``s3``'s
  interchange, now scored on every place 2, is 0.863 at the test's sizes. A base add alone at
  those heads fails its interchange exactly where source and base disagree on the written
  ``s3`` and the source's place 2 sums to 9.

:func:`mechanism` builds the hypothesis (``sites`` overrides variables' sites, ``s2_rule``
the rule for ``s2``, for variants and for :func:`carry_site`); :func:`carry_site` finds, per
answer digit with a carry, the first residual-stream hook where a 1-dim interchange of the carry
into its place holds: the carry case study's "carry layer" (measured: ``blocks.1.hook_resid_mid``
for places 2 and 1; place 3's carry, the answer ``s3`` itself, already passes at
``blocks.1.hook_resid_pre`` with 0.910, see the notes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from circuits.explain.compositions import carry_class
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable

RUN = "zoo:addition"

# s2 as the model reads it (X2: the digit the written s3 leaves, plus the carry), and the textbook rule
_S2_WRITTEN = """\
X2   = R2 + c2                         # MLP 1 @ 8; X2 is a digit on every real input, and then s2 = X2;
s2   = X2 if 0 <= X2 <= 9 else 9 if X2 == 10 else X2-10 if X2 >= 11 else 0 if R2 >= -4 else max(X2+9, 0)
                                       #   a wrong s3 holds s2 at the wrap (9 or 0) near it, wraps further out
"""
_S2_LOOKAHEAD = "s2   = (R2 % 10 + c2) % 10            # MLP 1 @ 8 (textbook: R2 % 10 is BA2)\n"

PSEUDOCODE = """\
T_p  = 0 if a_p+b_p <= 8, 1 if == 9, 2 if >= 10       # carry class: kill / sum-9 / make carry
T1   = T(a1, b1)           # layer 0 at b1 (a0.1, a0.3 read a1, b1): 1 dim of resid_pre.1 @ b1
gen0 = T(a0, b0) == 2      # layer 0 at b0 (a0.0-a0.3 read a0, b0): 1 dim of resid_pre.1 @ b0
c2   = T1 == 2 or (T1 == 1 and gen0)   # layer-1 attention @ 7 ('=') and @ 8 (a1.2 reads b1, a1.0/a1.1 b0):
                                       #   1 dim of resid_mid.1 @ 7 and, separately, @ 8
c1   = gen0                            # layer-1 attention @ 9 (reads b0): 1 dim of resid_mid.1 @ 9
s3   = T2 == 2 or (T2 == 1 and c2)     # T2 from layer-0 heads @ 7 ('='); MLP 1 @ 7
R2   = a2+b2 - 10*s3_written           # layer-0 heads @ 8, read jointly from the pair and the written s3
                                       #   (embed @ 8): on real inputs BA2, or -1 for sum 9 under a carry;
                                       #   BA_p = (a_p+b_p) % 10
""" + _S2_WRITTEN + """\
s1   = (BA1 + c1) % 10                 # BA1 from layer-0 heads @ 9; MLP 1 @ 9
s0   = BA0                             # BA0 from layer-0 heads @ 10
"""

N_DIGITS = 3
# the variables that are carries into a place (the case study probes carry_in where these hold)
CARRY_VARIABLES = ("c2@s3", "c2@s2", "c1@s1")
# the residual hooks carry_site scans, in forward order (resid_post.0 is resid_pre.1)
CARRY_HOOKS = ("blocks.0.hook_resid_mid", "blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid",
               "blocks.1.hook_resid_post")


# ---------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Residual positions of the 3-digit msb-first addition task (no seed token)."""

    a: tuple[int, ...]        # a_p at a[p]
    b: tuple[int, ...]        # b_p at b[p]
    answer: tuple[int, ...]   # the position predicting the digit of place p at answer[p]
    output: tuple[int, ...]   # index into batch.answer_positions of place p's digit

    @classmethod
    def of(cls, task: Any) -> "Layout":
        if getattr(task, "name", None) != "addition" or task.n_digits != N_DIGITS or task.answer_order != "msb":
            raise ValueError(f"the carry mechanism is stated for 3-digit msb-first addition (zoo:addition); got {task!r}")
        n = task.n_digits
        places = task.answer_places().tolist()               # [3, 2, 1, 0]
        positions = task.answer_positions().tolist()         # [7, 8, 9, 10]
        answer = tuple(positions[places.index(p)] for p in range(n + 1))
        output = tuple(places.index(p) for p in range(n + 1))
        return cls(tuple(n - 1 - p for p in range(n)), tuple(2 * n - p for p in range(n)), answer, output)


def _pair_sum(p: int) -> Callable[[Any], Tensor]:
    return lambda batch: batch.metadata["a_digits"][:, p] + batch.metadata["b_digits"][:, p]


def _class(p: int) -> Callable[[Any], Tensor]:
    return lambda batch: carry_class(_pair_sum(p)(batch))


def _base_add(p: int) -> Callable[[Any], Tensor]:
    return lambda batch: _pair_sum(p)(batch) % 10


def _lookahead(batch: Any, T1: Tensor, gen0: Tensor, **query: Tensor) -> Tensor:
    """The carry into place 2, looked ahead: ``T1 == 2 or (T1 == 1 and gen0)`` (``query``: the
    variables the gathering attention's query reads, which do not change the carry)."""
    return ((T1 == 2) | ((T1 == 1) & (gen0 == 1))).long()


def _heads(layer: int, position: int) -> Site:
    return Site.of(*(Node("head", layer, h, position) for h in range(4)))


# ---------------------------------------------------------------------- rules


def _top(T2: Tensor, carry: Tensor) -> Tensor:
    return ((T2 == 2) | ((T2 == 1) & (carry == 1))).long()


def _read_at_s3(batch: Any, s3_written: Tensor) -> Tensor:
    """Place 2 as the layer-0 heads at s3's position read it, jointly from the pair and the
    written ``s3``: ``R2 = a2 + b2 - 10 * s3_written``, the digit the written top digit leaves
    for place 2 before the carry (on every real input ``0..9``, the base add ``BA2``, or ``-1``
    for a sum-9 pair under a carry; with a wrong ``s3`` written ``10..18`` or ``-10..-1``)."""
    return _pair_sum(2)(batch) - 10 * s3_written


def _s2_written(R2: Tensor, carry: Tensor) -> Tensor:
    """The model's rule for ``s2`` from ``X = R2 + c2``: ``X`` itself when it is a digit (every
    real input); past the wrap on the side the written ``s3`` denies, it is held at the wrap
    (``X == 10``: ``9``; a pair sum of 6 to 9 under a written ``s3 = 1``, ``-4 <= R2 <= -1``:
    ``0``) and further out wraps (``X >= 11``: ``X - 10``; ``R2 <= -5``: ``X + 9``, at least
    ``0``)."""
    total = R2 + carry
    below = torch.where(R2 >= -4, torch.zeros_like(total), (total + 9).clamp(min=0))
    above = torch.where(total == 10, torch.full_like(total, 9), total - 10)
    return torch.where(total > 9, above, torch.where(total < 0, below, total))


def _s2_lookahead(R2: Tensor, carry: Tensor) -> Tensor:
    """The textbook rule, ``(BA2 + c2) mod 10`` always (``R2 mod 10`` is ``BA2``): the wrong
    variant the test shows failing."""
    return (R2 % 10 + carry) % 10


RULES = {"s2": {"written": _s2_written, "lookahead": _s2_lookahead}}


# ---------------------------------------------------------------------- the mechanism


def default_sites(task: Any) -> dict[str, Site]:
    """Where the model holds each variable (see the module docstring)."""
    L = Layout.of(task)
    pre, mid = "blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid"
    return {
        "T2": _heads(0, L.answer[3]),
        "T1": Site.at(pre, L.b[1], subspace=1),
        "gen0": Site.at(pre, L.b[0], subspace=1),
        "c2@s3": Site.at(mid, L.answer[3], subspace=1),
        "R2": _heads(0, L.answer[2]),
        "s3_written": Site.of(Node("embed", position=L.answer[2])),
        "pair2": Site.of(Node("embed", position=L.a[2]), Node("embed", position=L.b[2])),
        "s2_written": Site.of(Node("embed", position=L.answer[1])),
        "s1_written": Site.of(Node("embed", position=L.answer[0])),
        "c2@s2": Site.at(mid, L.answer[2], subspace=1),
        "BA1": _heads(0, L.answer[1]),
        "c1@s1": Site.at(mid, L.answer[1], subspace=1),
        "BA0": _heads(0, L.answer[0]),
    }


def applies(model: Any, task: Any) -> str | None:
    """Why the carry mechanism, as stated here (3-digit msb-first addition, 2 blocks of 4 heads
    with MLPs, as zoo:addition), cannot be checked on ``model`` (``None``: it can)."""
    if getattr(task, "name", None) != "addition" or task.n_digits != N_DIGITS or task.answer_order != "msb":
        return f"it is stated for {N_DIGITS}-digit msb-first addition; this run is {getattr(task, 'name', task)!r} " + (
            f"with {task.n_digits} digits, answer {task.answer_order} first" if hasattr(task, "n_digits") else "")
    if model.cfg.n_layers != 2 or model.cfg.n_heads != 4 or getattr(model.cfg, "attn_only", False):
        return (f"it names the heads and MLPs of 2 blocks of 4 heads; the model has {model.cfg.n_layers} blocks of "
                f"{model.cfg.n_heads} heads")
    return None


def mechanism(task: Any, sites: dict[str, Site | None] | None = None, s2_rule: str = "written",
              predictions: bool = True, n_flipped: int = 1000, cascade_rows: int | None = None) -> Mechanism:
    """The carry mechanism of ``zoo:addition``'s task.

    Args:
        task: the run's task (3-digit msb-first addition).
        sites: overrides of :func:`default_sites` by variable name (``None`` unmaps one); the
            variables ``c3`` (the carry out of place 2, i.e. ``s3``), ``c2``/``c1`` name carries
            :func:`carry_site` maps.
        s2_rule: ``"written"`` (the model's: place 2 is read jointly with the written ``s3``,
            ``R2 = a2 + b2 - 10 s3_written``, see the module docstring) or ``"lookahead"``
            (``(BA2 + c2) mod 10``, the textbook rule).
        predictions: attach the mechanism's predictions (``n_flipped``, ``cascade_rows``: their
            sizes, see :func:`carry_predictions`).
    """
    if s2_rule not in RULES["s2"]:
        raise ValueError(f"s2_rule={s2_rule!r} is not allowed; choose from {tuple(RULES['s2'])}")
    L = Layout.of(task)
    where = {**default_sites(task), **(sites or {})}
    unknown = sorted(set(where) - set(_VARIABLE_NAMES))
    if unknown:
        raise ValueError(f"unknown carry-mechanism variables {unknown}; they are {list(_VARIABLE_NAMES)}")
    s2_of = RULES["s2"][s2_rule]

    def var(name: str, compute: Callable[..., Tensor], parents: tuple[str, ...], description: str) -> Variable:
        return Variable(name, compute, parents, where.get(name), description)

    variables = (
        var("T2", _class(2), (), "class of place 2 (0: sum <= 8, 1: sum 9, 2: makes a carry), read at '='"),
        var("T1", _class(1), (), "class of place 1, written by layer 0 at b1"),
        var("gen0", lambda b: (_pair_sum(0)(b) >= 10).long(), (), "place 0 makes a carry, written by layer 0 at b0"),
        var("c2@s3", _lookahead, ("T1", "gen0", "T2"),
            "carry into place 2 (cascade through place 1), gathered at '=' (the query there reads T2's heads)"),
        var("c3", lambda b, T2, **c: _top(T2, c["c2@s3"]), ("T2", "c2@s3"), "carry out of place 2: the top digit s3"),
        var("s3_written", lambda b: b.inputs[:, L.answer[2]], (), "the written top digit s3 (input token)"),
        var("pair2", lambda b: 10 * b.metadata["a_digits"][:, 2] + b.metadata["b_digits"][:, 2], (),
            "the digits of place 2 (input tokens a2, b2)"),
        var("R2", lambda b, pair2, s3_written: _read_at_s3(b, s3_written), ("pair2", "s3_written"),
            "place 2 read at 8 (predicting s2) jointly from the pair and the written s3: a2 + b2 - 10 s3"),
        var("c2@s2", _lookahead, ("T1", "gen0", "R2", "s3_written"),
            "carry into place 2, gathered again at 8 (predicting s2; the query reads R2's heads and the written s3)"),
        var("BA1", _base_add(1), (), "base add of place 1, read at 9 (predicting s1)"),
        var("c1@s1", lambda b, gen0, **query: gen0, ("gen0", "BA1", "s2_written"),
            "carry into place 1, gathered at 9 (predicting s1; the query reads BA1's heads and the written s2)"),
        var("BA0", _base_add(0), (), "base add of place 0, read at 10 (predicting s0)"),
        var("s2_written", lambda b: b.inputs[:, L.answer[1]], (), "the written s2 (input token at 9), read by the readout"),
        var("s1_written", lambda b: b.inputs[:, L.answer[0]], (), "the written s1 (input token at 10), read by the readout"),
    )

    def answer(batch: Any, c3: Tensor, R2: Tensor, BA1: Tensor, BA0: Tensor, **carries: Tensor) -> Tensor:
        by_place = [BA0, (BA1 + carries["c1@s1"]) % 10, s2_of(R2, carries["c2@s2"]), c3]
        return torch.stack([by_place[p] for p in task.answer_places().tolist()], 1)

    readout = tuple(Node("mlp", layer, position=p) for layer in (0, 1) for p in L.answer)
    return Mechanism(
        name="carry", task="addition", variables=variables, answer=answer,
        # the readout MLPs read the whole residual at their positions: the written digits too
        answer_parents=("c3", "R2", "BA1", "BA0", "c2@s2", "c1@s1", "s3_written", "s2_written", "s1_written"),
        outputs=tuple(range(N_DIGITS + 1)), readout=readout,
        predictions=carry_predictions(task, n_flipped, cascade_rows) if predictions else (),
        pseudocode=PSEUDOCODE if s2_rule == "written" else PSEUDOCODE.replace(_S2_WRITTEN, _S2_LOOKAHEAD),
    )


_VARIABLE_NAMES = ("T2", "T1", "gen0", "c2@s3", "c3", "s3_written", "pair2", "R2", "c2@s2", "BA1", "c1@s1", "BA0",
                   "s2_written", "s1_written")


# ---------------------------------------------------------------------- the rivals


def ripple_mechanism(task: Any) -> Mechanism:
    """The ripple-carry rival, with the flagship's own sites and rules: layer 0 *forms* the
    carry into place 2 at ``b0`` (``c2 = T1 == 2 or (T1 == 1 and gen0)``, reading ``a1, b1``
    itself: one direction of ``resid_pre.1 @ b0``) and layer 1 only *copies* it to ``=`` and to
    the position predicting ``s2``; nothing at ``b1`` is read (``T1`` is not localised). On the
    task its answer is the flagship's on every input; it differs under a patch at ``b1`` (the
    flagship's ``T1``, which the ripple calls irrelevant) or at ``b0``."""
    L = Layout.of(task)
    flagship = mechanism(task, predictions=False)
    copy = lambda b, **p: p["c2@b0"]  # noqa: E731 - layer 1 copies the carry formed at b0
    variables = [dataclasses.replace(v, site=None) if v.name == "T1" else
                 dataclasses.replace(v, compute=copy, parents=("c2@b0",) + tuple(p for p in v.parents
                                                                               if p not in ("T1", "gen0")),
                                     description=v.description.replace("gathered", "copied from b0"))
                 if v.name in ("c2@s3", "c2@s2") else v for v in flagship.variables]
    variables.append(Variable("c2@b0", _lookahead, ("T1", "gen0"), Site.at("blocks.1.hook_resid_pre", L.b[0], subspace=1),
                              "carry into place 2, formed by layer 0 at b0 (ripple: place 1's class read there)"))
    pseudocode = PSEUDOCODE.replace(
        "c2   = T1 == 2 or (T1 == 1 and gen0)   # layer-1 attention @ 7 ('=') and @ 8 (a1.2 reads b1, a1.0/a1.1 b0):",
        "c2   = T1 == 2 or (T1 == 1 and gen0)   # RIPPLE: layer 0 @ b0 forms it (1 dim of resid_pre.1 @ b0);\n"
        "                                       #   layer-1 attention copies it to 7 and 8:")
    return dataclasses.replace(flagship, name="carry-ripple", variables=tuple(variables), pseudocode=pseudocode)


def textbook_mechanism(task: Any) -> Mechanism:
    """The textbook-rule rival: ``s2 = (BA2 + c2) mod 10`` always, the written ``s3`` playing
    no part (the flagship's sites otherwise). On the task it is the flagship's answer on every
    input (a sum-9 place 2 under a carry gives 0 both ways); it differs where the written
    ``s3`` is wrong."""
    return dataclasses.replace(mechanism(task, s2_rule="lookahead", predictions=False), name="carry-textbook-s2")


def rivals(task: Any) -> dict[str, Mechanism]:
    """The real rivals of the carry mechanism: the ripple carry and the textbook ``s2`` rule."""
    return {m.name: m for m in (ripple_mechanism(task), textbook_mechanism(task))}


# ---------------------------------------------------------------------- predictions


def _with_written_s3_flipped(task: Any, generator: torch.Generator, n: int = 1000) -> Any:
    """``n`` uniform problems, half of them with a sum-9 place 2, each with the written top
    digit ``s3`` (the input token the model reads when it predicts ``s2``) flipped; targets
    stay the true sums."""
    a = torch.randint(0, 10, (n, N_DIGITS), generator=generator)
    b = torch.randint(0, 10, (n, N_DIGITS), generator=generator)
    nine = torch.rand(n, generator=generator) < 0.5
    b[nine, 2] = 9 - a[nine, 2]
    batch = task.build(a, b)
    pos = Layout.of(task).answer[2]
    inputs = batch.inputs.clone()
    inputs[:, pos] = 1 - inputs[:, pos]
    return dataclasses.replace(batch, inputs=inputs)


def _cascades_through_place_1(task: Any, generator: torch.Generator, rows: int | None = None) -> Any:
    """Every problem whose places 2 and 1 are 9-pairs (10 x 10 x 100 = 10,000): with place 0
    making a carry (4,500) it is a cascade of length 2 into s3, the longest 3 digits allow;
    ``rows``: a random subset of that many (``None``: all)."""
    pairs = torch.tensor([(x, 9 - x) for x in range(10)])
    low = torch.tensor([(x, y) for x in range(10) for y in range(10)])
    i2, i1, i0 = torch.meshgrid(torch.arange(10), torch.arange(10), torch.arange(100), indexing="ij")
    i2, i1, i0 = i2.reshape(-1), i1.reshape(-1), i0.reshape(-1)
    a = torch.stack([low[i0, 0], pairs[i1, 0], pairs[i2, 0]], 1)
    b = torch.stack([low[i0, 1], pairs[i1, 1], pairs[i2, 1]], 1)
    if rows is not None:
        pick = torch.randperm(len(a), generator=generator)[:rows]
        a, b = a[pick], b[pick]
    return task.build(a, b)


def _wrong_s3_held(batch: Any, v: Any) -> Tensor:
    """Where the rule holds ``s2`` at the wrap: ``X2 == 10`` (``9``), or ``X2 < 0`` with a pair
    sum of 6 to 9 (``0``); on real inputs never."""
    total = v["R2"] + v["c2@s2"]
    return (total == 10) | ((total < 0) & (v["R2"] >= -4))


def carry_predictions(task: Any, n_flipped: int = 1000, cascade_rows: int | None = None) -> tuple[Prediction, ...]:
    """The mechanism's predictions. With the written ``s3`` flipped (on ``n_flipped`` problems,
    half with a sum-9 place 2), by the rule for ``s2`` read from ``R2 = a2 + b2 - 10 s3_written``:
    a sum-9 place 2 is always held at the wrong end of the wrap, and so is any other place 2 near
    the wrap; both hold (measured on all 10^6 problems: 0 of 100,000 and 0.027 of 285,450 right).
    Past the wrap the rule says ``s2`` wraps back to the true digit above it (a total of 11 or
    more under a written ``s3 = 0``) and to one below the true digit under a written ``s3 = 1``
    (a pair sum of 5 or less); neither holds (0.659 of 404,550 and 0.320 of 204,950 right: there
    the model's ``s2`` depends on the digits ``a2``, ``b2``, not only on their sum). Every length-2
    cascade is right (on the enumeration of :func:`_cascades_through_place_1`, or
    ``cascade_rows`` of it). Each is judged at the output it is about (``s2``; ``s3`` for the
    cascades)."""
    flipped = lambda t, g: _with_written_s3_flipped(t, g, n_flipped)  # noqa: E731
    s2, s3 = (Layout.of(task).output[2],), (Layout.of(task).output[3],)  # the outputs each one is about
    return (
        Prediction(
            "sum-9 place 2 with a wrong s3 written",
            "s2 of a sum-9 place 2 is read from the written s3 with the pair (R2 = 9 - 10 s3), not from the carry "
            "gathered from places 1 and 0: with s3 flipped X2 = R2 + c2 is 10 (held at 9) or -1 (held at 0), so the "
            "model writes 9 for 0 and 0 for 9",
            lambda batch, v: (_pair_sum(2)(batch) == 9), "fail", 0.1, flipped, s2),
        Prediction(
            "other place 2 with a wrong s3 written",
            "the written s3 steers s2 for every pair near the 9/10 wrap, not only sum 9: a total a2 + b2 + c2 of 10 "
            "under a written s3 = 0 is held at 9, a pair sum of 6 to 8 under a written s3 = 1 at 0, so the model "
            "is wrong there (a claim about inconsistent tokens that no real input has)",
            lambda batch, v: (_pair_sum(2)(batch) != 9) & _wrong_s3_held(batch, v), "fail", 0.1, flipped, s2),
        Prediction(
            "place 2 above the wrap with a wrong s3 written",
            "a total a2 + b2 + c2 >= 11 under a written s3 = 0 is past the wrap: X2 - 10 is the true digit, so the "
            "rule says s2 stays right (measured, it does not: the model's s2 there depends on the digits a2, b2)",
            lambda batch, v: (v["s3_written"] == 0) & (v["R2"] + v["c2@s2"] >= 11), "succeed", 0.9, flipped, s2),
        Prediction(
            "place 2 below the wrap with a wrong s3 written",
            "a pair sum <= 5 under a written s3 = 1 is past the wrap: the rule gives X2 + 9, one below the true "
            "digit (at least 0), so s2 is wrong but for a sum-0 pair with no carry (measured, the model is right "
            "on a third: its s2 there depends on the digits a2, b2)",
            lambda batch, v: (v["R2"] <= -5) & (v["R2"] + v["c2@s2"] + 10 > 0), "fail", 0.1, flipped, s2),
        Prediction(
            "length-2 cascades into s3",
            "the carry into place 2 is looked ahead in one layer-1 attention step (T1 at b1, gen0 at b0), "
            "so a cascade through places 1 and 2 costs no depth: every one is right",
            lambda batch, v: v["gen0"] == 1, "succeed", 0.99,
            lambda t, g: _cascades_through_place_1(t, g, cascade_rows), s3),
    )


# ---------------------------------------------------------------------- the carry layer


@dataclass(frozen=True)
class CarrySite:
    """Where the carry into ``place`` is held at the position predicting its digit: the first
    hook of :data:`CARRY_HOOKS` whose 1-dim interchange holds (``hook`` ``None``: none does);
    ``scan`` holds every hook tried, in order, with its IIA, worst control and verdict."""

    place: int
    position: int
    variable: str
    hook: str | None
    iia: float | None
    scan: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_CARRY_OF_PLACE = {3: "c3", 2: "c2@s2", 1: "c1@s1"}


def carry_site(model: Any, task: Any, *, n: int = 2000, n_pairs: int = 300, seed: int = 0,
               hooks: tuple[str, ...] = CARRY_HOOKS, das: Any = None, stop_at_first: bool = True) -> list[CarrySite]:
    """Per answer digit with a carry into its place (3, 2, 1), scan ``hooks`` at the position
    predicting that digit: a 1-dim DAS interchange of the carry, with the card's controls and
    rule (:func:`circuits.mechanisms.card.variable_claim`); the first hook where it holds is the
    carry's site. The counterfactuals are the mechanism's (so a sum-9 place 2, settled by the
    written ``s3``, never asks the carry to act)."""
    from circuits.graph.model_graph import ModelGraph
    from circuits.mechanisms.card import variable_claim
    from circuits.mechanisms.interchange import check_variable
    from circuits.mechanisms.patching import record
    from circuits.mechanisms.predictions import correct_rows
    from probes.controls import random_init_like
    from probes.interchange import DASConfig

    L = Layout.of(task)
    das = das or DASConfig()
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    batch = task.sample(n, generator)
    random_model = random_init_like(model, seed=seed + 1)
    graph = ModelGraph.of(model, batch.inputs.shape[1])
    out = []
    for place in (3, 2, 1):
        name, position = _CARRY_OF_PLACE[place], L.answer[place]
        scan, found = [], None
        for hook in hooks:
            site = Site.at(hook, position, subspace=1)
            mech = mechanism(task, sites={**{k: None for k in _VARIABLE_NAMES}, name: site}, predictions=False)
            values = mech.values(batch)
            acts, random_acts = record(model, batch, [hook]), record(random_model, batch, [hook])
            base_accuracy = float(correct_rows(model, mech, batch).float().mean())
            train = torch.rand(len(batch), generator=generator) < 0.5
            check, _ = check_variable(model, random_model, graph, mech, mech.variable(name), batch, values, acts,
                                      random_acts, train, base_accuracy, n_pairs, generator, das)
            claim = variable_claim(check)
            scan.append({"hook": hook, "iia": round(check.iia, 4),
                         "controls": {k: round(v, 4) for k, v in check.controls.items()},
                         "n_pairs": check.n_pairs, "verdict": claim.verdict.outcome})
            if claim.verdict.holds and found is None:
                found = (hook, check.iia)
                if stop_at_first:
                    break
        out.append(CarrySite(place, position, name, found[0] if found else None, found[1] if found else None,
                             tuple(scan)))
    return out


__all__ = ["CARRY_HOOKS", "PSEUDOCODE", "RUN", "CarrySite", "Layout", "applies", "carry_class", "carry_predictions",
           "carry_site", "default_sites", "mechanism", "ripple_mechanism", "rivals", "textbook_mechanism"]
