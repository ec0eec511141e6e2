"""Safe stops: SIGINT (Ctrl-C) and SIGTERM during training end the run at a step boundary.

Within :func:`stop_signals` the first SIGINT/SIGTERM only records the signal; the training loop
finishes the step it is in, saves a checkpoint at that step and raises
:class:`TrainingInterrupted` (the step, the checkpoint, the exit code 128 + signal: 130 for
SIGINT, 143 for SIGTERM). A second signal while that checkpoint is written stops at once
(the atomic save leaves the previous checkpoint whole). A signal whose handler is ``SIG_IGN``
(e.g. SIGINT of a background job, or ``nohup``) stays ignored; outside the main thread no
handler can be installed and signals behave as without this module.

``TrainingInterrupted`` is a ``KeyboardInterrupt``, so a broad ``except Exception`` does not
swallow a stop the user asked for.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal. ``checkpoint`` is the checkpoint a resume starts from
    (written at ``step`` when ``saved``; otherwise the last one before, or ``None``);
    ``resume`` says how to continue (the CLI replaces it with the command to run)."""

    def __init__(self, signum: int, step: int, run_dir: Path, checkpoint: Path | None, saved: bool):
        self.signum, self.step, self.run_dir, self.checkpoint, self.saved = signum, step, run_dir, checkpoint, saved
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        if saved:
            where = f"saved checkpoint {checkpoint}"
        else:
            where = f"stopped before saving; the last checkpoint is {checkpoint or 'none (nothing to resume)'}"
        self.resume = f"to resume, call train(...) again with the same settings and run_dir={str(run_dir)!r}"
        super().__init__(f"interrupted by {self.signal_name} at step {step}; {where}")

    def __str__(self) -> str:
        return f"{self.args[0]}; {self.resume}"


class _SecondSignal(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclass
class StopRequest:
    """What :func:`stop_signals` saw: the first stop signal's number, or ``None``."""

    signum: int | None = None


@contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """Within the block, the first SIGINT/SIGTERM sets ``request.signum``; a second raises a
    ``KeyboardInterrupt`` whose ``signum`` names it. The previous handlers come back on exit."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum, frame):
        if request.signum is not None:
            raise _SecondSignal(signum)
        request.signum = signum

    previous = {}
    try:
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, handler)
        yield request
    finally:
        for signum, old in previous.items():
            signal.signal(signum, signal.SIG_DFL if old is None else old)


__all__ = ["STOP_SIGNALS", "StopRequest", "TrainingInterrupted", "stop_signals"]
