"""Failed writes into a run folder, as one line: what could not be written, where, and why.

A full disk, a read-only file system, a missing parent or a path no folder can be made in
(``/proc/x``) raise :class:`RunWriteError` (an ``OSError`` with the same ``errno``) instead
of a bare ``OSError`` or safetensors' ``SafetensorError``, whose text names neither the file
nor what was being written.
"""

from __future__ import annotations

import errno as errno_module
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# safetensors reports an I/O failure as text only: "... I/O error: No space left on device (os error 28)"
_RUST_OS_ERROR = re.compile(r"os error (\d+)")


class RunWriteError(OSError):
    """Something of a run (folder, lock, checkpoint, metrics) could not be written."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno

    def __str__(self) -> str:
        return self.args[0]


def reason(err: BaseException) -> tuple[str, int | None]:
    """``(why, errno)`` of a failed write, e.g. ``("No space left on device (ENOSPC)", 28)``."""
    code = err.errno if isinstance(err, OSError) else None
    if code is None:
        match = _RUST_OS_ERROR.search(str(err))
        code = int(match.group(1)) if match else None
    if code is None:
        return str(err), None
    return f"{os.strerror(code)} ({errno_module.errorcode.get(code, code)})", code


@contextmanager
def writing(what: str, path: Path | str, note: str = "") -> Iterator[None]:
    """Turn an ``OSError``/``SafetensorError`` raised inside into :class:`RunWriteError`
    ``could not write WHAT PATH: WHY[; NOTE]``; a ``RunWriteError`` passes through."""
    try:
        yield
    except RunWriteError:
        raise
    except Exception as err:
        if not isinstance(err, OSError) and not _safetensors_error(err):
            raise
        why, code = reason(err)
        raise RunWriteError(f"could not write {what} {path}: {why}" + (f"; {note}" if note else ""), code) from err


def _safetensors_error(err: BaseException) -> bool:
    """Whether ``err`` is safetensors' ``SafetensorError`` (if safetensors was never imported,
    none can have been raised: the CLI starts without importing it)."""
    module = sys.modules.get("safetensors")
    return module is not None and isinstance(err, module.SafetensorError)


def make_run_folder(run_dir: Path) -> None:
    """``mkdir -p run_dir``; a failure names the nearest folder that exists (where the
    creation was refused), e.g. ``/proc`` for ``/proc/x``."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why, code = reason(err)
        if run_dir.exists() and not run_dir.is_dir():
            why = "it exists and is not a folder"
        else:
            existing = next((p for p in run_dir.absolute().parents if p.exists()), None)
            if existing is not None and err.errno in (errno_module.ENOENT, errno_module.EACCES, errno_module.EROFS,
                                                      errno_module.EPERM, errno_module.ENOTDIR):
                why += f"; no folder can be created in {existing}"
        raise RunWriteError(f"could not create the run folder {run_dir}: {why}", code) from err
