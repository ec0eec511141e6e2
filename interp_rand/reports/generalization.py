"""The length-generalisation report: :func:`circuits.analyses.length_generalization.generalization`
on a run, a zoo model or a model of your own, written as ``generalization.json`` and a
``generalization.html`` that opens with the extrapolation factor and where the model breaks.

A run's trained range is read from its training config (``min_length`` to the task's length);
the default lengths go from the shortest trained to 3x the longest.

    >>> report = generalization_report("out/sort-alibi", lengths=range(2, 25))
    >>> print(report.text()); report.write("out/generalization-sort-alibi")
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from circuits.analyses.length_generalization import Generalization, generalization
from interp_rand.display import Displayed

FILES = ("generalization.json", "generalization.html")


@dataclass(repr=False)
class GeneralizationReport(Displayed):
    """``found`` (what :func:`generalization` measured) on ``run`` (a label)."""

    found: Generalization
    run: str

    FILES = FILES

    def headline(self) -> str:
        return self.found.headline()

    def lines(self) -> list[str]:
        return [f"generalization {self.run}"] + self.found.lines()

    def text(self) -> str:
        return "\n".join(self.lines())

    def small_figure(self) -> str | None:
        return self.found.small_figure()

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, **self.found.to_dict()}

    def figure(self) -> Any:
        """The plotly figure (:func:`circuits.draw.length_figure.generalization_figure`): exact
        match by length, accuracy per output position, each head's attention drift."""
        from circuits.draw.length_figure import generalization_figure

        return generalization_figure(self.found)

    def page_headline(self) -> Any:
        from interp_rand.figures.headline import Headline

        f = self.found
        solved = f.longest_solved()
        number = (f"extrapolation factor {f.extrapolation_factor():.2f} (exact match >= {f.threshold:g} up to length "
                  f"{solved}; trained {f.trained[0]}-{f.trained[1]})" if solved is not None else
                  f"below {f.threshold:g} at its own trained maximum {f.trained[1]}")
        return Headline(f"lengths {self.run} never saw ({f.task}, positions {f.scheme})", number, None,
                        failing=f.breaking_step())

    def write(self, out: str | Path) -> Path:
        """generalization.json and generalization.html in ``out``, replaced together."""
        from interp_rand.figures.html_page import write_page
        from interp_rand.output import replace_files, write_text
        from interp_rand.output.files import json_text

        out = Path(out)
        table = "\n".join(self.found.lines()[1:])
        with replace_files(out, FILES) as stage:
            write_text(stage / "generalization.json", json_text(self.to_dict(), indent=1))
            write_page(stage / "generalization.html", f"generalization: {self.run}",
                       [self.figure(), f"<h2>Accuracy by length</h2><pre>{html.escape(table)}</pre>",
                        "<p class='note'>Drift: the total-variation distance between a head's attention mass per "
                        "role (position names without their index) at the answers and the same at the trained "
                        "maximum; entropy: normalised over the keys each query may read. A head 'moves' at drift "
                        ">= 0.25 or an entropy rise >= 0.2.</p>"],
                       headline=self.page_headline())
        return out


def trained_lengths(run: str | Path) -> tuple[int, int]:
    """The (shortest, longest) lengths run ``run`` was trained on, from its training config."""
    from interp_rand.tasks.lengths import length_of
    from interp_rand.training.checkpoint import load_checkpoint

    spec = load_checkpoint(run).spec
    top = length_of(spec.make_task())
    low = spec.train_config.min_length
    return (top if low is None else int(low), top)


#: the most lengths past the trained maximum the mechanism is checked at (each costs a card)
MECHANISM_LENGTHS = 6


def mechanism_lengths(found: Generalization) -> list[int]:
    """The lengths past the trained maximum to check the mechanism at: those run up to two past
    the breaking length (all run when it does not break), at most :data:`MECHANISM_LENGTHS`,
    evenly spread, the last always kept."""
    past = sorted(s.length for s in found.scores if s.exact_match is not None and s.length > found.trained[1])
    at = found.breaks_at()
    if at is not None:
        past = [L for L in past if L <= at + 2]
    if len(past) > MECHANISM_LENGTHS:
        step = (len(past) - 1) / (MECHANISM_LENGTHS - 1)
        past = sorted({past[round(i * step)] for i in range(MECHANISM_LENGTHS)})
    return past


def generalization_report(run: str | Path | None = None, *, model: Any = None, task: Any = None,
                          lengths: range | list[int] | None = None, trained: tuple[int, int] | None = None,
                          n: int = 512, seed: int = 0, mechanism: bool = True,
                          progress: bool = False) -> GeneralizationReport:
    """:func:`generalization` on ``run`` (a run folder or ``zoo:NAME``; its trained range from
    its config) or on a given ``model`` and ``task`` (``trained``: default the task's length).
    ``mechanism``: also the mechanism :func:`circuits.explain.explain` finds at the trained
    maximum, checked at the lengths of :func:`mechanism_lengths`
    (:func:`circuits.explain.by_length.mechanism_by_length`): which variable falls first."""
    from interp_rand import progress as bars
    from interp_rand.reports.inputs import model_and_task
    from interp_rand.tasks.lengths import at_length

    model, task, label = model_and_task(run, model, task, "generalization")
    if trained is None and run is not None:
        trained = trained_lengths(run)
    found = generalization(model, task, lengths, trained=trained, n=n, seed=seed, progress=progress)
    top = found.score_at(found.trained[1])
    if mechanism and top is not None and top.exact_match is not None:
        from circuits.explain.by_length import mechanism_by_length

        try:
            found.mechanism = mechanism_by_length(model, at_length(task, found.trained[1]), mechanism_lengths(found),
                                                  seed=seed, progress=bars.note if progress else None)
        except ValueError as err:  # explain finds no candidate for this task (bit answers: recall)
            found.mechanism_skipped = str(err)
    return GeneralizationReport(found, label)


__all__ = ["MECHANISM_LENGTHS", "GeneralizationReport", "generalization_report", "mechanism_lengths", "trained_lengths"]
