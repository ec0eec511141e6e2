"""``--model MODULE:FUNCTION``: a model of your own in place of a run folder, on ``circuit``,
``report``, ``eval``, ``randomness`` and ``compare`` (:func:`interp_rand.importers.user_model`)."""

from __future__ import annotations

import argparse
from typing import Any

HELP = ("a model of your own in place of {run}: MODULE:FUNCTION or FILE.py:FUNCTION returning (model, task) — our model or a "
        "TransformerBridge, and a task or an interp_rand.tasks.TaskSpec — or (model, task, 'fixed') for a model "
        "trained on the task's r0 alone")


def add_model_option(parser: argparse.ArgumentParser, run: str = "RUN_DIR", flag: str = "--model") -> None:
    parser.add_argument(flag, default=None, metavar="MODULE:FUNCTION", help=HELP.format(run=run))


def add_run_or_model(parser: argparse.ArgumentParser) -> None:
    """The positional ``RUN_DIR`` (a run folder or ``zoo:NAME``) and ``--model``: one of them."""
    parser.add_argument("run_dir", nargs="?", default=None, metavar="RUN_DIR",
                        help="a run folder or zoo:NAME (or give --model)")
    add_model_option(parser)


def given_model(args: argparse.Namespace) -> dict[str, Any]:
    """``{"model": ..., "task": ...}`` of ``--model`` for a report call, ``{}`` for a run."""
    given = model_or_run(args.run_dir, args.model)
    return {} if given is None else {"model": given[0], "task": given[1]}


def check_args(args: argparse.Namespace) -> None:
    """The rules of ``RUN_DIR`` and ``--model`` that need no file: exactly one of the two, and
    ``--model`` with ``--out`` where the output's default is the run folder (there is none).
    A command module that exposes it as ``check_args`` has it checked by
    :func:`interp_rand.cli.main.main` while parsing, before the heavy imports; raises
    ``ValueError``."""
    exactly_one(args.run_dir, args.model)
    if args.model is not None and getattr(args, "out", None) is None:
        raise ValueError("--model needs --out (there is no run folder to write into)")


def exactly_one(run: Any, target: str | None, run_name: str = "RUN_DIR", flag: str = "--model") -> None:
    """A run or a model function, exactly one of the two (checked before any output is claimed)."""
    if (run is None) == (target is None):
        raise ValueError(f"give {run_name} or {flag} MODULE:FUNCTION" + (", not both" if run is not None else ""))


def model_or_run(run: Any, target: str | None, run_name: str = "RUN_DIR", flag: str = "--model") -> tuple | None:
    """``(model, task, seed_source)`` for ``target``, or ``None`` for a run; exactly one of the two."""
    exactly_one(run, target, run_name, flag)
    if target is None:
        return None
    from interp_rand.importers import user_model

    return user_model(target)
