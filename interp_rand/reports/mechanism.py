"""A mechanism checked on a trained run in one call (what ``interp-rand mechanism`` and the
case studies print and write): the algorithm, its card (a verdict per check) and the drawing.

    >>> report = mechanism_report("carry")                  # the flagship on its zoo run
    >>> print(report.text()); report.write("out/carry")     # mechanism.json, mechanism.html
    >>> mechanism_report(my_mechanism, model=model, task=task)   # a user's own hypothesis
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from circuits.mechanisms import Mechanism, MechanismCard, check_mechanism
from interp_rand.display import Displayed


def claims_html(claims: list[Any]) -> str:
    """Claims as a list, each led by its coloured verdict word."""
    from interp_rand.figures.style import VERDICT_COLOURS

    return "<ul>" + "".join(
        f"<li><b style='color:{VERDICT_COLOURS[c.verdict.outcome]}'>{c.verdict.outcome.upper()}</b> "
        f"{html.escape(c.line().removeprefix('claim: '))}</li>" for c in claims) + "</ul>"


@dataclass(repr=False)
class MechanismReport(Displayed):
    """Attributes: ``mechanism`` (the hypothesis), ``card`` (its checks), ``run`` (what was
    read, or ``"(model given)"``), ``title``."""

    mechanism: Mechanism
    card: MechanismCard
    run: str
    title: str
    comparison: Any = None  # circuits.mechanisms.Comparison against the flagship's rivals, or None
    rivals: list[Any] = field(default_factory=list)  # the rival Mechanisms compared
    origin: str = ""  # where the mechanism came from, when not a flagship's hand-written one
    explanation: Any = None  # the circuits.explain.Explanation that found it, if any
    shortfall: str | None = None  # where a flagship that does not hold falls short, measured (one line)

    @property
    def lines(self) -> list[str]:
        lines = self.card.lines()
        short = [f"where it falls short: {self.shortfall}"] if self.shortfall else []
        return lines[:1] + short + ([self.origin] if self.origin else []) + self.rival_lines() + lines[1:]

    def placement_lines(self, components: Any, label: str) -> list[str]:
        """Where ``components`` (an edge-level study's heads or components, at any position)
        sit in the mechanism and in each rival: the variables naming them, ``readout``, or
        irrelevant; the winner of the decisive experiments is marked, so an edge-level
        reading ("these heads find the next element") is checked against the algorithm that won."""
        if not self.rivals:
            return []
        names = list(dict.fromkeys(n.name.split("@")[0] for n in components))
        unique = list({(n.kind, n.layer, n.head): n for n in components}.values())
        winner = None if self.comparison is None else self.comparison.winner
        out = [f"{label} ({', '.join(names)}) in each mechanism:"]
        for mech in [self.mechanism, *self.rivals]:
            tag = "wins" if mech.name == winner else ("loses" if winner else "no winner")
            roles = "; ".join(f"{n.name.split('@')[0]} -> {', '.join(mech.roles(n)) or 'irrelevant'}" for n in unique)
            out.append(f"  {mech.name} ({tag}): {roles}")
        return out

    def rival_lines(self) -> list[str]:
        """Which mechanism wins against the rivals, and by which experiment (one line a pair)."""
        if self.comparison is None:
            return []
        out = [f"rivals: {self.comparison.headline()}"]
        for pair in self.comparison.pairs:
            deciding = sorted(pair.deciding(), key=lambda e: -e.n_disagree)
            out.append("    " + pair.line() + (f"; e.g. {deciding[0].line()}" if deciding else ""))
        for prediction, discriminates in self.comparison.discriminating.get(self.mechanism.name, {}).items():
            if discriminates is False:
                out.append(f"    prediction {prediction!r} does not discriminate: a rival predicts the same")
        return out

    def text(self) -> str:
        return "\n".join(self.lines)

    def to_dict(self) -> dict[str, Any]:
        out = {"run": self.run, **self.card.to_dict()}
        if self.comparison is not None:
            out["rivals"] = self.comparison.to_dict()
        if self.origin:
            out["origin"] = self.origin
        if self.shortfall:
            out["shortfall"] = self.shortfall
        if self.explanation is not None:
            out["explain"] = self.explanation.to_dict()
        return out

    def to_json(self) -> str:
        from interp_rand.output.files import json_text

        return json_text(self.to_dict(), indent=1)

    def page_headline(self) -> Any:
        """The page's :class:`~interp_rand.figures.headline.Headline`: the checks that hold, the
        verdict, and the first check that does not hold with its reason."""
        from interp_rand.figures.headline import Headline

        bad = self.card.failing()
        held = sum(c.verdict.holds for c in self.card.claims)
        return Headline(f"the {self.card.mechanism} mechanism on {self.run}",
                        f"{held} of {len(self.card.claims)} checks hold", self.card.verdict,
                        failing=f"{bad[0].text}: {bad[0].verdict.reason}" if bad else None)

    def sections(self) -> list[Any]:
        """The page's sections after its headline: the drawing, the algorithm, the claims."""
        from circuits.draw.mechanism_figure import mechanism_figure

        claims = claims_html(self.card.claims)
        pseudo = f"<h2>The algorithm</h2><pre>{html.escape(self.card.pseudocode.strip())}</pre>"
        rivals = ([f"<h2>Against its rivals</h2><pre>{html.escape(chr(10).join(self.rival_lines()))}</pre>"]
                  if self.comparison is not None else [])
        return [mechanism_figure(self.mechanism, self.card, title=self.title), pseudo] + rivals + [
            "<h2>Checks</h2>", claims, "<pre>" + html.escape("\n".join(self.lines[-3:])) + "</pre>"]

    def figure(self) -> Any:
        """The mechanism's graph as a plotly figure (what mechanism.html shows first), for a notebook."""
        from circuits.draw.mechanism_figure import mechanism_figure

        return mechanism_figure(self.mechanism, self.card, title=self.title)

    def write(self, out: str | Path) -> Path:
        """mechanism.json and mechanism.html in ``out``, replaced together."""
        from interp_rand.figures.html_page import write_page
        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, ("mechanism.json", "mechanism.html")) as stage:
            write_text(stage / "mechanism.json", self.to_json())
            write_page(stage / "mechanism.html", self.title, self.sections(), headline=self.page_headline())
        return out


