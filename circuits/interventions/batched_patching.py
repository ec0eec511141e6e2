"""Many candidate ablations per forward: batched edge patching, for exact scores and ACDC.

:class:`PatchRun` is the one engine both use. It holds one forward of a batch and evaluates
many candidates on top of it (copy ``e`` ablates its own edges on top of a keep mask), by one
of two paths that share its state and the rule of :mod:`circuits.interventions.edge_patching`:

* the incremental path, on our model
  (:class:`~circuits.interventions.incremental_run.IncrementalRun`): the forward is held node by
  node, and a candidate recomputes only the patched node at the positions its edges touch and
  what that reaches through the kept edges (one head, the MLP and logits at the reached
  positions, the later blocks only where reached), reading everything else from the run;
* the block path (:func:`run_with_edge_sets`), for what the incremental path does not decompose
  (a TransformerBridge or any TL-protocol model, the input MLP's edges, ``incremental=False``):
  the batch is repeated once per candidate ("copy"; row ``e * b + i`` is example ``i`` under
  mask ``e``) and each reader site rebuilds its input per copy with that copy's ablated edges
  (:func:`~circuits.interventions.edge_patching.edge_hooks`). Nothing upstream of the earliest
  reader with an ablated edge changes, so on our model the forward starts at that reader's
  block (:meth:`~interp_rand.model.transformer.HookedTransformer.run_from_block`) from a
  :func:`clean_run` cache, and the writers before it are read from that cache.

:func:`batched_edge_scores` (the ``exact`` discovery method) and
:func:`~circuits.methods.acdc.acdc_scores` drive it.
:func:`~circuits.interventions.edge_patching.exact_edge_scores`, one forward per edge, stays the
reference both paths are tested against (``tests/circuits/interventions/test_batched_patching.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.edge_patching import edge_hooks
from circuits.interventions.metrics import Metric, evaluate_metric
from circuits.graph.writers import capture_hooks, stack_writers
from circuits.interventions.incremental_run import IncrementalRun
from interp_rand.model.capture import capture_into
from interp_rand.model.hook_names import hook_name
from interp_rand.progress import bar


DEFAULT_MEMORY_BUDGET = 512 * 2**20  # bytes of activations per batched forward
MAX_ROWS = 512  # examples x copies per batched forward, by default


@dataclass(frozen=True)
class CleanRun:
    """What a batched patched forward reuses from one unpatched run of ``batch``.

    Attributes:
        batch: the batch run.
        logits: its logits.
        writers: every writer's value ``[b, P, n_writers, d_model]`` (:func:`stack_writers`).
        resid: the residual stream entering each block, ``[b, P, d_model]`` per block, then the
            final ``hook_resid_post`` (index ``n_layers``).
    """

    batch: Any
    logits: Tensor
    writers: Tensor
    resid: list[Tensor]
    _diff: list = dataclasses.field(default_factory=list, repr=False, compare=False)

    def diff(self, replacement: Tensor) -> Tensor:
        """``replacement − writers`` ``[b, P, n_writers, d_model]``, computed once per replacement."""
        if not self._diff or self._diff[0] is not replacement:
            self._diff[:] = [replacement, replacement - self.writers]
        return self._diff[1]


@torch.no_grad()
def clean_run(model: Any, graph: ModelGraph, batch: Any) -> CleanRun:
    """One unpatched forward of ``batch``, keeping what :func:`run_with_edge_sets` reuses."""
    L = graph.arch.n_layers
    names = [hook_name(l, "hook_resid_pre") for l in range(L)] + [hook_name(L - 1, "hook_resid_post")]
    acts: dict[str, Tensor] = {}
    hooks = capture_hooks(graph, acts) + capture_into(acts, names)
    with model.hooks(fwd_hooks=hooks):
        logits = run_model(model, batch)
    return CleanRun(batch, logits, stack_writers(model, graph, acts), [acts[n] for n in names])


def _reader_layers(graph: ModelGraph) -> Tensor:
    """``[n_readers]``: the block whose residual each reader reads (-1: the input MLP, before
    the blocks; ``n_layers``: the logits, after them)."""
    out = torch.empty(len(graph.readers), dtype=torch.long)
    for site in graph.reader_sites:
        out[site.readers.start : site.readers.stop] = (
            graph.arch.n_layers if site.input == "logits" else -1 if site.layer is None else site.layer
        )
    return out


def _first_writer(graph: ModelGraph, layer: int) -> int:
    """Index of the first writer computed in block ``layer`` (all writers if ``layer`` is past
    the last block)."""
    for site in graph.writer_sites:
        if site.layer is not None and site.layer >= layer:
            return site.writers.start
    return len(graph.writers)


def _suffix_runner(model: Any):
    """``run(x [rows, P, d_model], layer, batch, copies) -> logits`` running blocks ``layer..``
    of our :class:`~interp_rand.model.transformer.HookedTransformer` (their hooks fire) from the
    residual ``x`` entering block ``layer`` (``layer = n_layers``: ``x`` is the final residual);
    ``None`` for other models (a TransformerBridge), which then run their whole forward."""
    from interp_rand.model.transformer import HookedTransformer

    if not isinstance(model, HookedTransformer):
        return None

    def run(x: Tensor, layer: int, batch: Any, copies: int) -> Tensor:
        mask = None if isinstance(batch, Tensor) else batch.attention_mask
        return model.run_from_block(x, layer, None if mask is None else mask.repeat(copies, 1, 1))

    return run


def _repeat_batch(batch: Any, copies: int) -> Any:
    if isinstance(batch, Tensor):
        return batch.repeat(copies, *([1] * (batch.dim() - 1)))
    rep = lambda t: None if t is None else t.repeat(copies, *([1] * (t.dim() - 1)))
    return dataclasses.replace(batch, inputs=rep(batch.inputs), seeds=rep(batch.seeds),
                               attention_mask=rep(batch.attention_mask), targets=rep(batch.targets),
                               loss_mask=rep(batch.loss_mask), metadata={})


@torch.no_grad()
def run_with_edge_sets(
    model: Any, graph: ModelGraph, batch: Any, keeps: Tensor, replacement: Tensor, clean: CleanRun | None = None,
) -> Tensor:
    """Logits ``[E, b, ...]`` of ``batch`` under each of ``E`` keep masks ``keeps [E, n_slots,
    n_writers, n_readers]`` in one forward: ``[e]`` equals ``run_with_edges(..., keeps[e], ...)``
    up to float rounding.

    ``clean`` (:func:`clean_run` of ``batch``) lets our model's forward start at the block of the
    earliest reader with an ablated edge (everything before it is that unpatched run); without
    it, or on a model that cannot be run from a block, every copy runs the whole forward.
    """
    if keeps.dim() != 4 or tuple(keeps.shape[1:]) != graph.shape:
        raise ValueError(f"keep masks have shape {tuple(keeps.shape)}; the graph needs [E, *{graph.shape}]")
    E = keeps.shape[0]
    ablated_bool = graph.mask[None] & ~keeps
    layers = _reader_layers(graph)
    hit_readers = ablated_bool.any(2).any(1).any(0)  # [R]
    if not hit_readers.any():
        logits = clean.logits if clean is not None else run_model(model, batch)
        return logits[None].expand(E, *logits.shape)
    runner = _suffix_runner(model) if clean is not None else None
    start = int(layers[hit_readers].min())
    if runner is None or start < 0:
        start, runner = -1, None
    first = _first_writer(graph, start) if runner is not None else 0
    hooks = edge_hooks(model, graph, ablated_bool, replacement, first,
                       clean.diff(replacement) if first else None)
    with model.hooks(fwd_hooks=hooks):
        if runner is not None:
            x = clean.resid[start]
            logits = runner(x.repeat(E, 1, 1), start, batch, E)
        else:
            logits = run_model(model, _repeat_batch(batch, E))
    return logits.unflatten(0, (E, -1))


def copies_per_forward(graph: ModelGraph, model: Any, batch_size: int, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                       max_batch: int | None = None) -> int:
    """How many keep masks one batched forward evaluates: ``max_batch`` if given, else as many
    as fit ``memory_budget`` bytes by a rough per-row estimate of the activations and deltas,
    and no more than make :data:`MAX_ROWS` rows (past that a larger forward is no faster per row
    on CPU: measured on the zoo's models, 256 examples gain nothing from a second copy)."""
    if max_batch is not None:
        if max_batch < 1:
            raise ValueError(f"max_batch={max_batch} must be >= 1")
        return max_batch
    cap = max(1, MAX_ROWS // max(1, batch_size))
    cfg, P = model.cfg, graph.n_positions
    d, h = int(cfg.d_model), int(cfg.n_heads)
    per_position = d * (3 * len(graph.writers) + 8 * h + 16) + 4 * int(getattr(cfg, "d_mlp", 4 * d) or 0) + 4 * h * P
    per_row = 4 * P * per_position
    return max(1, min(cap, int(memory_budget // max(1, per_row * batch_size))))


MAX_INCREMENTAL_ROWS = 2048  # examples x copies per incremental propagation, by default


def incremental_copies(graph: ModelGraph, model: Any, batch_size: int, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                       max_batch: int | None = None) -> int:
    """How many candidates one :meth:`IncrementalRun.propagate` evaluates: ``max_batch`` if
    given, else as many as fit ``memory_budget`` by the largest per-copy tensor (a block's q/k/v
    inputs, ``3 n_heads`` readers at every position), and no more than make
    :data:`MAX_INCREMENTAL_ROWS` rows."""
    if max_batch is not None:
        return copies_per_forward(graph, model, batch_size, memory_budget, max_batch)
    d, h = int(model.cfg.d_model), int(model.cfg.n_heads)
    per_copy = 4 * batch_size * graph.n_positions * (3 * h + len(graph.writers)) * d * 3
    return max(1, min(MAX_INCREMENTAL_ROWS // max(1, batch_size), int(memory_budget // max(1, per_copy))))


class PatchRun:
    """One forward of ``batch`` and many candidate edge ablations evaluated on top of it: the one
    engine of :func:`batched_edge_scores` and :func:`~circuits.methods.acdc.acdc_scores`.

    :meth:`evaluate` takes the candidates as edge lists (copy ``e`` ablates its listed edges on
    top of a keep mask) and runs them on the incremental path where it decomposes the readers
    (``stage_of[r] >= 0``: our model, the readers of a block or the logits) and on the block path
    elsewhere (module docstring); :meth:`commit` makes one candidate the run's state (ACDC's
    accepted removals). Both paths read the same unpatched forward: the incremental run's capture
    serves the block path as its :class:`CleanRun` until a commit changes the run, after which
    the block path makes its own (:func:`clean_run`, once).
    """

    def __init__(self, model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, incremental: bool = True):
        self.model, self.graph, self.batch, self.replacement = model, graph, batch, replacement
        self.incremental = (IncrementalRun(model, graph, batch, replacement)
                            if incremental and IncrementalRun.supports(model) else None)
        inc = self.incremental
        self._clean = clean_run(model, graph, batch) if inc is None else CleanRun(batch, inc.logits, inc.live, inc.resid)
        self.stage_of = inc.stage_of if inc is not None else torch.full((len(graph.readers),), -1, dtype=torch.long)

    @property
    def logits(self) -> Tensor:
        """The run's logits (under the committed candidates)."""
        return self.incremental.logits if self.incremental is not None else self._clean.logits

    def clean(self) -> CleanRun:
        """The unpatched forward the block path starts from."""
        if self._clean is None:
            self._clean = clean_run(self.model, self.graph, self.batch)
        return self._clean

    def copies(self, stage: int, batch_size: int, memory_budget: int = DEFAULT_MEMORY_BUDGET,
               max_batch: int | None = None) -> int:
        """How many candidates one :meth:`evaluate` into a reader of ``stage`` takes."""
        if stage >= 0:
            return incremental_copies(self.graph, self.model, batch_size, memory_budget, max_batch)
        return copies_per_forward(self.graph, self.model, batch_size, memory_budget, max_batch)

    @torch.no_grad()
    def evaluate(self, copy: Tensor, slot: Tensor, writer: Tensor, reader: Tensor, keep: Tensor,
                 updates: list | None = None) -> Tensor:
        """Logits ``[E, b, ...]`` when copy ``copy[i]`` ablates the edge ``(slot[i], writer[i],
        reader[i])`` (one entry per edge; a copy may ablate several) on top of ``keep`` (the keep
        mask this run holds: the graph's, or ACDC's kept set as committed). On the incremental
        path the readers share one stage. With ``updates`` (a list), what each copy changed is
        appended to it, for :meth:`commit`."""
        stage = self.stage_of[reader]
        if self.incremental is not None and bool((stage >= 0).all()):
            s = int(stage[0])
            if not bool((stage == s).all()):
                raise ValueError(f"one incremental evaluation patches the readers of one stage, not of {stage.unique().tolist()}")
            pos, dx, aff = self.incremental.edge_inputs(s, copy, slot, writer, reader)
            return self.incremental.propagate(s, pos, dx, aff, keep, updates)
        keeps = keep[None].repeat(int(copy.max()) + 1, 1, 1, 1)
        keeps[copy, slot, writer, reader] = False
        return run_with_edge_sets(self.model, self.graph, self.batch, keeps, self.replacement, self.clean())

    def commit(self, updates: list, copy: int) -> None:
        """Make copy ``copy`` of the :meth:`evaluate` call that filled ``updates`` the run's state
        (nothing to do on the block path, which reads the keep mask it is given)."""
        if updates and self.incremental is not None:
            self.incremental.commit(updates, copy)
            self._clean = None  # the capture is the committed run now, no longer the unpatched one

    def chunks(self, edges: Tensor, batch_size: int, memory_budget: int = DEFAULT_MEMORY_BUDGET,
               max_batch: int | None = None) -> list[Tensor]:
        """``edges [n, 3]`` (slot, writer, reader), each to be ablated on its own, in groups that
        one :meth:`evaluate` takes: on the block path, edges whose readers read the same block
        (its forward starts there); on the incremental path, edges sharing a stage, a position
        and, in a block's attention, whether they enter queries (which change one output
        position) or keys/values (which change every query allowed to attend them), so that the
        positions recomputed for one copy are the others'."""
        graph, out = self.graph, []
        stage = self.stage_of[edges[:, 2]]
        block = edges[stage < 0]
        if len(block):
            layer = _reader_layers(graph)[block[:, 2]]
            order = torch.sort(layer, stable=True).indices
            block, layer = block[order], layer[order]
            size = self.copies(-1, batch_size, memory_budget, max_batch)
            for l in layer.unique().tolist():
                idx = (layer == l).nonzero()[:, 0]
                out += [block[idx[i : i + size]] for i in range(0, len(idx), size)]
        edges, stage = edges[stage >= 0], stage[stage >= 0]
        if len(edges):
            run = self.incremental
            start = torch.tensor([run.stages[s][2].start for s in range(len(run.stages))])[stage]
            kv = torch.tensor([run.stages[s][0] == "attn" for s in range(len(run.stages))])[stage] & (
                edges[:, 2] - start >= graph.arch.n_heads)
            group = (stage * graph.n_slots + edges[:, 0]) * 2 + kv.long()
            order = torch.sort(group * len(graph.readers) + edges[:, 2], stable=True).indices
            edges, group = edges[order], group[order]
            size = self.copies(0, batch_size, memory_budget, max_batch)
            for g in group.unique().tolist():
                idx = (group == g).nonzero()[:, 0]
                out += [edges[idx[i : i + size]] for i in range(0, len(idx), size)]
        return out


def batched_edge_scores(
    model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, metric: Metric, metric_batch: Any = None,
    progress: bool = False, max_batch: int | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET,
    incremental: bool = True,
) -> Tensor:
    """:func:`~circuits.interventions.edge_patching.exact_edge_scores` (the slow reference, one
    forward per edge), many edges per forward: the single-edge ablations are evaluated as the
    copies of one :class:`PatchRun` (``max_batch`` edges per evaluation, default as many as fit
    ``memory_budget``). On our model (``incremental``) each edge recomputes only its reader's
    node and what that reaches; otherwise (a TransformerBridge, the input MLP's edges,
    ``incremental=False``) the edges are grouped by their reader's block and each forward starts
    there from the unpatched run. Equal to the reference up to float rounding."""
    metric_batch = batch if metric_batch is None else metric_batch
    run = PatchRun(model, graph, batch, replacement, incremental)
    base = evaluate_metric(metric, run.logits, metric_batch)
    scores = torch.zeros(graph.shape)
    chunks = run.chunks(graph.mask.nonzero(), len(batch), memory_budget, max_batch)
    for chunk in bar(chunks, desc=f"patching {graph.n_edges} edges in {len(chunks)} passes", enabled=progress):
        logits = run.evaluate(torch.arange(len(chunk)), chunk[:, 0], chunk[:, 1], chunk[:, 2], graph.mask)
        for e, (slot, w, r) in enumerate(chunk.tolist()):
            scores[slot, w, r] = float(evaluate_metric(metric, logits[e], metric_batch) - base)
    return scores


__all__ = ["CleanRun", "DEFAULT_MEMORY_BUDGET", "MAX_INCREMENTAL_ROWS", "MAX_ROWS", "PatchRun",
           "batched_edge_scores", "clean_run", "copies_per_forward", "incremental_copies", "run_with_edge_sets"]
