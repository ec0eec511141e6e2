"""The interactive circuit page (issue 38, item 2): the node table's scores, each edge trace
naming the nodes it joins, each head's attention in its own colour, hover reachable along every
line, and in the browser a click on a node that dims every edge but its own and a second click
that restores them, a row of the node table that does what a click does, and a hovered node that
shows its edges until the pointer leaves it (then the clicked node's, or none)."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from circuits import Circuit, Edge, Node, discover
from circuits.analyses.flow import attention_flow, mean_attention
from circuits.draw.circuit_figure import (ATTENTION, FIGURE_ID, circuit_figure, edge_strokes, figure_layout,
                                          write_circuit_html)
from circuits.draw.interactive import DIMMED, node_scores, node_table
from circuits.graph.model_graph import ModelGraph


@pytest.fixture(scope="module")
def drawn(model, pairs):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=40)
    attention = mean_attention(model, clean)
    names = [f"t{i}: {int(v)}" for i, v in enumerate(clean.inputs[0])]
    return circuit, attention, names


def test_node_table_sums_scores_in_and_out_and_sorts_by_total(model):
    arch = ModelGraph.of(model, 6).arch
    a, b, c = Node("embed", position=2), Node("head", 0, 1, 2), Node("logits", position=2)
    circuit = Circuit({Edge(a, b, "v"): 0.5, Edge(a, b, "q"): -0.25, Edge(b, c, "logits"): -2.0,
                       Edge(a, c, "logits"): 0.1}, arch, {}, 46)
    rows = {n.name: (i, o) for n, i, o in node_scores(circuit)}
    assert rows["a0.1@2"] == pytest.approx((0.75, 2.0))  # |0.5| + |-0.25| in, |-2| out
    assert rows["embed@2"] == pytest.approx((0.0, 0.85)) and rows["logits@2"] == pytest.approx((2.1, 0.0))
    assert [n.name for n, _, _ in node_scores(circuit)] == ["a0.1@2", "logits@2", "embed@2"]  # by total
    page = node_table(circuit, ["<x0>", "x1", "x2: 7"])
    assert page.index("data-node='a0.1@2'") < page.index("data-node='logits@2'") < page.index("data-node='embed@2'")
    assert "<td class='l'>2 (x2: 7)</td>" in page and "<x0>" not in page  # the example's token, escaped
    assert "<div class='scroll'><table" in page  # tables scroll sideways (the page check)


def test_every_stroke_names_the_nodes_it_joins_and_each_head_has_its_colour(drawn):
    circuit, attention, names = drawn
    flows = attention_flow(circuit, attention, 0.1)
    layout = figure_layout(circuit, flows)
    drawn_names = {n.name for f in flows for n in (f.source, f.dest)}
    circuit_names = {n.name for n in circuit.nodes}
    for by_head in (False, True):
        strokes = edge_strokes(flows, layout, names, 1.0, by_head)
        assert all(s.ends and set(s.ends) <= drawn_names | circuit_names for s in strokes)
        for s in strokes:
            if s.edge is not None and s.edge.input in ("q", "mlp", "logits"):
                assert set(s.ends) == {s.edge.source.name, s.edge.dest.name}
        lanes = [s for s in strokes if s.edge is None]
        heads = {re.search(r"a\d\.\d", s.hover).group(0) for s in lanes}
        assert len(heads) >= 2  # the check has several heads to tell apart
        colours = {re.search(r"a\d\.\d", s.hover).group(0): s.colour for s in lanes}
        if by_head:
            assert len(set(colours.values())) == len(heads) and ATTENTION not in colours.values()
            # a head's lane and its branches share its colour
            assert all(s.colour == colours[re.search(r"a\d\.\d", s.hover).group(0)] for s in lanes)
        else:
            assert set(colours.values()) == {ATTENTION}
    # the trunk of a key/value edge says which head reads which position, with the example's token
    trunks = [s for s in strokes if s.edge is not None and s.edge.input in ("k", "v") and s.edge.source.position
              is not None and len(s.ends) > 2]
    assert trunks and all(f"reads position {s.edge.source.position} {names[s.edge.source.position]}" in s.hover
                          for s in trunks)


def test_hover_is_reachable_along_every_line(drawn):
    """Consecutive points of a line at most 0.15 column and 0.7 row apart: ~15 px, inside plotly's
    20 px hover distance."""
    circuit, attention, names = drawn
    fig = circuit_figure(circuit, attention=attention, position_names=names, by_head=True)
    lines = [t for t in fig.data if t.mode == "lines" and t.x and t.x[0] is not None]
    assert lines
    for t in lines:
        points = list(zip(t.x, t.y))
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            if None not in (x0, x1):
                assert abs(x1 - x0) <= 0.15 + 1e-9 and abs(y1 - y0) <= 0.7 + 1e-9
        assert isinstance(t.meta, dict) and t.meta["ends"]  # what the click handler reads
    legend = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert sum(" reads key → query" in n for n in legend) >= 2  # one legend line per head's colour


_CLICK = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var gd = document.getElementById(%(div)s), out = {steps: [], hover: []};
  function snap() { return gd.data.map(function (t) {
    return {opacity: t.opacity === undefined ? 1 : t.opacity, ends: t.meta && t.meta.ends ? t.meta.ends : null,
            marks: t.customdata && t.marker ? t.marker.opacity : null, names: t.customdata || null}; }); }
  function nodes(name) { return gd.data.findIndex(function (t) { return t.name === 'nodes' && t.customdata.indexOf(name) >= 0; }); }
  function click(name) {
    var i = nodes(name);
    gd.emit('plotly_click', {points: [{curveNumber: i, pointNumber: gd.data[i].customdata.indexOf(name)}]});
  }
  // the pointer as a reader moves it: a mousemove over the node's marker, on whatever element is there
  // (plotly's hover layer finds the point), and a mouseout of the plot
  function hover(name) {
    var t = gd.data[nodes(name)], j = t.customdata.indexOf(name), full = gd._fullLayout;
    var xa = full[(t.xaxis || 'x').replace('x', 'xaxis')], ya = full[(t.yaxis || 'y').replace('y', 'yaxis')];
    var box = gd.querySelector('.main-svg').getBoundingClientRect();
    var x = box.left + xa._offset + xa.l2p(t.x[j]), y = box.top + ya._offset + ya.l2p(t.y[j]);
    document.elementFromPoint(x, y).dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true, view: window}));
  }
  function leave() {  // to the plot's corner, where no node is
    var box = gd.querySelector('.main-svg').getBoundingClientRect(), x = box.left + 3, y = box.top + 3;
    document.elementFromPoint(x, y).dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true,
                                                                               view: window}));
  }
  function record(into) { into.push({data: snap(), hover: gd.getAttribute('data-hover'),
                                     picked: gd.getAttribute('data-highlight')}); }
  var steps = [
    function () { out.before = snap(); click(%(node)s); out.steps.push(snap()); },
    function () { click(%(node)s); out.steps.push(snap()); },
    function () { var row = document.querySelector('#nodes tr[data-node]');
                  click(%(node)s); row.click(); out.steps.push(snap());
                  out.row = [row.getAttribute('data-node'), gd.getAttribute('data-highlight')]; row.click(); },
    // hover a node, still on it a moment later (no restyle loop), leave: back to none
    function () { hover(%(node)s); },
    function () { record(out.hover); },
    function () { leave(); },
    function () { record(out.hover); },
    // a node clicked, another hovered: the hovered one's edges; leave: the clicked one's again
    function () { click(%(node)s); hover(%(other)s); },
    function () { record(out.hover); leave(); },
    function () { record(out.hover); },
  ];
  (function next(k) {
    if (k < steps.length) { steps[k](); setTimeout(function () { next(k + 1); }, 60); return; }
    var pre = document.createElement('pre'); pre.id = 'click-check';
    pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
  })(0);
}, 500); });
</script>"""


