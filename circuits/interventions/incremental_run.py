"""The incremental path of batched edge patching: one forward kept node by node, so that a
candidate edge's forward is the patched node and what it reaches (:class:`IncrementalRun`).
:func:`circuits.interventions.batched_patching.batched_edge_scores` and ACDC
(:mod:`circuits.methods.acdc`) drive it; the block path of
:mod:`~circuits.interventions.batched_patching` serves what it does not decompose."""

from __future__ import annotations

from typing import Any

import einops
import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.writers import capture_hooks, stack_writers
from circuits.interventions.edge_patching import add_edge_deltas, each_position
from interp_rand.model.capture import capture_into
from interp_rand.model.hook_names import hook_name


def _ix(*indices: Tensor) -> tuple:
    """``(slice(None), *indices)`` with the 1-d index tensors reshaped to broadcast against each
    other: an outer-product index of axes 1.. of a ``[b, ...]`` tensor."""
    n = len(indices)
    return (slice(None), *(ix.view(*([1] * k), -1, *([1] * (n - k - 1))) for k, ix in enumerate(indices)))


class IncrementalRun:
    """One forward of ``batch`` under a keep mask, held node by node, so that a change to some
    readers' inputs is evaluated by recomputing only what it reaches.

    A patched edge into reader ``r`` changes ``r``'s residual input, and only at the edge's
    position; its node's output changes only where that input reaches (a query input: its own
    position; a key or value input: the queries allowed to attend it, for any example; an MLP:
    its position), and a changed writer changes a later reader's input only through an edge the
    keep mask keeps. :meth:`propagate` follows exactly that, stage by stage (a block's heads,
    its MLP, the logits), recomputing only the heads and positions whose inputs changed and
    reading everything else (``q/k/v``, ``z``, the writers, each reader's input, the logits)
    from this run. So a candidate costs about one head and what it reaches instead of whole
    blocks. Where every reader of a stage gets the same change and had the same input (the
    unpatched run), the stage normalises once and projects every head in one matmul, as the
    model's own forward does. :meth:`commit` makes one candidate the new state (ACDC's accepted
    removals).

    Only our :class:`~interp_rand.model.transformer.HookedTransformer` is decomposed this way
    (:meth:`supports`): the stages use its public modules (``blocks[l].ln1``, the attention
    weights, ``blocks[l].ln2``/``mlp``, ``ln_final``, ``unembed``), its attention mask
    (``allowed_keys``) and the block's mixer's own steps (:class:`~interp_rand.model.mixer.Mixer`:
    ``project_shared``/``project_heads``, ``mix_at`` for the changed heads at the queries they
    reach, ``head_writes``/``heads_write``), so any mixer kind is decomposed alike. ``tests/circuits/interventions/test_batched_patching.py``
    pins the results against :func:`~circuits.interventions.edge_patching.run_with_edges`.
    Readers of the input MLP are not decomposed (``stage_of`` is -1):
    :class:`~circuits.interventions.batched_patching.PatchRun`, which drives this run, takes the
    block path for them. A candidate's input changes follow the one rule of
    :mod:`circuits.interventions.edge_patching` (:func:`~circuits.interventions.edge_patching.add_edge_deltas`).
    """

    @staticmethod
    def supports(model: Any) -> bool:
        from interp_rand.model.transformer import HookedTransformer

        return isinstance(model, HookedTransformer)

    @torch.no_grad()
    def __init__(self, model: Any, graph: ModelGraph, batch: Any, replacement: Tensor):
        if not self.supports(model):
            raise TypeError(f"IncrementalRun decomposes interp_rand's HookedTransformer, not {type(model).__name__}")
        self.model, self.graph, self.batch = model, graph, batch
        L, H = graph.arch.n_layers, graph.arch.n_heads
        self.offset = graph.arch.seed_offset
        names = [hook_name(l, n) for l in range(L) for n in ("hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v")]
        if not graph.arch.attn_only:
            names += [hook_name(l, "hook_resid_mid") for l in range(L)]
        names.append(hook_name(L - 1, "hook_resid_post"))
        acts: dict[str, Tensor] = {}
        with model.hooks(fwd_hooks=capture_hooks(graph, acts) + capture_into(acts, names)):
            self.logits = run_model(model, batch)
        # the residual entering each block, then the final one (a CleanRun's, while nothing is committed)
        self.resid = [acts[n] for n in names if n.endswith("hook_resid_pre")] + [acts[names[-1]]]
        self.live = stack_writers(model, graph, acts)  # [b, P, W, d]
        b, P = self.live.shape[:2]
        self.replacement = replacement.expand(b, *replacement.shape[1:])
        mask = None if isinstance(batch, Tensor) else batch.attention_mask
        self.allowed = model.allowed_keys(mask, b, P - self.offset)  # None, [P, P] or [b, P, P]
        allowed = torch.ones(P, P, dtype=torch.bool) if self.allowed is None else self.allowed
        self.reach = allowed if allowed.dim() == 2 else allowed.any(0)  # [query, key], any example
        # stages in forward order: (kind, layer, readers, writers); each reader's residual input
        self.stages: list[tuple[str, int | None, range, range | None]] = []
        self.xin: list[Tensor] = []  # [b, P, n_readers, d] per stage
        self.uniform: list[bool] = []  # every reader of the stage has the same input
        writer_site = {(s.kind, s.layer): s.writers for s in graph.writer_sites}
        self.stage_of = torch.full((len(graph.readers),), -1, dtype=torch.long)
        for site in graph.reader_sites:
            if site.layer is None and site.input != "logits":
                continue  # the input MLP: not decomposed
            kind = "attn" if site.per_head else site.input
            if kind == "attn" and site.input != "q":
                continue  # k and v join the q site's stage (their sites follow it)
            readers = range(site.readers.start, site.readers.start + (3 * H if kind == "attn" else 1))
            writers = None if kind == "logits" else writer_site[("head" if kind == "attn" else "mlp", site.layer)]
            self.stage_of[readers.start : readers.stop] = len(self.stages)
            self.stages.append((kind, site.layer, readers, writers))
            self.xin.append(acts[site.source][:, :, None].expand(-1, -1, len(readers), -1).clone())
            self.uniform.append(True)
        self.qkv = [torch.stack([acts[hook_name(l, f"attn.hook_{t}")] for t in "qkv"], 2) for l in range(L)]  # [b, P, 3, H, e]
        self.z = [acts[hook_name(l, "attn.hook_z")] for l in range(L)]  # [b, P, H, e]

    # -----------------------------------------------------------------------------------------
    def edge_inputs(self, stage: int, copy: Tensor, slot: Tensor, writer: Tensor,
                    reader: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What :meth:`propagate` takes when copy ``copy[i]`` ablates the edge ``(slot[i],
        writer[i], reader[i])`` into stage ``stage`` (one entry per ablated edge; a copy may
        ablate several): the positions touched ``[n]``, the change to the stage's reader inputs
        there ``[E, b, n, n_readers, d]`` (the writer's replacement minus its value in this run)
        and where it is ``[n_readers, n]`` (any copy)."""
        P, readers = self.graph.n_positions, self.stages[stage][2]
        E = int(copy.max()) + 1
        b, d = self.live.shape[0], self.live.shape[3]
        if not self.graph.by_position:  # slot 0 spans every position
            copy, slot, writer, reader = each_position(P, copy, slot, writer, reader)
        pos, at = torch.unique(slot, return_inverse=True)
        local = reader - readers.start
        values = (self.replacement[:, slot, writer] - self.live[:, slot, writer]).transpose(0, 1)  # [m, b, d]
        dx = torch.zeros(E, len(pos), len(readers), b, d, dtype=self.live.dtype).permute(0, 3, 1, 2, 4)
        add_edge_deltas(dx, copy, at, local, values)  # [E, b, n, n_readers, d]
        aff = torch.zeros(len(readers), len(pos), dtype=torch.bool)
        aff[local, at] = True
        return pos, dx, aff

    @torch.no_grad()
    def propagate(self, stage: int, pos: Tensor, dx: Tensor, aff: Tensor, keep: Tensor,
                  updates: list | None = None) -> Tensor:
        """Logits ``[E, b, task positions, vocab]`` when stage ``stage``'s reader inputs change
        by ``dx [E, b, len(pos), n_readers, d]`` at positions ``pos`` (where ``aff [n_readers,
        len(pos)]``), and every later reader's input by what reaches it through the edges that
        ``keep [n_slots, n_writers, n_readers]`` keeps. With ``updates`` (a list), what each copy
        changed is appended to it, for :meth:`commit`."""
        E, P = dx.shape[0], self.graph.n_positions
        keep_p = keep if keep.shape[0] == P else keep.expand(P, -1, -1)
        # (writers [nw], positions [n], their deltas [E, b, n, nw, d] (or a function making them), their sum [E, b, n, d])
        changed: list[tuple[Tensor, Tensor, Any, Tensor]] = []
        resid, n_summed = None, 0  # [E, b, P, d]: the sum of the changed writers' deltas so far
        logits, shared = None, False
        for s in range(stage, len(self.stages)):
            kind, layer, readers, _ = self.stages[s]
            if s > stage:
                if not changed:
                    break
                if resid is None:
                    resid = torch.zeros(E, dx.shape[1], P, self.live.shape[3], dtype=self.live.dtype)
                for _, at, _, summed in changed[n_summed:]:
                    resid[:, :, at] += summed
                n_summed = len(changed)
                w = torch.cat([c[0] for c in changed])
                pos = torch.unique(torch.cat([c[1] for c in changed]))
                k = keep_p[pos][:, w][:, :, readers.start : readers.stop]  # [n, Wc, Rs]
                if bool(k.all()):  # every change reaches every reader here: the residual stream's change
                    shared = self.uniform[s]
                    dx = resid[:, :, pos, None]
                    if not shared:
                        dx = dx.expand(-1, -1, -1, len(readers), -1)
                    aff = torch.ones(len(readers), len(pos), dtype=torch.bool)
                    self._stage(s, kind, layer, pos, dx, aff, shared, changed, updates)
                    if kind == "logits":
                        logits = self._last_logits
                    continue
                where = torch.zeros(len(w), len(pos), dtype=torch.bool)
                delta = torch.zeros(E, dx.shape[1], len(pos), len(w), self.live.shape[3], dtype=self.live.dtype)
                col = 0
                for writers, at, values, _ in changed:
                    values = values() if callable(values) else values
                    j = torch.searchsorted(pos, at)
                    where[col : col + len(writers), j] = True
                    delta[:, :, j, col : col + len(writers)] = values
                    col += len(writers)
                aff = (where.T[:, :, None] & k).any(1).T  # [Rs, n]
                hit = aff.any(0)
                if not hit.any():
                    continue
                if not hit.all():
                    pos, aff, delta, k = pos[hit], aff[:, hit], delta[:, :, hit], k[hit]
                shared = self.uniform[s] and bool((k == k[:, :, :1]).all())
                if shared:  # every reader gets the same change: one [E, b, n, 1, d]
                    dx = einops.einsum(delta, k[:, :, 0].to(delta.dtype), "e b p w d, p w -> e b p d")[:, :, :, None]
                    aff = aff[:1].expand(len(readers), -1)
                else:
                    dx = einops.einsum(delta, k.to(delta.dtype), "e b p w d, p w r -> e b p r d")
            self._stage(s, kind, layer, pos, dx, aff, shared, changed, updates)
            if kind == "logits":
                logits = self._last_logits
        if logits is None:
            logits = self.logits.expand(E, *self.logits.shape)
        return logits

    def _stage(self, s: int, kind: str, layer: int | None, pos: Tensor, dx: Tensor, aff: Tensor, shared: bool,
               changed: list, updates: list | None) -> None:
        if kind == "attn":
            self._attention(s, layer, pos, dx, aff, shared, changed, updates)
        elif kind == "mlp":
            self._mlp(s, layer, pos, dx, aff, changed, updates)
        else:
            self._last_logits = self._logits(s, pos, dx, aff, updates)

    def _attention(self, s: int, layer: int, pos: Tensor, dx: Tensor, aff: Tensor, shared: bool, changed: list,
                   updates: list | None) -> None:
        H = self.graph.arch.n_heads
        E = dx.shape[0]
        block = self.model.blocks[layer]
        attn = block.attn
        where = aff.view(3, H, -1)  # [q/k/v, head, n]
        heads = where.any(2).any(0).nonzero()[:, 0]
        hit = where.any(1).any(0)
        pos, where, dx = pos[hit], where[:, :, hit], dx[:, :, hit]
        kinds = torch.arange(3)
        xin = self.xin[s].unflatten(2, (3, H))  # a view: [b, P, 3, H, d]
        if shared:  # one input for every reader: normalise once, project every head in one matmul
            x = xin[:, pos, 0, 0] + dx[:, :, :, 0]  # [E, b, n, d]
            new = attn.project_shared(block.ln1(x), heads)
        else:  # the changed heads' q/k/v inputs: [E, b, n, 3, nh, d]
            x = xin[_ix(pos, kinds, heads)] + dx.unflatten(3, (3, H))[:, :, :, :, heads]
            new = attn.project_heads(block.ln1(x), kinds, heads)
        cached = self.qkv[layer][_ix(pos, kinds, heads)]  # [b, n, 3, nh, e]
        hit = where[:, heads].permute(2, 0, 1)[..., None]  # [n, 3, nh, 1]
        new = torch.where(hit, new, cached)
        # queries whose output changes: a changed query, or one allowed to attend a changed key/value
        kv = torch.zeros(self.graph.n_positions, dtype=torch.bool)
        kv[pos[where[1:, heads].any(0).any(0)]] = True
        queries = torch.zeros_like(kv)
        queries[pos[where[0, heads].any(0)]] = True
        queries = (queries | self.reach[:, kv].any(1)).nonzero()[:, 0]
        k, v = (self.qkv[layer][:, :, t, heads].expand(E, -1, -1, -1, -1).clone() for t in (1, 2))  # [E, b, P, nh, e]
        k[:, :, pos], v[:, :, pos] = new[:, :, :, 1], new[:, :, :, 2]
        q = self.qkv[layer][:, queries, 0][:, :, heads].expand(E, -1, -1, -1, -1).clone()  # [E, b, nq, nh, e]
        inside = torch.searchsorted(queries, pos)
        found = (inside < len(queries)) & (queries[inside.clamp(max=len(queries) - 1)] == pos)
        q[:, :, inside[found]] = new[:, :, found, 0]
        allowed = None
        if self.allowed is not None:
            allowed = self.allowed[queries] if self.allowed.dim() == 2 else self.allowed[:, None, queries]
        # the mixer's own "these heads at these queries" form: [E, b, nq, nh, e]
        z = attn.mix_at(q, k, v, allowed, queries, per_example=self.allowed is not None and self.allowed.dim() == 3,
                        heads=heads)
        writers = self.stages[s][3].start + heads
        dz = z - self.z[layer][_ix(queries, heads)]
        # each head's write changes by dz @ W_O; their sum in one matmul, each one only if needed
        changed.append((writers, queries, lambda: attn.head_writes(dz, heads), attn.heads_write(dz, heads)))
        if updates is not None:
            out = attn.head_writes(z, heads)
            if shared:
                x = x[:, :, :, None, None].expand(-1, -1, -1, 3, len(heads), -1)
            updates += [(xin, _ix(pos, kinds, heads), x), (self.qkv[layer], _ix(pos, kinds, heads), new),
                        (self.z[layer], _ix(queries, heads), z), (self.live, _ix(queries, writers), out)]
            if not (shared and len(heads) == H):
                updates.append(("uniform", s, False))

    def _mlp(self, s: int, layer: int, pos: Tensor, dx: Tensor, aff: Tensor, changed: list,
             updates: list | None) -> None:
        block = self.model.blocks[layer]
        pos, dx = pos[aff[0]], dx[:, :, aff[0], 0]
        x = self.xin[s][:, pos, 0] + dx  # [E, b, n, d]
        out = block.mlp(block.ln2(x))
        w = torch.tensor([self.stages[s][3].start])
        delta = out - self.live[:, pos, w[0]]
        changed.append((w, pos, delta[:, :, :, None], delta))
        if updates is not None:
            zero = torch.zeros(1, dtype=torch.long)
            updates += [(self.xin[s], _ix(pos, zero), x[:, :, :, None]), (self.live, _ix(pos, w), out[:, :, :, None])]

    def _logits(self, s: int, pos: Tensor, dx: Tensor, aff: Tensor, updates: list | None) -> Tensor:
        task = aff[0] & (pos >= self.offset)
        pos, dx = pos[task], dx[:, :, task, 0]
        x = self.xin[s][:, pos, 0] + dx
        new = self.model.unembed(self.model.ln_final(x))  # [E, b, n, vocab]
        logits = self.logits.expand(dx.shape[0], *self.logits.shape).clone()
        logits[:, :, pos - self.offset] = new
        if updates is not None:
            zero = torch.zeros(1, dtype=torch.long)
            updates += [(self.xin[s], _ix(pos, zero), x[:, :, :, None]), (self.logits, _ix(pos - self.offset), new)]
        return logits

    def commit(self, updates: list, copy: int) -> None:
        """Make copy ``copy`` of the :meth:`propagate` call that filled ``updates`` this run's state."""
        for target, index, values in updates:
            if isinstance(target, str):
                self.uniform[index] = values
            else:
                target[index] = values[copy]


__all__ = ["IncrementalRun"]
