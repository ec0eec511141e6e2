"""Grid-world exploration maps: for seeded transformer agents trained with PGPE on the
explore-then-exploit grid, one on the average return over treasure cells (ERM) and one on the
worst cell (q = inf), map per cell after how many steps of the first episode the agent finds a
treasure hidden there (seed-averaged), and count the distinct exploration routes its seeds
produce. A randomized explorer spreads its routes; a deterministic one takes one route and
finds late cells late every time.

    # zoo:gridworld-AE_R vs zoo:gridworld-Aq_R: about 6 s on one CPU thread, start-up included
    python examples/gridworld_exploration_maps.py --out /tmp/gridworld
    # any agents (run directories or zoo:NAMEs), e.g. also zoo:gridworld-Aq_R_m1
    python examples/gridworld_exploration_maps.py --out /tmp/gridworld --runs RUN_A RUN_B ...
"""

import argparse
import json
from pathlib import Path

import torch

from interp_rand.figures.first_visit import first_visit_figure
from interp_rand.gridworld import evaluate_agent, load_agent
from interp_rand.training.checkpoint import CheckpointError


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", nargs="+", default=["zoo:gridworld-AE_R", "zoo:gridworld-Aq_R"], metavar="RUN",
                        help="agent run directories (interp-rand gridworld train) or zoo:NAMEs (default: %(default)s)")
    parser.add_argument("--n-seeds", type=int, default=64, help="seeds per treasure cell in the evaluation")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    summary = {}
    for run in args.runs:
        try:
            agent = load_agent(run)  # refuses a checkpoint of any other task
        except CheckpointError as err:
            parser.error(f"--runs {run}: {err}")
        pgpe = agent.scale.pgpe
        s = evaluate_agent(agent.model(), agent.scale.grid, args.n_seeds, seed=1).summary(max_routes=3)
        summary[run] = {"variant": pgpe.variant, "m_seeds": pgpe.m_seeds, "generations": pgpe.generations,
                        "size": agent.scale.grid.size, "episode_steps": agent.scale.grid.episode_steps,
                        **{k: s[k] for k in ("average", "worst_cell", "worst_5pct", "n_distinct_routes",
                                             "first_visit_min", "first_visit_max", "first_visit_map", "routes")}}

    steps = max(s["episode_steps"] for s in summary.values())
    fig = first_visit_figure({run: s["first_visit_map"] for run, s in summary.items()}, steps)
    args.out.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(args.out / "exploration_maps.html"), include_plotlyjs=True, full_html=True)
    (args.out / "exploration_maps.json").write_text(json.dumps(summary, indent=2))
    for run, s in summary.items():
        print(f"{run} ({s['variant']}): average return {s['average']:.3f}, worst cell {s['worst_cell']:.3f}, "
              f"{s['n_distinct_routes']} distinct routes over {args.n_seeds} seeds; first-visit map "
              f"(start = None, {s['episode_steps'] + 1} = not found in episode 1):")
        for row in s["first_visit_map"]:
            print("        " + "  ".join("  -  " if v is None else f"{v:5.2f}" for v in row))
    print(f"wrote {args.out}/exploration_maps.json, exploration_maps.html")
    return summary


if __name__ == "__main__":
    main()
