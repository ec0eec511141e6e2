"""A claim card as HTML: the headline (the verdict coloured, naming the claim that fails), each
claim's verdict line, the sufficiency / necessity curves over circuit sizes with the card's
size marked, then the numbers against their controls and how the circuit was found (drawing
only; the card comes from :mod:`circuits.analyses.claim_card`)."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from circuits.analyses.claim_card import ClaimCard
from interp_rand.figures.headline import Headline
from interp_rand.figures.html_page import page_html, write_page
from interp_rand.figures.style import VERDICT_COLOURS

_COLOUR = VERDICT_COLOURS


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))


def curves_figure(card: ClaimCard) -> go.Figure:
    """Sufficiency and necessity against the share of edges kept (log axis), as MIB plots them,
    the card's own size marked. On a log axis plotly places annotations in log10 coordinates
    (shapes in data ones): the mark's label is put at ``log10(share)`` and the axis spans the
    measured sizes only."""
    ig = card.integrals
    xs = [100 * f for f in ig.fractions]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=list(ig.sufficiency), mode="lines+markers", name=f"sufficiency (CPR {ig.cpr:.3f}, "
                    f"CMD {ig.cmd:.3f})", line={"color": "#1f77b4"})
    fig.add_scatter(x=xs, y=list(ig.necessity), mode="lines+markers", name=f"necessity (area {ig.necessity_cpr:.3f})",
                    line={"color": "#d62728", "dash": "dot"})
    share = max(100 * len(card.circuit) / max(1, card.circuit.total_edges), min(xs))
    fig.add_shape(type="line", x0=share, x1=share, y0=0, y1=1, xref="x", yref="paper",
                  line={"color": "#888", "dash": "dash"})
    fig.add_annotation(x=math.log10(share), y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                       text=f"this card: {len(card.circuit)} edges ({share:.2g} %)", font={"size": 12})
    low, high = math.log10(min(xs)), math.log10(max(max(xs), share))
    pad = 0.05 * max(high - low, 0.5)
    fig.update_layout(title="faithfulness over circuit sizes (1 = the full model, 0 = every edge ablated)",
                      xaxis={"title": "edges kept (% of the graph, log scale)", "type": "log",
                             "range": [low - pad, high + pad], "dtick": 1, "tickfont": {"size": 12}},
                      yaxis={"title": "share of the full − empty gap"}, height=400, margin={"t": 70, "b": 50},
                      legend={"orientation": "h", "y": -0.25}, font={"size": 12})
    return fig


def card_headline(card: ClaimCard, link: str | None = None) -> Headline:
    """The card's headline: what was measured, its sufficiency and size, the verdict coloured,
    naming the first claim that fails (or is inconclusive)."""
    failing = next((c for c in card.claims if c.verdict.outcome == card.verdict), None) \
        if card.verdict != "holds" else None
    why = None
    if failing is not None:
        why = f"{card.verdict}: {failing.text}"
        why = why if len(why) <= 140 else why[:139] + "…"
    return Headline(f"claim card of {card.subject}", f"sufficiency {card.sufficiency:.2f} with "
                    f"{len(card.circuit)} of {card.circuit.total_edges} edges", card.verdict, why, link)


def _scroll(table: str) -> str:
    return f"<div class='scroll'>{table}</div>"


def claim_card_sections(card: ClaimCard) -> list:
    """The card as page sections (HTML strings and its figure): the verdict and the claims, the
    curves, then the tables (how it was found, the numbers against their controls)."""
    data = card.to_dict()
    colour = _COLOUR[card.verdict]
    found = "".join(f"<tr><th>{html.escape(k)}</th><td class='l'>{_fmt(v)}</td></tr>"
                    for k, v in card.found_with.items())
    rc, ri, fx = data["random_circuits"], data["random_init"], data["effects"]
    unit = html.escape(str(card.found_with.get("metric", "metric")))

    def both(share: Any, effect: Any) -> str:
        """A share of the trained gap beside its effect in the metric's units."""
        return f"{_fmt(share)} <small>({_fmt(effect)} {unit})</small>"

    numbers = [
        ("edges", f"{len(card.circuit)} of {card.circuit.total_edges}"),
        ("the trained model's gap, full − empty (the denominator of every share)",
         f"{_fmt(card.gap)} {unit} <small>(floor {_fmt(data['gap_floor'])})</small>"),
        ("sufficiency (circuit alone)", both(card.sufficiency, fx["circuit"])),
        ("random circuits of its size: sufficiency, 95th pct", both(rc["sufficiency_p95"], fx["random_circuits_p95"])),
        ("necessity (model without the circuit)", _fmt(card.necessity)),
        ("share removed by ablating the circuit (1 − necessity)", both(1 - card.necessity, fx["removed"])),
        ("random circuits: share removed, 95th pct", both(rc["removed_p95"], fx["random_circuits_removed_p95"])),
        ("random-initialised model: its own gap (never a denominator)", both(ri["gap_share_of_trained_gap"], ri["gap"])),
        ("random-initialised model: the method's circuit on it, effect on the trained scale",
         both(ri["circuit_share_of_trained_gap"], ri["circuit_effect"])),
        ("random-initialised model: the card's edges on it, effect on the trained scale",
         both(ri["same_edges_share_of_trained_gap"], ri["same_edges_effect"])),
        ("CPR / CMD (MIB, sufficiency)", f"{card.integrals.cpr:.3f} / {card.integrals.cmd:.3f}"),
        ("stability: mean Jaccard with resampled-data circuits",
         f"{card.stability.mean_jaccard:.3f} (chance {card.stability.chance_jaccard:.3f})"),
    ]
    if card.methods is not None:
        numbers.append(("agreement with other methods: mean Jaccard", _fmt(card.methods.mean_jaccard)))
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td class='l'>{v}</td></tr>" for k, v in numbers)
    def line(c) -> str:  # the claim's line, its verdict word coloured
        text, word = html.escape(c.line().removeprefix("claim: ")), c.verdict.outcome.upper()
        return text.replace(f"— {word}", f"— <b style='color:{_COLOUR[c.verdict.outcome]}'>{word}</b>", 1)

    claims = "".join(f"<li>{line(c)}<br><small>rule: {html.escape(c.verdict.rule)}</small></li>" for c in card.claims)
    scale = ("<p class='note'>Every share divides by the trained model's gap (in brackets: the same number in the "
             "metric's units); a gap below its floor, or a control whose interval covers both outcomes, makes a "
             "claim INCONCLUSIVE, not failed.</p>")
    return [f"<h3>claims (card <span style='color:{colour}'>{card.verdict.upper()}</span>)</h3><ul>{claims}</ul>",
            curves_figure(card),
            f"<h3>numbers and controls</h3>{scale}{_scroll(f'<table>{rows}</table>')}"
            f"<h3>found with</h3>{_scroll(f'<table>{found}</table>')}"]


