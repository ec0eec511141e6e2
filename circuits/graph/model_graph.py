"""The full computational graph of a model: every writer, every reader input, every edge, and
the one place the graph's structure is written down.

Writers (residual-stream order): ``embed``, ``seed`` (if the model has a seed channel),
``input_mlp`` (if it has an input MLP), then per layer its heads and its MLP. Readers: the input
MLP's input (if any), per layer the q, k and v inputs of every head and the MLP input, then the
logits. A writer feeds a reader when it comes earlier in the residual stream (a layer's heads
feed that layer's MLP), except around an input MLP: the input MLP reads exactly the embedding
(and an appended seed), and those feed nothing else (:mod:`circuits.graph.architecture`). Edge
scores are held as a dense tensor ``[n_positions or 1, n_writers, n_readers]`` (zero where no
edge exists): fast to compute with, and turned into :class:`~circuits.graph.nodes.Edge` objects
only at the boundary.

:class:`ModelGraph` owns, for every node, what the rest of :mod:`circuits` reads from it:

- its **column** in the residual stream (:meth:`ModelGraph.column`): embed and seed 0, an input
  MLP 0.5, layer ``l``'s heads ``2l + 1`` and its MLP ``2l + 2``, the logits ``2L + 1``. A
  writer feeds a reader of a larger column; circuits sort their nodes by it
  (:meth:`ModelGraph.node_order`) and drawings put nodes and axis ticks there
  (:meth:`ModelGraph.column_labels`);
- its **writer site** (:attr:`ModelGraph.writer_sites`): the hook its residual write is read
  at and which positions that hook sees (:meth:`ModelGraph.hook_position`);
- its **reader sites** (:attr:`ModelGraph.reader_sites`), one table: the hook where a group of
  reader inputs is written back (``hook_q/k/v``, ``mlp.hook_pre``, ``input_mlp.hook_pre``, the
  final ``hook_resid_post``), the residual hook they are rebuilt from, and how
  (:meth:`ReaderSite.rebuild`). :attr:`ModelGraph.readers` is that table flattened, so edge
  patching, EAP gradients and ablation, which loop over it, line up with the score tensor by
  construction.

A new node kind or block type is added here (and to the model); the modules that patch,
attribute, ablate and draw read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from circuits.graph.architecture import Architecture, architecture, attention_input, input_mlp_input, mlp_input
from interp_rand.model.hook_names import hook_name
from interp_rand.model.mixer import Mixer
from circuits.graph.nodes import Edge, Node

# Node kinds whose hooks see the task positions only (a seed token, if any, is joined after them).
TASK_POSITION_KINDS = ("embed", "input_mlp")


@dataclass(frozen=True)
class WriterSite:
    """One hook point at which writers' residual writes are read.

    Attributes:
        kind: the writers' node kind (``embed``, ``seed``, ``input_mlp``, ``head``, ``mlp``).
        layer: their block (``None`` outside the blocks).
        hook: the hook read (``hook_embed``, ``hook_seed_embed``, ``input_mlp.hook_post``,
            ``attn.hook_z`` (one write per head, times ``W_O``), ``hook_mlp_out``).
        writers: their indices in :attr:`ModelGraph.writers`.
    """

    kind: str
    layer: int | None
    hook: str
    writers: range


@dataclass(frozen=True)
class ReaderSite:
    """One hook point at which the inputs of a group of readers are written back.

    Attributes:
        input: the readers' edge input and how the hook value is rebuilt from their residual
            inputs: ``q``/``k``/``v`` (a head's attention input, one reader per head), ``mlp``
            (an MLP's, or with ``layer=None`` the input MLP's, ``hook_pre``), ``logits`` (the
            final residual itself).
        layer: the block (``None`` for the input MLP and the logits).
        hook: the hook whose value is the readers' input (``attn.hook_q`` …).
        source: the residual hook the readers read (``hook_resid_pre``, ``hook_resid_mid``, the
            final ``hook_resid_post``, which is also the logits' ``hook``), or ``None`` for the
            input MLP, which reads the sum of its source writers' values.
        readers: their indices in :attr:`ModelGraph.readers`.
        per_head: one reader per head (the hook has a head axis).
        task_positions: the hook sees the task positions only (behind a seed token).
    """

    input: str
    layer: int | None
    hook: str
    source: str | None
    readers: range
    per_head: bool = False
    task_positions: bool = False

    @property
    def group(self) -> str:
        """Sites of one group read the same residual hook (a layer's q, k and v)."""
        return self.source or self.hook

    def rebuild(self, model: Any, x: Tensor) -> Tensor:
        """The hook's value from its readers' residual inputs ``x: [batch, pos, n_readers, d_model]``."""
        if self.per_head:
            return attention_input(model, self.layer, self.input, x)
        if self.input == "mlp":
            return mlp_input(model, self.layer, x[:, :, 0]) if self.layer is not None else input_mlp_input(model, x[:, :, 0])
        return x[:, :, 0]


@dataclass(frozen=True)
class ModelGraph:
    """Writers, readers and the edge structure of one architecture.

    Attributes:
        arch: the model's :class:`Architecture`.
        n_positions: residual-stream length (including a seed token).
        by_position: edges resolved per position (else each edge spans every position).
    """

    arch: Architecture
    n_positions: int
    by_position: bool = True

    @classmethod
    def of(cls, model: Any, n_positions: int, by_position: bool = True) -> ModelGraph:
        return cls(architecture(model), n_positions + architecture(model).seed_offset, by_position)

    @staticmethod
    @lru_cache(maxsize=64)
    def structure(arch: Architecture) -> ModelGraph:
        """The graph of ``arch`` without positions: its nodes, sites, order and columns (what a
        :class:`~circuits.graph.circuit.Circuit` or a drawing needs)."""
        return ModelGraph(arch, 0, by_position=False)

    # ------------------------------------------------------------------ writers
    @staticmethod
    def writer_hook(node: Node) -> str:
        """The hook at which ``node``'s residual write is read (and replaced when ablated)."""
        if node.kind == "embed":
            return "hook_embed"
        if node.kind == "seed":
            return "hook_seed_embed"
        if node.kind == "input_mlp":
            return "input_mlp.hook_post"
        if node.kind == "head":
            return hook_name(node.layer, f"attn.{Mixer.WRITER_HOOK}")  # the mixer's writer site
        if node.kind == "mlp":
            return hook_name(node.layer, "hook_mlp_out")
        raise ValueError(f"a {node.kind!r} node writes nothing and cannot be ablated")

    @cached_property
    def writers(self) -> list[Node]:
        return [node for site in self._writer_groups for node in site[1]]

    @cached_property
    def _writer_groups(self) -> list[tuple[str, list[Node]]]:
        groups = [("embed", [Node("embed")])] + ([("seed", [Node("seed")])] if self.arch.has_seed else [])
        groups += [("input_mlp", [Node("input_mlp")])] if self.arch.has_input_mlp else []
        for layer in range(self.arch.n_layers):
            groups.append(("head", [Node("head", layer, h) for h in range(self.arch.n_heads)]))
            if not self.arch.attn_only:
                groups.append(("mlp", [Node("mlp", layer)]))
        return groups

    @cached_property
    def writer_sites(self) -> list[WriterSite]:
        """One site per writer hook, in :attr:`writers` order."""
        out, start = [], 0
        for kind, nodes in self._writer_groups:
            out.append(WriterSite(kind, nodes[0].layer, self.writer_hook(nodes[0]), range(start, start + len(nodes))))
            start += len(nodes)
        return out

    @property
    def writer_hooks(self) -> list[str]:
        return [site.hook for site in self.writer_sites]

    @property
    def input_hooks(self) -> list[str]:
        """The hooks of the writers that read nothing (the token embedding and the seed channel):
        where EAP-IG interpolates."""
        return [site.hook for site in self.writer_sites if site.kind in ("embed", "seed")]

    def hook_position(self, node: Node) -> int | slice | None:
        """Index of ``node``'s residual-stream position in its writer hook's position axis
        (``None``: the node writes nothing there, e.g. the embedding at a seed token, a seed
        token elsewhere)."""
        offset = self.arch.seed_offset
        if node.position is None:
            return slice(None)
        if node.kind in TASK_POSITION_KINDS:
            return node.position - offset if node.position >= offset else None
        if node.kind == "seed" and offset:
            return 0 if node.position == 0 else None
        return node.position

    def to_stream_positions(self, kind: str, value: Tensor) -> Tensor:
        """A ``kind`` node's hook value ``[batch, hook positions, ...]`` on the residual stream's
        positions ``[batch, n_positions, ...]`` (zero where the hook has no position)."""
        if kind in TASK_POSITION_KINDS:
            return self.from_task_positions(value)
        if kind == "seed":
            return F.pad(value, (0, 0) * (value.dim() - 2) + (0, self.n_positions - value.shape[1]))
        return value

    def from_task_positions(self, value: Tensor) -> Tensor:
        """A hook value on the task positions ``[batch, P - seed_offset, ...]`` on the residual
        stream's ``[batch, P, ...]`` (task positions follow a seed token; zero there)."""
        return F.pad(value, (0, 0) * (value.dim() - 2) + (self.arch.seed_offset, 0))

    # ------------------------------------------------------------------ readers
    @cached_property
    def reader_sites(self) -> list[ReaderSite]:
        """The one table of reader inputs, in :attr:`readers` order."""
        out: list[ReaderSite] = []

        def add(input: str, layer: int | None, hook: str, source: str | None, n: int = 1, **kw: bool) -> None:
            start = out[-1].readers.stop if out else 0
            out.append(ReaderSite(input, layer, hook, source, range(start, start + n), **kw))

        if self.arch.has_input_mlp:
            add("mlp", None, "input_mlp.hook_pre", None, task_positions=True)
        for layer in range(self.arch.n_layers):
            for hook in Mixer.READER_HOOKS:  # the mixer's reader sites: hook_q/k/v, one reader per head
                add(hook.removeprefix("hook_"), layer, hook_name(layer, f"attn.{hook}"), hook_name(layer, "hook_resid_pre"),
                    self.arch.n_heads, per_head=True)
            if not self.arch.attn_only:
                add("mlp", layer, hook_name(layer, "mlp.hook_pre"), hook_name(layer, "hook_resid_mid"))
        final = hook_name(self.arch.n_layers - 1, "hook_resid_post")
        add("logits", None, final, final)
        return out

    @cached_property
    def readers(self) -> list[tuple[Node, str]]:
        out: list[tuple[Node, str]] = []
        for site in self.reader_sites:
            if site.per_head:
                out += [(Node("head", site.layer, h), site.input) for h in range(len(site.readers))]
            elif site.input == "logits":
                out.append((Node("logits"), "logits"))
            else:
                out.append((Node("mlp", site.layer) if site.layer is not None else Node("input_mlp"), site.input))
        return out

    @cached_property
    def input_mlp_sources(self) -> tuple[str, ...]:
        """Kinds of the writers that feed the input MLP, and only it (none without one)."""
        if not self.arch.has_input_mlp:
            return ()
        return ("embed", "seed") if self.arch.seed_append else ("embed",)

    @cached_property
    def writers_upto(self) -> list[int]:
        """Per reader: the number of writers up to its last source (those captured before it in a
        forward; the writers in between that do not feed it, e.g. around an input MLP, have no
        edge into it)."""
        return [int(self.valid[:, r].nonzero()[:, 0].max()) + 1 for r in range(len(self.readers))]

    # ------------------------------------------------------------------ order and columns
    def column(self, node: Node) -> float:
        """``node``'s column in the residual stream: a writer feeds readers of larger columns."""
        if node.kind in ("embed", "seed"):
            return 0
        if node.kind == "input_mlp":
            return 0.5
        if node.kind == "logits":
            return 2 * self.arch.n_layers + 1
        return 2 * node.layer + (1 if node.kind == "head" else 2)

    def column_labels(self) -> list[tuple[float, str]]:
        """``(column, label)`` of every column, left to right. A block has two (an attention-only
        block keeps its empty MLP column, so drawings of different models line up)."""
        out = [(self.column(Node("embed")), "embed")]
        out += [(self.column(Node("input_mlp")), "input MLP")] if self.arch.has_input_mlp else []
        for layer in range(self.arch.n_layers):
            out += [(self.column(Node("head", layer, 0)), f"attn {layer}"), (self.column(Node("mlp", layer)), f"mlp {layer}")]
        return out + [(self.column(Node("logits")), "logits")]

    @cached_property
    def nodes(self) -> list[Node]:
        """Every node without a position, in residual-stream order: the writers, then the logits."""
        return self.writers + [Node("logits")]

    @cached_property
    def _node_index(self) -> dict[Node, int]:
        return {n: i for i, n in enumerate(self.nodes)}

    def node_order(self, node: Node) -> tuple[int, int]:
        """Sort key: residual-stream order, then position (summed-over-positions first)."""
        try:
            index = self._node_index[node.at(None)]
        except KeyError:
            raise ValueError(f"node {node.name} is not a component of this architecture") from None
        return (index, -1 if node.position is None else node.position)

    @cached_property
    def valid(self) -> Tensor:
        """``[n_writers, n_readers]`` bool: which writer feeds which reader."""
        w = torch.tensor([float(self.column(n)) for n in self.writers])
        r = torch.tensor([float(self.column(n)) for n, _ in self.readers])
        into_input_mlp = torch.tensor([n.kind in self.input_mlp_sources for n in self.writers])
        reads_input_mlp = torch.tensor([n.kind == "input_mlp" for n, _ in self.readers])
        # the input MLP's sources feed it and nothing else; it reads nothing else
        return (w[:, None] < r[None, :]) & (into_input_mlp[:, None] == reads_input_mlp[None, :])

    @property
    def n_slots(self) -> int:
        """Number of position slots of the score tensor."""
        return self.n_positions if self.by_position else 1

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.n_slots, len(self.writers), len(self.readers))

    @cached_property
    def mask(self) -> Tensor:
        """``[n_slots, n_writers, n_readers]`` bool, true on real edges."""
        return self.valid[None].expand(self.shape).clone()

    @property
    def n_edges(self) -> int:
        return int(self.mask.sum())

    def writer_index(self, node: Node) -> int:
        return self.writers.index(node.at(None))

    def reader_index(self, node: Node, which: str) -> int:
        return self.readers.index((node.at(None), which))

    # ------------------------------------------------------------------ edges <-> indices
    def edge(self, slot: int, w: int, r: int) -> Edge:
        pos = slot if self.by_position else None
        node, which = self.readers[r]
        return Edge(self.writers[w].at(pos), node.at(pos), which)

    def index(self, edge: Edge) -> tuple[int, int, int]:
        if self.by_position != (edge.source.position is not None):
            raise ValueError(
                f"edge {edge.name} is {'not ' if self.by_position else ''}position-resolved but "
                f"the graph is{'' if self.by_position else ' not'}"
            )
        slot = edge.source.position if self.by_position else 0
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"edge {edge.name}: position {slot} outside [0, {self.n_slots})")
        try:
            w, r = self.writer_index(edge.source), self.reader_index(edge.dest, edge.input)
        except ValueError:
            raise ValueError(f"edge {edge.name} names a component this model does not have") from None
        if not self.valid[w, r]:
            if edge.source.kind in self.input_mlp_sources:
                raise ValueError(f"edge {edge.name}: {edge.source.kind} reaches the residual stream only through the input MLP")
            if edge.dest.kind == "input_mlp":
                raise ValueError(f"edge {edge.name}: the input MLP reads only {' and '.join(self.input_mlp_sources)}")
            raise ValueError(f"edge {edge.name} goes backwards in the residual stream")
        return slot, w, r

    def edges(self, keep: Tensor | None = None) -> list[Edge]:
        """The edges where ``keep`` (default: all real edges) is true, in index order."""
        keep = self.mask if keep is None else keep & self.mask
        return [self.edge(*map(int, idx)) for idx in keep.nonzero()]

    def keep_mask(self, edges: list[Edge]) -> Tensor:
        keep = torch.zeros(self.shape, dtype=torch.bool)
        for edge in edges:
            keep[self.index(edge)] = True
        return keep


__all__ = ["TASK_POSITION_KINDS", "ModelGraph", "ReaderSite", "WriterSite"]
