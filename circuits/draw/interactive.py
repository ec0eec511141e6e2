"""What makes the circuit page interactive: a click handler on the drawing and a node table.

Click a node (in either view) and its edges keep their opacity while every other edge and node
fades; click it again, or on empty space, and the drawing comes back. Hovering a node shows its
edges the same way while the pointer is on it; when the pointer leaves, the drawing goes back to
the clicked selection, or to none. Clicking a node of the
summed view also picks that component at every position of the view by position. Clicking an
edge keeps that edge alone. The handler reads what :func:`~circuits.draw.circuit_figure.add_strokes`
stores on each edge trace (``meta.ends``: the nodes it joins, the one it is drawn from first;
``meta.lane``: a head's attention lane, lit when any of its nodes is picked, marking none) and the
node traces' ``customdata``
(their names), and uses only the page's own plotly.js (``Plotly.restyle``), so it works offline.

The node table lists each node of the circuit: its component, its position (and what the
example holds there), the sum of ``|score|`` of its edges in and out, largest total first;
clicking a row highlights that node as a click on the drawing does.

    >>> sections = [("circuit", fig), highlight_script("circuit"), node_table(circuit, names)]
"""

from __future__ import annotations

import html
import json

from circuits.graph.circuit import Circuit
from circuits.graph.nodes import Node

#: The opacity of what a highlight leaves out.
DIMMED = 0.07
#: How far outside its marker (in pixels) the pointer still hovers a node.
HOVER_PX = 4

_SCRIPT = """<script type='text/javascript'>
(function () {
  var DIV = %(div)s, DIM = %(dim)s, HOVER_PX = %(reach)s;
  function attach() {
    var gd = document.getElementById(DIV);
    if (!gd || !gd.on || !gd.data || !window.Plotly) { return setTimeout(attach, 50); }
    // chosen: the clicked pick; hovered: the node under the pointer; shown: what is drawn (a key)
    var base = null, chosen = null, hovered = null, shown = null, lastClick = 0;
    function keyOf(pick) { return pick === null ? null : JSON.stringify(pick); }
    function matches(end, name) { return end === name || (name.indexOf('@') < 0 && end.indexOf(name + '@') === 0); }
    function isEdge(t) { return t.meta && t.meta.ends; }
    function isNodes(t) { return t.customdata && t.mode && t.mode.indexOf('markers') >= 0; }
    // draw pick (null: everything as it was): its edges as they were, the rest dimmed
    function show(pick) {
      if (keyOf(pick) === shown) { return; }
      shown = keyOf(pick);
      if (base === null) {
        base = gd.data.map(function (t) { return t.opacity === undefined ? 1 : t.opacity; });
      }
      var edges = [], opacity = [], near = {};
      gd.data.forEach(function (t, i) {
        if (!isEdge(t)) { return; }
        var on = pick === null || (pick.trace === i) || (pick.node !== undefined &&
                 t.meta.ends.some(function (e) { return matches(e, pick.node); }));
        // the nodes shown with it: a line's first end is the node it is drawn from (a writer, or
        // for a branch into a head its query node); picked there, all its ends, else that one. A
        // head's lane carries every key to every query: lit, but it marks no node.
        if (on && pick !== null && !t.meta.lane) {
          var first = t.meta.ends[0], all = pick.trace === i || matches(first, pick.node);
          (all ? t.meta.ends : [first]).forEach(function (e) { near[e] = true; });
        }
        edges.push(i); opacity.push(on ? base[i] : DIM);
      });
      if (edges.length) { Plotly.restyle(gd, {opacity: opacity}, edges); }
      gd.data.forEach(function (t, i) {
        if (!isNodes(t)) { return; }
        var marks = t.customdata.map(function (name) {
          return pick === null || near[name] || (pick.node !== undefined && matches(name, pick.node)) ? 1 : 0.2;
        });
        Plotly.restyle(gd, {'marker.opacity': [marks]}, [i]);
      });
    }
    function refresh() {
      show(hovered !== null ? hovered : chosen);
      gd.setAttribute('data-highlight', chosen === null ? '' : (chosen.node !== undefined ? chosen.node : 'edge'));
      gd.setAttribute('data-hover', hovered === null ? '' : hovered.node);
    }
    // a click: pick, or unpick what was picked (null: unpick)
    function highlight(pick) {
      chosen = pick === null || keyOf(pick) === keyOf(chosen) ? null : pick;
      refresh();
    }
    gd.circuitHighlight = highlight;
    // the node whose marker is under the pointer (client x, y), or null: found by where the
    // markers are drawn, as plotly's own hover gives the edge line that runs into a node's centre
    function nodeUnder(x, y) {
      var svg = gd.querySelector('.main-svg'), full = gd._fullLayout, found = null, nearest = Infinity;
      if (!svg || !full) { return null; }
      var box = svg.getBoundingClientRect();
      gd._fullData.forEach(function (t, i) {
        var d = gd.data[i];
        if (!isNodes(d) || t.visible !== true) { return; }
        var xa = full[(t.xaxis || 'x').replace('x', 'xaxis')], ya = full[(t.yaxis || 'y').replace('y', 'yaxis')];
        var size = t.marker ? t.marker.size : 0;
        d.customdata.forEach(function (name, j) {
          if (d.x[j] === null || d.y[j] === null) { return; }
          var dx = box.left + xa._offset + xa.c2p(d.x[j]) - x, dy = box.top + ya._offset + ya.c2p(d.y[j]) - y;
          var far = Math.sqrt(dx * dx + dy * dy), reach = (Array.isArray(size) ? size[j] : size) / 2 + HOVER_PX;
          if (far <= reach && far < nearest) { nearest = far; found = name; }
        });
      });
      return found;
    }
    function hover(name) {
      var pick = name === null ? null : {node: name};
      if (keyOf(pick) !== keyOf(hovered)) { hovered = pick; refresh(); }
    }
    gd.addEventListener('mousemove', function (e) { hover(nodeUnder(e.clientX, e.clientY)); });
    gd.addEventListener('mouseleave', function () { hover(null); });
    gd.on('plotly_click', function (ev) {
      lastClick = Date.now();
      var p = ev && ev.points && ev.points[0];
      if (!p) { return; }
      var t = gd.data[p.curveNumber];
      if (isNodes(t)) { highlight({node: t.customdata[p.pointNumber]}); }
      else if (isEdge(t)) { highlight({trace: p.curveNumber}); }
    });
    // a click that hit no point (plotly_click fires just before it when one did): restore
    gd.addEventListener('click', function () { if (Date.now() - lastClick > 300 && chosen !== null) { highlight(null); } });
    function rows() {
      document.querySelectorAll('tr[data-node]').forEach(function (row) {
        row.style.cursor = 'pointer';
        row.addEventListener('click', function () { highlight({node: row.getAttribute('data-node')}); });
      });
    }
    // the node table comes after this script: its rows exist once the page is parsed
    if (document.readyState === 'loading') { document.addEventListener('DOMContentLoaded', rows); } else { rows(); }
  }
  attach();
})();
</script>"""


