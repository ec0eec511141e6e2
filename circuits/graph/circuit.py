"""A circuit: a set of scored edges of one architecture, kept as a ``networkx.DiGraph``, with
the settings it was found with. Save/load JSON (architecture checked on load); export GraphML
and Graphviz DOT.

Graph layout: nodes are keyed by :attr:`Node.name` (``a1.2@5``) with ``kind``, ``layer``,
``head``, ``position`` attributes; one DiGraph edge per (source, destination) pair carries
``score`` (summed over inputs), ``inputs`` (``"q,k"``) and one ``score_<input>`` per input.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx

from circuits.graph.architecture import Architecture, architecture
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Edge, Node
from interp_rand.display import Displayed, bars_svg
from interp_rand.output import write_bytes, write_json, write_text

FORMAT = "interp-rand-circuit/1"


@dataclass(frozen=True, repr=False)
class Circuit(Displayed):
    """Scored edges of one model architecture (in a notebook: its size and how it was found,
    and its strongest edges; drawn by :func:`circuits.draw.circuit_figure.circuit_figure`).

    Attributes:
        edges: edge → score (the method's score, positive = helps the clean metric).
        arch: the architecture the circuit belongs to.
        settings: how it was found (method, metric, ablation, data, selection ...).
        total_edges: number of edges in the model's full graph.
    """

    edges: dict[Edge, float]
    arch: Architecture
    settings: dict[str, Any] = field(default_factory=dict)
    total_edges: int = 0

    def __len__(self) -> int:
        return len(self.edges)

    @property
    def nodes(self) -> set[Node]:
        return {e.source for e in self.edges} | {e.dest for e in self.edges}

    @cached_property
    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph(**{k: json.dumps(v) for k, v in self.settings.items()})
        order = ModelGraph.structure(self.arch).node_order  # residual-stream order, then position
        for node in sorted(self.nodes, key=order):
            g.add_node(node.name, **{k: (-1 if v is None else v) for k, v in node.to_dict().items()})
        for edge, score in sorted(self.edges.items(), key=lambda kv: order(kv[0].source)):
            u, v = edge.source.name, edge.dest.name
            if not g.has_edge(u, v):
                g.add_edge(u, v, score=0.0, inputs="")
            data = g.edges[u, v]
            data["score"] += score
            data["inputs"] = ",".join(filter(None, [data["inputs"], edge.input]))
            data[f"score_{edge.input}"] = score
        return g

    # ------------------------------------------------------------------ display
    def top_edges(self, k: int = 10) -> list[tuple[Edge, float]]:
        """The ``k`` edges of largest |score|, largest first."""
        return sorted(self.edges.items(), key=lambda kv: -abs(kv[1]))[:k]

    def headline(self) -> str:
        """One line: its size, of the full graph's, and how it was found."""
        found = ", ".join(f"{k} {self.settings[k]}" for k in ("task", "method", "metric") if self.settings.get(k))
        of = f" of {self.total_edges}" if self.total_edges else ""
        return f"{len(self)}{of} edges, {len(self.nodes)} nodes" + (f" ({found})" if found else "")

    def lines(self) -> list[str]:
        """The headline, then its strongest edges with their scores."""
        return [self.headline()] + [f"{e.name}: {s:+.4f}" for e, s in self.top_edges(20)] + (
            [f"... {len(self) - 20} more edges"] if len(self) > 20 else [])

    def small_figure(self) -> str | None:
        """Its strongest edges' scores as bars (blue helps the metric, red hurts)."""
        return bars_svg([(e.name, s) for e, s in self.top_edges(10)], caption="the strongest edges' scores")

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "architecture": self.arch.to_dict(),
            "settings": self.settings,
            "total_edges": self.total_edges,
            "edges": [{**e.to_dict(), "score": s} for e, s in self.edges.items()],
        }

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), indent=1)

    @classmethod
    def load(cls, path: str | Path, model: Any = None) -> Circuit:
        """Read a circuit JSON; with ``model``, refuse a circuit of another architecture. A file
        that is not one (binary, not JSON, a JSON of another kind, damaged entries) is refused
        with a ``ValueError`` naming it and what is wrong; nothing but JSON is ever parsed."""
        try:
            data = json.loads(Path(path).read_bytes().decode("utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not a circuit file: binary, not UTF-8 text (byte {err.start}: "
                             f"{err.object[err.start]:#04x}; a pickle?); circuit files are the JSON "
                             "`interp-rand circuit` writes") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not a circuit file: not JSON ({err.msg} at line {err.lineno} "
                             f"column {err.colno})") from None
        found = data.get("format") if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        if found != FORMAT:
            raise ValueError(f"{path}: not a circuit file (format {found!r}, expected {FORMAT!r})")
        try:
            arch = Architecture(**data["architecture"])
            if model is not None:
                mismatch = architecture(model).mismatch(arch)
                if mismatch:
                    raise ValueError(
                        f"{path}: the circuit is for another architecture (model vs circuit): " + "; ".join(mismatch)
                    )
            edges = {Edge.from_dict(e): float(e["score"]) for e in data["edges"]}
            settings = data.get("settings", {})
            if not isinstance(settings, dict):
                raise TypeError(f"settings is a {type(settings).__name__}, not an object")
            return cls(edges, arch, settings, int(data.get("total_edges", 0)))
        except (KeyError, TypeError, AttributeError) as err:
            what = f"missing {err}" if isinstance(err, KeyError) else str(err)
            raise ValueError(f"{path}: a damaged circuit file ({what})") from None

    def write_graphml(self, path: str | Path) -> Path:
        buffer = io.BytesIO()
        nx.write_graphml(self.graph, buffer)
        return write_bytes(path, buffer.getvalue())

    def to_dot(self) -> str:
        """Graphviz DOT text: blue edges help the metric, red hurt; width by |score|."""
        top = max((abs(s) for s in self.edges.values()), default=1.0) or 1.0
        lines = ["digraph circuit {", "  rankdir=BT;"]
        for name in self.graph.nodes:
            lines.append(f'  "{name}";')
        for u, v, data in self.graph.edges(data=True):
            colour = "blue" if data["score"] >= 0 else "red"
            width = 0.5 + 4 * abs(data["score"]) / top
            label = data["inputs"] if self.graph.nodes[v]["kind"] == "head" else ""
            lines.append(f'  "{u}" -> "{v}" [color={colour}, penwidth={width:.2f}, label="{label}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def write_dot(self, path: str | Path) -> Path:
        return write_text(path, self.to_dot())


__all__ = ["FORMAT", "Circuit"]
