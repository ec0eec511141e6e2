"""How many torch intra-op threads the toolkit uses: one, by default.

The models here are small (a few hundred thousand parameters, batches of a few hundred), so an
op has too little work to split: on a shared 2-core machine a second thread mostly waits for the
other core: training docs/python.md's example ran at 11.3 steps/s with 1 thread and 1.0 with 2, and
with one core kept busy at 4.4 against 0.4 (``bench/threads.py``, 2026-12-01, a shared 2-core
machine). torch's own default is one thread per core. The library never changes
the setting by itself; the CLI applies ``--threads`` (default :data:`DEFAULT_THREADS`) for the
duration of a command, and Python users call :func:`set_threads` once::

    import interp_rand
    interp_rand.set_threads()          # DEFAULT_THREADS, i.e. 1
    with interp_rand.use_threads(2):   # scoped: restored afterwards
        ...
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

DEFAULT_THREADS = 1


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask; else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def clamp(n: int) -> int:
    """``n`` threads bounded by :func:`cores`: more threads than cores only wait for each other
    (and torch crashes on some very large counts: 100000 segfaulted)."""
    return min(n, cores())


def set_threads(n: int = DEFAULT_THREADS) -> int:
    """Set torch's intra-op threads to ``n`` (>= 1; more than :func:`cores` is clamped to them,
    with a warning); return the previous number."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads={n!r} must be an integer >= 1")
    if clamp(n) < n:
        warnings.warn(f"threads={n} is more than the {cores()} cores this process may use; using {clamp(n)}",
                      stacklevel=2)
        n = clamp(n)
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    return previous


@contextlib.contextmanager
def use_threads(n: int = DEFAULT_THREADS) -> Iterator[None]:
    """torch uses ``n`` intra-op threads inside the ``with`` block, its previous setting after."""
    previous = set_threads(n)
    try:
        yield
    finally:
        set_threads(previous)
