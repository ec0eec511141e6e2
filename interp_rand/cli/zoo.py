"""``interp-rand zoo list|show|build``: the packaged trained models (``interp_rand.zoo``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand.cli import catalogue
from interp_rand.cli.options import output_path


def add_parser(commands) -> argparse.ArgumentParser:
    names = [entry["name"] for entry in catalogue.zoo_entries()]
    parser = commands.add_parser(
        "zoo", help="small trained models of every task and variant, shipped with the package",
        description="The zoo: trained models of every task and variant, shipped with the package so "
        "that analyses run without training first. Any command taking RUN_DIR takes zoo:NAME. "
        f"Models: {', '.join(names)}.",
    )
    sub = parser.add_subparsers(dest="zoo_command", required=True, metavar="{list,show,build}")
    sub.add_parser("list", help="the zoo's models, whether installed, and each one's headline figures"
                   ).set_defaults(uses_torch=False)
    show = sub.add_parser("show", help="print one model's card (recipe, evaluation, versions)")
    show.set_defaults(uses_torch=False)
    show.add_argument("name", metavar="NAME")
    build = sub.add_parser(
        "build", help="train, evaluate and install zoo models (all by default; about an hour on one thread)",
        description="Train each named model (all if none are named) with its recipe, evaluate it and "
        "install its weights, training curve and card (zoo.json). A q-norm model that starts from its "
        "ERM twin builds the twin first unless it is installed. Use `interp-rand --threads 1 zoo build`.")
    build.add_argument("names", nargs="*", metavar="NAME", choices=names, help=f"models to build (default: all): {', '.join(names)}")
    build.add_argument("--out", type=output_path, default=None,
                       help="install here instead of into the package's zoo folder (for trying a recipe)")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.add_argument("--from-run", default=None, metavar="RUN_DIR",
                       help="install this finished run as the one named model instead of training it (refused "
                       "unless its task, model and training config are the model's recipe)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand import zoo

    if args.zoo_command == "show":
        print(json.dumps(zoo.card(args.name), indent=2))
        return 0
    if args.zoo_command == "build":
        from interp_rand.zoo.build import build

        build(args.names, out=args.out or zoo.ZOO_DIR, progress=not args.quiet, from_run=args.from_run)
        return 0
    print(listing())
    return 0


def listing() -> str:
    """One line per zoo entry: name, task, variant, size, headline figures (or 'not built')."""
    from interp_rand import zoo

    # the entries from the catalogue, so that listing does not import the recipes (and torch)
    entries = catalogue.zoo_entries()
    have = set(zoo.installed())
    lines = [f"{'name':<18} {'task':<10} {'variant':<12} {'size':>7}  figures (zoo.json)"]
    for entry in entries:
        name, task, variant = entry["name"], entry["task"], entry["variant"] or "-"
        if name not in have:
            lines.append(f"{name:<18} {task:<10} {variant:<12} {'-':>7}  not built")
            continue
        size = sum(p.stat().st_size for p in zoo.zoo_path(name).rglob("*") if p.is_file())
        lines.append(f"{name:<18} {task:<10} {variant:<12} {size / 1024:>5.0f}KB  {zoo.headline(zoo.card(name))}")
    lines.append(f"\n{len(have)} of {len(entries)} built, in {zoo.ZOO_DIR}; use a model as zoo:NAME")
    return "\n".join(lines)
