"""Checks shared by the frozen config dataclasses, so every config words its errors alike:
``Owner.field=value must be an integer >= N``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


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
