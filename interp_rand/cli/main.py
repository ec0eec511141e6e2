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

import torch

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
    "randomness",
    "case_study",
    "compare",
    "zoo",
)
# What a command may raise for bad input or a bad run: printed as one line, exit code 2.
USER_ERRORS = (ValueError, KeyError, CheckpointError, TrainingDiverged, FloatingPointError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp-rand",
        description="Train small TransformerLens-hooked transformers on algorithmic and randomized "
        "tasks, evaluate them, and analyse their circuits.",
    )
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch intra-op threads (default: torch's choice). The models here are "
                        "small: on a busy machine 1 is often fastest")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"interp_rand.cli.{name}")
        module.add_parser(commands).set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # for messages that repeat the command (how to resume)
    threads = torch.get_num_threads()
    try:
        if args.threads is not None:
            if args.threads < 1:
                raise ValueError(f"--threads={args.threads} must be >= 1")
            torch.set_num_threads(args.threads)
        return args.run(args)
    except USER_ERRORS as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"interp-rand {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        # Ctrl-C or SIGTERM: one line, no traceback; exit 128 + signal (training saved a checkpoint first)
        print(f"interp-rand {args.command}: {err or 'interrupted'}", file=sys.stderr)
        return getattr(err, "exit_code", 130)
    finally:
        torch.set_num_threads(threads)
