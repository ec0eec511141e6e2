"""A run's evaluation history: ``RUN/metrics.jsonl``, one JSON record per evaluation (``step``,
``loss``, ``exact_match``, ``lr``, ...), appended by the trainer. The one owner of that file's name and its reader; imports no torch
(``interp-rand curve`` reads it without)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_metrics(run: str | Path) -> list[dict[str, Any]]:
    """The records of a run folder's ``metrics.jsonl`` (``run`` may be the file itself; blank
    lines skipped); a clear error when there is none."""
    path = Path(run)
    path = path / METRICS_FILE if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{path} does not exist: a run folder written by `interp-rand train` keeps one")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


__all__ = ["METRICS_FILE", "read_metrics"]
