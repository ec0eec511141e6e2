"""The headline every page opens with (issue 23): at most three lines saying what was measured,
the number, and the verdict in its colour, naming the failing claim when it fails.

    >>> Headline("edges recover the model's logit difference", "recovers 0.99 with 78 edges",
    ...          "fails", failing="minimality: 12 edges are not needed", link="card.html").html()

A page without a verdict (a training curve, an attention report) still gets a headline: the
measurement and its number, ``verdict=None``."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from interp_rand.figures.style import verdict_colour

VERDICTS = ("holds", "fails", "inconclusive")
#: The headline's rules (after html_page.STYLE).
HEADLINE_STYLE = """
.headline { border-left: 6px solid #888; padding: 0.4em 0.9em; margin: 0.6em 0 1.2em 0; font-size: 1.05em;
            background: #fafafa; max-width: 70em; }
.headline .verdict { font-weight: bold; letter-spacing: 0.03em; }
.headline .measured { color: #333; } .headline .number { font-variant-numeric: tabular-nums; }
.headline .failing { color: #555; font-size: 0.92em; }
"""


def overall_verdict(claims: Iterable[Any]) -> str | None:
    """One word over ``claims`` (verdict words, or dicts with a ``"verdict"``, as JSON outputs
    store them): ``fails`` when any fails, ``holds`` when all hold, else ``inconclusive``;
    ``None`` when there are none. The one rule every page's headline and the demo index use."""
    outcomes = {str(c["verdict"] if isinstance(c, dict) else c).lower() for c in claims}
    if not outcomes:
        return None
    return "fails" if "fails" in outcomes else "holds" if outcomes == {"holds"} else "inconclusive"


@dataclass(frozen=True)
class Headline:
    """``measured``: what was measured (plain text); ``number``: the headline number(s), e.g.
    ``"recovers 0.99 · 78 edges"``; ``verdict``: ``holds``/``fails``/``inconclusive`` or None;
    ``failing``: the claim that fails (or why it is inconclusive); ``link``: a page to follow
    for the evidence (the card)."""

    measured: str
    number: str
    verdict: str | None = None
    failing: str | None = None
    link: str | None = None

    def __post_init__(self) -> None:
        if self.verdict is not None and self.verdict.lower() not in VERDICTS:
            raise ValueError(f"headline verdict {self.verdict!r}: allowed {', '.join(VERDICTS)} or None")

    def text(self) -> str:
        """The headline as one plain line: ``VERDICT · measured: number (failing)``."""
        first = f"{self.measured}: {self.number}"
        if self.verdict:
            first = f"{self.verdict.upper()} · {first}"
        return first + (f" ({self.failing})" if self.failing else "")

    def __str__(self) -> str:
        return self.text()

    def html(self) -> str:
        """The headline as a ``<div class="headline">`` of at most three lines."""
        e = html.escape
        colour = verdict_colour(self.verdict) if self.verdict else "#888"
        lines = []
        first = f"<span class='measured'>{e(self.measured)}</span>: <span class='number'>{e(self.number)}</span>"
        if self.verdict:
            word = e(self.verdict.upper())
            if self.link:
                word = f"<a href='{e(self.link, quote=True)}' style='color:{colour}'>{word}</a>"
            first = f"<span class='verdict' style='color:{colour}'>{word}</span> · " + first
        lines.append(first)
        if self.failing:
            lines.append(f"<span class='failing'>{e(self.failing)}</span>")
        body = "<br>".join(lines)
        return f"<div class='headline' data-verdict='{e(self.verdict or '')}' style='border-color:{colour}'>{body}</div>"


__all__ = ["HEADLINE_STYLE", "Headline", "VERDICTS", "overall_verdict"]
