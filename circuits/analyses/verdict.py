"""Verdicts: whether a claim holds against its control, by a rule stated before the numbers.

Every case-study and comparison claim is a :class:`Claim`: a sentence, the measured value, the
control it is held against and a :class:`Verdict` (``holds``, ``fails`` or ``inconclusive``)
with the rule that decided it. Two rules cover them:

- :func:`exceeds`: the value must beat the control by ``margin`` *and* be ``ratio`` times it
  (e.g. the accuracy drop when the named heads are ablated against the drop for random heads).
  Below ``control + margin`` the claim fails; above it but short of ``ratio`` it is
  inconclusive.
- :func:`keeps`: the value must stay within ``tolerance`` below a reference (e.g. no-carry
  digits keep their accuracy when the carry is removed); else the claim fails.

A missing control or value (``None`` / NaN) makes a claim inconclusive. Compute only.

    >>> exceeds("ablating the heads hurts", 0.385, 0.105, control_label="random heads").line()
    'claim: ablating the heads hurts — HOLDS (0.385 vs 0.105 for random heads)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

VERDICTS = ("holds", "fails", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    """Attributes:
    outcome: one of :data:`VERDICTS`.
    rule: the rule applied, in words (``"value >= control + 0.05 and >= 2x control"``).
    reason: why it did not hold (empty when it holds).
    """

    outcome: str
    rule: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in VERDICTS:
            raise ValueError(f"Verdict.outcome={self.outcome!r} is not allowed; choose from {VERDICTS}")

    @property
    def holds(self) -> bool:
        return self.outcome == "holds"


@dataclass(frozen=True)
class Claim:
    """Attributes:
    text: the claim in words.
    value: the measured quantity; ``control``: what it is held against (``None``: none).
    control_label: what the control is (``"random heads"``), for the printed line.
    verdict: the :class:`Verdict`.
    """

    text: str
    value: float | None
    control: float | None
    control_label: str
    verdict: Verdict

    def line(self) -> str:
        """``claim: TEXT — HOLDS (0.385 vs 0.105 for random heads)`` / ``— FAILS: reason (...)``."""
        numbers = f"{_fmt(self.value)} vs {_fmt(self.control)} for {self.control_label}"
        if self.verdict.holds:
            return f"claim: {self.text} — HOLDS ({numbers})"
        return f"claim: {self.text} — {self.verdict.outcome.upper()}: {self.verdict.reason} ({numbers})"

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.text, "verdict": self.verdict.outcome, "rule": self.verdict.rule,
                "reason": self.verdict.reason, "value": _round(self.value), "control": _round(self.control),
                "control_label": self.control_label, "line": self.line()}


def _missing(x: float | None) -> bool:
    return x is None or math.isnan(x)


def _fmt(x: float | None) -> str:
    return "n/a" if _missing(x) else f"{x:.3f}".replace("-0.000", "0.000")


def _round(x: float | None) -> float | None:
    return None if _missing(x) else round(float(x), 4)


def exceeds(text: str, value: float | None, control: float | None, *, control_label: str,
            margin: float = 0.05, ratio: float = 2.0, floor: float | None = None,
            unavailable: str = "") -> Claim:
    """``value`` against ``control``: holds when ``value >= control + margin`` and
    ``value >= ratio * control`` (and ``value >= floor`` when a floor is given: a control
    near or below 0, e.g. random circuits' recovered share, is beaten by almost anything);
    fails below ``control + margin`` or below the floor; inconclusive in between, or when
    either number is missing (``unavailable`` says why, if known)."""
    rule = f"value >= control + {margin:g} and >= {ratio:g}x control" + (
        f" and >= {floor:g}" if floor is not None else "")
    if _missing(value) or _missing(control):
        return Claim(text, value, control, control_label,
                     Verdict("inconclusive", rule, unavailable or "no measurement to compare"))
    if floor is not None and value < floor:
        return Claim(text, value, control, control_label, Verdict("fails", rule, f"below the floor {floor:g}"))
    if value < control + margin:
        why = ("below its control" if value < control else f"not above its control by {margin:g}")
        return Claim(text, value, control, control_label, Verdict("fails", rule, why))
    if value < ratio * control:
        return Claim(text, value, control, control_label,
                     Verdict("inconclusive", rule, f"above its control but less than {ratio:g}x it"))
    return Claim(text, value, control, control_label, Verdict("holds", rule))


def keeps(text: str, value: float | None, reference: float | None, *, control_label: str,
          tolerance: float = 0.05, unavailable: str = "") -> Claim:
    """``value`` must not fall more than ``tolerance`` below ``reference``: holds or fails;
    inconclusive when either number is missing."""
    rule = f"value >= reference - {tolerance:g}"
    if _missing(value) or _missing(reference):
        return Claim(text, value, reference, control_label,
                     Verdict("inconclusive", rule, unavailable or "no measurement to compare"))
    if value < reference - tolerance:
        return Claim(text, value, reference, control_label,
                     Verdict("fails", rule, f"more than {tolerance:g} below the reference"))
    return Claim(text, value, reference, control_label, Verdict("holds", rule))


def inconclusive(claim: Claim, reason: str) -> Claim:
    """``claim`` marked inconclusive whatever its numbers say (e.g. the behaviour it is about is
    too small to measure)."""
    return Claim(claim.text, claim.value, claim.control, claim.control_label,
                 Verdict("inconclusive", claim.verdict.rule, reason))


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    """``{"holds": n, "fails": n, "inconclusive": n}``."""
    return {v: sum(c.verdict.outcome == v for c in claims) for v in VERDICTS}


def summary_line(claims: list[Claim]) -> str:
    """``verdicts: 3 of 4 claims hold, 1 fails, 0 inconclusive``."""
    n = verdict_counts(claims)
    return (f"verdicts: {n['holds']} of {len(claims)} claims hold, {n['fails']} fail, "
            f"{n['inconclusive']} inconclusive")


__all__ = ["VERDICTS", "Claim", "Verdict", "exceeds", "inconclusive", "keeps", "summary_line", "verdict_counts"]
