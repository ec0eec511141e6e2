"""Injected faults for the tests of what a failed write leaves (issue 26): a disk that fills up
mid-write. A tmpfs of a few kilobytes would be the real thing, but mounting one needs root;
``os.write`` is what every file of :mod:`interp_rand.output.files` goes through."""

from __future__ import annotations

import errno
import os


def fill_disk_after(monkeypatch, budget: int) -> list[int]:
    """``os.write`` raises ENOSPC once ``budget`` bytes have been written from now on (a disk
    that fills up mid-write); returns the bytes written per call. ``monkeypatch.undo()`` frees
    the disk again."""
    real = os.write
    written: list[int] = []

    def write(fd, data):
        left = budget - sum(written)
        if left <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[:left]))
        written.append(n)
        return n

    monkeypatch.setattr(os, "write", write)
    return written
