"""``interp-rand tasks``: list the registered tasks and their options."""

from __future__ import annotations

import argparse
import dataclasses

from interp_rand.cli.options import field_docs
from interp_rand.tasks import task_class, task_names


def add_parser(commands) -> argparse.ArgumentParser:
    return commands.add_parser("tasks", help="list the registered tasks and their options",
                               description="List the registered tasks, their options and defaults.")


def run(args: argparse.Namespace) -> int:
    for name in task_names():
        cls = task_class(name)
        print(f"{name}: {cls.description}")
        docs = field_docs(cls)
        for field in dataclasses.fields(cls):
            text = docs.get(field.name, "").replace("``", "")
            print(f"    --{field.name.replace('_', '-'):<20} default {field.default!r:<8} {text}")
    return 0
