"""What every page and figure shares (one owner): the verdict colours, the colour scales (a
sequential one for quantities in [0, 1], a diverging one centred on 0 for signed ones) and the
name of a head (``a0.3``: layer 0, head 3), so every page names a head the same way.

Light to import (no plotly): probes, circuits and reports all use it."""

from __future__ import annotations

#: The colour of each verdict word (lower case, as verdicts are stored).
VERDICT_COLOURS = {"holds": "#2ca02c", "fails": "#d62728", "inconclusive": "#ff7f0e"}
#: A component or claim that was not tested.
NOT_TESTED = "#bbbbbb"
#: Quantities in [0, 1] (attention, role scores, shares): light = 0, dark = 1.
SEQUENTIAL = "Blues"
#: Signed quantities (scores, effects): blue < 0 < red, white at 0 (use with ``zmid=0`` / cmid).
DIVERGING = "RdBu_r"


def head_name(layer: int, head: int) -> str:
    """The one spelling of a head on every page: ``a{layer}.{head}``."""
    return f"a{int(layer)}.{int(head)}"


def verdict_colour(verdict: str) -> str:
    """The colour of ``verdict`` (any case); :data:`NOT_TESTED` for anything else."""
    return VERDICT_COLOURS.get(str(verdict).lower(), NOT_TESTED)


__all__ = ["DIVERGING", "NOT_TESTED", "SEQUENTIAL", "VERDICT_COLOURS", "head_name", "verdict_colour"]
