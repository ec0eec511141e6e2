"""``interp-rand``: one sub-command per module of this package. Thin: each command parses into
the library's configs and calls the library.

A command module has ``add_parser(commands) -> ArgumentParser`` (it adds itself to the
sub-parsers) and ``run(args) -> int``; to add a command, write the module and list it in
``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from interp_rand.training.checkpoint import CheckpointError
from interp_rand.training.trainer import TrainingDiverged

# In the order `--help` lists them.
COMMANDS = (
    "tasks",
    "train",
    "evaluate",
    "reproduce",
    "report",
    "demo",
    "circuit",
    "gridworld",
)
# What a command may raise for bad input or a bad run: printed as one line, exit code 2.
USER_ERRORS = (ValueError, KeyError, CheckpointError, TrainingDiverged, FloatingPointError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp-rand",
        description="Train small TransformerLens-hooked transformers on algorithmic and randomized "
        "tasks, evaluate them, and analyse their circuits.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"interp_rand.cli.{name}")
        module.add_parser(commands).set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except USER_ERRORS as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"interp-rand {args.command}: error: {message}", file=sys.stderr)
        return 2
