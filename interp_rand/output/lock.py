"""One writer per output folder: an exclusive ``flock`` on ``FOLDER/run.lock``, held for the whole run.

Every command that writes a folder (``train``, the grid world's ``run_variant``, and through
:func:`interp_rand.output.folder.claim` every command that writes results) holds
:func:`run_lock` while it writes. A second ``run_lock`` of a held folder is refused, in this
process too, unless it asks to be ``reentrant`` from the thread that holds it (a command's
claim, then the library's write of the same folder).
``run.lock`` is opened with ``O_NOFOLLOW``: a symbolic link there is refused, never written
through. ``run.lock`` records the holder as JSON (pid, host, start
time, command); a second writer is refused with :class:`RunLocked` naming it::

    runs/sort is in use by another writer: pid 4242 on host-a since 2025-01-31 14:02:11 (interp-rand train sort); ...

A stale lock is taken over, and said so. The kernel drops a ``flock`` when its process ends,
however it ends (Ctrl-C, ``kill -9``, a crash), so a lock that can be taken is free: a
``run.lock`` that still names a holder then belongs to a process that died without releasing
it. The next writer takes it over and prints ``previous holder pid N on HOST (since T) is gone;
lock taken over`` — a researcher resuming after a crash wants to continue, not to clear
files by hand, and nothing is at risk because the dead process cannot write any more.

A clean release deletes ``run.lock`` (while still holding it), so a finished folder holds only
its results. That is safe because a writer checks, once it holds the lock, that ``run.lock``
still names the file it locked, and opens it again if not: a writer that opened the file just
before it was deleted can never share the folder with one that created the next ``run.lock``.
A ``run.lock`` left in a folder therefore means its writer did not release it (a crash, ``kill
-9``, a full disk): it stays because it names that writer, for the next one to report.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interp_rand.output.paths import refuse_link
from interp_rand.output.write_error import RunWriteError, make_run_folder, reason, writing

LOCK_FILE = "run.lock"
# {resolved folder: (holder, thread id)} of the locks this process holds
_HELD: dict[Path, tuple[dict[str, Any], int]] = {}


class RunLocked(OSError):
    """Another process writes this run folder; ``holder`` is what its ``run.lock`` says."""

    def __init__(self, message: str, holder: dict[str, Any]):
        super().__init__(message)
        self.holder = holder

    def __str__(self) -> str:
        return self.args[0]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def describe(holder: dict[str, Any]) -> str:
    """``pid 4242 on host-a since 2025-01-31 14:02:11 (interp-rand train sort)``."""
    pid = holder.get("pid", "?")
    mine = pid == os.getpid() and holder.get("host") == socket.gethostname()
    text = f"pid {pid}{' (this process)' if mine else ''} on {holder.get('host', '?')} since {holder.get('started', '?')}"
    return text + (f" ({holder['command']})" if holder.get("command") else "")


@contextmanager
def run_lock(run_dir: str | Path, command: str | None = None,
             notify: Callable[[str], None] = _say, reentrant: bool = False) -> Iterator[dict[str, Any]]:
    """Hold the run folder's lock (creating the folder) for the ``with`` block; yields what
    ``run.lock`` records of this holder. ``command`` defaults to this process's command line;
    ``notify`` receives the one line said when a dead holder's lock is taken over;
    ``reentrant``: a lock this thread holds already is entered again (and left held).

    Raises:
        RunLocked: another live process holds it (the message names its pid and start time).
        RunWriteError: the folder or ``run.lock`` cannot be created or locked (says why).
    """
    run_dir = Path(run_dir)
    make_run_folder(run_dir)
    key = run_dir.resolve()
    if reentrant and key in _HELD and _HELD[key][1] == threading.get_ident():
        yield _HELD[key][0]
        return
    path = run_dir / LOCK_FILE
    fd = _locked(run_dir, path)
    try:
        previous = _read(fd)
        if previous:
            notify(f"{run_dir}: the previous writer {describe(previous)} is gone without releasing "
                   f"{LOCK_FILE}; lock taken over")
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "command": command if command is not None else shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])}
        with writing("the lock file", path):
            _write(fd, json.dumps(holder) + "\n")
        _HELD[key] = (holder, threading.get_ident())
        try:
            yield holder
        finally:
            del _HELD[key]
            try:
                os.unlink(path)  # while held: whoever locked it meanwhile sees it gone and opens the next
            except OSError:
                try:
                    _write(fd, "")
                except OSError:
                    pass  # still released below; the next writer reports it as taken over
    finally:
        os.close(fd)  # closing releases the flock


def _locked(run_dir: Path, path: Path) -> int:
    """A descriptor of ``path`` holding its exclusive ``flock``, ``path`` still naming the file
    locked (a file deleted or replaced between the open and the lock is opened again)."""
    while True:
        refuse_link(path)
        with writing("the lock file", path):  # O_NOFOLLOW: a link put there meanwhile is refused too
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise RunLocked(
                f"{run_dir} is in use by another writer: {describe(holder)}; wait for it to end or write "
                f"into another folder (--out). Only one process may write a run folder at a time",
                holder,
            ) from None
        except OSError as err:  # e.g. a file system without locks
            os.close(fd)
            why, code = reason(err)
            raise RunWriteError(f"could not lock {path}: {why} (does this file system support flock?)", code) from err
        mine = os.fstat(fd)
        try:
            named = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        if named is not None and (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        os.close(fd)  # its holder deleted it on release after we opened it: lock the next one


def _read(fd: int) -> dict[str, Any]:
    try:
        text = os.pread(fd, 65_536, 0).decode(errors="replace").strip()
        holder = json.loads(text) if text else {}
    except (OSError, json.JSONDecodeError):
        return {"pid": "?", "command": "unreadable run.lock"}
    return holder if isinstance(holder, dict) else {}


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)
    os.fsync(fd)


__all__ = ["LOCK_FILE", "RunLocked", "RunWriteError", "describe", "run_lock"]
