"""Many keep masks in one forward: batched edge patching, for exact scores and ACDC.

The batch is repeated once per mask ("copy"; row ``e * b + i`` is example ``i`` under mask
``e``) and each reader site rebuilds its input per copy with that copy's ablated edges, by the
same linear rule as :func:`circuits.interventions.edge_patching.patched_edges`. Nothing
upstream of the earliest reader with an ablated edge changes, so on our model the forward
starts at that reader's block (:meth:`~interp_rand.model.transformer.HookedTransformer.run_from_block`)
from a :func:`clean_run` cache, and the writers before it are read from that cache.
That is the general path (any TL-protocol model, a TransformerBridge included).

On our model, :class:`~circuits.interventions.incremental_run.IncrementalRun` goes further: it holds a forward node by node, and a
candidate recomputes only the patched node at the positions its edges touch and what that
reaches through the kept edges (one head, the MLP and logits at the reached positions, the
later blocks only where reached), reading everything else from the run.
:func:`batched_edge_scores` (the ``exact`` discovery method) and
:func:`~circuits.methods.acdc.acdc_scores` use it, and the general path where it does not
apply (a bridge, the input MLP's edges). :func:`~circuits.interventions.edge_patching.exact_edge_scores`,
one forward per edge, stays the reference both are tested against
(``tests/circuits/interventions/test_batched_patching.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import einops
import torch
from torch import Tensor

from circuits.graph.architecture import head_results, input_mlp_output, run_model
from circuits.graph.model_graph import ModelGraph, ReaderSite
from circuits.interventions.metrics import Metric, evaluate_metric
from circuits.graph.writers import capture_hooks, reader_input, stack_writers
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


def _stack_from(model: Any, graph: ModelGraph, acts: dict[str, Tensor], first: int, upto: int,
                positions: Tensor | slice) -> Tensor:
    """Writers ``first..upto-1`` ``[rows, len(positions), n, d_model]`` from captured hook values
    (:func:`stack_writers` for a forward that started after writer ``first``'s predecessors)."""
    parts: list[Tensor] = []
    for site in graph.writer_sites:
        if site.writers.stop <= first or site.writers.start >= upto:
            continue
        value = acts[site.hook]
        if site.kind == "input_mlp":
            value = input_mlp_output(model, value)
        value = graph.to_stream_positions(site.kind, value)[:, positions]
        parts.append(head_results(model, site.layer, value) if site.kind == "head" else value[:, :, None])
    return torch.cat(parts, dim=2)[:, :, : upto - first]


def _shared_delta(ablated: Tensor, diff: Tensor, positions: Tensor | slice) -> Tensor:
    """:func:`_delta` for a mask shared by every row: ``ablated: [slots, w, r]`` float; ``diff:
    [rows, len(positions), w, d]`` → ``[rows, len(positions), r, d]``."""
    if ablated.shape[0] == 1:
        return einops.einsum(diff, ablated[0], "b p w d, w r -> b p r d")
    b, d = diff.shape[0], diff.shape[3]
    per_position = einops.rearrange(diff, "b p w d -> p w (b d)")
    out = torch.bmm(ablated[positions].transpose(1, 2), per_position)
    return einops.rearrange(out, "p r (b d) -> b p r d", b=b, d=d)


def _copy_deltas(ablated: Tensor, diff_pre: Tensor | None, diff_live: Tensor | None, positions: Tensor | slice,
                 n_positions: int) -> Tensor:
    """Each copy's ``Σ_w ablated[e, p, w, r] · diff_e[p, w]`` → ``[E, b, len(positions), r, d]``.

    ``ablated: [E, slots, n_w, r]`` float; ``diff_pre: [b or 1, p, n_pre, d]`` (the writers before
    the forward's start, the same for every copy) and ``diff_live: [E, b, p, n_w - n_pre, d]``.
    The edges every copy ablates go through one matmul (:func:`_shared_delta`); the few edges
    that differ between copies are added one by one (an indexed accumulate)."""
    E, S = ablated.shape[:2]
    n_pre = 0 if diff_pre is None else diff_pre.shape[2]
    ref = diff_live if diff_live is not None else diff_pre[None]
    b, p, d, r = ref.shape[1], ref.shape[2], ref.shape[4], ablated.shape[3]
    base = ablated.amin(0)  # [slots, n_w, r]: ablated in every copy
    extra = ablated - base
    delta = torch.zeros(E, b, p, r, d, dtype=ablated.dtype)
    if n_pre and base[:, :n_pre].any():
        delta += _shared_delta(base[:, :n_pre], diff_pre, positions)[None]
    if diff_live is not None and base[:, n_pre:].any():
        delta += _shared_delta(base[:, n_pre:], diff_live.flatten(0, 1), positions).unflatten(0, (E, b))
    nz = extra.nonzero()
    if len(nz):
        e, slot, w, r_ = nz.unbind(1)
        if S == 1:  # the edge spans every position
            t = len(e)
            pi = torch.arange(p).repeat(t)
            e, w, r_ = (x.repeat_interleave(p) for x in (e, w, r_))
        else:
            inverse = torch.full((n_positions,), -1, dtype=torch.long)
            inverse[positions] = torch.arange(p)
            pi = inverse[slot]
        vals = torch.empty(len(e), b, d, dtype=ablated.dtype)
        pre = w < n_pre
        if pre.any():
            vals[pre] = diff_pre[:, pi[pre], w[pre]].expand(b, -1, -1).transpose(0, 1)
        if (~pre).any():
            vals[~pre] = diff_live[e[~pre], :, pi[~pre], w[~pre] - n_pre]
        delta.permute(0, 2, 3, 1, 4).index_put_((e, pi, r_), vals, accumulate=True)
    return delta


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
    E, P = keeps.shape[0], graph.n_positions
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
    ablated = ablated_bool.to(replacement.dtype)
    hit = ablated_bool.any(2)  # [E, slots, R]
    hit = hit.expand(E, P, -1) if hit.shape[1] == 1 else hit
    acts: dict[str, Tensor] = {}
    shared: dict[str, tuple[Tensor | slice, Tensor]] = {}
    groups: dict[str, list[int]] = {}
    for site in graph.reader_sites:
        groups.setdefault(site.group, []).extend(site.readers)
    b = None

    def rebuilt_delta(span: list[int], rows: int) -> tuple[Tensor | slice, Tensor]:
        n_w = graph.writers_upto[span[0]]
        positions = hit[:, :, span].any(2).any(0).nonzero()[:, 0]
        if len(positions) == P:
            positions = slice(None)
        n_pre = min(first, n_w)
        diff_pre = diff_live = None
        if n_pre:  # writers before the start: the unpatched run's values, the same for every copy
            diff_pre = clean.diff(replacement)[:, positions, :n_pre]
        if n_w > n_pre:
            live = _stack_from(model, graph, acts, n_pre, n_w, positions)
            diff_live = replacement[None, :, positions, n_pre:n_w] - live.unflatten(0, (E, rows // E))
        delta = _copy_deltas(ablated[:, :, :n_w, span], diff_pre, diff_live, positions, P)
        return positions, delta.flatten(0, 1)  # [rows, p, r, d]

    def site_hook(site: ReaderSite):
        span = groups[site.group]
        lo, n = site.readers.start - span[0], len(site.readers)

        def hook(value: Tensor, hook: Any) -> Tensor:
            rows = value.shape[0]
            if site.group not in shared:
                shared[site.group] = rebuilt_delta(span, rows)
            positions, delta = shared[site.group]
            delta = delta[:, :, lo : lo + n]
            if site.source == site.hook:
                acts[site.source] = value
            x = reader_input(model, graph, site, acts, positions)
            readers_hit = hit[:, positions][:, :, site.readers]  # [E, p, n]
            dest = positions
            if site.task_positions:
                dest = torch.arange(P)[positions] - graph.arch.seed_offset
                task = dest >= 0
                dest, x, delta, readers_hit = dest[task], x[:, task], delta[:, task], readers_hit[:, task]
            rebuilt = site.rebuild(model, x[:, :, None] + delta)
            if isinstance(dest, slice) and bool(readers_hit.all()):  # every copy rebuilds it everywhere
                return rebuilt
            out = value.clone()
            rows_hit = readers_hit.repeat_interleave(rows // E, 0)  # [rows, p, n]
            if site.per_head:
                out[:, dest] = torch.where(rows_hit[..., None], rebuilt, value[:, dest])
            else:
                out[:, dest] = torch.where(rows_hit[:, :, 0, None], rebuilt, value[:, dest])
            return out

        return hook

    hooks = capture_hooks(graph, acts, detach=False)
    patched = [site for site in graph.reader_sites if hit[:, :, site.readers].any()]
    sources = dict.fromkeys(s.source for s in patched if s.source not in (None, s.hook))
    hooks += capture_into(acts, sources, detach=False)
    hooks += [(site.hook, site_hook(site)) for site in patched]
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


def batched_edge_scores(
    model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, metric: Metric, metric_batch: Any = None,
    progress: bool = False, max_batch: int | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET,
    incremental: bool = True,
) -> Tensor:
    """:func:`exact_edge_scores` (the slow reference, one forward per edge), many edges per
    forward: the single-edge ablations are stacked along the batch (``max_batch`` edges per
    forward, default as many as fit ``memory_budget``). On our model (``incremental``) each
    edge recomputes only its reader's node and what that reaches (:class:`IncrementalRun`);
    otherwise (a TransformerBridge, the input MLP's edges, ``incremental=False``) the edges are
    grouped by their reader's block and each forward starts there from the unpatched run's
    cache (:func:`run_with_edge_sets`). Equal to the reference up to float rounding."""
    metric_batch = batch if metric_batch is None else metric_batch
    if incremental and IncrementalRun.supports(model):
        return _incremental_edge_scores(model, graph, batch, replacement, metric, metric_batch, progress, max_batch,
                                        memory_budget)
    clean = clean_run(model, graph, batch)
    base = evaluate_metric(metric, clean.logits, metric_batch)
    edges = graph.mask.nonzero()  # [n, 3]: slot, writer, reader
    return _general_edge_scores(model, graph, batch, replacement, metric, metric_batch, progress, max_batch,
                                memory_budget, clean, base, edges, torch.zeros(graph.shape))


def _general_edge_scores(model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, metric: Metric,
                         metric_batch: Any, progress: bool, max_batch: int | None, memory_budget: int, clean: CleanRun,
                         base: Tensor, edges: Tensor, scores: Tensor) -> Tensor:
    """Fill ``scores`` at ``edges [n, 3]`` by :func:`run_with_edge_sets`."""
    layer = _reader_layers(graph)[edges[:, 2]]
    order = torch.sort(layer, stable=True).indices
    edges, layer = edges[order], layer[order]
    size = copies_per_forward(graph, model, len(batch), memory_budget, max_batch)
    chunks = []
    for l in layer.unique().tolist():
        idx = (layer == l).nonzero()[:, 0]
        chunks += [edges[idx[i : i + size]] for i in range(0, len(idx), size)]
    for chunk in bar(chunks, desc=f"patching {size} edges per forward", enabled=progress):
        keeps = torch.ones((len(chunk), *graph.shape), dtype=torch.bool)
        keeps[torch.arange(len(chunk)), chunk[:, 0], chunk[:, 1], chunk[:, 2]] = False
        logits = run_with_edge_sets(model, graph, batch, keeps, replacement, clean)
        for e, (slot, w, r) in enumerate(chunk.tolist()):
            scores[slot, w, r] = float(evaluate_metric(metric, logits[e], metric_batch) - base)
    return scores


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


def _incremental_edge_scores(model: Any, graph: ModelGraph, batch: Any, replacement: Tensor, metric: Metric,
                             metric_batch: Any, progress: bool, max_batch: int | None, memory_budget: int) -> Tensor:
    run = IncrementalRun(model, graph, batch, replacement)
    base = evaluate_metric(metric, run.logits, metric_batch)
    edges = graph.mask.nonzero()  # [n, 3]: slot, writer, reader
    stage = run.stage_of[edges[:, 2]]
    scores = torch.zeros(graph.shape)
    if (stage < 0).any():  # the input MLP's edges: the general path
        clean = CleanRun(batch, run.logits, run.live, [])
        _general_edge_scores(model, graph, batch, replacement, metric, metric_batch, progress, max_batch,
                             memory_budget, clean, base, edges[stage < 0], scores)
    edges, stage = edges[stage >= 0], stage[stage >= 0]
    # a chunk's edges share a stage, a position and, in a block's attention, whether they enter
    # queries (which change one output position) or keys/values (which change every query
    # allowed to attend them), so that the positions recomputed for one copy are the others'
    start = torch.tensor([run.stages[s][2].start for s in range(len(run.stages))])[stage]
    kv = torch.tensor([run.stages[s][0] == "attn" for s in range(len(run.stages))])[stage] & (
        edges[:, 2] - start >= graph.arch.n_heads)
    group = (stage * graph.n_slots + edges[:, 0]) * 2 + kv.long()
    order = torch.sort(group * len(graph.readers) + edges[:, 2], stable=True).indices
    edges, stage, group = edges[order], stage[order], group[order]
    size = incremental_copies(graph, model, len(batch), memory_budget, max_batch)
    chunks = []
    for g in group.unique().tolist():
        idx = (group == g).nonzero()[:, 0]
        chunks += [(int(stage[idx[0]]), edges[idx[i : i + size]]) for i in range(0, len(idx), size)]
    for s, chunk in bar(chunks, desc=f"patching {size} edges per pass", enabled=progress):
        copy = torch.arange(len(chunk))
        pos, dx, aff = run.edge_inputs(s, copy, chunk[:, 0], chunk[:, 1], chunk[:, 2])
        logits = run.propagate(s, pos, dx, aff, graph.mask)
        for e, (slot, w, r) in enumerate(chunk.tolist()):
            scores[slot, w, r] = float(evaluate_metric(metric, logits[e], metric_batch) - base)
    return scores


__all__ = ["CleanRun", "DEFAULT_MEMORY_BUDGET", "MAX_INCREMENTAL_ROWS", "MAX_ROWS",
           "batched_edge_scores", "clean_run", "copies_per_forward", "incremental_copies", "run_with_edge_sets"]
