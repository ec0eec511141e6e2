"""An output folder's files replaced together or not at all, by one writer at a time.

:func:`replace_files` stages the files of one output (a circuit's ``circuit.json``,
``circuit.html``, ``card.json``, ...) in a temporary folder inside the output folder, then moves
them into place together: it writes a commit record in the staging folder, renames every staged
file over its old one, removes the files of the set this write did not produce (an old
``card.json`` never stays beside a new ``circuit.json`` made without a card), and fsyncs the
folder. SIGINT and SIGTERM wait while the renames run. A writer killed before the commit record
leaves the old files; one killed after it leaves a record the next writer of the folder
finishes (:func:`recover`, like a database's journal); either way no reader sees one file of a
new output beside another of an old one for longer than the renames take.

:func:`claim` is what a command calls first, before any work, for the folder (or file) it will
write: the path is checked (:func:`~interp_rand.output.paths.check_output`), every file of the
output is checked not to be a symbolic link, and the folder's ``run.lock`` is taken (one
writer per folder, as ``train`` does; a second gets a one-line error). The claims live until the
command's :func:`session` ends; :func:`kept` says, after an interrupt, what each claimed folder
holds.

:func:`replace_folder` replaces a whole folder (a checkpoint's ``step_N``, a zoo model) by a
new one filled beside it; :func:`recover_folders` undoes what a killed one left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from interp_rand.output.files import folder_mode, is_temporary, write_json
from interp_rand.output.lock import LOCK_FILE, run_lock
from interp_rand.output.paths import OutputError, check_output, refuse_link
from interp_rand.output.write_error import RunWriteError, writing

STAGE_PREFIX = ".tmp-stage-"
OLD_PREFIX = ".tmp-old-"  # a folder replace_folder() moved aside
COMMIT_FILE = ".commit.json"  # inside a staging folder: the renames decided on


@dataclass
class Claim:
    """A folder a command writes: the output's file names; what was committed so far."""

    folder: Path
    names: tuple[str, ...]
    created: bool
    keeps: str = ""
    written: list[str] = field(default_factory=list)


_SESSION: list[tuple[contextlib.ExitStack, list[Claim], str | None]] = []


@contextlib.contextmanager
def session(command: str | None = None) -> Iterator[list[Claim]]:
    """The scope of one command (``command``: its command line, which ``run.lock`` records):
    the locks its :func:`claim` s take are released at the end, and a folder a claim created
    and nothing was written into is removed again."""
    claims: list[Claim] = []
    with contextlib.ExitStack() as stack:
        _SESSION.append((stack, claims, command))
        try:
            yield claims
        finally:
            _SESSION.pop()
            stack.callback(_remove_unused, claims)  # runs first: while the locks are held


def _remove_unused(claims: list[Claim]) -> None:
    for claim in claims:
        if claim.created and not claim.written:
            try:
                left = [p.name for p in claim.folder.iterdir()]
                if left == [LOCK_FILE]:
                    (claim.folder / LOCK_FILE).unlink()
                    claim.folder.rmdir()
            except OSError:
                pass


def claim(path: str | Path, names: Iterable[str] = (), kind: str = "folder", option: str = "--out",
          command: str | None = None, keeps: str = "") -> Path:
    """Check ``path`` (a folder the output ``names`` go into, or with ``kind="file"`` the one
    file) and take its folder's lock until the :func:`session` ends; returns ``path``. Call it
    before any work: every refusal is one line (:class:`OutputError`,
    :class:`~interp_rand.output.lock.RunLocked`). ``keeps``: what else the command keeps when
    stopped half-way (a sweep's finished runs), said by :func:`kept`."""
    if not _SESSION:
        raise RuntimeError("claim() outside an output session()")
    path = check_output(path, kind, option)
    folder, names = (path, tuple(names)) if kind == "folder" else (path.parent, (path.name,))
    for name in names:
        refuse_link(folder / name)
    created = not folder.exists()
    stack, claims, session_command = _SESSION[-1]
    stack.enter_context(run_lock(folder, command or session_command))
    recover(folder)
    claims.append(Claim(folder, names, created, keeps))
    return path


def nested() -> bool:
    """Whether the current session runs inside another (a command run by a command)."""
    return len(_SESSION) > 1


def kept() -> str:
    """What the current session's claimed folders hold, for the line an interrupt prints."""
    claims = _SESSION[-1][1] if _SESSION else []
    if not claims:
        return "nothing was written"
    parts = []
    for c in claims:
        if c.written:
            parts.append(f"{c.folder}: {', '.join(c.written)} written whole")
        else:
            parts.append(f"no {', '.join(c.names)} written to {c.folder} (what was there is unchanged)")
        if c.keeps:
            parts.append(c.keeps)
    return "; ".join(parts)


