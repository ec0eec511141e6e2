"""Slow fixtures built once per test run, even under pytest-xdist, where each worker would
otherwise build a session fixture of its own: the first worker to ask builds the value under a
file lock and saves it in the run's temp folder, which all workers share; the others wait for the
lock and load what it saved. Without xdist the value is simply built. The folder is new each run
(pytest's ``tmp_path_factory``), so nothing carries over from an earlier run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, TypeVar

import torch
from filelock import FileLock

T = TypeVar("T")


def built_once(tmp_path_factory, name: str, build: Callable[[Path], T]) -> T:
    """``build(folder)`` once per test run (``folder``: an empty folder of its own, shared by the
    workers, for what it writes, e.g. a training run). Its value is saved with ``torch.save`` and
    each other worker loads it, so it must survive a save and load: tensors, models and plain data."""
    base = tmp_path_factory.getbasetemp()
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    root = base.parent  # shared by the workers of this run (pytest-of-USER/pytest-N)
    saved = root / f"{name}.pt"
    with FileLock(str(root / f"{name}.lock")):
        if saved.exists():
            return torch.load(saved, weights_only=False)
        folder = root / name
        folder.mkdir()
        value = build(folder)
        partial = root / f"{name}.pt.partial"
        torch.save(value, partial)
        partial.replace(saved)  # the others only ever see a complete file
        return value