def test_a_click_on_a_node_dims_the_other_edges_in_the_browser(drawn, tmp_path):
    import browser

    circuit, attention, names = drawn
    page = write_circuit_html(circuit, tmp_path / "circuit.html", "tiny: eap, 40 edges", attention=attention,
                              position_names=names)
    text = page.read_text()
    assert "plotly_click" in text and "Plotly.restyle" in text and "<table id='nodes'>" in text
    # the node to click: a head at a query position that is no key position of its own edges
    flows = attention_flow(circuit, attention, 0.1)
    keys = {f.edge.dest.name for f in flows if f.share is not None}
    heads = sorted({f.dest.name for f in flows if f.share is not None} - keys)
    assert heads
    node = heads[0]
    other = next(n.name for n, _, _ in node_scores(circuit) if n.name != node)  # the largest node: hovered
    clicked = page.with_name("clicked.html")
    clicked.write_text(text.replace("</body>", _CLICK % {"div": json.dumps(FIGURE_ID), "node": json.dumps(node),
                                                         "other": json.dumps(other)} + "</body>"))
    dom, console = browser.load(clicked, browser.screenshot_path(tmp_path, "circuit-clicked.png"), "1000,800")
    assert not browser.page_errors(console), console
    found = re.search(r'<pre id="click-check">(.*?)</pre>', dom, flags=re.S)
    assert found, "the click script did not run"
    out = json.loads(unescape(found.group(1)))
    before, (on, off, row) = out["before"], out["steps"]
    edges = [i for i, t in enumerate(before) if t["ends"] is not None]
    mine = [i for i in edges if node in before[i]["ends"]]
    others = [i for i in edges if i not in mine]
    assert mine and others
    # clicked: its edges as they were, every other edge dimmed; its node shown, unrelated nodes faded
    assert all(on[i]["opacity"] == pytest.approx(before[i]["opacity"]) for i in mine)
    assert all(on[i]["opacity"] == pytest.approx(DIMMED) and DIMMED < before[i]["opacity"] for i in others)
    nodes = next(i for i, t in enumerate(on) if t["names"] and node in t["names"])
    marks = dict(zip(on[nodes]["names"], on[nodes]["marks"]))
    assert marks[node] == 1 and min(marks.values()) < 1
    # the same head at its other query positions is not joined to this one (a shared lane marks no node)
    elsewhere = [n for n in marks if n.split("@")[0] == node.split("@")[0] and n != node and n not in keys]
    assert elsewhere and all(marks[n] < 1 for n in elsewhere)
    # clicked again: everything as before
    assert [t["opacity"] for t in off] == pytest.approx([t["opacity"] for t in before])
    # a row of the node table highlights its node (the largest node of the circuit)
    assert out["row"][0] == out["row"][1] == other
    assert [t["opacity"] for t in row] == pytest.approx(lit(before, other))

    # hovered: the node's edges as a click shows them, still a moment later; the pointer off it: as before
    (hovered, left, other_hovered, back) = out["hover"]
    assert (hovered["hover"], hovered["picked"]) == (node, "")
    assert [t["opacity"] for t in hovered["data"]] == pytest.approx([t["opacity"] for t in on])
    assert hovered["data"][nodes]["marks"] == on[nodes]["marks"]
    assert (left["hover"], left["picked"]) == ("", "")
    assert [t["opacity"] for t in left["data"]] == pytest.approx([t["opacity"] for t in before])
    # a node clicked and another hovered: the hovered one's edges; the pointer off it: the clicked one's
    assert (other_hovered["hover"], other_hovered["picked"]) == (other, node)
    assert [t["opacity"] for t in other_hovered["data"]] == pytest.approx(lit(before, other))
    assert lit(before, other) != pytest.approx(lit(before, node))  # the check tells the two apart
    assert (back["hover"], back["picked"]) == ("", node)
    assert [t["opacity"] for t in back["data"]] == pytest.approx([t["opacity"] for t in on])


def lit(before: list[dict], name: str) -> list[float]:
    """Every trace's opacity with ``name`` highlighted: its edges as ``before``, the other edges dimmed."""
    return [t["opacity"] if t["ends"] is None or name in t["ends"] else DIMMED for t in before]
