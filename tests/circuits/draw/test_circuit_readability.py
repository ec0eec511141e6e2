"""The circuit drawing of ``circuit zoo:sort --method eap-ig`` reads (issue 23): no hairball
inside a position band (crossings counted from the figure's data, today's straight-line
drawing shown failing the same bound), one diverging colour for the signed score, width for
|score| only, hover on every point of an edge, token names on the position axis, empty
positions and columns dropped, the summed view beside, the title and headline saying what the
circuit recovers and its card's verdict; the claim card's size mark in log coordinates; and
both pages at a first look in a 1280 × 800 window.

One small report is computed once (eap-ig, 2 steps, 64 pairs, 78 edges, a card with 4 random
circuits and 1 resample) and shared by every test here."""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go
import pytest

from circuits.analyses.flow import attention_flow
from circuits.draw.circuit_figure import (ATTENTION, MAX_CROSSINGS_PER_BAND, circuit_figure, edge_crossings,
                                          edge_strokes, figure_bands, score_colour, score_width)
from circuits.draw.claim_card import curves_figure
from circuits.draw.layout import Layout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from interp_rand.reports.circuit import circuit_report

    r = circuit_report("zoo:sort", method="eap-ig", n=64, top_k=78, options={"steps": 2}, n_resamples=0,
                       card_random=4, card_resamples=1)
    out = r.write(tmp_path_factory.mktemp("sort-circuit"))
    return r, out


def straight_drawing(r) -> go.Figure:
    """Today's (a75580d) drawing of the same circuit, kept here as the measure's control: one
    straight segment per key → query flow on the full layout (every column and position), the
    segments grouped into one line trace per (sign, reaches, input, width class) as its
    ``add_edges`` did, the y ticks at the circuit's positions."""
    flows = attention_flow(r.circuit, r.attention, 0.1)
    layout = Layout.of(r.circuit.nodes, r.circuit.arch, compact=False)
    groups: dict[tuple, tuple[list, list]] = {}
    for f in flows:
        weight = f.share if f.share is not None else abs(f.score)
        key = (f.score >= 0, f.reaches, f.input, min(5, int(6 * weight)))
        xs, ys = groups.setdefault(key, ([], []))
        (x0, y0), (x1, y1) = layout.xy(f.source), layout.xy(f.dest)
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    fig = go.Figure([go.Scatter(x=xs, y=ys, mode="lines") for xs, ys in groups.values()])
    positions = sorted({n.position for n in r.circuit.nodes if n.position is not None})
    fig.update_layout(yaxis={"tickvals": [layout.centre(p) for p in positions],
                             "ticktext": [r.position_names[p] for p in positions]})
    return fig


def _rgb(colour: str) -> tuple[float, ...]:
    return tuple(float(c) for c in re.findall(r"[\d.]+", colour)[:3])


def test_no_position_band_is_a_hairball(report):
    r, _ = report
    fig = circuit_figure(r.circuit, attention=r.attention, position_names=r.position_names)
    bands = figure_bands(fig)
    assert len(bands) >= 5  # the circuit spans many positions: the check has bands to look at
    now = edge_crossings(fig, bands)
    before = edge_crossings(straight_drawing(r), figure_bands(straight_drawing(r)))
    assert max(now.values()) <= MAX_CROSSINGS_PER_BAND, now
    assert max(before.values()) > MAX_CROSSINGS_PER_BAND, before  # the straight fan fails the same bound
    assert sum(now.values()) < sum(before.values()) / 3


def test_crossings_are_counted_where_they_are():
    """Two strokes crossing in band b count once there; touching at an end, running along
    each other, or a segment drawn twice count nothing."""
    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 2], mode="lines")
    fig.add_scatter(x=[0, 0.5, 1], y=[2, 1.5, 0], mode="lines")    # crosses the first at y = 1.33 (sampled points: one line)
    fig.add_scatter(x=[1, 2], y=[2, 2], mode="lines")              # touches the first at its end
    fig.add_scatter(x=[0, 1], y=[0, 2], mode="lines")              # the first again
    fig.add_scatter(x=[0, 0.5], y=[0, 1], mode="lines")            # along the first
    bands = [("low", -1, 1), ("high", 1, 3)]
    assert edge_crossings(fig, bands) == {"low": 0, "high": 1}


