"""``interp-rand replay RUN``: replay analyses over every checkpoint of a run (training
dynamics). Thin: one call to :func:`interp_rand.reports.dynamics.replay.replay`; the analyses,
their descriptions and options are read from the catalogue (the registry
:data:`~interp_rand.reports.dynamics.view.DYNAMICS_ANALYSES`), so ``--help`` and bad names
answer without torch."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from interp_rand.cli import catalogue
from interp_rand.cli.options import at_least, option_type, output_path, seed_option
from interp_rand.defaults import DEFAULT_SEED

OUT_FOLDER = "replay"


def _listing() -> str:
    lines = []
    for name, entry in catalogue.dynamics_analyses().items():
        options = ", ".join(f"{o['name']}={o['default']!r}" for o in entry["options"])
        lines.append(f"  {name}: {entry['description']}" + (f" [options: {options}]" if options else ""))
    return "\n".join(lines) or "  (none registered)"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "replay", help="replay analyses over every checkpoint of a run (training dynamics)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the chosen analyses on every checkpoint of RUN (oldest first, all on the same "
        "--n examples), and write one JSON table (steps x quantities, the run's loss curve, the step at "
        "which each quantity first crosses its threshold, seconds per analysis) and its figures (lines "
        "per group against the loss, heatmaps of edge scores over steps).\n\n"
        "The run needs at least 2 checkpoints: train it with a dynamics schedule, which keeps every "
        "checkpoint it writes, e.g.\n"
        "  interp-rand train sort --checkpoint-schedule log:50 --out runs/sort-dyn\n"
        "  interp-rand replay runs/sort-dyn --analyses accuracy,circuit --out out/sort-dyn\n\n"
        f"Registered analyses (default: all that apply to the run's task):\n{_listing()}",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN", help="a run folder written by `interp-rand train`")
    parser.add_argument("--analyses", type=_analyses, default=None, metavar="A,B,...",
                        help="comma-separated analyses (listed above; default: every registered one that "
                        "applies to the task, the others skipped with a note)")
    parser.add_argument("--n", type=at_least(2, counts="examples"), default=256, help="examples (and clean/corrupted pairs) per "
                        "checkpoint, the same at every checkpoint (default: 256)")
    parser.add_argument("--seed", type=seed_option, default=DEFAULT_SEED, help="seed of the examples (default: %(default)s)")
    parser.add_argument("--set", dest="settings", action="append", default=[], type=_setting,
                        metavar="ANALYSIS.OPTION=VALUE",
                        help="an analysis option (listed above), e.g. --set circuit.size=0; repeatable")
    parser.add_argument("--out", type=output_path, default=None,
                        help=f"output folder (default: RUN/{OUT_FOLDER}; zoo-output/NAME/{OUT_FOLDER} for zoo:NAME)")
    return parser


def _analyses(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = list(catalogue.dynamics_analyses())
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown analyses {unknown or [text]}; registered: {', '.join(known)}")
    return names


def _setting(text: str) -> tuple[str, str, Any]:
    target, sep, raw = text.partition("=")
    name, dot, option_name = target.partition(".")
    if not sep or not dot:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ANALYSIS.OPTION=VALUE, e.g. circuit.size=0")
    known = catalogue.dynamics_analyses()
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown analysis {name!r} in {text!r}; registered: {', '.join(known)}")
    options = {o.name: o for o in catalogue.dynamics_options(name)}
    if option_name not in options:
        raise argparse.ArgumentTypeError(f"{name} has no option {option_name!r}; its options: "
                                         f"{', '.join(options) or '(none)'}")
    option = options[option_name]
    if option.type == "bool":
        if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise argparse.ArgumentTypeError(f"{text!r}: {name}.{option_name} takes true or false")
        return name, option_name, raw.lower() in ("true", "1", "yes")
    try:
        return name, option_name, option_type(option)(raw)
    except (ValueError, argparse.ArgumentTypeError) as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.dynamics.replay import OUTPUT_FILES, replay
    from interp_rand.run_names import output_folder, resolve_run

    options: dict[str, dict[str, Any]] = {}
    for name, option, value in args.settings:
        options.setdefault(name, {})[option] = value
    command = "interp-rand " + shlex.join(getattr(args, "argv", sys.argv[1:]))
    out = args.out if args.out is not None else output_folder(args.run_dir, resolve_run(args.run_dir)) / OUT_FOLDER
    claim(out, OUTPUT_FILES)
    result = replay(args.run_dir, args.analyses, n=args.n, seed=args.seed, options=options, progress=True,
                    command=command)
    written = result.write(out)
    crossed = {key: c["text"] for key, c in result.crossings.items()}
    print(json.dumps({"run": result.run, "checkpoints": len(result.steps), "analyses": result.analyses,
                      "notes": result.notes, "seconds": result.seconds, "crossings": crossed}, indent=2))
    for path in written.values():
        print(f"wrote {path}")
    return 0
