"""``interp-rand import KIND SOURCE --out RUN``: a model trained elsewhere as a weights-only run
folder every command reads (:mod:`interp_rand.importers`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand.cli.options import output_path


def add_parser(commands) -> argparse.ArgumentParser:
    from interp_rand.importers import IMPORTERS  # light: the registry, no torch

    kinds = "; ".join(f"{e.name}: {e.description}" for e in IMPORTERS.entries())
    parser = commands.add_parser(
        "import", help="bring in a model trained elsewhere as a run folder",
        description=f"Import SOURCE with the importer KIND into the new run folder --out ({kinds}). "
        "The folder holds the weights (safetensors) and checkpoint.json with the model's provenance.",
    )
    parser.add_argument("kind", choices=IMPORTERS.names(), metavar="KIND", help=" | ".join(IMPORTERS.names()))
    parser.add_argument("source", metavar="SOURCE", help="a file (haiku-recall), module:function (bridge) or a "
                        "model folder (hf)")
    parser.add_argument("--out", type=output_path, required=True, help="the new run folder")
    seen: set[str] = set()
    for entry in IMPORTERS.entries():
        for option in entry.options:
            if option.name not in seen:
                seen.add(option.name)
                parser.add_argument("--" + option.name.replace("_", "-"), dest=option.name, default=None,
                                    help=f"{entry.name}: {option.help} (default: {option.default!r})")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.importers import IMPORTERS, import_model

    names = {o.name for o in IMPORTERS.entry(args.kind).options}
    given = {k: getattr(args, k) for k in {o.name for e in IMPORTERS.entries() for o in e.options}
             if getattr(args, k) is not None}
    foreign = sorted(set(given) - names)
    if foreign:
        raise ValueError(f"{', '.join('--' + k.replace('_', '-') for k in foreign)} is not an option of "
                         f"{args.kind!r} (its options: {', '.join(sorted(names)) or 'none'})")
    folder = import_model(args.kind, args.source, Path(args.out), **given)
    meta = json.loads((folder / "checkpoint.json").read_text())
    print(json.dumps({"checkpoint": str(folder), "task": meta["task"], "provenance": meta["provenance"]}, indent=2))
    return 0
