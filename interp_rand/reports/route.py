"""The grid-world route report: what the seed chooses (:func:`probes.route_choice.route_choice`)
for an agent and, beside it, another (its ERM twin), written as ``route.json`` and a
``route.html`` that opens with the verdict and the finding.

    >>> report = route_report("zoo:gridworld-Aq_R", compare="zoo:gridworld-AE_R")
    >>> print(report.text()); report.write("out/route")
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand.display import Displayed

FILES = ("route.json", "route.html")


@dataclass(repr=False)
class RouteReport(Displayed):
    """``agents``: label -> :class:`~probes.route_choice.RouteChoice`, the first the one the
    report is about; ``first_visit``: label -> its seed-mean first-visit map."""

    agents: dict[str, Any]
    first_visit: dict[str, list[list[float | None]]]
    episode_steps: int

    FILES = FILES

    @property
    def main(self) -> Any:
        return next(iter(self.agents.values()))

    def headline(self) -> str:
        return self.main.headline()

    def lines(self) -> list[str]:
        out = []
        for choice in self.agents.values():
            out += choice.lines() + [""]
        if len(self.agents) > 1:
            a, b = list(self.agents.values())[:2]
            out.append(f"{a.label} against {b.label}: {a.n_distinct_routes} vs {b.n_distinct_routes} routes over "
                       f"{a.n_seeds} seeds; cells visited by {_range(a)} vs {_range(b)} of the seeds; worst treasure "
                       f"cell {a.worst_cell_return:.2f} vs {b.worst_cell_return:.2f} (seed-averaged; higher is better); "
                       f"average {a.average:.2f} vs {b.average:.2f}")
        return out

    def text(self) -> str:
        return "\n".join(self.lines())

    def finding(self) -> str:
        """What the agent's seed does, in one sentence (the demo's index leads with it)."""
        m = self.main
        k90 = m.route_rank
        text = (f"{m.label}: the seed chooses the exploration route through "
                + (f"{k90} of its {m.d_seed} directions" if k90 and k90 < m.d_seed else f"all {m.d_seed} of its directions"
                   f" (no smaller subspace carries it: {m.route_curve[-2]:.2f} at {m.d_seed - 1})")
                + f", {m.n_distinct_routes} routes over {m.n_seeds} seeds, cells visited by {_range(m)} of them")
        if len(self.agents) > 1:
            b = list(self.agents.values())[1]
            text += (f"; its ERM twin takes {b.n_distinct_routes} routes, cells visited by {_range(b)}; the worst "
                     f"treasure cell {m.worst_cell_return:.2f} against the twin's {b.worst_cell_return:.2f}")
        return text

    def shortfall(self) -> str | None:
        """Where the agent's card falls short, in one line (``None`` when it holds): how many of
        the seed's directions the route and the first move need beyond those the card names."""
        m = self.main
        if m.verdict == "holds":
            return None
        k90 = m.route_rank
        route = (f"the route needs {k90} of the seed's {m.d_seed} directions" if k90 and k90 < m.d_seed else
                 f"the route needs all {m.d_seed} of the seed's directions (IIA {m.route_curve[-2]:.2f} at "
                 f"{m.d_seed - 1}): the seed acts as a hash of all its numbers, not a low-dimensional choice")
        return f"{route}; the first move needs more than the {m.rank_first} its logits move along (IIA {m.iia_first:.2f})"

    def to_dict(self) -> dict[str, Any]:
        m = self.main  # the report's claims are its agent's (the demo's index reads the top-level ones)
        return {"subject": f"what the seed chooses in {m.label}", "verdict": m.verdict, "finding": self.finding(),
                "shortfall": self.shortfall(),
                "claims": [c.to_dict() for c in m.claims], "agents": {k: v.to_dict() for k, v in self.agents.items()},
                "first_visit": self.first_visit}

    def figure(self) -> Any:
        """Each agent's visit rate per cell across seeds (its worst treasure cell outlined)."""
        from interp_rand.figures.first_visit import grid_maps_figure

        return grid_maps_figure({k: v.visit_rate for k, v in self.agents.items()}, zmin=0, zmax=1, fmt="{:.2f}",
                                title="share of seeds whose exploration route visits each cell (no treasure)",
                                colorbar="share", marks={k: (*v.worst_cell, "worst") for k, v in self.agents.items()})

    def curve_figure(self) -> Any:
        """Route IIA against how many of the seed's directions are swapped (the route's own, largest first)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        for label, choice in self.agents.items():
            k = list(range(1, len(choice.route_curve) + 1))
            fig.add_trace(go.Scatter(x=k, y=choice.route_curve, mode="lines+markers", name=label))
        fig.add_hline(y=0.9, line_dash="dot", annotation_text="0.9")
        fig.update_layout(template="plotly_white", height=360, width=640, yaxis={"range": [0, 1.02]},
                          title="route = the source seed's, top k directions swapped",
                          xaxis_title="seed directions swapped (the route's own, largest first)",
                          yaxis_title="whole route = the source's")
        return fig

    def page_headline(self) -> Any:
        from interp_rand.figures.headline import Headline

        m = self.main
        failing = next((c.line().removeprefix("claim: ") for c in m.claims if c.verdict.outcome != "holds"), None)
        k90 = m.route_rank
        number = (f"route chosen by {k90 if k90 else 'all'} of the seed's {m.d_seed} directions; first move "
                  f"{m.iia_first:.3f} in {m.rank_first}; {m.n_distinct_routes} routes / {m.n_seeds} seeds")
        return Headline(f"what the seed chooses in {m.label}", number, m.verdict, failing=failing)

    def write(self, out: str | Path) -> Path:
        """route.json and route.html in ``out``, replaced together."""
        from interp_rand.figures.first_visit import first_visit_figure
        from interp_rand.figures.html_page import write_page
        from interp_rand.output import replace_files, write_text
        from interp_rand.output.files import json_text

        out = Path(out)
        note = ("<p class='note'>The seed is a Normal vector read as the agent's first token. A claim swaps the base "
                "seed's component in k directions for the source seed's (s_b + P(s_s - s_b)) and asks whether the "
                "first move (or the whole episode-1 route, no treasure on the grid) becomes the source's; the "
                "directions are those the moves' logits change along (eigenvectors of E[J^T J]), as few as hold 95% "
                "of it; the control swaps a random subspace of the same size. The worst cell: the treasure cell "
                "with the lowest seed-averaged return (an adversary who cannot see the seed); per seed its worst "
                "cell, averaged, is what an adversary who sees the seed gets.</p>")
        with replace_files(out, FILES) as stage:
            write_text(stage / "route.json", json_text(self.to_dict(), indent=1))
            write_page(stage / "route.html", f"route: {self.main.label}",
                       [f"<pre>{html.escape(self.text())}</pre>", self.figure(), self.curve_figure(),
                        first_visit_figure(self.first_visit, self.episode_steps), note],
                       headline=self.page_headline())
        return out


def _range(choice: Any) -> str:
    """The least and most visited cells' shares (the start cell left out)."""
    rates = [v for y, row in enumerate(choice.visit_rate) for x, v in enumerate(row) if (x, y) != (0, 0)]
    return f"{min(rates):.2f}-{max(rates):.2f}"