def highlight_script(div_id: str) -> str:
    """The ``<script>`` that makes the plotly figure in ``div_id`` highlight a clicked node's
    edges (module docstring); ``div.circuitHighlight({node: name})`` does what a click does."""
    return _SCRIPT % {"div": json.dumps(div_id), "dim": DIMMED, "reach": HOVER_PX}


def node_scores(circuit: Circuit) -> list[tuple[Node, float, float]]:
    """``(node, in-score, out-score)`` per node of ``circuit``: the sums of ``|score|`` of the
    edges into and out of it, largest total first (ties in residual-stream order)."""
    into: dict[Node, float] = {}
    out: dict[Node, float] = {}
    for edge, score in circuit.edges.items():
        into[edge.dest] = into.get(edge.dest, 0.0) + abs(score)
        out[edge.source] = out.get(edge.source, 0.0) + abs(score)
    rows = [(n, into.get(n, 0.0), out.get(n, 0.0)) for n in circuit.nodes]
    return sorted(rows, key=lambda r: (-(r[1] + r[2]), r[0].name))


def node_table(circuit: Circuit, names: list[str] | None = None, limit: int = 200) -> str:
    """The node table as HTML (module docstring); ``names``: one label per position (the
    example's tokens, ``x3: 7``); at most ``limit`` rows (the rest counted below it)."""
    rows = node_scores(circuit)
    body = []
    for node, into, out in rows[:limit]:
        p = node.position
        where = "all (summed)" if p is None else (f"{p} ({names[p]})" if names is not None and p < len(names) else str(p))
        body.append(f"<tr data-node='{html.escape(node.name, quote=True)}'><td class='l'>{html.escape(node.at(None).name)}"
                    f"</td><td class='l'>{html.escape(where)}</td><td>{into:.4g}</td><td>{out:.4g}</td>"
                    f"<td>{into + out:.4g}</td></tr>")
    more = f"<p class='note'>{len(rows) - limit} more nodes not listed.</p>" if len(rows) > limit else ""
    return ("<h3>Nodes</h3><p class='note'>Each node of the circuit: in-score and out-score are the sums of |score| "
            "of its edges in and out; largest total first. A head at a key position has an in-score only: what it reads "
            "there leaves it at the query positions that attend to the key. Click a row (or a node in the drawing) to highlight its "
            "edges (hovering a node shows them while the pointer is on it); click again, or on empty space, to restore.</p><div class='scroll'><table id='nodes'>"
            "<tr><th>component</th><th>position</th><th>in-score</th><th>out-score</th><th>total</th></tr>"
            + "".join(body) + "</table></div>" + more)


__all__ = ["DIMMED", "HOVER_PX", "highlight_script", "node_scores", "node_table"]
