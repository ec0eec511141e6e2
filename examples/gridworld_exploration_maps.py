"""Grid-world exploration maps: train two seeded transformer agents with PGPE on the
explore-then-exploit grid, one on the average return over treasure cells (ERM) and one on the
worst cell (q = inf), then map, per cell, after how many steps of the first episode the agent
finds a treasure hidden there (seed-averaged), and count the distinct exploration routes its
seeds produce. A randomized explorer spreads its routes; a deterministic one takes one route
and finds late cells late every time.

    python examples/gridworld_exploration_maps.py --out /tmp/gridworld   # CPU, under a minute
"""

import argparse
import dataclasses
import json
from pathlib import Path

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from interp_rand.gridworld import GRIDWORLD_CPU, evaluate_agent, train_agent


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--popsize", type=int, default=24)
    parser.add_argument("--n-seeds", type=int, default=64, help="seeds per treasure cell in the evaluation")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    summary, maps = {}, {}
    for variant in ("erm", "worst"):
        # the CPU scale (3x3 grid), shortened: a real run uses `interp-rand gridworld compare`
        scale = dataclasses.replace(GRIDWORLD_CPU, pgpe=dataclasses.replace(
            GRIDWORLD_CPU.pgpe, variant=variant, generations=args.generations, popsize=args.popsize))
        agent = train_agent(scale, log_every=args.generations)
        evaluation = evaluate_agent(agent.model, scale.grid, args.n_seeds, seed=1)
        s = evaluation.summary(max_routes=3)
        maps[variant] = s["first_visit_map"]
        summary[variant] = {k: s[k] for k in ("average", "worst_cell", "worst_5pct", "n_distinct_routes",
                                              "first_visit_min", "first_visit_max", "first_visit_map", "routes")}

    # compute above, drawing here: one heatmap per agent, same colour scale
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"{v}: mean first-visit step" for v in maps])
    top = max(v for m in maps.values() for row in m for v in row if v is not None)
    for col, grid_map in enumerate(maps.values(), start=1):
        fig.add_trace(go.Heatmap(z=grid_map, zmin=0, zmax=top, colorscale="Viridis", showscale=col == 2,
                                 texttemplate="%{z:.1f}"), row=1, col=col)
    args.out.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(args.out / "exploration_maps.html"), include_plotlyjs=True, full_html=True)
    (args.out / "exploration_maps.json").write_text(json.dumps(summary, indent=2))
    for variant, s in summary.items():
        print(f"{variant:>5}: average return {s['average']:.3f}, worst cell {s['worst_cell']:.3f}, "
              f"{s['n_distinct_routes']} distinct routes over {args.n_seeds} seeds; first-visit map (start = None):")
        for row in s["first_visit_map"]:
            print("        " + "  ".join("  -  " if v is None else f"{v:5.2f}" for v in row))
    print(f"wrote {args.out}/exploration_maps.json, exploration_maps.html")
    return summary


if __name__ == "__main__":
    main()
