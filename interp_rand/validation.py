"""Checks shared by the frozen config dataclasses, so every config words its errors alike:
``Owner.field=value must be an integer >= N``; and :class:`Bounds`, a number field's allowed
values declared once (``bounded(...)``), which the config checks on construction and the
command line while parsing."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The largest seed anything takes: torch's generators take up to 2**64 - 1, and seeds get
# offsets added (an evaluation set's, a data split's); 2**62 leaves room for them.
MAX_SEED = 2**62
# The largest integer a tensor (int64) holds: every integer field and option stays within it.
MAX_INT = 2**63 - 1


def is_int(value: Any) -> bool:
    """Is ``value`` a Python int that is not a bool (``True`` is an ``int`` to ``isinstance``)?"""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(owner: str, name: str, value: Any, minimum: int) -> None:
    """``ValueError`` unless ``value`` is an int (not a bool) of at least ``minimum``."""
    if not is_int(value) or value < minimum:
        raise ValueError(f"{owner}.{name}={value!r} must be an integer >= {minimum}")


def check_ints(config: Any, names: Iterable[str], minimum: int) -> None:
    """:func:`check_int` for each field ``names`` of ``config``, named after its class."""
    for name in names:
        check_int(type(config).__name__, name, getattr(config, name), minimum)


def check_positive(owner: str, name: str, value: Any) -> None:
    """``ValueError`` unless ``value`` is a number (not a bool) above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{owner}.{name}={value!r} must be a number > 0")


@dataclass(frozen=True)
class Bounds:
    """The values a number may take: the one declaration behind a config field's check on
    construction (:func:`check_bounds`) and its command-line option's check while parsing
    (``interp_rand.cli.options``), so both say the same thing.

    A number is finite unless ``infinite`` allows ``+inf``; NaN is never allowed.

    Attributes:
        minimum, maximum: inclusive limits (``None``: none).
        above, below: exclusive limits (``None``: none).
        infinite: ``+inf`` is allowed (the q-norm's exponent: the worst input).
        counts: what the number sizes, for the command line's memory estimate
            (``interp_rand.cli.memory``): ``"examples"`` (tensors grow with it) or
            ``"width"`` (a model dimension: parameters grow with it); ``None``: neither.
    """

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    infinite: bool = False
    counts: str | None = None

    def describe(self, integer: bool = False) -> str:
        """``"a finite number in (0, 1]"``, ``"an integer >= 1"``."""
        noun = "an integer" if integer else ("a number" if self.infinite else "a finite number")
        low = (f"[{self.minimum:g}" if self.minimum is not None else f"({self.above:g}" if self.above is not None
               else None)
        high = (f"{self.maximum:g}]" if self.maximum is not None else f"{self.below:g})" if self.below is not None
                else None)
        if low and high:
            return f"{noun} in {low}, {high}" + (" or inf" if self.infinite else "")
        if low:
            return f"{noun} {'>=' if low[0] == '[' else '>'} {low[1:]}" + (" (or inf)" if self.infinite else "")
        if high:
            return f"{noun} {'<=' if high[-1] == ']' else '<'} {high[:-1]}"
        return noun + (" (or inf)" if self.infinite and not integer else "")

    def problem(self, value: Any, integer: bool = False) -> str | None:
        """``None`` if ``value`` is allowed, else what it must be (``"must be a finite number >
        0"``)."""
        wrong = f"must be {self.describe(integer)}"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not is_int(value)):
            return wrong
        if math.isnan(value) or (math.isinf(value) and not (self.infinite and value > 0)):
            return wrong
        if integer and abs(value) > MAX_INT:
            return f"{wrong} that fits in 64 bits (at most {MAX_INT})"
        if math.isinf(value):
            return None  # +inf, allowed above
        if ((self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum)
                or (self.above is not None and value <= self.above) or (self.below is not None and value >= self.below)):
            return wrong
        return None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and v is not False}


def bounded(default: Any, **bounds: Any) -> Any:
    """A dataclass field with ``default`` whose values are limited by :class:`Bounds`
    (``bounded(1e-3, above=0)``); :func:`check_bounds` checks it, the CLI reads it."""
    return dataclasses.field(default=default, metadata={"bounds": Bounds(**bounds)})


def field_bounds(cls: type) -> dict[str, Bounds]:
    """``{field: Bounds}`` of the dataclass ``cls``'s fields declared with :func:`bounded`."""
    return {f.name: f.metadata["bounds"] for f in dataclasses.fields(cls) if "bounds" in f.metadata}


def check_bounds(config: Any) -> None:
    """``ValueError`` naming the first field of ``config`` outside its declared :class:`Bounds`
    (``None`` is left to the field's own check: it means "derived" or "off")."""
    hints = typing.get_type_hints(type(config))
    for name, bounds in field_bounds(type(config)).items():
        value = getattr(config, name)
        if value is None:
            continue
        integer = int in (typing.get_args(hints[name]) or (hints[name],))
        wrong = bounds.problem(value, integer=integer)
        if wrong:
            raise ValueError(f"{type(config).__name__}.{name}={value!r} {wrong}")