@contextlib.contextmanager
def _signals_wait() -> Iterator[None]:
    """SIGINT and SIGTERM are held back (delivered after the block) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _apply(folder: Path, stage: Path, record: dict) -> None:
    for name in record["rename"]:
        if (stage / name).exists():
            os.replace(stage / name, folder / name)
    for name in record["remove"]:
        target = folder / name
        if target.is_symlink() or target.exists():
            target.unlink()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    shutil.rmtree(stage, ignore_errors=True)


def recover(folder: Path, say=lambda line: print(line, file=sys.stderr, flush=True)) -> None:
    """Finish or drop what a killed writer left in ``folder`` (the caller holds its lock): a
    staging folder with a commit record is moved into place (said in one line), one without
    is removed, and so is a temporary file of an unfinished write."""
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if not is_temporary(entry.name) or entry.is_symlink() or entry.name.startswith(OLD_PREFIX):
            continue  # an old folder moved aside is recover_folders()'s: it may be the good copy
        record_path = entry / COMMIT_FILE
        if entry.name.startswith(STAGE_PREFIX) and record_path.is_file():
            try:
                record = json.loads(record_path.read_text())
                with writing("the output folder", folder):
                    _apply(folder, entry, record)
                say(f"{folder}: finished an interrupted write of {', '.join(record['rename'])}")
                continue
            except (ValueError, KeyError, TypeError):
                pass  # a torn record: the write never committed
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@contextlib.contextmanager
def replace_files(folder: str | Path, names: Iterable[str], command: str | None = None) -> Iterator[Path]:
    """Yield a staging folder to write the output's files into (any of ``names``, nothing
    else); when the block ends they replace the folder's files together (module docstring),
    and the files of ``names`` not written are removed. An exception in the block (a failed
    write, Ctrl-C) leaves the folder as it was. Holds ``folder``'s lock (re-entrant: a
    :func:`claim` of this process already holds it)."""
    folder, names = Path(folder), tuple(names)
    with run_lock(folder, command, reentrant=True):
        recover(folder)
        for name in names:
            refuse_link(folder / name)
        with writing("the output folder", folder):
            stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=folder))
        committed = False
        try:
            try:
                yield stage
            except RunWriteError as err:  # name the file as the user knows it, not its staged copy
                raise RunWriteError(str(err).replace(f"{stage}{os.sep}", f"{folder}{os.sep}").replace(
                    "an earlier file there is untouched", "the earlier files there are untouched"), err.errno) from err
            written = sorted(p.name for p in stage.iterdir())
            unexpected = sorted(set(written) - set(names))
            if unexpected:
                raise ValueError(f"replace_files({folder}): {unexpected} are not files of this output {names}")
            record = {"rename": written, "remove": [n for n in names if n not in written]}
            write_json(stage / COMMIT_FILE, record, what="the commit record")
            committed = True  # from here on, a failure leaves the record for recover()
            with _signals_wait(), writing("the output folder", folder, "its earlier files are untouched"):
                _apply(folder, stage, record)
        except BaseException:
            if not committed:
                shutil.rmtree(stage, ignore_errors=True)
            raise
    for claimed in (_SESSION[-1][1] if _SESSION else []):
        if claimed.folder.resolve() == folder.resolve():
            claimed.written += [n for n in written if n not in claimed.written]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replace_folder(final: str | Path) -> Iterator[Path]:
    """Yield a new folder beside ``final`` to fill (a checkpoint's ``step_N``, a zoo model);
    when the block ends its files are fsynced and it becomes ``final``: an old ``final`` is
    moved aside first and removed after, so a killed writer leaves one of the two whole
    (:func:`recover_folders` puts it back). An exception in the block leaves ``final`` as it
    was. The folder gets the umask's mode (not ``mkdtemp``'s ``0o700``)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    old = final.with_name(f"{OLD_PREFIX}{final.name}")
    try:
        os.chmod(tmp, folder_mode())
        yield tmp
        for path in sorted(tmp.rglob("*")):
            if path.is_file() and not path.is_symlink():
                _fsync(path)
        with _signals_wait():
            if final.exists():  # the same folder again: move the old one aside, never delete it first
                shutil.rmtree(old, ignore_errors=True)
                os.rename(final, old)
                os.rename(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, final)
        _fsync(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not final.exists():
            os.rename(old, final)
        raise


def recover_folders(parent: str | Path) -> None:
    """What killed :func:`replace_folder` s left in ``parent``: an old folder moved aside whose
    replacement never arrived is put back; a half-filled new one is removed."""
    for stray in Path(parent).glob(".tmp-*"):
        kept = stray.with_name(stray.name[len(OLD_PREFIX):])
        if stray.name.startswith(OLD_PREFIX) and not kept.exists():
            stray.rename(kept)  # killed between the two renames: the old folder is the good one
        else:
            shutil.rmtree(stray, ignore_errors=True)


__all__ = ["COMMIT_FILE", "Claim", "OLD_PREFIX", "OutputError", "STAGE_PREFIX", "claim", "kept", "nested", "recover",
           "recover_folders", "replace_files", "replace_folder", "session"]
