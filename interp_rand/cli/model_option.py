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
