"""How a result shows itself in a notebook and at the prompt: a short ``repr`` (its headline,
one line) and ``_repr_html_`` (the verdict word in its colour, the headline, a small figure,
then its lines folded), instead of a dataclass repr of every array and nested result (up to
tens of thousands of characters).

A result class inherits :class:`Displayed` and is declared ``@dataclass(repr=False)``; it
gives ``headline()`` and ``lines()`` (or ``text()``), and may give ``small_figure()`` (an SVG
string, or ``None``).

The small figure is inline SVG drawn here, not plotly: it shows offline in Jupyter, JupyterLab,
VS Code and GitHub's notebook viewer, and in a stored notebook, where an untrusted output's
script would not run and plotly.js (4.7 MB) would be copied into every saved output. The full,
interactive picture is ``.figure()`` (a plotly figure) on the reports that have one. By
default the small figure is the result's claims, one row each: the measured value (a dot in
its verdict's colour) against its control (a grey tick), each row on its own scale.

This module is a foundation of the core (it imports no other unit): the verdict colours are
those of :data:`interp_rand.figures.style.VERDICT_COLOURS` (a test checks they agree).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

REPR_MAX = 200  # characters of the headline a plain repr shows
#: The colour of each verdict word (as :data:`interp_rand.figures.style.VERDICT_COLOURS`).
VERDICT_COLOURS = {"holds": "#2ca02c", "fails": "#d62728", "inconclusive": "#ff7f0e"}
GREY = "#bbbbbb"
MAX_ROWS = 8  # rows a small figure shows (then "+ N more")
_FONT = "font-family='system-ui, sans-serif' font-size='11'"


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) or math.isinf(x) else x


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _svg(width: int, height: int, body: list[str]) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' style='display:block;margin:4px 0'>{''.join(body)}</svg>")


def _more(n_more: int, y: int) -> str:
    return f"<text x='2' y='{y}' {_FONT} fill='#777'>+ {n_more} more (in the lines below)</text>" if n_more else ""


def claims_svg(claims: Iterable[Any], max_rows: int = MAX_ROWS) -> str | None:
    """One row per claim (a :class:`~interp_rand.verdicts.Claim`): its text, a track on the
    row's own scale (from the smaller of 0, value and control to the larger of 1, value and
    control), the control as a grey tick, the value as a dot in the verdict's colour, and the
    numbers. ``None`` when no claim has a number."""
    rows = [c for c in claims if _num(getattr(c, "value", None)) is not None]
    if not rows:
        return None
    shown, n_more = rows[:max_rows], max(0, len(rows) - max_rows)
    row_h, label_w, track_w = 18, 330, 180
    x0, width = label_w + 90, label_w + 90 + track_w + 150
    body = []
    for i, c in enumerate(shown):
        y = 13 + i * row_h
        outcome = str(getattr(getattr(c, "verdict", None), "outcome", "")).lower()
        colour = VERDICT_COLOURS.get(outcome, GREY)
        value, control = _num(c.value), _num(getattr(c, "control", None))
        lo = min(0.0, value, control if control is not None else 0.0)
        hi = max(1.0, value, control if control is not None else 1.0)
        at = (lambda v: x0 + track_w * (v - lo) / (hi - lo))
        label = html.escape(_short(c.text, 58))
        body.append(f"<g><title>{html.escape(c.line() if hasattr(c, 'line') else str(c.text))}</title>"
                    f"<text x='2' y='{y}' {_FONT} fill='{colour}' font-weight='bold'>{html.escape(outcome.upper())}</text>"
                    f"<text x='88' y='{y}' {_FONT} fill='#333'>{label}</text>"
                    f"<line x1='{x0}' y1='{y - 4}' x2='{x0 + track_w}' y2='{y - 4}' stroke='#e3e3e3' stroke-width='5'/>")
        if control is not None:
            body.append(f"<line x1='{at(control):.1f}' y1='{y - 10}' x2='{at(control):.1f}' y2='{y + 2}' "
                        f"stroke='#888' stroke-width='2'/>")
        against = "" if control is None else f" vs {control:.3f}"
        body.append(f"<circle cx='{at(value):.1f}' cy='{y - 4}' r='4.5' fill='{colour}'/>"
                    f"<text x='{x0 + track_w + 8}' y='{y}' {_FONT} fill='#333'>{value:.3f}{against}</text></g>")
    body.append(_more(n_more, 13 + len(shown) * row_h))
    legend_y = 13 + (len(shown) + (1 if n_more else 0)) * row_h
    body.append(f"<text x='{x0}' y='{legend_y}' {_FONT} fill='#777'>dot: value (verdict's colour) · "
                f"tick: its control</text>")
    return _svg(width, legend_y + 5, body)


def bars_svg(rows: Sequence[tuple[str, float | str | None]], *, lo: float | None = None, hi: float | None = None,
             threshold: float | None = None, caption: str = "", max_rows: int = 12) -> str | None:
    """Horizontal bars, one per ``(label, value)`` row (``None``: not measured, drawn empty; a
    string: the label is a heading across the row, no bar),
    from 0 (or ``lo``) to ``hi`` (default: the largest |value|); signed values grow left in red
    and right in blue about 0. ``threshold``: a dashed line (a pass mark). ``None`` without a
    number."""
    headings = [isinstance(v, str) for _, v in rows]
    values = [None if h else _num(v) for h, (_, v) in zip(headings, rows)]
    if not any(v is not None for v in values):
        return None
    shown = list(zip([str(label) for label, _ in rows], values, headings))[:max_rows]
    n_more = max(0, len(rows) - max_rows)
    known = [v for v in values if v is not None]
    lo = min(0.0, *known) if lo is None else lo
    hi = max(max(known), 0.0) if hi is None else hi
    if hi <= lo:
        hi = lo + 1.0
    row_h, label_w, track_w = 16, 200, 220
    x0, width = label_w + 8, label_w + 8 + track_w + 70
    at = (lambda v: x0 + track_w * (min(max(v, lo), hi) - lo) / (hi - lo))
    zero = at(0.0)
    body = []
    for i, (label, v, heading) in enumerate(shown):
        y = 12 + i * row_h
        if heading:
            body.append(f"<text x='2' y='{y}' {_FONT} fill='#333' font-weight='bold'>{html.escape(_short(label, 90))}</text>")
            continue
        body.append(f"<text x='{label_w}' y='{y}' {_FONT} fill='#333' text-anchor='end'>"
                    f"{html.escape(_short(label, 34))}</text>")
        if v is None:
            body.append(f"<text x='{x0}' y='{y}' {_FONT} fill='#999'>not measured</text>")
            continue
        left, right = sorted((zero, at(v)))
        colour = "#4c78a8" if v >= 0 else "#d62728"
        body.append(f"<rect x='{left:.1f}' y='{y - 10}' width='{max(right - left, 1):.1f}' height='11' "
                    f"fill='{colour}'><title>{html.escape(label)}: {v:.4g}</title></rect>"
                    f"<text x='{x0 + track_w + 6}' y='{y}' {_FONT} fill='#333'>{v:.3g}</text>")
    bottom = 12 + len(shown) * row_h
    body.append(f"<line x1='{zero:.1f}' y1='0' x2='{zero:.1f}' y2='{bottom - 10}' stroke='#999'/>")
    if threshold is not None:
        body.append(f"<line x1='{at(threshold):.1f}' y1='0' x2='{at(threshold):.1f}' y2='{bottom - 10}' "
                    f"stroke='#555' stroke-dasharray='3,2'/>")
    body.append(_more(n_more, bottom))
    y = bottom + (row_h if n_more else 0)
    if caption:
        body.append(f"<text x='{x0}' y='{y}' {_FONT} fill='#777'>{html.escape(caption)}</text>")
        y += row_h
    return _svg(width, y - 6, body)


def overall(outcomes: Iterable[str]) -> str | None:
    """One verdict over verdict words: ``fails`` when any fails, ``holds`` when all hold, else
    ``inconclusive``; ``None`` for none (the rule of
    :func:`interp_rand.figures.headline.overall_verdict`)."""
    found = {str(o).lower() for o in outcomes}
    if not found:
        return None
    return "fails" if "fails" in found else "holds" if found == {"holds"} else "inconclusive"


class Displayed:
    """``__repr__`` and ``_repr_html_`` from the object's ``headline()`` and ``lines()``; the
    verdict from its headline (a :class:`~interp_rand.figures.headline.Headline`), its own
    ``verdict`` or its claims; the small figure from ``small_figure()``."""

    def _headline_text(self) -> str:
        if hasattr(self, "headline"):
            return str(self.headline())
        text = self._lines()
        return text[0] if text else ""

    def _lines(self) -> list[str]:
        if hasattr(self, "lines"):
            lines = self.lines() if callable(self.lines) else self.lines
            return list(lines)
        return self.text().splitlines() if hasattr(self, "text") else []

    def _claims(self) -> list[Any]:
        for owner in (self, getattr(self, "card", None)):
            claims = getattr(owner, "claims", None) if owner is not None else None
            if isinstance(claims, (list, tuple)) and all(hasattr(c, "verdict") for c in claims):
                return list(claims)
        return []

    def display_verdict(self) -> str | None:
        """The verdict the HTML view shows in its colour: the headline's, the result's own
        ``verdict``, or one over its claims; ``None`` for a result that states none."""
        head = self.headline() if hasattr(self, "headline") else None
        for verdict in (getattr(head, "verdict", None), getattr(self, "verdict", None)):
            if isinstance(verdict, str) and verdict.lower() in VERDICT_COLOURS:
                return verdict.lower()
        return overall(getattr(c.verdict, "outcome", c.verdict) for c in self._claims())

    def small_figure(self) -> str | None:
        """The HTML view's picture, an inline SVG (module docstring): by default the claims'
        values against their controls; ``None`` for none."""
        return claims_svg(self._claims())

    def __repr__(self) -> str:
        head = self._headline_text()
        head = head if len(head) <= REPR_MAX else head[: REPR_MAX - 3] + "..."
        return f"<{type(self).__name__}: {head}>"

    def _repr_html_(self) -> str:
        head, verdict = self._headline_text(), self.display_verdict()
        word = ""
        if verdict:
            head = head.removeprefix(verdict.upper()).lstrip(" ·:")  # the word is shown once, coloured
            word = (f"<b style='color:{VERDICT_COLOURS[verdict]};letter-spacing:0.03em'>{verdict.upper()}</b> · ")
        lines = self._lines()
        if lines and lines[0].strip() == self._headline_text().strip():
            lines = lines[1:]
        try:
            figure = self.small_figure() or ""
        except Exception as err:  # a picture that cannot be drawn never hides the result
            figure = f"<div style='color:#777'>(no figure: {html.escape(type(err).__name__)})</div>"
        folded = (f"<details><summary style='color:#555'>{len(lines)} line{'' if len(lines) == 1 else 's'}</summary>"
                  f"<pre style='white-space:pre-wrap;font-size:0.85em'>{html.escape(chr(10).join(lines))}</pre>"
                  "</details>") if lines else ""
        return (f"<div class='interp-rand-result' style='border-left:5px solid "
                f"{VERDICT_COLOURS.get(verdict or '', GREY)};padding:2px 10px'>"
                f"<div><span style='color:#777'>{html.escape(type(self).__name__)}</span> {word}"
                f"{html.escape(head)}</div>{figure}{folded}</div>")


__all__ = ["Displayed", "MAX_ROWS", "REPR_MAX", "VERDICT_COLOURS", "bars_svg", "claims_svg", "overall"]
