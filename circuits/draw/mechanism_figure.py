"""The mechanism graph: the algorithm's variables as nodes (each labelled with where the model
holds it and its interchange verdict, coloured), the answer on the right, parent -> child
arrows. At most ``MAX_NODES`` nodes: a mechanism with more variables is drawn with its
variables grouped by name stem (``carry_1``, ``carry_2`` -> ``carry``), a group taking its
worst verdict. Drawing only; the numbers come from :func:`circuits.mechanisms.check_mechanism`.
"""

from __future__ import annotations

import re

import networkx as nx
import plotly.graph_objects as go

from interp_rand.figures.style import NOT_TESTED, VERDICT_COLOURS
from circuits.mechanisms.card import MechanismCard, variable_claim
from circuits.mechanisms.hypothesis import Mechanism

MAX_NODES = 15
ANSWER = "answer"
_WORST = {"fails": 0, "inconclusive": 1, "holds": 2}


def short_site(site) -> str:
    """A site in few characters: heads of one layer at one position as ``a0.0-3@10``, a hook as
    ``resid_mid.1@9 (k=1)``."""
    if site is None:
        return "not localised"
    if site.hook is not None:
        match = re.fullmatch(r"blocks\.(\d+)\.hook_(\w+)", site.hook)
        hook = f"{match.group(2)}.{match.group(1)}" if match else site.hook.removeprefix("hook_")
        k = "" if site.subspace is None else (
            f" (k={site.subspace})" if isinstance(site.subspace, int) else f" (k={site.subspace.shape[1]})")
        return f"{hook}@{','.join(map(str, site.positions))}{k}"
    groups: dict[tuple, list] = {}
    for n in site.nodes:
        groups.setdefault((n.kind, n.layer, n.position), []).append(n.head)
    parts = []
    for (kind, layer, position), heads in groups.items():
        if kind == "head":
            hs = sorted(heads)
            run = f"{hs[0]}-{hs[-1]}" if hs == list(range(hs[0], hs[-1] + 1)) and len(hs) > 2 else ",".join(map(str, hs))
            parts.append(f"a{layer}.{run}@{position}")
        else:
            parts.append({"mlp": f"m{layer}"}.get(kind, kind) + f"@{position}")
    return " + ".join(parts)


def _stem(name: str) -> str:
    return re.sub(r"[_ ]?\d+$", "", name) or name


def mechanism_graph(mech: Mechanism, card: MechanismCard | None = None) -> nx.DiGraph:
    """Variables (or their groups) and the answer as a DAG with ``label``, ``verdict`` and
    ``detail`` node attributes."""
    checks = {c.variable: c for c in (card.interchange if card else [])}
    group = (lambda n: n) if len(mech.variables) + 1 <= MAX_NODES else _stem
    g = nx.DiGraph()
    for v in mech.variables:
        key = group(v.name)
        check = checks.get(v.name)
        tested = check is not None and check.n_pairs > 0  # no pairs: its value never moves the answer, no claim
        verdict = variable_claim(check).verdict.outcome if tested else None
        detail = f"{v.name}: {short_site(v.site)}" + (
            f"<br>IIA {check.iia:.2f}" if tested else "<br>no interchange pairs" if check is not None else "")
        if key in g:
            node = g.nodes[key]
            node["members"] += 1
            node["details"].append(detail)
            if verdict is not None and (node["verdict"] is None or _WORST[verdict] < _WORST[node["verdict"]]):
                node["verdict"] = verdict
        else:
            g.add_node(key, members=1, details=[detail], verdict=verdict, description=v.description)
    for v in mech.variables:  # edges once every node has its attributes (a parent may be listed later)
        for p in v.parents:
            if group(p) != group(v.name):
                g.add_edge(group(p), group(v.name))
    answer_verdict = None
    if card is not None:
        answer_verdict = {c.verdict.outcome for c in card.claims[:2]}
        answer_verdict = "fails" if "fails" in answer_verdict else (
            "holds" if answer_verdict == {"holds"} else "inconclusive")
    detail = (f"agreement {card.agreement:.2f}<br>scrubbing {card.scrubbing.share['logprob']:.2f}" if card else "")
    g.add_node(ANSWER, members=1, details=[detail], verdict=answer_verdict, description="the task's answer")
    for p in mech.answer_parents:
        g.add_edge(group(p), ANSWER)
    return g


def mechanism_figure(mech: Mechanism, card: MechanismCard | None = None, title: str | None = None) -> go.Figure:
    """The graph laid out by topological generation, left to right; hover gives every member."""
    g = mechanism_graph(mech, card)
    layers = list(nx.topological_generations(g))
    pos = {}
    for x, layer in enumerate(layers):
        for y, node in enumerate(sorted(layer)):
            pos[node] = (x, -(y - (len(layer) - 1) / 2))
    fig = go.Figure()
    for a, b in g.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                           arrowhead=2, arrowsize=1, arrowwidth=1.5, arrowcolor="#777", standoff=18, startstandoff=18,
                           text="")
    nodes = list(g.nodes)
    colours = [VERDICT_COLOURS.get(g.nodes[n]["verdict"], NOT_TESTED) for n in nodes]
    labels = []
    for n in nodes:
        d = g.nodes[n]
        members = f" ×{d['members']}" if d["members"] > 1 else ""
        first = d["details"][0].split(": ", 1)[-1] if d["details"] else ""
        labels.append(f"<b>{n}{members}</b><br>{first}")
    hover = ["<br>".join([f"<b>{n}</b> — {g.nodes[n]['description']}", *g.nodes[n]["details"]]) for n in nodes]
    fig.add_scatter(x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text",
                    marker={"size": 26, "color": colours, "line": {"color": "#333", "width": 1}},
                    text=labels, textposition="bottom center", textfont={"size": 12}, hovertext=hover,
                    hoverinfo="text", showlegend=False)
    for outcome, colour in [*VERDICT_COLOURS.items(), ("not tested", NOT_TESTED)]:
        fig.add_scatter(x=[None], y=[None], mode="markers", marker={"size": 12, "color": colour},
                        name=outcome.upper() if outcome != "not tested" else outcome)
    ys = [y for _, y in pos.values()]
    height = max(320, 120 * max(len(layer) for layer in layers) + 140)
    verdict = f" — {card.verdict.upper()}" if card else ""
    fig.update_layout(title=title or f"mechanism {mech.name}{verdict}", height=height, autosize=True,
                      xaxis={"visible": False, "range": [-0.6, len(layers) - 0.4]},
                      yaxis={"visible": False, "range": [min(ys) - 0.7, max(ys) + 0.4]}, plot_bgcolor="white", margin={"t": 60, "l": 20, "r": 20, "b": 40},
                      legend={"orientation": "h", "y": -0.05}, font={"size": 12})
    return fig


__all__ = ["MAX_NODES", "mechanism_figure", "mechanism_graph", "short_site"]
