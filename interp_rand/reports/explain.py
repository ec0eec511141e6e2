"""The explain report: :func:`circuits.explain.explain` on a run, a zoo model or a model of your
own, written as ``explain.json`` and a verdict-first ``explain.html`` (the headline, the chosen
algorithm's drawing and pseudocode, the candidates with their match, the decisive experiments,
the checks).

    >>> report = explain_report("zoo:sort")
    >>> print(report.text()); report.write("out/explain-sort")
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from circuits.explain import Explanation, SeededExplanation, explain
from interp_rand.reports.mechanism import MechanismReport, claims_html
from interp_rand.display import Displayed

FILES = ("explain.json", "explain.html")


@dataclass(repr=False)
class ExplainReport(Displayed):
    """``explanation`` (what :func:`~circuits.explain.explain` found) on ``run`` (a label)."""

    explanation: Explanation | SeededExplanation
    run: str

    FILES = FILES

    @property
    def title(self) -> str:
        return f"explain: {self.run}"

    def headline(self) -> str:
        return self.explanation.headline()

    def display_verdict(self) -> str | None:
        """The explanation's verdict (the notebook view's colour)."""
        verdict = self.explanation.verdict
        return verdict if verdict in ("holds", "fails", "inconclusive") else None

    def small_figure(self) -> str | None:
        """The stated candidate's claims, each value against its control."""
        from interp_rand.display import claims_svg

        e = self.explanation
        if isinstance(e, SeededExplanation):
            from interp_rand.display import bars_svg

            return bars_svg(e.bars(), lo=0, hi=1, threshold=0.9, caption="share of answer entries", max_rows=16)
        return claims_svg(e.cards[e.stated].claims) if e.stated in e.cards else None

    def text(self) -> str:
        return "\n".join([f"explain {self.run} ({self.explanation.task})"] + self.explanation.lines())

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, **self.explanation.to_dict()}

    def to_json(self) -> str:
        from interp_rand.output.files import json_text

        return json_text(self.to_dict(), indent=1)

    def page_headline(self) -> Any:
        from interp_rand.figures.headline import Headline

        e = self.explanation
        verdict = e.verdict if e.verdict in ("holds", "fails") else "inconclusive"
        short = e.shortfall()
        return Headline(f"the algorithm found in {self.run}", e.stated or "no winner: indistinguishable", verdict,
                        failing=short[0] if short else (None if e.chosen else e.headline()))

    def sections(self) -> list[Any]:
        e = self.explanation
        if isinstance(e, SeededExplanation):
            return self._seeded_sections(e)
        out: list[Any] = [f"<p>{html.escape(e.headline())}</p>"]
        if e.chosen is not None:
            chosen = e.located[e.stated].mechanism
            others = [v.mechanism for name, v in e.located.items() if name != e.stated]
            page = MechanismReport(chosen, e.cards[e.stated], self.run, f"{chosen.name}: {self.run}", e.comparison,
                                   others)
            out += page.sections()
        table = "\n".join(s.line() for s in e.candidates)
        out.append(f"<h2>Candidates from the primitive library</h2><pre>{html.escape(table)}</pre>")
        for name in e.ranked + e.composed:
            if name == e.stated:
                continue
            out += [f"<h2>Candidate {html.escape(name)}: {e.cards[name].verdict.upper()}</h2>",
                    claims_html(e.cards[name].claims)]
        out.append(f"<pre>{html.escape(chr(10).join(e.lines()[-1:]))}</pre>")
        return out

    def _seeded_sections(self, e: SeededExplanation) -> list[Any]:
        """A seeded task's page: the verdict, the program, the seed experiment per program, the
        rivals with what rejected each, the chosen program's card where it has one."""
        out: list[Any] = [f"<p>{html.escape(e.headline())}</p>"]
        if e.chosen in e.cards:  # its mechanism page below states the algorithm with its sites
            out.append(f"<p>{html.escape(e.route_line())}</p>")
        else:
            out.append(f"<h2>The algorithm</h2><pre>{html.escape(e.pseudocode() or '(none)')}</pre>")
        chart = self.small_figure()
        if chart:
            out.append(f"<h2>Programs and the seed experiment</h2>{chart}")
        table = "\n".join(s.line() for s in e.scores)
        out.append(f"<pre>{html.escape(table)}</pre>")
        out.append("<h2>Rivals and the experiments that rejected them</h2><ul>"
                   + "".join(f"<li>{html.escape(line)}</li>" for line in e.rejected()) + "</ul>")
        if e.chosen in e.cards:
            page = MechanismReport(e.mechanisms[e.chosen], e.cards[e.chosen], self.run, f"{e.chosen}: {self.run}")
            out += page.sections()
        out.append(f"<pre>{html.escape(chr(10).join(e.lines()[-1:]))}</pre>")
        return out

    def figure(self) -> Any:
        """The stated mechanism's graph as a plotly figure (``ValueError`` when the experiments
        chose none), for a notebook."""
        from circuits.draw.mechanism_figure import mechanism_figure

        e = self.explanation
        if isinstance(e, SeededExplanation):
            if e.chosen not in e.cards:
                raise ValueError(f"{e.chosen} is a program with no sites (a seeded task's library program): nothing "
                                 "to draw; its seed experiment is small_figure()")
            return mechanism_figure(e.mechanisms[e.chosen], e.cards[e.chosen], title=f"{e.chosen}: {self.run}")
        if e.chosen is None:
            raise ValueError(f"explain chose no mechanism ({e.headline()}): nothing to draw")
        return mechanism_figure(e.located[e.stated].mechanism, e.cards[e.stated], title=f"{e.stated}: {self.run}")

    def write(self, out: str | Path) -> Path:
        """explain.json and explain.html in ``out``, replaced together."""
        from interp_rand.figures.html_page import write_page
        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, FILES) as stage:
            write_text(stage / "explain.json", self.to_json())
            write_page(stage / "explain.html", self.title, self.sections(), headline=self.page_headline())
        return out


def _seed_source(run: str | Path) -> str:
    """The run's training seed source (``fixed``: a deterministic variant trained at r0)."""
    from interp_rand.training.checkpoint import load_checkpoint

    return getattr(load_checkpoint(run).spec.train_config, "seed_source", "fresh")


def explain_report(run: str | Path | None = None, *, model: Any = None, task: Any = None, n: int = 1000,
                   seed: int = 0, families: list[str] | None = None, max_candidates: int = 3, compose: bool = True,
                   seed_source: str | None = None, progress: Any = None) -> ExplainReport:
    """:func:`circuits.explain.explain` on ``run`` (a run folder or ``zoo:NAME``) or on a given
    ``model`` and ``task``; a seeded task's ``seed_source`` (``fixed``: a model trained at the
    task's one seed r0) is the run's own, ``fresh`` for a given model unless said."""
    from interp_rand.reports.inputs import model_and_task
    from interp_rand.reports.mechanisms import declared_programs

    given = model is not None
    model, task, label = model_and_task(run, model, task, "explain")
    if seed_source is None:  # only a seeded task reads it (a token task's run is not loaded twice)
        seeded = getattr(task, "loss_kind", "ce") != "ce"
        seed_source = _seed_source(run) if seeded and not given else "fresh"
    found = explain(model, task, n=n, seed=seed, families=families, max_candidates=max_candidates, compose=compose,
                    declared=declared_programs(task), seed_source=seed_source, progress=progress)
    return ExplainReport(found, label)


__all__ = ["ExplainReport", "explain_report"]