def claim_card_section(card: ClaimCard, include_plotlyjs: bool | str = False) -> str:
    """The card as one HTML fragment (for a page holding several cards; the page loads plotly.js
    unless ``include_plotlyjs``)."""
    parts = [s if isinstance(s, str) else s.to_html(full_html=False, include_plotlyjs=include_plotlyjs)
             for s in claim_card_sections(card)]
    return f'<section class="claim-card">{"".join(parts)}</section>'


def claim_card_title(card: ClaimCard) -> str:
    return f"claim card: {card.subject}"


def claim_card_html(card: ClaimCard) -> str:
    """A self-contained HTML page of one card (plotly.js inlined): its headline first."""
    return page_html(claim_card_title(card), claim_card_sections(card), headline=card_headline(card),
                      style=".claim-card th, table th { text-align: left; }")


def write_claim_card(card: ClaimCard, path: str | Path) -> Path:
    """The card's page at ``path``, loading its folder's plotly.min.js."""
    return write_page(path, claim_card_title(card), claim_card_sections(card), headline=card_headline(card),
                      style=".claim-card th, table th { text-align: left; }")


__all__ = ["card_headline", "claim_card_html", "claim_card_section", "claim_card_sections", "claim_card_title",
           "curves_figure", "write_claim_card"]
