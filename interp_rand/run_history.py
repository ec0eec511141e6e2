"""A run's evaluation history: ``RUN/metrics.jsonl``, one JSON record per evaluation (``step``,
``loss``, ``exact_match``, ``lr``, ...), appended by the trainer. The one owner of that file's
name and its reader; imports no torch (``interp-rand curve`` reads it without).

The file is a journal: each record is one line written at once, so a write cut short (a kill, a
full disk) can only leave its *last* line incomplete. Such a torn last record (no end of line,
not a whole JSON object) is dropped on reading, with a line on stderr saying so; any other
damage (bytes that are not UTF-8 text, a line that is not JSON, a record that is not an object
with an integer ``step``) is refused with a :class:`MetricsError` naming the file, the line and
what is wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


class MetricsError(ValueError):
    """A ``metrics.jsonl`` is damaged (the message names the file, the line and what is wrong)."""


def read_metrics(run: str | Path, *, quiet: bool = False) -> list[dict[str, Any]]:
    """The records of a run folder's ``metrics.jsonl`` (``run`` may be the file itself; blank
    lines skipped); a clear error when there is none or it is damaged, a torn last record
    dropped (said on stderr unless ``quiet``)."""
    path = Path(run)
    path = path / METRICS_FILE if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{path} does not exist: a run folder written by `interp-rand train` keeps one")
    records, torn = parse_metrics(path.read_bytes(), path)
    if torn and not quiet:
        print(f"{path}: dropped its torn last record ({torn}); the records before it are kept", file=sys.stderr)
    return records


def parse_metrics(data: bytes, path: str | Path = METRICS_FILE) -> tuple[list[dict[str, Any]], str | None]:
    """The records in ``data`` (a ``metrics.jsonl``'s bytes) and, if its last line was torn and
    dropped, what it was (``None`` otherwise). :class:`MetricsError` for any other damage."""
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, 1):
        last = number == len(lines)  # the text after the final end of line ("" if the file ends with one)
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise MetricsError(f"{path} line {number}: not UTF-8 text (byte {err.start}: {raw[err.start]:#04x}); "
                               "a metrics.jsonl holds one JSON record a line") from None
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            if last and text.lstrip().startswith("{"):
                return records, f"line {number}, {len(raw)} bytes with no end of line: a write cut short"
            raise MetricsError(f"{path} line {number}: not JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict):
            raise MetricsError(f"{path} line {number}: a JSON {type(record).__name__}, not a record (an object "
                               "with a step)")
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise MetricsError(f"{path} line {number}: a record without an integer step (step={step!r})")
        records.append(record)
    return records, None


__all__ = ["METRICS_FILE", "MetricsError", "parse_metrics", "read_metrics"]
