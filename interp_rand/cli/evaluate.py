"""``interp-rand eval RUN_DIR``: evaluate a trained run on fresh examples of its task. The
report is :func:`interp_rand.reports.evaluation.evaluation_report`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand.cli import catalogue
from interp_rand.cli.model_option import add_model_option, check_args, model_or_run  # noqa: F401 (check_args: main's)
from interp_rand.cli.options import at_least, output_path, seed_option

from interp_rand.defaults import DEFAULT_SEED as DEFAULT_EVAL_SEED


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "eval", help="evaluate a trained run on fresh examples",
        description="Evaluate the newest checkpoint of RUN_DIR (or a checkpoint folder) on fresh "
        "examples of its task; prints the result and writes eval.json next to the checkpoint "
        "(zoo:NAME: into zoo-output/NAME, or --out).",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", nargs="?", default=None)
    add_model_option(parser)
    parser.add_argument("--out", type=output_path, default=None,
                        help="folder for eval.json / seeded_eval.json (default: RUN_DIR; zoo-output/NAME for zoo:NAME)")
    parser.add_argument("--task", choices=catalogue.task_names(), default=None,
                        help="expected task; an error if the checkpoint was trained on another")
    parser.add_argument("--n", type=at_least(1, counts="examples"), default=10_000, help="fresh examples (default: 10000)")
    parser.add_argument("--seed", type=seed_option, default=DEFAULT_EVAL_SEED,
                        help="seed of the evaluation examples")
    parser.add_argument("--seeds", type=at_least(1, counts="examples"), default=None, metavar="S",
                        help="randomized tasks: also run every example under S random seeds (a "
                        "fixed-seed run: its seed r0) and write the paper's metrics (docs/setting.md; average and "
                        "worst-5%% success, majority-5/30, the sampled baseline, predictive "
                        "variance, histogram) to seeded_eval.json")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.output import claim
    from interp_rand.reports.evaluation import EVAL_FILE, SEEDED_FILE, evaluation_report
    from interp_rand.training.checkpoint import META_FILE
    from interp_rand.run_names import output_folder, resolve_run

    files = (EVAL_FILE,) + ((SEEDED_FILE,) if args.seeds else ())
    if args.model is not None:  # with --out (check_args)
        out = claim(args.out, files)  # before the model function runs (it may train)
        given = model_or_run(args.run_dir, args.model)
        own = {"model": given[0], "task": given[1], "seed_source": given[2]}
    else:
        folder = resolve_run(args.run_dir)
        run_dir = folder.parent.parent if (folder / META_FILE).is_file() else folder  # a checkpoint folder's run
        out = claim(output_folder(args.run_dir, run_dir, args.out), files)
        own = {"task": args.task}
    report = evaluation_report(args.run_dir, **own, n=args.n, seed=args.seed, seeds=args.seeds, progress=True)
    eval_path, seeded_path = report.write(out)
    print(json.dumps(report.key_numbers(), indent=2))
    print(f"wrote {eval_path}")
    if seeded_path is not None:
        print(json.dumps(report.seeded_key_numbers(), indent=2))
        print(f"wrote {seeded_path}")
    return 0
