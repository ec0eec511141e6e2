"""Every file the toolkit writes, written one way: a temporary file in the same folder, fsync,
rename; never through a symbolic link; with the user's umask; JSON strict.

- :func:`write_text` / :func:`write_bytes` / :func:`write_json`: the file appears whole or not
  at all (``os.replace`` of a fsynced temporary file, then the folder fsynced). A symbolic link
  at the path is refused with one line naming it: the link's target is never touched. The
  temporary file is created ``O_EXCL | O_NOFOLLOW`` with mode ``0o666`` less the umask (not
  ``mkstemp``'s ``0o600``), so results are as readable as any file the user makes.
- :func:`append_line`: one line appended to a journal (``metrics.jsonl``), ``O_NOFOLLOW``.
- :func:`strict_json`: NaN and infinities become ``null`` (JSON has no such numbers), and
  :func:`write_json` adds :data:`NULLED_KEY` listing where, so a reader knows a ``null`` was a
  non-finite number and not a missing one.

A failed write (full disk, read-only file system) raises
:class:`~interp_rand.output.write_error.RunWriteError` naming the file, and leaves the earlier
file, if any, whole; its temporary file is removed.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path
from typing import Any

from interp_rand.output.paths import refuse_link
from interp_rand.output.write_error import writing

# The note :func:`write_json` adds to a top-level object when it nulled non-finite numbers.
NULLED_KEY = "non_finite_as_null"
_TEMP_PREFIX = ".tmp-"


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by ``None``, recursively through
    dicts, lists and tuples (strict JSON)."""
    return strict_json(value)[0]


def strict_json(value: Any, where: str = "") -> tuple[Any, list[str]]:
    """``(value with non-finite floats as None, the paths nulled)``; a path is written like
    ``curve[3].recovered``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, [where or "(the value)"]
    if isinstance(value, dict):
        out, nulled = {}, []
        for key, item in value.items():
            out[key], found = strict_json(item, f"{where}.{key}" if where else str(key))
            nulled += found
        return out, nulled
    if isinstance(value, (list, tuple)):
        out, nulled = [], []
        for i, item in enumerate(value):
            clean, found = strict_json(item, f"{where}[{i}]")
            out.append(clean)
            nulled += found
        return out, nulled
    return value, []


def json_text(data: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``data`` (non-finite numbers as ``null``; a top-level object also
    gets :data:`NULLED_KEY`, the paths nulled)."""
    clean, nulled = strict_json(data)
    if nulled and isinstance(clean, dict):
        clean[NULLED_KEY] = nulled
    return json.dumps(clean, indent=indent, allow_nan=False)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes, what: str = "the file") -> Path:
    """Write ``data`` to ``path`` atomically (module docstring); returns ``path``."""
    path = Path(path)
    refuse_link(path)
    tmp = path.with_name(f"{_TEMP_PREFIX}{path.name}-{secrets.token_hex(4)}")
    with writing(what, path, "an earlier file there is untouched"):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)  # a link put there meanwhile is replaced, never followed
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_folder(path.parent)
    return path


def write_text(path: str | Path, text: str, what: str = "the file") -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), what)


def write_json(path: str | Path, data: Any, indent: int | None = 2, what: str = "the file") -> Path:
    """:func:`write_text` of :func:`json_text` (strict JSON) plus a final newline."""
    return write_text(path, json_text(data, indent) + "\n", what)


def append_line(path: str | Path, line: str, what: str = "the journal") -> None:
    """Append ``line`` and a newline to ``path`` (created with the umask's mode), fsynced;
    a symbolic link at ``path`` is refused, never written through."""
    path = Path(path)
    refuse_link(path)
    with writing(what, path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview((line + "\n").encode("utf-8"))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets under the user's umask (``0o666`` less it), for a file a library
    wrote with a mode of its own (safetensors writes ``0o600``)."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode a new folder gets under the user's umask (``0o777`` less it), for a folder
    ``mkdtemp`` made (``0o700``) that is renamed into place."""
    return 0o777 & ~_umask()


def is_temporary(name: str) -> bool:
    """Whether a file name is one of this module's (or a staging folder's) temporary names."""
    return name.startswith(_TEMP_PREFIX)


__all__ = ["NULLED_KEY", "append_line", "finite_or_none", "folder_mode", "is_temporary", "json_text",
           "strict_json", "write_bytes", "write_json", "write_text"]
