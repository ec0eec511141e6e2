"""A claim card as HTML: the verdict, how the circuit was found, its numbers against their
controls, each claim's verdict line, and the sufficiency / necessity curves over circuit sizes
with the random circuits' 95th percentile marked (drawing only; the card comes from
:mod:`circuits.analyses.claim_card`)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from circuits.analyses.claim_card import ClaimCard
from interp_rand.figures.style import VERDICT_COLOURS

_COLOUR = VERDICT_COLOURS


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))


def curves_figure(card: ClaimCard) -> go.Figure:
    """Sufficiency and necessity against the share of edges kept (log axis), as MIB plots them."""
    ig = card.integrals
    xs = [100 * f for f in ig.fractions]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=list(ig.sufficiency), mode="lines+markers", name=f"sufficiency (CPR {ig.cpr:.3f}, "
                    f"CMD {ig.cmd:.3f})", line={"color": "#1f77b4"})
    fig.add_scatter(x=xs, y=list(ig.necessity), mode="lines+markers", name=f"necessity (area {ig.necessity_cpr:.3f})",
                    line={"color": "#d62728", "dash": "dot"})
    share = 100 * len(card.circuit) / max(1, card.circuit.total_edges)
    fig.add_vline(x=max(share, xs[0]), line={"color": "#888", "dash": "dash"},
                  annotation_text=f"this card: {len(card.circuit)} edges", annotation_position="top left")
    fig.update_layout(title="faithfulness over circuit sizes (1 = the full model, 0 = every edge ablated)",
                      xaxis={"title": "edges kept (% of the graph, log scale)", "type": "log"},
                      yaxis={"title": "share of the full − empty gap"}, height=380, margin={"t": 60, "b": 50},
                      legend={"orientation": "h", "y": -0.25})
    return fig


def claim_card_section(card: ClaimCard, include_plotlyjs: bool | str = False) -> str:
    """The card as an HTML fragment (for a page holding several cards)."""
    data = card.to_dict()
    colour = _COLOUR[card.verdict]
    found = "".join(f"<tr><th>{html.escape(k)}</th><td>{_fmt(v if not isinstance(v, dict) else v)}</td></tr>"
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
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in numbers)
    claims = "".join(f'<li style="color:{_COLOUR[c.verdict.outcome]}">{html.escape(c.line())}'
                     f'<br><small>rule: {html.escape(c.verdict.rule)}</small></li>' for c in card.claims)
    figure = curves_figure(card).to_html(full_html=False, include_plotlyjs=include_plotlyjs)
    scale = ("<p><small>Every share divides by the trained model's gap (in brackets: the same number in the "
             "metric's units); a gap below its floor, or a control whose interval covers both outcomes, makes a "
             "claim INCONCLUSIVE, not failed.</small></p>")
    return (f'<section class="claim-card"><h2>{html.escape(card.subject)} — '
            f'<span style="color:{colour}">{card.verdict.upper()}</span></h2>'
            f"<h3>found with</h3><table>{found}</table><h3>numbers and controls</h3>{scale}<table>{rows}</table>"
            f"<h3>claims</h3><ul>{claims}</ul>{figure}</section>")


def claim_card_html(card: ClaimCard) -> str:
    """A self-contained HTML page of one card."""
    style = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}"
             "th{background:#f6f6f6;font-weight:normal}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>claim card: {html.escape(card.subject)}"
            f"</title><style>{style}</style></head><body>{claim_card_section(card, include_plotlyjs=True)}"
            "</body></html>")


__all__ = ["claim_card_html", "claim_card_section", "curves_figure"]
