"""``interp-rand report RUN_DIR``: one self-contained HTML attention-pattern report of a run:
per-head patterns (averaged and conditioned on task metadata), head-role scores, example
patterns chosen by metadata, the probe table and, for seeded models, the seed channel's share
of attribution. Thin: parses into ``probes.ReportConfig`` and calls the library."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from interp_rand import progress
from interp_rand.cli.model_option import add_model_option, check_args, model_or_run  # noqa: F401 (check_args: main's)
from interp_rand.cli import catalogue
from interp_rand.cli.options import add_dataclass_options, add_qk_head_option, collect, output_file

REPORT_FILE = "report.html"


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "report", help="write a self-contained HTML attention-pattern report of a run",
        description="Analyse the newest checkpoint of RUN_DIR (or a checkpoint folder) and write one "
        "offline HTML file: per-head attention heatmaps, head-role scores, example patterns, probes "
        "with controls and causal checks, and the seed channel's attribution share.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", nargs="?", default=None)
    add_model_option(parser)
    parser.add_argument("--out", type=output_file, default=None,
                        help=f"output file (default: RUN_DIR/{REPORT_FILE}; zoo-output/NAME/{REPORT_FILE} for zoo:NAME)")
    add_qk_head_option(parser, "add")
    parser.set_defaults(report_fields=add_dataclass_options(parser.add_argument_group("report options"),
                                                            catalogue.config_options("ReportConfig")))
    return parser




def run(args: argparse.Namespace) -> int:
    from probes.report import ReportConfig, report_from_run
    from interp_rand.output import claim
    from interp_rand.run_names import output_folder
    from probes.report_html import write_report

    began = time.perf_counter()
    config = ReportConfig(**collect(args, args.report_fields))
    out = args.out if args.out is not None else output_folder(args.run_dir, args.run_dir) / REPORT_FILE
    claim(out, kind="file")  # before any work (a --model function may train)
    given = model_or_run(args.run_dir, args.model)
    if given is None:
        data = report_from_run(args.run_dir, config, progress=True, qk_heads=tuple(args.qk_head))
    else:
        from interp_rand.training import TrainConfig
        from interp_rand.training.objectives import fixed_seeds_if_asked
        from probes.report import build_report

        model, task, seed_source = given
        data = build_report(model, task, config, progress=True, qk_heads=tuple(args.qk_head), info={"model": args.model},
                            batch_fn=lambda b: fixed_seeds_if_asked(task, b, TrainConfig(seed_source=seed_source)))
    progress.note("writing the HTML")
    path = write_report(data, out)
    size = path.stat().st_size / 1e6
    print(f"wrote {path} ({size:.1f} MB) in {time.perf_counter() - began:.1f} s")
    return 0
