"""The ``interp-rand`` command line."""

from interp_rand.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