def mechanism_report(mechanism: str | Mechanism, run: str | Path | None = None, *, model: Any = None,
                     task: Any = None, n: int = 2000, seed: int = 0, n_pairs: int = 500,
                     n_random: int = 10, das: Any = None, rivals: bool = True,
                     n_rivals: int = 1000) -> MechanismReport:
    """Check ``mechanism`` (a flagship's name, or a :class:`Mechanism`) on ``run`` (default: the
    flagship's zoo run) or on a given ``model`` and ``task``; a flagship is also put to the
    decisive experiments against its registered rivals (``rivals``; the module's
    ``rivals(task)``, on ``n_rivals`` inputs), and the report says which mechanism wins and by
    which experiment. A flagship that does not hold and has a ``shortfall(model, task)`` says
    in one measured line where it falls short (``MechanismReport.shortfall``)."""
    from interp_rand.reports.inputs import model_and_task

    module = None
    if isinstance(mechanism, str):
        from interp_rand.reports.mechanisms import FLAGSHIPS, flagship

        module = flagship(mechanism)
        run = run if run is not None or model is not None else module.RUN
        wanted_task = FLAGSHIPS.get(mechanism).task
    else:
        wanted_task = mechanism.task
    model, task, label = model_and_task(run, model, task, "mechanism_report", wanted_task)
    mech = module.mechanism(task) if module is not None else mechanism
    sizes = {} if das is None else {"das": das}  # das: the DAS training of subspace sites (DASConfig)
    card = check_mechanism(model, task, mech, n=n, seed=seed, n_pairs=n_pairs, n_random=n_random, **sizes)
    comparison, others = None, []
    if rivals and module is not None and hasattr(module, "rivals"):
        from circuits.mechanisms import compare_mechanisms

        others = list(module.rivals(task).values())
        comparison = compare_mechanisms(model, task, [mech, *others], n=n_rivals, seed=seed, cards=False)
    # a flagship that does not hold says where it falls short, measured on the model (its ``shortfall``)
    shortfall = (module.shortfall(model, task) if module is not None and hasattr(module, "shortfall")
                 and card.verdict != "holds" else None)
    return MechanismReport(mech, card, label, f"mechanism {mech.name}: {label}", comparison, others,
                           shortfall=shortfall)


__all__ = ["MechanismReport", "claims_html", "mechanism_report"]
