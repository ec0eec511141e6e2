"""Output paths checked once, before any work: resolved, outside the installed packages, and
not an existing file, a dangling symbolic link or a link loop where a folder is to be written
(nor a folder or a link where a file is).

Light (no torch): the CLI's ``--out`` types call :func:`check_output` while parsing, and every
command calls it again through :func:`interp_rand.output.folder.claim` for the path it will
really write (a default one included), so a bad path costs one line and no work.
"""

from __future__ import annotations

import errno
import importlib.util
import os
from pathlib import Path

# The installed packages: no command writes into them (``zoo build``'s default folder aside).
PACKAGES = ("interp_rand", "circuits", "probes")


class OutputError(OSError):
    """An output path that cannot be written as asked; the message is one line."""

    def __str__(self) -> str:
        return self.args[0]


def package_folders() -> dict[str, Path]:
    """``{package: folder}`` of the installed :data:`PACKAGES` (found without importing them)."""
    folders = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders[name] = Path(next(iter(spec.submodule_search_locations))).resolve()
    return folders


def _link_problem(path: Path) -> str | None:
    """Why the symbolic link ``path`` cannot be used (dangling, a loop), or ``None``."""
    try:
        path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13: a loop
        return "is a symbolic link loop"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link loop"
        return f"is a dangling symbolic link (to {os.readlink(path)})"
    return None


def refuse_link(path: Path) -> None:
    """:class:`OutputError` if ``path`` is a symbolic link (one line, naming its target): no
    output is ever written through one."""
    if path.is_symlink():
        raise OutputError(f"{path} is a symbolic link (to {os.readlink(path)}); refusing to write through it: "
                          "remove it or choose another output")


def check_output(path: str | Path, kind: str = "folder", option: str = "--out") -> Path:
    """``path`` as given, after checking that results can be written there (``kind``:
    ``"folder"`` to write files into, ``"file"`` to write one file); :class:`OutputError` in one
    line naming ``option`` otherwise. A link to an existing folder is a folder; for a file, any
    link is refused (never written through)."""
    path = Path(path).expanduser()
    what = f"{option} {path}"
    for link in (path, *path.parents):
        if link.is_symlink():
            problem = _link_problem(link)
            if problem:
                where = "" if link == path else f" ({link} {problem})"
                raise OutputError(f"{what} {problem if link == path else 'cannot be reached'}{where}; "
                                  "choose another path")
    if kind == "file":
        refuse_link(path)
    if kind == "folder" and path.exists() and not path.is_dir():
        raise OutputError(f"{what} exists and is not a folder; give a folder (new or existing)")
    if kind == "file" and path.is_dir():
        raise OutputError(f"{what} is a folder; give a file name, e.g. {option} {path / 'report.html'}")
    for parent in path.absolute().parents:
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"{what}: {parent} is a file, not a folder; choose another path")
    where = path.resolve()
    for name, folder in package_folders().items():
        if where == folder or folder in where.parents:
            raise OutputError(f"{what} is inside the installed package folder {name!r} ({folder}); write outside "
                              f"it, e.g. {option} out/{path.name or 'results'}")
    return path


__all__ = ["OutputError", "PACKAGES", "check_output", "package_folders", "refuse_link"]
