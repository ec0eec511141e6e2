"""Verdicts: whether a claim holds against its control, by a rule stated before the numbers.

The one owner of the toolkit's verdict rules: the case studies, comparisons and claim cards of
:mod:`circuits`, the mechanism cards (:mod:`circuits.mechanisms.card`), the query/key patching
check (:mod:`probes.qk_attribution`) and the interchange test (:mod:`probes.interchange`) all
decide by these functions (a core module, so :mod:`probes` may import it). Every claim is a
:class:`Claim`: a sentence, the measured value, the control it is held against and a
:class:`Verdict` (``holds``, ``fails`` or ``inconclusive``) with the rule that decided it. Five
rules cover them:

- :func:`exceeds`: the value must beat the control by ``margin`` *and* be ``ratio`` times it
  (e.g. the accuracy drop when the named heads are ablated against the drop for random heads;
  the pattern change when a head's top query/key contributors are removed against random
  ones). Below ``control + margin`` the claim fails (the margin is the smallest effect the rule
  counts, so a smaller one is evidence against the claim, not for it); above it but short of
  ``ratio`` it is inconclusive.
- :func:`reaches`: the value must reach an absolute ``target`` and its controls must show the
  test can tell (each at most ``control_max``, or ``margin`` below the value): e.g. an
  interchange intervention's IIA against its random-direction, random-init and control-variable
  runs, or causal scrubbing's recovered share against random location sets. Below the target
  the claim fails, whatever the controls (a permissive control can only empty a pass of
  meaning); a control that does not pass makes a pass inconclusive, and a test that does not
  apply (a model that does not solve the task) is inconclusive either way.
- :func:`meets`: the value must lie on one side of a bound stated with the claim (at least, or
  at most, it: e.g. a mechanism's prediction that the model succeeds, or fails, on the inputs
  it names, a bound on its accuracy there); on the other side the claim fails; too small a
  measurement is inconclusive. A control is shown beside it, never deciding.
- :func:`keeps`: the value must stay within ``tolerance`` below a reference (e.g. no-carry
  digits keep their accuracy when the carry is removed); else the claim fails.
- :func:`exceeds_on_scale`: two effects in the metric's units, shared out of one denominator
  (the trained model's behaviour gap) that must clear a floor (:func:`gap_floor_reason`); the
  bootstrap interval of the difference of the shares decides, and an interval that covers both
  outcomes makes the claim inconclusive, not failed (a control drawn once cannot fail a claim).

A missing control or value (``None`` / NaN) makes a claim inconclusive. Compute only.

    >>> exceeds("ablating the heads hurts", 0.385, 0.105, control_label="random heads").line()
    'claim: ablating the heads hurts — HOLDS (0.385 vs 0.105 for random heads)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

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
    note: more numbers for the line (e.g. the effects in the metric's units); may be empty.
    """

    text: str
    value: float | None
    control: float | None
    control_label: str
    verdict: Verdict
    note: str = ""

    def line(self) -> str:
        """``claim: TEXT — HOLDS (0.385 vs 0.105 for random heads)`` / ``— FAILS: reason (...)``
        (the note, when there is one, after the numbers: ``(0.9 vs 0.1 for c; note)``)."""
        numbers = f"{_fmt(self.value)} vs {_fmt(self.control)} for {self.control_label}"
        numbers += f"; {self.note}" if self.note else ""
        if self.verdict.holds:
            return f"claim: {self.text} — HOLDS ({numbers})"
        return f"claim: {self.text} — {self.verdict.outcome.upper()}: {self.verdict.reason} ({numbers})"

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.text, "verdict": self.verdict.outcome, "rule": self.verdict.rule,
                "reason": self.verdict.reason, "value": _round(self.value), "control": _round(self.control),
                "control_label": self.control_label, "note": self.note, "line": self.line()}


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


