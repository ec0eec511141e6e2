"""Multi-digit addition, with metadata about carries and carry cascades.

Sequence layout (``n`` = ``n_digits``; tokens: digits ``0..9``, ``PLUS`` = 10, ``EQUALS`` = 11)::

    a_{n-1} .. a_0  PLUS  b_{n-1} .. b_0  EQUALS  s ...    (3n + 3 tokens)

Operands are written most-significant digit first (``operand_order="lsb"``: units first, every
number then read from its units up, the layout digit-index positions need); the ``n + 1`` answer digits (leading zero
kept) are written most-significant first (``answer_order="msb"``) or least-significant first
(``"lsb"``). The model reads ``sequence[:, :-1]`` (``n_ctx = 3n + 2``) and only its predictions
of the answer digits are scored.

Places are indexed by place value: place 0 is the units. ``carry_in`` of place ``i`` is the
carry from place ``i-1`` (0 for the units); the top answer digit (place ``n``) is the final
carry itself, so its ``carry_out`` is 0.

Carry cascade. A cascade is a maximal run of consecutive places ``k .. k+r-1`` whose digit
pairs sum to exactly 9 (``a_i + b_i = 9``) and whose lowest place ``k`` receives a carry-in of 1,
so the carry ripples through all ``r`` of them. Its length is ``r >= 1``. Because the run is
maximal, place ``k-1`` is not a 9-pair, so the carry into ``k`` was *generated* there
(``a_{k-1} + b_{k-1} >= 10``) and ``k >= 1``. The answer digits at places ``k .. k+r`` (the run
and the place receiving its final carry) get ``cascade_len = r``; every other digit gets 0.
Distinct cascades never label the same digit.

Worked example, ``445 + 555 = 1000`` (``n = 3``)::

    place            3   2   1   0
    a                    4   4   5
    b                    5   5   5
    a + b                9   9  10      place 0 generates a carry
    carry_in         1   1   1   0
    answer digit     1   0   0   0
    carry_out        0   1   1   1
    cascade_len      2   2   2   0      run = places 1..2 (r = 2), receiver = place 3

``999 + 001`` has the same carries and cascade (places 1..2, r = 2); ``0 + 0`` has none.

Uniform operands almost never contain long cascades (each extra place costs a factor 10),
so :meth:`AdditionTask.sample` plants one in a ``cascade_fraction`` of the rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from interp_rand.tasks.base import CARRIES, Batch, PairBatch, register_task, token_model_config

if TYPE_CHECKING:
    from interp_rand.model.config import ModelConfig

PLUS = 10
EQUALS = 11
ANSWER_ORDERS = ("msb", "lsb")
EXHAUSTIVE_MAX_DIGITS = 3
# Operand values are kept as int64 metadata only while 10**n - 1 fits.
INT64_MAX_DIGITS = 18

# All 45 digit pairs that generate a carry on their own (a + b >= 10), to sample them uniformly.
_GENERATING_PAIRS = torch.tensor([(a, b) for a in range(10) for b in range(10) if a + b >= 10])


from interp_rand.validation import is_int as _is_int


def carries(a_digits: Tensor, b_digits: Tensor) -> tuple[Tensor, Tensor]:
    """Ripple-carry addition of place-ordered digits.

    Args:
        a_digits, b_digits: ``[batch, n]`` long digits, index 0 = units.

    Returns:
        ``sum_digits`` ``[batch, n + 1]`` (index ``n`` is the final carry) and ``carry_in``
        ``[batch, n + 1]`` (carry into each place; ``carry_in[:, n]`` equals the top digit).
    """
    batch, n = a_digits.shape
    sum_digits = torch.empty(batch, n + 1, dtype=torch.long, device=a_digits.device)
    carry_in = torch.zeros(batch, n + 1, dtype=torch.long, device=a_digits.device)
    carry = carry_in[:, 0]
    # A loop over places (n is small) is vectorised over the batch, which is what matters.
    for i in range(n):
        total = a_digits[:, i] + b_digits[:, i] + carry
        sum_digits[:, i] = total % 10
        carry = total // 10
        carry_in[:, i + 1] = carry
    sum_digits[:, n] = carry
    return sum_digits, carry_in


def cascade_lengths(a_digits: Tensor, b_digits: Tensor, carry_in: Tensor) -> Tensor:
    """``[batch, n + 1]`` long, place-ordered ``cascade_len`` (see the module docstring).

    Args:
        a_digits, b_digits: ``[batch, n]`` place-ordered digits.
        carry_in: ``[batch, n + 1]`` from :func:`carries`.
    """
    batch, n = a_digits.shape
    nine = (a_digits + b_digits) == 9  # [batch, n]
    # run[:, i]: number of consecutive 9-pairs from place i upwards.
    run = torch.zeros(batch, n + 1, dtype=torch.long, device=a_digits.device)
    for i in range(n - 1, -1, -1):
        run[:, i] = torch.where(nine[:, i], run[:, i + 1] + 1, 0)
    labels = torch.zeros(batch, n + 1, dtype=torch.long, device=a_digits.device)
    for i in range(n + 1):
        below_nine = nine[:, i - 1] if i >= 1 else torch.zeros_like(nine[:, 0])
        starts = (run[:, i] > 0) & (carry_in[:, i] == 1) & ~below_nine
        if i >= 1:
            # Place i-1 is inside a labelled run, so place i continues it (or receives its carry).
            continues = below_nine & (labels[:, i - 1] > 0)
            labels[:, i] = torch.where(continues, labels[:, i - 1], 0)
        labels[:, i] = torch.where(starts, run[:, i], labels[:, i])
    return labels


@register_task
@dataclass(frozen=True)
class AdditionTask:
    """Add two ``n_digits``-digit numbers.

    Attributes:
        n_digits: digits per operand (>= 1); the answer has ``n_digits + 1``.
        cascade_fraction: fraction of sampled rows with a planted carry cascade, in [0, 1].
        answer_order: ``"msb"`` or ``"lsb"``, the order the answer digits are written in.
        operand_order: ``"msb"`` or ``"lsb"``, the order the operands' digits are written in
            (``"lsb"`` with ``answer_order="lsb"``: every number units first, so a digit's index
            in its number is its place value, the layout of Abacus embeddings and of the
            ``digit_index`` positions, :mod:`interp_rand.model.digit_index`). Left out of
            ``config_dict`` at its default, so runs written before it existed read as before.
    """

    name: ClassVar[str] = "addition"
    description: ClassVar[str] = "add two multi-digit numbers (carry cascades enriched)"
    loss_kind: ClassVar[str] = "ce"
    capabilities: ClassVar[frozenset[str]] = frozenset({CARRIES})
    # the primitive families `explain` builds candidate algorithms from (circuits.explain)
    # the field that is its length (interp_rand.tasks.lengths: training on a range, generalisation)
    length_field: ClassVar[str] = "n_digits"
    families: ClassVar[tuple[str, ...]] = ("digits", "copy")

    n_digits: int = 5
    cascade_fraction: float = 0.5
    answer_order: str = "msb"
    operand_order: str = "msb"

    def __post_init__(self) -> None:
        # Fail at construction, not at the first sample deep inside a training run.
        self.validate()

    # ------------------------------------------------------------------ config

    @property
    def d_vocab(self) -> int:
        """Digits plus ``PLUS`` and ``EQUALS``: 12 (inputs and outputs)."""
        return 12

    @property
    def n_ctx(self) -> int:
        return 3 * self.n_digits + 2

    def _operand_places(self) -> list[int]:
        """The place of each operand digit in written order."""
        n = self.n_digits
        return [n - 1 - i for i in range(n)] if self.operand_order == "msb" else list(range(n))

    def position_names(self) -> list[str]:
        places = self._operand_places()
        operands = [f"a{p}" for p in places] + ["+"] + [f"b{p}" for p in places] + ["="]
        return operands + [f"s{int(p)}" for p in self.answer_places()][:-1]  # the last digit is not read

    def token_labels(self, batch: Batch, row: int) -> list[str]:
        symbols = {PLUS: "+", EQUALS: "="}
        return [f"{name}: {symbols.get(int(t), int(t))}" for name, t in zip(self.position_names(), batch.inputs[row])]

    def validate(self) -> None:
        if not _is_int(self.n_digits) or self.n_digits < 1:
            raise ValueError(f"AdditionTask.n_digits={self.n_digits!r} must be an integer >= 1")
        fraction = self.cascade_fraction
        is_number = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
        if not is_number or not 0 <= fraction <= 1:
            raise ValueError(f"AdditionTask.cascade_fraction={fraction!r} must be in [0, 1]")
        for name in ("answer_order", "operand_order"):
            if getattr(self, name) not in ANSWER_ORDERS:
                raise ValueError(
                    f"AdditionTask.{name}={getattr(self, name)!r} is not allowed; choose from {ANSWER_ORDERS}"
                )

    def config_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.operand_order == "msb":  # the default, left out: runs written before it read as before
            del out["operand_order"]
        return out

    def model_config(self, **overrides: Any) -> "ModelConfig":
        """Default: :func:`~interp_rand.tasks.base.token_model_config` sized for this task."""
        return token_model_config(self.n_ctx, self.d_vocab, overrides)

    # ------------------------------------------------------------------ layout

    def answer_positions(self, device: torch.device | str | None = None) -> Tensor:
        """``[n + 1]`` long: input positions ``2n+1 .. 3n+1`` (from ``EQUALS`` on)."""
        n = self.n_digits
        return torch.arange(2 * n + 1, 3 * n + 2, device=device)

    def answer_places(self, device: torch.device | str | None = None) -> Tensor:
        """``[n + 1]`` long: the place value of each answer digit, in written order."""
        places = torch.arange(self.n_digits + 1, device=device)
        return places.flip(0) if self.answer_order == "msb" else places

    def operand_digits(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """``a_digits``, ``b_digits`` ``[batch, n]`` (place-ordered) read from the tokens."""
        n = self.n_digits
        a, b = batch.inputs[:, :n], batch.inputs[:, n + 1 : 2 * n + 1]
        return (a.flip(1), b.flip(1)) if self.operand_order == "msb" else (a, b)

    # ------------------------------------------------------------------ batches

    def build(self, a_digits: Tensor, b_digits: Tensor) -> Batch:
        """The batch for given operands.

        Args:
            a_digits, b_digits: ``[batch, n]`` integer digits 0..9, index 0 = units.

        Returns:
            A :class:`Batch` with ``inputs``/``targets``/``loss_mask`` ``[batch, 3n+2]`` and
            metadata ``place``, ``carry_in``, ``carry_out``, ``cascade_len`` ``[batch, n+1]``
            (answer digits in written order), ``max_cascade`` ``[batch]``, ``a_digits``,
            ``b_digits`` ``[batch, n]`` and, for ``n <= 18``, int64 values ``a``, ``b``
            ``[batch]``.
        """
        for label, digits in (("a_digits", a_digits), ("b_digits", b_digits)):
            if digits.ndim != 2 or digits.shape[1] != self.n_digits:
                raise ValueError(
                    f"{label} must have shape [batch, n_digits={self.n_digits}], "
                    f"got {tuple(digits.shape)}"
                )
            if digits.dtype.is_floating_point or digits.dtype == torch.bool:
                raise ValueError(f"{label} must be an integer tensor, got dtype {digits.dtype}")
            if digits.numel() and (int(digits.min()) < 0 or int(digits.max()) > 9):
                raise ValueError(f"{label} must hold digits in 0..9")
        if a_digits.shape[0] != b_digits.shape[0]:
            sizes = f"{len(a_digits)} and {len(b_digits)}"
            raise ValueError(f"a_digits and b_digits need the same batch size, got {sizes}")
        return self._build(a_digits.long(), b_digits.long())

    def _build(self, a_digits: Tensor, b_digits: Tensor) -> Batch:
        """:meth:`build` without input checks (the sampling hot path)."""
        batch, n = a_digits.shape
        device = a_digits.device
        sum_digits, carry_in = carries(a_digits, b_digits)
        carry_out = torch.cat([carry_in[:, 1:], torch.zeros_like(carry_in[:, :1])], 1)
        cascade = cascade_lengths(a_digits, b_digits, carry_in)

        places = self.answer_places(device)
        plus = torch.full((batch, 1), PLUS, dtype=torch.long, device=device)
        equals = torch.full((batch, 1), EQUALS, dtype=torch.long, device=device)
        answer = sum_digits[:, places]  # written order
        written = (lambda d: d.flip(1)) if self.operand_order == "msb" else (lambda d: d)
        sequence = torch.cat([written(a_digits), plus, written(b_digits), equals, answer], 1)
        inputs = sequence[:, :-1]
        answer_positions = self.answer_positions(device)
        loss_mask = torch.zeros(batch, self.n_ctx, dtype=torch.bool, device=device)
        loss_mask[:, answer_positions] = True
        # -1 off the answers, so a loss that forgets the mask fails loudly.
        targets = torch.full_like(inputs, -1)
        targets[:, answer_positions] = answer

        metadata = {
            "place": places.expand(batch, n + 1).clone(),
            "carry_in": carry_in[:, places],
            "carry_out": carry_out[:, places],
            "cascade_len": cascade[:, places],
            "max_cascade": cascade.max(1).values,
            "a_digits": a_digits,
            "b_digits": b_digits,
        }
        if n <= INT64_MAX_DIGITS:
            powers = 10 ** torch.arange(n, dtype=torch.long, device=device)
            metadata["a"] = (a_digits * powers).sum(1)
            metadata["b"] = (b_digits * powers).sum(1)
        return Batch(
            inputs=inputs,
            targets=targets,
            loss_mask=loss_mask,
            answer_positions=answer_positions,
            metadata=metadata,
        )

    def _uniform_digits(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        shape = (n, self.n_digits)
        a = torch.randint(0, 10, shape, generator=generator, device=generator.device)
        b = torch.randint(0, 10, shape, generator=generator, device=generator.device)
        return a, b

    def _plant_cascades(self, a: Tensor, b: Tensor, min_len: int, generator: torch.Generator):
        """Plant a cascade of length ``r`` ~ U{min_len .. n-1} in every row of ``a``/``b``
        (in place): place ``k-1`` generates a carry, places ``k .. k+r-1`` are 9-pairs with
        ``k`` ~ U{1 .. n-r}. Higher places stay as they were, so the run may grow longer."""
        rows, n = a.shape
        device = a.device
        r = torch.randint(min_len, n, (rows,), generator=generator, device=device)
        # k = 1 + floor(u * (n - r)) is uniform over the n - r allowed starts.
        u = torch.rand(rows, generator=generator, device=device)
        k = 1 + torch.minimum((u * (n - r)).long(), n - r - 1)
        pair = torch.randint(0, len(_GENERATING_PAIRS), (rows,), generator=generator, device=device)
        generating = _GENERATING_PAIRS.to(device)[pair]  # [rows, 2]
        nine_a = torch.randint(0, 10, (rows, n), generator=generator, device=device)

        place = torch.arange(n, device=device)
        in_run = (place >= k[:, None]) & (place < (k + r)[:, None])
        is_generator = place == (k - 1)[:, None]
        a.copy_(torch.where(in_run, nine_a, torch.where(is_generator, generating[:, :1], a)))
        b.copy_(torch.where(in_run, 9 - nine_a, torch.where(is_generator, generating[:, 1:], b)))

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` examples: ``round(cascade_fraction * n)`` rows (chosen with ``generator``) get a
        planted cascade of length ~ U{1 .. n_digits-1}; the rest are uniform. With
        ``n_digits = 1`` no cascade is possible and every row is uniform."""
        a, b = self._uniform_digits(n, generator)
        n_enriched = round(self.cascade_fraction * n)
        if self.n_digits >= 2 and n_enriched > 0:
            rows = torch.randperm(n, generator=generator, device=generator.device)[:n_enriched]
            a_rows, b_rows = a[rows], b[rows]
            self._plant_cascades(a_rows, b_rows, 1, generator)
            a[rows], b[rows] = a_rows, b_rows
        return self._build(a, b)

    def sample_uniform(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` examples with uniform independent digits (no enrichment)."""
        return self._build(*self._uniform_digits(n, generator))

    def sample_with_cascade(self, n: int, generator: torch.Generator, min_len: int) -> Batch:
        """``n`` examples, each with a cascade of length >= ``min_len`` (1 .. n_digits-1)."""
        if not _is_int(min_len) or not 1 <= min_len <= self.n_digits - 1:
            raise ValueError(
                f"min_len={min_len!r} must be an integer in 1..n_digits-1 = "
                f"1..{self.n_digits - 1} (a cascade needs a generating place below it)"
            )
        a, b = self._uniform_digits(n, generator)
        self._plant_cascades(a, b, min_len, generator)
        return self._build(a, b)

    def exhaustive(self) -> Batch:
        """Every ordered operand pair once: ``10**(2n)`` rows, ``a`` major (only n <= 3)."""
        if self.n_digits > EXHAUSTIVE_MAX_DIGITS:
            raise ValueError(
                f"exhaustive() needs n_digits <= {EXHAUSTIVE_MAX_DIGITS} "
                f"(10**(2*n_digits) rows); got n_digits={self.n_digits}"
            )
        size = 10**self.n_digits
        values = torch.arange(size)
        a_values = values.repeat_interleave(size)
        b_values = values.repeat(size)
        powers = 10 ** torch.arange(self.n_digits)
        return self._build((a_values[:, None] // powers) % 10, (b_values[:, None] // powers) % 10)

    # ------------------------------------------------------------------ patching

    def corrupt(self, batch: Batch, generator: torch.Generator) -> PairBatch:
        """Flip one carry: per row, change one operand digit at a place ``j`` so that the
        carry out of ``j`` flips (``a_j + b_j + carry_in_j`` crosses 10).

        ``j`` is uniform among the places where such a change exists (equivalently: pick a
        place at random and move on to others while it cannot flip). At ``j`` the ``a`` digit
        is changed if it can flip the carry, else the ``b`` digit; the new digit is uniform
        among the values that flip it. The operand sum changes, so the answer always differs.
        ``changed`` ``[batch]`` is the place ``j``.

        The only operands where no single digit can flip a carry are ``a = b = 0``; there the
        units digit of ``a`` becomes a uniform 1..9 (answer differs, no carry flips) and
        ``changed`` is 0.
        """
        a, b = self.operand_digits(batch)
        a, b = a.clone(), b.clone()
        rows, n = a.shape
        device = a.device
        _, carry_in = carries(a, b)
        c = carry_in[:, :n]
        total = a + b + c
        carry_set = total >= 10
        # Values of one digit that flip the carry, given the other digit and carry_in:
        # carry 1 -> new digit <= 9 - other - c (exists iff other + c <= 9);
        # carry 0 -> new digit >= 10 - other - c (exists iff other + c >= 1).
        def flippable(other: Tensor) -> Tensor:
            return torch.where(carry_set, other + c <= 9, other + c >= 1)

        can_a, can_b = flippable(b), flippable(a)
        can = can_a | can_b
        # argmax of random scores over the flippable places = a uniform flippable place.
        scores = torch.rand(rows, n, generator=generator, device=generator.device).to(device)
        place = torch.where(can, scores, -1.0).argmax(1)
        none = ~can.any(1)
        place = torch.where(none, 0, place)

        row = torch.arange(rows, device=device)
        use_a = can_a[row, place] | none
        other = torch.where(use_a, b[row, place], a[row, place])
        cj = c[row, place]
        was_set = carry_set[row, place]
        # Flip range [low, low + count): below the threshold if the carry was set, above if not.
        low = torch.where(was_set, 0, 10 - other - cj)
        count = torch.where(was_set, 10 - other - cj, other + cj)
        # a = b = 0 rows: any nonzero units digit of a (no carry can flip there).
        low = torch.where(none, 1, low)
        count = torch.where(none, 9, count)
        u = torch.rand(rows, generator=generator, device=generator.device).to(device)
        new_digit = low + torch.minimum((u * count).long(), count - 1)

        a[row, place] = torch.where(use_a, new_digit, a[row, place])
        b[row, place] = torch.where(use_a, b[row, place], new_digit)
        return PairBatch(clean=batch, corrupted=self._build(a, b), changed=place)