def test_colour_is_the_signed_score_width_is_its_size_and_hover_covers_the_edge(report):
    r, _ = report
    top = max(abs(s) for s in r.circuit.edges.values())
    layout = Layout.of({n for f in attention_flow(r.circuit, r.attention, 0.1) for n in (f.source, f.dest)},
                       r.circuit.arch)
    strokes = edge_strokes(attention_flow(r.circuit, r.attention, 0.1), layout, r.position_names, top)
    scored = [s for s in strokes if s.colour != ATTENTION]
    assert len(scored) >= len(r.circuit)  # every circuit edge drawn in its score's colour
    for s in scored:
        score = float(re.search(r"score ([-+][0-9.e+-]+)", s.hover).group(1))
        # the hover's score has 4 digits: the colour within one step of the scale
        assert _rgb(s.colour) == pytest.approx(_rgb(score_colour(score, top)), abs=2)
        assert s.width == pytest.approx(score_width(score, top), rel=1e-2)
    # attention (the grey lane and branches) never sets a width: its share is the opacity
    grey = [s for s in strokes if s.colour == ATTENTION]
    assert grey and {s.width for s in grey} == {2.0} and len({round(s.opacity, 3) for s in grey}) > 1
    # red helps, blue hurts: the two ends of the scale
    (r_red, _, b_red), (r_blue, _, b_blue) = _rgb(score_colour(top, top)), _rgb(score_colour(-top, top))
    assert r_red > b_red and b_blue > r_blue
    fig = circuit_figure(r.circuit, attention=r.attention, position_names=r.position_names)
    lines = [t for t in fig.data if t.mode == "lines" and t.x and t.x[0] is not None]
    assert lines and all(len(t.hovertext) == len(t.x) and len(set(t.hovertext)) == 1 and t.hovertext[0]
                         for t in lines)  # the same text at every point: hover anywhere on the edge
    main = [t for t in lines if (t.xaxis or "x") == "x"]  # the view by position (the summed one is drawn first)
    negative = [i for i, t in enumerate(main) if "score -" in t.hovertext[0] and t.line.color != ATTENTION]
    positive = [i for i, t in enumerate(main) if "score +" in t.hovertext[0]]
    if negative and positive:
        assert min(negative) > max(positive)  # negative edges drawn last: on top


def test_axes_name_tokens_drop_empty_positions_and_follow_the_window(report):
    r, _ = report
    fig = circuit_figure(r.circuit, attention=r.attention, position_names=r.position_names)
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks and all(t in r.position_names for t in ticks)  # y0, SEP: no bare numbers
    drawn = {f.dest.position for f in attention_flow(r.circuit, r.attention, 0.1)} | \
        {f.source.position for f in attention_flow(r.circuit, r.attention, 0.1)}
    assert len(ticks) == len(drawn)  # one band per position where something is drawn
    assert fig.layout.width is None and fig.layout.autosize  # the width follows the window
    columns = set(fig.layout.xaxis.ticktext)
    assert columns <= {"embed", "attn 0", "mlp 0", "attn 1", "mlp 1", "logits"}
    # the view summed over positions, beside: one node per component
    assert list(fig.layout.xaxis2.ticktext) == list(fig.layout.xaxis.ticktext)
    summed = next(t for t in fig.data if t.name == "nodes (summed)")
    assert len(summed.x) == len({n.at(None) for n in r.circuit.nodes})


