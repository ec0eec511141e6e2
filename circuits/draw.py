"""Plotly drawing of a circuit: edge width by |score|, colour by sign (blue helps the metric,
red hurts), hover with node names and scores; saved as one self-contained, offline HTML file.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from circuits.circuit import Circuit
from circuits.layout import layered_layout

_WIDTH_BINS = 6  # edges are grouped into this many width classes (one trace each)


def circuit_figure(circuit: Circuit, title: str | None = None) -> go.Figure:
    """A plotly figure of ``circuit`` on :func:`~circuits.layout.layered_layout`."""
    pos = layered_layout(circuit)
    g = circuit.graph
    top = max((abs(d["score"]) for _, _, d in g.edges(data=True)), default=1.0) or 1.0
    fig = go.Figure()
    groups: dict[tuple[bool, int], tuple[list, list]] = {}
    mid_x, mid_y, mid_text = [], [], []
    for u, v, d in g.edges(data=True):
        width_bin = min(_WIDTH_BINS - 1, int(_WIDTH_BINS * abs(d["score"]) / top))
        xs, ys = groups.setdefault((d["score"] >= 0, width_bin), ([], []))
        (x0, y0), (x1, y1) = pos[u], pos[v]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mid_x.append((x0 + x1) / 2)
        mid_y.append((y0 + y1) / 2)
        per_input = ", ".join(f"{k[6:]}: {val:+.4g}" for k, val in d.items() if k.startswith("score_"))
        mid_text.append(f"{u} → {v}<br>score {d['score']:+.4g}<br>{per_input}")
    for (positive, width_bin), (xs, ys) in sorted(groups.items()):
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
            line={"width": 0.75 + 1.5 * width_bin, "color": "rgba(40,90,200,0.6)" if positive else "rgba(210,50,50,0.6)"},
        ))
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker={"size": 6, "opacity": 0.0},
                             hovertext=mid_text, hoverinfo="text", showlegend=False, name="edges"))
    names = list(g.nodes)
    fig.add_trace(go.Scatter(
        x=[pos[n][0] for n in names], y=[pos[n][1] for n in names], mode="markers+text",
        text=names, textposition="middle right", textfont={"size": 9}, hoverinfo="text",
        showlegend=False, name="nodes",
        hovertext=[f"{n}<br>{g.nodes[n]['kind']}" for n in names],
        marker={"size": 10, "color": "white", "line": {"width": 1.5, "color": "black"}},
    ))
    settings = circuit.settings
    fig.update_layout(
        title=title or f"{settings.get('method', 'circuit')}: {len(circuit)} of {circuit.total_edges} edges",
        plot_bgcolor="white", hovermode="closest",
        # about 22 px per row, so labels of neighbouring heads do not overlap
        height=max(450, 160 + 22 * int(max((y for _, y in pos.values()), default=0) + 2)),
        xaxis={"showgrid": False, "zeroline": False, "tickmode": "array",
               "tickvals": list(range(2 * circuit.arch.n_layers + 2)),
               "ticktext": ["embed"] + [f"{k}{layer}" for layer in range(circuit.arch.n_layers)
                                        for k in ("attn ", "mlp ")] + ["logits"]},
        yaxis={"showgrid": False, "zeroline": False,
               "title": "head (bands: positions)" if settings.get("by_position") else "head"},
    )
    return fig


def write_circuit_html(circuit: Circuit, path: str | Path, title: str | None = None) -> Path:
    """Write the figure as one HTML file with plotly.js inlined once (works offline)."""
    path = Path(path)
    circuit_figure(circuit, title).write_html(str(path), include_plotlyjs=True, full_html=True)
    return path


__all__ = ["circuit_figure", "write_circuit_html"]
