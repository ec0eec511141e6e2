"""What memory this machine has now, and how to say a size: the core's (an importer refuses a
model that cannot fit before allocating it) and the command line's (:mod:`interp_rand.cli.memory`
refuses sizes before any work)."""

from __future__ import annotations

import os
from pathlib import Path


def available_bytes() -> int | None:
    """Memory a new allocation can get now: ``MemAvailable`` (Linux), else free physical pages;
    ``None`` where neither is known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def human(n: float) -> str:
    """``12.3 GiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"


__all__ = ["available_bytes", "human"]
