"""``interp-rand curve RUN_DIR``: draw a run's training curve (loss, held-out exact match and
learning rate against step, from its ``metrics.jsonl``) into one offline HTML file. Needs no
torch: it reads the JSON lines and draws them."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp_rand.cli.options import output_file
from interp_rand.run_history import METRICS_FILE, read_metrics

CURVE_FILE = "training_curve.html"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "curve", help="draw a run's training curve (loss, exact match, lr) as offline HTML",
        description="Read RUN_DIR/metrics.jsonl (a run folder or zoo:NAME, whose folder keeps its "
        "training curve) and write an offline HTML figure of the training and held-out loss, the "
        "held-out exact match and the learning rate against step.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=output_file, default=None,
                        help=f"output file (default: RUN_DIR/{CURVE_FILE}; zoo-output/NAME/{CURVE_FILE} for zoo:NAME)")
    parser.set_defaults(uses_torch=False)
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.figures.html_page import write_figure
    from interp_rand.figures.training_curve import curve_headline, training_curve_figure
    from interp_rand.run_names import output_folder, resolve_run, run_label

    from interp_rand.output import claim

    folder = resolve_run(args.run_dir)
    out = claim(args.out if args.out is not None else output_folder(args.run_dir, folder) / CURVE_FILE, kind="file")
    records = read_metrics(folder / METRICS_FILE)
    last = records[-1] if records else {}
    title = f"training curve: {run_label(args.run_dir)} ({len(records)} evaluations, last step {last.get('step', '-')})"
    write_figure(training_curve_figure(records, title), out, title,
                 headline=curve_headline(records, run_label(args.run_dir)))
    print(f"wrote {out}")
    return 0
