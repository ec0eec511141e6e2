"""``interp-rand``: one sub-command per module of this package. Thin: each command parses into
the library's configs and calls the library.

A command module has ``add_parser(commands) -> ArgumentParser`` (it adds itself to the
sub-parsers) and ``run(args) -> int``, and may have ``check_args(args)``: the rules between its
arguments (e.g. a run or ``--model``, not both), light, raising ``ValueError``, which :func:`main`
checks before the command's heavy imports. To add a command, write the module and list it in
``COMMANDS``. Command modules import only light modules at the top (argparse, the catalogue of
choices, :mod:`interp_rand.progress`) and the library inside ``run``, so that ``--help``,
argument errors, ``tasks`` and ``zoo list`` return without importing torch; a parser that
answers without torch sets ``uses_torch=False`` in its defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import shlex
import signal
import sys
import time
from pathlib import Path
from collections.abc import Iterator

from interp_rand import output, progress, run_names
from interp_rand.cli import memory
from interp_rand.cli.options import at_least
from interp_rand.output import folder as output_folder
from interp_rand.threads import DEFAULT_THREADS, clamp, cores, use_threads

# In the order `--help` lists them.
COMMANDS = (
    "tasks",
    "train",
    "import_run",
    "evaluate",
    "reproduce",
    "qsweep",
    "report",
    "curve",
    "replay",
    "demo",
    "circuit",
    "gridworld",
    "randomness",
    "case_study",
    "explain",
    "generalization",
    "compare",
    "ground_truth",
    "zoo",
)
# What a command may raise for bad input or a bad run: printed as one line, exit code 2
# (CheckpointError is a ValueError; TrainingDiverged is added once the trainer is imported).
USER_ERRORS = (ValueError, KeyError, FloatingPointError, OSError)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``PROG: error: WHAT (see PROG --help)``),
    exit code 2, instead of the usage block and the error; the sub-command parsers are of this
    class too."""

    def error(self, message: str):
        message = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="interp-rand",
        description="Train small TransformerLens-hooked transformers on algorithmic and randomized "
        "tasks, evaluate them, and analyse their circuits.",
    )
    parser.add_argument("--threads", type=at_least(1), default=DEFAULT_THREADS, metavar="N",
                        help=f"torch intra-op threads (default: {DEFAULT_THREADS}: the models here are "
                        "small, and on a shared 2-core machine one thread trained about 10x faster than "
                        "two; bench/threads.py measures it)")
    parser.add_argument("--debug", action="store_true",
                        help="after an error's one line, print its traceback, the original one included (e.g. "
                        "the exception raised inside your --model MODULE:FUNCTION)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"interp_rand.cli.{name}")
        module.add_parser(commands).set_defaults(run=module.run, check_args=getattr(module, "check_args", None))
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    """:data:`USER_ERRORS`, plus the trainer's divergence error if the trainer was imported (an
    error of a module never imported cannot have been raised)."""
    trainer = sys.modules.get("interp_rand.training.trainer")
    return USER_ERRORS + ((trainer.TrainingDiverged,) if trainer is not None else ())


def parse(argv: list[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """The parsed command line (by ``parser``, default :func:`build_parser`'s), every number
    checked (bounds, memory estimate) and ``--threads`` bounded by the cores, before any work
    and without importing torch; argument errors exit 2 with one line (:class:`Parser`). The
    parse-only entry point (the property test of the parser calls it)."""
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    memory.check(parser, args)
    # reported by main before any work (parse alone does not refuse)
    args.early_error = _broken_rule(args) or _missing_run(parser, args)
    if clamp(args.threads) < args.threads:
        print(f"interp-rand: --threads {args.threads} is more than the {cores()} cores this process may use; "
              f"using {clamp(args.threads)}", file=sys.stderr)
        args.threads = clamp(args.threads)
    args.argv = argv  # for messages that repeat the command (how to resume)
    args.main = main  # for a command that runs commands (the demo's tour), which never imports this module
    return args


def _broken_rule(args: argparse.Namespace) -> str | None:
    """The message of the command's ``check_args`` (the rules between its arguments), ``None``
    when they hold or it has none. :func:`main` refuses it before the command's heavy imports."""
    check = getattr(args, "check_args", None)
    try:
        if check is not None:
            check(args)
    except ValueError as err:
        return str(err)
    return None


def _exists(path: str) -> bool:
    """Does ``path`` exist? A name the file system cannot hold (too long, a NUL) does not."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def _missing_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The message for a run argument (an argument whose metavar names a run: ``RUN_DIR``,
    ``RUN_A`` ...) that is neither ``zoo:NAME`` nor an existing path, in the parser and the
    sub-command parsers ``args`` chose; ``None`` when there is none. :func:`main` refuses it
    before the command's heavy imports."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            found = None if chosen is None else _missing_run(chosen, args)
            if found:
                return found
            continue
        value = getattr(args, action.dest, None)
        if value is None or isinstance(value, list):
            continue
        if action.metavar == "MODULE:FUNCTION":
            found = _missing_module(str(value))
            if found:
                return found
            continue
        if not str(action.metavar or "").startswith("RUN"):
            continue
        shown = value if len(str(value)) <= 80 else f"{str(value)[:77]}..."
        if str(value).startswith(run_names.PREFIX):
            try:
                run_names.resolve_run(str(value))  # an installed zoo model's name (no torch)
            except ValueError as err:
                return str(err)
            continue
        if not _exists(value):
            return f"{action.metavar} {shown} does not exist (a run folder, or zoo:NAME)"
        if getattr(args, "command", None) not in CHECKPOINT_FREE and not _checkpoint_like(Path(value)):
            return (f"{action.metavar} {shown} is neither a checkpoint folder (no checkpoint.json) nor a run "
                    "directory with checkpoints/step_* folders")
    return None


# commands whose run argument need not hold a checkpoint (a training history, a run being copied)
CHECKPOINT_FREE = ("curve", "replay", "zoo")


def _checkpoint_like(path: Path) -> bool:
    """Could ``path`` be read as a checkpoint: a folder holding ``checkpoint.json`` or
    ``checkpoints/step_*`` folders (what :func:`interp_rand.training.checkpoint.read_meta`
    accepts, checked here without torch; the loader checks the rest)."""
    try:
        if (path / "checkpoint.json").is_file():
            return True
        folder = path / run_names.CHECKPOINTS_DIR
        return folder.is_dir() and any(p.is_dir() and p.name.startswith("step_") for p in folder.iterdir())
    except (OSError, ValueError):
        return True  # unreadable: let the loader say what is wrong


def _defines(source_file: str, name: str) -> bool:
    """Whether the Python source ``source_file`` may define ``name`` at its top level, read
    without running it (a def, class, assignment or import of that name; ``True`` when it
    cannot tell: unreadable source, ``from x import *``, a module ``__getattr__``)."""
    import ast

    try:
        tree = ast.parse(Path(source_file).read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError):
        return True  # the importer says what is wrong with it
    def binds(node: ast.AST) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name in (name, "__getattr__")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return any(a.name == "*" or (a.asname or a.name.split(".")[0]) == name for a in node.names)
        return isinstance(node, ast.Name) and node.id in (name, "globals")

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            found = binds(node)  # a function's body binds nothing at the top level
        else:  # an assignment, or a statement that may hold one (if, try, with, for ...)
            found = any(binds(n) for n in ast.walk(node))
        if found:
            return True
    return False


def _missing_module(target: str) -> str | None:
    """The message for a ``MODULE:FUNCTION`` whose file or top-level module does not exist, or
    whose source plainly defines no ``FUNCTION`` (found without importing or running it, so
    before torch); ``None`` otherwise (the importer checks the rest, and runs it)."""
    import importlib.util
    import os

    module, sep, function = target.rpartition(":")
    if not sep or not module:
        return None  # malformed: the importer says how it should look
    if module.endswith(".py"):
        if not (_exists(module) and Path(module).is_file()):
            return f"{target!r}: no file {module}"
        source = module
    else:
        top = module.split(".")[0]
        if not top.isidentifier():
            return None
        if os.getcwd() not in sys.path:  # as the importer finds it: a module of the folder the command runs in
            sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if found is None:
            return f"cannot import {module!r} (from {target!r}): No module named {top!r}"
        # a top-level module's own source (a package's submodule would need the package run to find)
        source = found.origin if module == top and (found.origin or "").endswith(".py") else None
    if source is not None and function.isidentifier() and not _defines(source, function):
        return f"{module} has no function {function!r}"  # the importer's words
    return None


def print_traceback(err: BaseException) -> None:
    """``err``'s traceback on stderr with the exceptions it was raised from or while handling,
    those an error wrapped into one line hid (``raise ... from None``: the user's function's own
    exception and where it was raised)."""
    import traceback

    seen = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:  # show every wrapped exception
        seen.add(id(link))
        link.__suppress_context__ = False
        link = link.__cause__ or link.__context__
    traceback.print_exception(err, file=sys.stderr)


class Stopped(KeyboardInterrupt):
    """SIGTERM outside training: stops the command as Ctrl-C does (exit 143)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum, self.exit_code = signum, 128 + signum


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises :class:`Stopped` in the main thread (training handles it itself, at a
    step boundary); an ignored SIGTERM stays ignored."""
    def stop(signum, frame):
        raise Stopped(signum)

    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN:
            raise ValueError
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread, or ignored
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_line(command: str, argv: list[str], err: KeyboardInterrupt, seconds: float) -> str:
    """The one line an interrupt prints: what was interrupted, what was kept, and the command
    that resumes (training resumes from its checkpoint) or redoes the rest."""
    again = shlex.join(["interp-rand", *[a for a in argv if a != "--no-resume"]])
    if hasattr(err, "resume"):  # TrainingInterrupted: its step and checkpoint
        err.resume = f"resume with: {again}"
        return f"interp-rand {command}: {err}"
    name = signal.Signals(getattr(err, "signum", signal.SIGINT)).name
    return (f"interp-rand {command}: interrupted by {name} after {seconds:.0f} s; {output_folder.kept()}; "
            f"redo with: {again}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    if args.early_error:  # one line, before torch is imported
        print(f"interp-rand {args.command}: error: {args.early_error}", file=sys.stderr)
        return 2
    threads = use_threads(args.threads) if getattr(args, "uses_torch", True) else contextlib.nullcontext()
    began = time.perf_counter()
    # the session: every output folder a command claims is locked until it returns
    with output.session(shlex.join(["interp-rand", *argv])):
        try:
            with threads, progress.scope(args.command), _sigterm_stops():
                return args.run(args)
        except Exception as err:
            if not isinstance(err, user_errors()):
                raise
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            print(f"interp-rand {args.command}: error: {message}", file=sys.stderr)
            if args.debug:
                print_traceback(err)
            return 2
        except KeyboardInterrupt as err:
            if output_folder.nested():  # a command run by another (the demo's tour): the outer one says it
                raise
            # Ctrl-C or SIGTERM: one line, no traceback; exit 128 + signal (training saved a checkpoint first)
            print(interrupt_line(args.command, argv, err, time.perf_counter() - began), file=sys.stderr)
            return getattr(err, "exit_code", 130)