def test_key_value_edges_reach_their_query_positions(report):
    """No islands: every stroke of a key/value edge that left its position ends on its head's
    attention lane, and every lane leads into the head at a query position."""
    r, _ = report
    flows = attention_flow(r.circuit, r.attention, 0.1)
    layout = Layout.of({n for f in flows for n in (f.source, f.dest)}, r.circuit.arch)
    strokes = edge_strokes(flows, layout, r.position_names, 1.0)
    lanes = {round(s.xs[0], 6) for s in strokes if s.colour == ATTENTION and len(set(s.xs) - {None}) == 1}
    assert lanes
    nodes = {tuple(round(v, 6) for v in layout.xy(n)) for f in flows for n in (f.source, f.dest)}
    for s in strokes:
        end = (round(s.xs[-1], 6), round(s.ys[-1], 6))
        assert end in nodes or end[0] in lanes, s.hover
    exits = [s for s in strokes if s.colour == ATTENTION and round(s.xs[0], 6) in lanes and len(set(s.xs) - {None}) > 1]
    assert {round(s.xs[0], 6) for s in exits} == lanes  # every lane hands on to a query position
    assert all((round(s.xs[-1], 6), round(s.ys[-1], 6)) in nodes for s in exits)


def test_the_page_names_the_examples_tokens_lists_the_nodes_and_exports_a_tracer_graph(report):
    """The position axis shows what the first clean example holds at each position (``x3: 7``),
    the node table lists every node, and circuit.tracer.json passes its schema on that example."""
    import json

    from circuits.graph.tracer_export import check_circuit_tracer

    r, out = report
    assert len(r.example) == len(r.position_names)
    ticks = list(r.figure().layout.yaxis.ticktext)
    assert ticks and all(t in r.example for t in ticks)
    assert sum(bool(re.fullmatch(r"[xy]\d+: \d+", t)) for t in ticks) >= len(ticks) - 1  # all but SEP hold a token
    page = (out / "circuit.html").read_text()
    assert page.count("<tr data-node=") == len(r.circuit.nodes)
    assert page.index("<div class='figure'>") < page.index("<table id='nodes'>")
    tracer = json.loads((out / "circuit.tracer.json").read_text())
    check_circuit_tracer(tracer)
    assert tracer["metadata"]["prompt_tokens"] == [t.split(": ", 1)[-1] for t in r.example]
    assert len(tracer["nodes"]) == len(r.circuit.nodes)


def test_title_and_headline_say_what_it_recovers_and_the_cards_verdict(report):
    r, out = report
    title = r.figure_title()
    verdict = r.card.verdict.upper()
    assert f"recovers {r.summary['recovered']:.2f}" in title and f"<a href='card.html'>card {verdict}</a>" in title
    page = (out / "circuit.html").read_text()
    assert page.index("class='headline'") < page.index("<div class='figure'>")
    assert f"data-verdict='{r.card.verdict}'" in page and "href='card.html'" in page
    assert "src='plotly.min.js'" in page and (out / "plotly.min.js").is_file()


def test_the_cards_size_mark_is_placed_in_log_coordinates(report):
    r, _ = report
    fig = curves_figure(r.card)
    share = 100 * len(r.card.circuit) / r.card.circuit.total_edges
    (note,) = [a for a in fig.layout.annotations if "this card" in a.text]
    assert note.x == pytest.approx(math.log10(share))  # a log axis takes log10 for annotations
    (mark,) = fig.layout.shapes
    assert mark.x0 == pytest.approx(share)  # and data values for shapes
    low, high = fig.layout.xaxis.range
    fractions = [100 * f for f in r.card.integrals.fractions]
    assert high <= math.log10(max(fractions)) + 0.2 and low >= math.log10(min(fractions)) - 0.2  # not to 10^7 %


def test_circuit_and_card_pages_at_a_first_look(report, tmp_path):
    import browser

    _, out = report
    result = browser.first_look(out / "circuit.html", browser.screenshot_path(tmp_path, "circuit-sort.png"))
    browser.assert_first_look(result)
    main = next(iter(result["figures"].values()))
    assert main["yticks"] and not any(t.strip().isdigit() for t in main["yticks"])
    assert main["outside"] == []  # the legend and colour bar inside the figure
    card = browser.first_look(out / "card.html", browser.screenshot_path(tmp_path, "card-sort.png"))
    browser.assert_first_look(card)