def route_report(run: str | Path, *, compare: str | Path | None = None, n_seeds: int = 1000, eval_seeds: int = 100,
                 seed: int = 0, eval_seed: int | None = None, evaluation: Any = None) -> RouteReport:
    """What the seed chooses in agent ``run`` (a run folder, checkpoint or ``zoo:NAME``) and,
    beside it, in ``compare``: ``n_seeds`` exploration routes each (drawn from ``seed``), the
    adversaries over every treasure cell x ``eval_seeds`` seeds drawn from ``eval_seed`` (default
    the grid world's evaluation seed, so that the worst cell is ``gridworld eval``'s);
    ``evaluation``: ``run``'s own, when already made (``gridworld eval`` has it)."""
    from interp_rand.gridworld.checkpoint import load_agent
    from interp_rand.gridworld.evaluation import evaluate_agent
    from interp_rand.gridworld.experiment import EVAL_SEED
    from probes.route_choice import route_choice

    given = {} if evaluation is None else {str(run): evaluation}
    agents, maps, steps = {}, {}, 0
    for path in [run] + ([compare] if compare is not None else []):
        ckpt = load_agent(path)
        model, grid = ckpt.model(), ckpt.scale.grid
        label = str(path)
        found = given.get(label) or evaluate_agent(model, grid, eval_seeds,
                                                   seed=EVAL_SEED if eval_seed is None else eval_seed)
        agents[label] = route_choice(model, grid, found, label, n_seeds=n_seeds, seed=seed)
        maps[label] = found.first_visit_map()
        steps = grid.episode_steps
    return RouteReport(agents, maps, steps)


__all__ = ["RouteReport", "route_report"]