def reaches(text: str, value: float | None, *, target: float, controls: Mapping[str, float | None],
            control_max: float | None = None, margin: float | None = None, inapplicable: str = "",
            too_few: str = "", value_name: str = "value", unavailable: str = "") -> Claim:
    """``value`` against an absolute ``target``, its ``controls`` (``{name: value}``) showing that
    the test can tell: each control at most ``control_max`` and, with ``margin``, at least
    ``margin`` below the value.

    Inconclusive when ``inapplicable`` says why the test means nothing here (e.g. the model does
    not solve the task, so no alignment with the task's causal model is defined: neither a pass
    nor a fail), ``too_few`` why the measurement is too small, or a number is missing; fails
    when ``value < target``, whatever the controls (a control that passes too only shows the
    test is permissive, which cannot rescue a miss); holds when ``value >= target`` and every
    control passes; else inconclusive (the test cannot tell the claim from its control). The
    claim's control is the worst control (the largest), named in its label."""
    bounds = ([f"<= {control_max:g}"] if control_max is not None else []) + (
        [f"<= {value_name} - {margin:g}"] if margin is not None else [])
    rule = (f"{value_name} >= {target:g} with every control {' and '.join(bounds) or 'measured'}; "
            f"below {target:g} fails; inconclusive when a control does not pass or the test does not apply")
    worst_name = max(controls, key=lambda k: -math.inf if _missing(controls[k]) else controls[k], default="")
    worst = None if not worst_name or _missing(controls[worst_name]) else float(controls[worst_name])
    label = "the worst control" + (f" ({worst_name})" if worst_name else "")
    claim = lambda outcome, reason="": Claim(text, value, worst, label, Verdict(outcome, rule, reason))
    for why in (inapplicable, too_few):
        if why:
            return claim("inconclusive", why)
    if _missing(value):
        return claim("inconclusive", unavailable or "no measurement")
    if value < target:
        return claim("fails", f"{value_name} {value:.3f} < {target:g}")
    missing = [k for k, v in controls.items() if _missing(v)]
    if missing:
        return claim("inconclusive", f"the {', '.join(missing)} control was not measured")
    for name, c in controls.items():
        if control_max is not None and c > control_max:
            return claim("inconclusive", f"the {name} control reaches {c:.3f} > {control_max:g}: the test cannot tell")
        if margin is not None and c > value - margin:
            return claim("inconclusive", f"the {name} control ({c:.3f}) is within {margin:g} of the {value_name}: "
                                         "the test cannot tell")
    return claim("holds")


#: the sides of a one-sided bound (:func:`meets`)
SIDES = ("at least", "at most")


def meets(text: str, value: float | None, bound: float, *, side: str, control: float | None = None,
          control_label: str, value_name: str = "value", condition: str = "", too_few: str = "",
          unavailable: str = "") -> Claim:
    """``value`` held to a one-sided ``bound``: ``side="at least"`` holds when ``value >= bound``,
    ``"at most"`` when ``value <= bound``; fails on the other side. Inconclusive when ``too_few``
    says why the measurement is too small (``condition``: the rule's own words for that, e.g. "at
    least 10 inputs") or the value is missing. ``control`` (e.g. the accuracy elsewhere) is shown
    beside the value and decides nothing."""
    if side not in SIDES:
        raise ValueError(f"meets: side={side!r} is not allowed; choose from {SIDES}")
    op = ">=" if side == "at least" else "<="
    rule = f"{value_name} {op} {bound:g}" + (f" ({condition})" if condition else "")
    claim = lambda outcome, reason="": Claim(text, value, control, control_label, Verdict(outcome, rule, reason))
    if too_few:
        return claim("inconclusive", too_few)
    if _missing(value):
        return claim("inconclusive", unavailable or "no measurement")
    if value >= bound if side == "at least" else value <= bound:
        return claim("holds")
    return claim("fails", f"{value_name} {value:.3f} {'<' if side == 'at least' else '>'} {bound:g}")


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
                 Verdict("inconclusive", claim.verdict.rule, reason), claim.note)


def interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of ``values`` (their quantiles at ``(1 ∓ level) / 2``)."""
    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    lo, hi = torch.quantile(t, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)).tolist()
    return lo, hi


def gap_floor_reason(gap: float | None, resampled: Sequence[float] = (), *, gap_floor: float,
                     level: float = 0.95) -> str:
    """Why a denominator ``gap`` (a behaviour, in the metric's units) cannot share out effects:
    missing, ``|gap| < gap_floor``, or its ``level`` interval over ``resampled`` values contains
    0; ``""`` when it can."""
    if _missing(gap):
        return "no behaviour gap measured"
    if abs(gap) < gap_floor:
        return f"the behaviour gap {gap:.2g} is below the floor {gap_floor:g} (metric units): no share is defined"
    if len(resampled) > 1:
        lo, hi = interval(resampled, level)
        if lo <= 0 <= hi:
            return f"the behaviour gap's {level:.0%} interval [{lo:.2g}, {hi:.2g}] contains 0: no share is defined"
    return ""


def exceeds_on_scale(text: str, effect: float | None, control: float | None, gap: float | None, *,
                     control_label: str, resamples: Sequence[tuple[float, float, float]] = (),
                     margin: float = 0.1, floor: float = 0.5, gap_floor: float = 1e-2, level: float = 0.95,
                     unavailable: str = "") -> Claim:
    """``effect`` against ``control``, both in the metric's units, as shares of the one
    denominator ``gap`` (the behaviour of the model the claim is about, never the control's).

    The claim's value is ``effect / gap``, its control ``control / gap``. ``resamples``:
    ``(effect, control, gap)`` on bootstrap resamples of the data (the same resample for both).
    Inconclusive when a number is missing or the gap fails :func:`gap_floor_reason` (nothing is
    divided then); fails when the value is below ``floor``; with resamples, holds when the
    ``level`` interval of ``value − control`` lies at or above ``margin``, fails when it lies
    below, and is inconclusive when it contains ``margin`` (the control cannot decide); without
    resamples the point difference decides (holds at or above ``margin``, else fails)."""
    rule = (f"shares of one gap, the behaviour of the model the claim is about (|gap| >= {gap_floor:g} metric "
            "units, its interval excluding 0; else inconclusive): "
            f"value >= {floor:g} and value - control >= {margin:g}"
            + (f" over the {level:.0%} bootstrap interval ({len(resamples)} resamples; inconclusive when the "
               f"interval contains {margin:g})" if resamples else ""))
    units = ("" if _missing(effect) or _missing(control) or _missing(gap) else
             f"metric units: {effect:.4g} vs {control:.4g} of a gap of {gap:.4g}")
    if _missing(effect) or _missing(control):
        return Claim(text, None, None, control_label,
                     Verdict("inconclusive", rule, unavailable or "no measurement to compare"), units)
    why = gap_floor_reason(gap, [g for _, _, g in resamples], gap_floor=gap_floor, level=level)
    if why:
        return Claim(text, None, None, control_label, Verdict("inconclusive", rule, why), units)
    value, ctrl = effect / gap, control / gap
    if resamples:
        lo, hi = interval([(e - c) / g for e, c, g in resamples], level)
        units += f"; value - control {level:.0%} interval [{lo:.3f}, {hi:.3f}]"
    if value < floor:
        return Claim(text, value, ctrl, control_label, Verdict("fails", rule, f"below the floor {floor:g}"), units)
    if not resamples:
        if value - ctrl < margin:
            return Claim(text, value, ctrl, control_label,
                         Verdict("fails", rule, f"not above its control by {margin:g}"), units)
        return Claim(text, value, ctrl, control_label, Verdict("holds", rule), units)
    if hi < margin:
        return Claim(text, value, ctrl, control_label,
                     Verdict("fails", rule, f"not above its control by {margin:g} (the whole interval)"), units)
    if lo < margin:
        return Claim(text, value, ctrl, control_label,
                     Verdict("inconclusive", rule, f"the interval of value - control contains {margin:g}: the "
                             "control cannot decide"), units)
    return Claim(text, value, ctrl, control_label, Verdict("holds", rule), units)


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    """``{"holds": n, "fails": n, "inconclusive": n}``."""
    return {v: sum(c.verdict.outcome == v for c in claims) for v in VERDICTS}


def summary_line(claims: list[Claim]) -> str:
    """``verdicts: 3 of 4 claims hold, 1 fails, 0 inconclusive``."""
    n = verdict_counts(claims)
    return (f"verdicts: {n['holds']} of {len(claims)} claims hold, {n['fails']} fail, "
            f"{n['inconclusive']} inconclusive")


__all__ = ["VERDICTS", "Claim", "Verdict", "exceeds", "exceeds_on_scale", "gap_floor_reason", "inconclusive", "interval",
           "keeps", "meets", "reaches", "SIDES", "summary_line", "verdict_counts"]
