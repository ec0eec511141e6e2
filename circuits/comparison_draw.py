"""Side-by-side plotly drawing of two compared circuits on one shared layered layout: every node
of either circuit sits at the same place in both panels (nodes absent from a circuit are drawn
faint), shared edges in one colour, edges unique to that circuit in another; one self-contained,
offline HTML file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from circuits.circuit import Circuit
from circuits.comparison import CircuitComparison
from circuits.layout import layered_layout

SHARED_COLOUR = "rgba(40,90,200,0.7)"
UNIQUE_COLOUR = "rgba(230,120,20,0.8)"


def shared_layout(a: Circuit, b: Circuit) -> dict[str, tuple[float, float]]:
    """Positions of every node of ``a`` or ``b`` (the layered layout of their union)."""
    union = dataclasses.replace(a, edges={**b.edges, **a.edges})
    return layered_layout(union)


def _panel(fig: go.Figure, circuit: Circuit, other: Circuit, pos: dict, col: int, label: str) -> None:
    g = circuit.graph
    top = max((abs(d["score"]) for _, _, d in g.edges(data=True)), default=1.0) or 1.0
    other_pairs = set(other.graph.edges)
    mid_x, mid_y, mid_text = [], [], []
    for shared in (True, False):
        for u, v, d in g.edges(data=True):
            if ((u, v) in other_pairs) != shared:
                continue
            (x0, y0), (x1, y1) = pos[u], pos[v]
            fig.add_trace(go.Scatter(
                x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="skip", showlegend=False,
                line={"width": 0.75 + 5 * abs(d["score"]) / top, "color": SHARED_COLOUR if shared else UNIQUE_COLOUR},
                name="shared" if shared else f"only {label}",
            ), row=1, col=col)
            mid_x.append((x0 + x1) / 2)
            mid_y.append((y0 + y1) / 2)
            mid_text.append(f"{u} → {v}<br>score {d['score']:+.4g}<br>{'shared' if shared else 'only ' + label}")
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker={"size": 6, "opacity": 0.0},
                             hovertext=mid_text, hoverinfo="text", showlegend=False, name=f"edges {label}"),
                  row=1, col=col)
    names = sorted(pos)
    present = set(g.nodes)
    fig.add_trace(go.Scatter(
        x=[pos[n][0] for n in names], y=[pos[n][1] for n in names], mode="markers+text",
        text=[n if n in present else "" for n in names], textposition="middle right",
        textfont={"size": 9}, hoverinfo="text", showlegend=False, name=f"nodes {label}",
        hovertext=[f"{n}{'' if n in present else ' (not in ' + label + ')'}" for n in names],
        marker={"size": 10, "color": "white",
                "line": {"width": 1.5, "color": ["black" if n in present else "lightgrey" for n in names]}},
    ), row=1, col=col)


def comparison_figure(a: Circuit, b: Circuit, result: CircuitComparison, title: str | None = None) -> go.Figure:
    """Two panels (A left, B right) on :func:`shared_layout`."""
    pos = shared_layout(a, b)
    la, lb = result.labels
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=(f"{la}: {len(a)} edges", f"{lb}: {len(b)} edges"))
    _panel(fig, a, b, pos, 1, la)
    _panel(fig, b, a, pos, 2, lb)
    rho = "n/a" if result.spearman is None else f"{result.spearman:.3f}"
    cross = ", ".join(f"{k} {v:.3f}" for k, v in result.cross.items())
    n_layers = a.arch.n_layers
    ticks = {"tickmode": "array", "tickvals": list(range(2 * n_layers + 2)),
             "ticktext": ["embed"] + [f"{k}{layer}" for layer in range(n_layers) for k in ("attn ", "mlp ")] + ["logits"]}
    fig.update_xaxes(showgrid=False, zeroline=False, **ticks)
    fig.update_yaxes(showgrid=False, zeroline=False)
    fig.update_layout(
        title=title or (f"shared {len(result.shared)} (blue), only {la} {len(result.only_a)}, only {lb} "
                        f"{len(result.only_b)} (orange); Jaccard {result.jaccard:.3f}; Spearman of shared {rho}"
                        + (f"<br>recovered share, circuit_on_model: {cross}" if cross else "")),
        plot_bgcolor="white", hovermode="closest",
        height=max(500, 180 + 22 * int(max((y for _, y in pos.values()), default=0) + 2)),
    )
    return fig


def write_comparison_html(a: Circuit, b: Circuit, result: CircuitComparison, path: str | Path,
                          title: str | None = None) -> Path:
    """Write the figure as one HTML file with plotly.js inlined (works offline)."""
    path = Path(path)
    comparison_figure(a, b, result, title).write_html(str(path), include_plotlyjs=True, full_html=True)
    return path


__all__ = ["comparison_figure", "shared_layout", "write_comparison_html"]
