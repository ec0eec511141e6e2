"""``interp-rand gridworld train|eval|compare``: grid-world agents trained with PGPE (the
paper's task 3), locally or on a Ray cluster."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp_rand import progress
from interp_rand.cli import catalogue
from interp_rand.cli.options import at_least, number_or, output_path, seed_option


_FROM_SCALE = object()  # --tie-break-q not given (argparse would run a string default through its type)


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", choices=catalogue.choices("gridworld_scale"), default="cpu",
                        help="cpu: the 5x5 grid with a small agent (width 16), population 20, 60 generations, minutes on one core; paper: the paper's settings, width 80, population 300 (docs/setting.md) (default: cpu)")
    parser.add_argument("--m", type=at_least(1, counts="examples"), default=None, help="seeds per generation (default: the scale's)")
    parser.add_argument("--generations", type=at_least(1), default=None, help="PGPE generations (default: the scale's)")
    parser.add_argument("--popsize", type=at_least(2, counts="examples"), default=None, help="PGPE population, even, >= 2 (default: the scale's)")
    parser.add_argument("--seed", type=seed_option, default=0, help="training seed (default: 0)")
    parser.add_argument("--tie-break-q", type=_tie_break_q, default=_FROM_SCALE, metavar="Q|none",
                        help="worst-cell fitness: break ties of the worst cell by a small q-norm of the cells' "
                        "losses (PGPEConfig.tie_break_q); none: the exact worst cell (default: the scale's: "
                        "cpu 4, paper none)")
    parser.add_argument("--ray-address", default=None,
                        help="evaluate the population on this Ray cluster (host:port, ray://host:port or "
                        "auto); without it everything runs locally")
    parser.add_argument("--num-actors", type=at_least(1), default=None,
                        help="Ray actors evaluating the population (default with --ray-address: one per "
                        "cluster CPU; without --ray-address: none, or a local Ray instance if given)")
    parser.add_argument("--device", default="cpu",
                        help="where the population is evaluated, e.g. cuda for the paper scale (default: cpu)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


# ``--tie-break-q``: the q of the worst cell's tie-break (>= 1), or ``none``: the exact worst cell
_tie_break_q = number_or("none", float, 1, word_means=None)


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "gridworld", help="grid-world exploration agents trained with PGPE (the paper's task 3; docs/setting.md)",
        description="Train seeded transformer agents on the explore-then-exploit grid with evotorch's PGPE "
        "against the exact worst treasure cell (or the average: ERM), evaluate them, and compare ERM "
        "with the randomized agent.",
    )
    sub = parser.add_subparsers(dest="gridworld_command", required=True, metavar="{train,eval,compare}")
    train = sub.add_parser("train", help="train one agent")
    train.add_argument("--variant", choices=catalogue.choices("gridworld_variant"), default="worst",
                       help="worst: fitness = worst cell's seed-averaged return (q = inf); erm: mean over cells")
    _add_training_options(train)
    train.add_argument("--out", type=output_path, default=None, help="run directory (default: runs/gridworld-VARIANT)")
    evaluate = sub.add_parser(
        "eval", help="evaluate a trained agent (evaluation.json, first_visit.html; route.json, route.html: what the "
        "seed chooses)",
        description="Evaluate an agent on every treasure cell under many seeds (evaluation.json, first_visit.html) "
        "and say what its seed chooses (route.json, route.html): the seed directions that choose the first move and "
        "the route, checked by swapping them between seeds against random directions; how many routes the seeds "
        "give, each cell's visit rate across seeds, and the worst treasure cell for an adversary who cannot see the "
        "seed and for one who can. --compare puts another agent (its ERM twin) beside it.")
    evaluate.add_argument("path", metavar="RUN", type=Path, help="run directory or checkpoint folder")
    evaluate.add_argument("--seeds", type=at_least(1, counts="examples"), default=None, help="seeds per cell (default: the scale's)")
    evaluate.add_argument("--compare", metavar="RUN", type=Path, default=None,
                          help="another agent (e.g. zoo:gridworld-AE_R, the ERM twin) drawn beside it on route.html")
    evaluate.add_argument("--route-seeds", type=at_least(20, counts="examples"), default=1000,
                          help="exploration routes (seeds) for route.json (default: 1000)")
    evaluate.add_argument("--out", type=output_path, default=None,
                          help="folder for evaluation.json (default: RUN; zoo-output/NAME for zoo:NAME)")
    compare = sub.add_parser("compare", help="train and compare ERM, randomized (m seeds) and m = 1")
    _add_training_options(compare)
    compare.add_argument("--out", type=output_path, default=None, help="output folder (default: reproduction/gridworld-SCALE)")
    return parser


def _scale(args: argparse.Namespace, **changes):
    from interp_rand.gridworld.config import scale_named

    given = {"m_seeds": args.m, "generations": args.generations, "popsize": args.popsize, "seed": args.seed}
    given = {k: v for k, v in given.items() if v is not None}
    if args.tie_break_q is not _FROM_SCALE:
        given["tie_break_q"] = args.tie_break_q
    return scale_named(args.scale).replace(**given, **changes)


def _num_actors(args: argparse.Namespace):
    from interp_rand.job_runner import connect_ray

    if args.ray_address is not None:
        connect_ray(args.ray_address)
        return args.num_actors or "max"
    return args.num_actors


def _printer(args: argparse.Namespace, generations: int):
    """A PGPE log callback ``(entry, label) -> None`` printing one progress line (stderr):
    ``LABEL: generation k of N: ...``; ``None`` with ``--quiet``."""
    if args.quiet:
        return None

    def show(entry, label: str = "") -> None:
        progress.note(f"{label}{': ' if label else ''}generation {entry['generation']} of {generations}: "
                      f"population mean {entry['mean_eval']:.2f}, centre fitness {entry['center_fitness']:.3f}, "
                      f"centre worst cell {entry['center_worst_cell']:.2f}, "
                      f"centre average {entry['center_average']:.2f}")

    return show


def run(args: argparse.Namespace) -> int:
    from interp_rand.gridworld import experiment

    if args.gridworld_command == "eval":
        from interp_rand.figures.first_visit import first_visit_figure
        from interp_rand.figures.html_page import write_figure
        from interp_rand.gridworld.checkpoint import load_agent
        from interp_rand.output import claim
        from interp_rand.run_names import output_folder

        from interp_rand.reports.route import FILES as ROUTE_FILES, route_report

        where = load_agent(args.path).path.parent.parent  # the metadata only: cheap
        if args.compare is not None:
            load_agent(args.compare)  # refused before any work when it is not an agent
        claim(output_folder(args.path, where, args.out), (experiment.EVALUATION_FILE, "first_visit.html") + ROUTE_FILES)
        with progress.scope("gridworld eval"):
            summary, evaluation = experiment.evaluate_saved(args.path, n_seeds=args.seeds, out=args.out)
            folder = Path(summary["folder"])
            write_figure(first_visit_figure({str(args.path): summary["first_visit_map"]},
                                            summary["scale"]["grid"]["episode_steps"]), folder / "first_visit.html")
            progress.note(f"what the seed chooses: {args.route_seeds} routes, swaps of seed directions"
                          + (f", beside {args.compare}" if args.compare is not None else ""))
            report = route_report(args.path, compare=args.compare, n_seeds=args.route_seeds,
                                  eval_seeds=summary["n_seeds"], evaluation=evaluation)  # evaluation.json's seeds
            report.write(folder)
        keys = ("average", "worst_5pct", "worst_cell", "first_visit_max", "first_visit_min", "n_distinct_routes")
        print(json.dumps({k: summary[k] for k in keys}, indent=2))
        print(report.text())
        print(f"wrote {folder / experiment.EVALUATION_FILE}, first_visit.html, route.json and route.html in {folder}")
        return 0
    scale = _scale(args, **({"variant": args.variant} if args.gridworld_command == "train" else {}))
    num_actors = _num_actors(args)
    if args.gridworld_command == "train":
        from interp_rand.output import check_output

        out = check_output(args.out or Path("runs") / f"gridworld-{scale.pgpe.variant}")  # run_variant locks it
        with progress.scope("gridworld train"):
            summary = experiment.run_variant(scale, out, num_actors=num_actors, device=args.device,
                                             on_log=_printer(args, scale.pgpe.generations))
        keys = ("average", "worst_5pct", "worst_cell", "first_visit_max", "first_visit_min", "n_distinct_routes")
        print(json.dumps({"run_dir": str(out), **{k: summary[k] for k in keys}}, indent=2))
        return 0
    from interp_rand.figures.first_visit import first_visit_figure
    from interp_rand.figures.html_page import write_figure
    from interp_rand.output import claim, write_text

    out = claim(args.out or Path("reproduction") / f"gridworld-{args.scale}",
                ("comparison.json", "comparison.md", "first_visit.html"))
    printer = _printer(args, scale.pgpe.generations)
    labels = [experiment.variant_label(v, scale.pgpe.m_seeds) for v in experiment.compared_variants(scale)]
    with progress.scope("gridworld compare"):
        rows = experiment.compare(
            scale, out, num_actors=num_actors, device=args.device,
            on_log=None if printer is None else
            (lambda label, e: printer(e, f"agent {labels.index(label) + 1} of {len(labels)} ({label})")))
    markdown = experiment.table(rows)
    write_text(Path(out) / "comparison.md", markdown + "\n")
    figure = first_visit_figure({r["variant"]: r["first_visit_map"] for r in rows}, scale.grid.episode_steps)
    write_figure(figure, Path(out) / "first_visit.html")
    print(markdown)
    print(f"wrote comparison.json, comparison.md and first_visit.html to {out}")
    return 0
