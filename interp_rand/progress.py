"""Progress of long computations, with one policy for the whole toolkit.

Library functions that can take more than a few seconds take ``progress: bool = False`` and
report through :func:`bar` (a loop, "k of N") and :func:`stage` (one step without a count), so
Python users and tests see nothing unless they ask. The CLI turns progress on and names the
command with :func:`scope`, which prefixes every line (``case-study sort: scoring heads``).

On a terminal (stderr is a tty) a loop is a tqdm bar; otherwise (a log file, a pipe, CI) it is
plain lines on stderr, ``NAME k/N``, at most one every :data:`INTERVAL` seconds plus the first
and the last, so logs stay short and readable. Stages print one line when they start and, off a
terminal, one with their duration when they end. Nothing is ever written to stdout, which
stays for results.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from tqdm import tqdm

# Seconds between two lines of one loop when stderr is not a terminal.
INTERVAL = 10.0
# (label, start time) of the innermost scope
_SCOPE: contextvars.ContextVar[tuple[str, float] | None] = contextvars.ContextVar("progress_scope", default=None)


@contextlib.contextmanager
def scope(label: str) -> Iterator[None]:
    """Prefix every progress line inside the ``with`` block with ``label`` (e.g. a command);
    :func:`note` lines also show the seconds since the scope began."""
    token = _SCOPE.set((label, time.perf_counter()))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _name(desc: str) -> str:
    current = _SCOPE.get()
    return f"{current[0]}: {desc}" if current else desc


def _tty() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def bar(iterable: Iterable | None = None, *, desc: str, total: int | None = None, enabled: bool = True,
        unit: str = "it"):
    """``iterable`` wrapped so that its progress shows as ``desc k/N`` (``N``: ``total`` or
    ``len(iterable)``); without ``iterable`` a counter to ``update(n)`` by hand. Use it as a
    context manager or call ``close()`` when done. ``enabled=False``: silent."""
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if not enabled:
        return tqdm(iterable, total=total, disable=True)
    if _tty():
        return tqdm(iterable, total=total, desc=_name(desc), unit=unit, file=sys.stderr, dynamic_ncols=True)
    return _Lines(iterable, total, _name(desc))


@contextlib.contextmanager
def stage(desc: str, enabled: bool = True) -> Iterator[None]:
    """One step of work without a count: a line ``desc`` when it starts (and off a terminal
    ``desc: done in X s`` when it ends). ``enabled=False``: silent."""
    if not enabled:
        yield
        return
    name, began = _name(desc), time.perf_counter()
    print(name, file=sys.stderr, flush=True)
    yield
    if not _tty():
        print(f"{name}: done in {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)


def note(text: str, enabled: bool = True) -> None:
    """One progress line on stderr naming the stage that starts now, e.g. ``note("scoring
    heads", enabled=progress)``; inside a :func:`scope` it ends with the seconds since the
    scope began."""
    if enabled:
        current = _SCOPE.get()
        clock = f" [{time.perf_counter() - current[1]:.0f} s]" if current else ""
        print(_name(text) + clock, file=sys.stderr, flush=True)


class _Lines:
    """The non-terminal display: ``NAME k/N`` lines on stderr, the first, the last and at most one
    every :data:`INTERVAL` seconds in between (the subset of tqdm's interface the toolkit uses)."""

    def __init__(self, iterable: Iterable | None, total: int | None, name: str):
        self.iterable, self.total, self.name = iterable, total, name
        self.n, self.postfix = 0, ""
        self.began = self.last = time.perf_counter()
        self.closed = False
        self._print()

    def _print(self) -> None:
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        elapsed = time.perf_counter() - self.began
        tail = f" {self.postfix}" if self.postfix else ""
        print(f"{self.name} {count} ({elapsed:.0f} s){tail}", file=sys.stderr, flush=True)
        self.last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.total is not None and self.n >= self.total:
            return  # the last line is printed by close()
        if time.perf_counter() - self.last >= INTERVAL:
            self._print()

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self.name = _name(desc)

    def write(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._print()

    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
