"""``interp-rand tasks``: list the registered tasks and their options."""

from __future__ import annotations

import argparse

from interp_rand.cli import catalogue


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser("tasks", help="list the registered tasks and their options",
                                 description="List the registered tasks, their options and defaults.")
    parser.set_defaults(uses_torch=False)
    return parser


def run(args: argparse.Namespace) -> int:
    # from the catalogue of the task registry, so that listing does not import torch
    for name in catalogue.task_names():
        print(f"{name}: {catalogue.task_description(name)}")
        for spec in catalogue.task_options(name):
            text = spec.doc.replace("``", "")
            print(f"    --{spec.name.replace('_', '-'):<20} default {spec.default!r:<8} {text}")
    return 0
