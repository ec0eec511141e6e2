"""The one intervention the mechanism checks are made of: run a batch with some sites' values
taken from other examples of a recorded batch.

Every check (interchange, causal scrubbing, their controls) is a forward of base rows with a
list of :class:`Patch` es, each saying *which site* takes *which recorded row's* value. The
activations of the whole evaluation batch are recorded once (:func:`record`), so a source
example is a row index, and a patched forward costs one forward.

Node sites replace a component's output at its position (``hook_z`` for a head, so the head's
``W_O`` write follows; ``hook_mlp_out``; ``hook_embed``; ``hook_seed_embed``) through
:meth:`~circuits.graph.model_graph.ModelGraph.hook_position`. Hook sites replace the hook's
value at residual positions, whole or inside an orthonormal basis ``U`` ``[d, k]``:
``h <- h + (h_s - h) U U^T``. Patches apply in list order, so a later patch of the same
location wins (scrubbing lists the resampling first, then the variables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms.hypothesis import Site
from interp_rand.losses import bit_patterns, decoding_for_targets
from interp_rand.model.capture import capture_into


@dataclass(frozen=True)
class Patch:
    """``site``'s value on each base row taken from recorded row ``rows[i]`` (``[n_base]``
    long); ``basis``: the subspace ``[d, k]`` of a hook site (``None``: the whole value)."""

    site: Site
    rows: Tensor
    basis: Tensor | None = None


def site_hooks(sites: list[Site]) -> list[str]:
    """Every hook a list of sites reads or replaces."""
    names: list[str] = []
    for site in sites:
        for name in ([ModelGraph.writer_hook(n) for n in site.nodes] if site.nodes else [site.hook]):
            if name not in names:
                names.append(name)
    return names


def mechanism_hooks(graph: ModelGraph, sites: list[Site]) -> list[str]:
    """What the checks record: every writer hook (scrubbing resamples them) and the sites' hooks."""
    return list(dict.fromkeys(graph.writer_hooks + site_hooks(sites)))


def check_sites(model: Any, sites: list[Site]) -> None:
    """Every site's hook exists on ``model``; a ``TransformerBridge``'s ``hook_resid_mid`` is
    refused: there it feeds only the MLP's input, so replacing it does not replace the
    residual stream (ours and the bridge agree on every other hook)."""
    bridge = type(model).__name__ == "TransformerBridge"
    for site in sites:
        if site.hook is None:
            continue
        if site.hook not in model.hook_dict:
            raise ValueError(f"model has no hook point {site.hook!r} (a Site's hook must be a TransformerLens hook name)")
        if bridge and site.hook.endswith("hook_resid_mid"):
            raise ValueError(f"Site hook {site.hook!r}: on a TransformerBridge hook_resid_mid feeds only the MLP's "
                             "input; use hook_resid_pre / hook_resid_post, or the components' outputs")


@torch.no_grad()
def record(model: Any, batch: Any, hooks: list[str]) -> dict[str, Tensor]:
    """The clean values of ``hooks`` on ``batch`` (one forward)."""
    missing = [h for h in hooks if h not in model.hook_dict]
    if missing:
        raise ValueError(f"model has no hook point(s) {missing}")
    acts: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_into(acts, hooks)):
        run_model(model, batch)
    return acts


def writer_locations(graph: ModelGraph) -> list[Node]:
    """Every writer at every residual position where it writes: the locations causal scrubbing
    resamples and its random controls draw from."""
    out = []
    for node in graph.writers:
        for p in range(graph.n_positions):
            at = node.at(p)
            if graph.hook_position(at) is not None:
                out.append(at)
    return out


def patch_hooks(graph: ModelGraph, acts: dict[str, Tensor], patches: list[Patch]) -> list[tuple[str, Any]]:
    """Forward hooks applying ``patches`` (in order) from the recorded ``acts``."""
    by_hook: dict[str, list[tuple[Any, Patch]]] = {}
    for patch in patches:
        if patch.site.nodes:
            for node in patch.site.nodes:
                by_hook.setdefault(ModelGraph.writer_hook(node), []).append((node, patch))
        else:
            by_hook.setdefault(patch.site.hook, []).append((None, patch))

    def make(name: str, items: list[tuple[Any, Patch]]):
        source = acts[name]

        def hook(value: Tensor, hook: Any) -> Tensor:
            out = value.clone()
            for node, patch in items:
                if node is not None:
                    pos = graph.hook_position(node)
                    if pos is None:
                        continue
                    if node.kind == "head":
                        out[:, pos, node.head] = source[patch.rows, pos, node.head].to(out.dtype)
                    else:
                        out[:, pos] = source[patch.rows, pos].to(out.dtype)
                    continue
                pos = torch.tensor(patch.site.positions)
                src = source[patch.rows][:, pos].to(out.dtype)
                here = out[:, pos]
                if patch.basis is None:
                    out[:, pos] = src
                else:
                    flat, flat_src = here.reshape(len(out), len(pos), -1), src.reshape(len(out), len(pos), -1)
                    U = patch.basis.to(out.dtype)
                    out[:, pos] = (flat + ((flat_src - flat) @ U) @ U.T).reshape(here.shape)
            return out

        return hook

    return [(name, make(name, items)) for name, items in by_hook.items()]


def answer_logits(model: Any, batch: Any, outputs: Tensor, fwd_hooks: list | None = None) -> Tensor:
    """``[batch, len(outputs), n_answers]`` class scores at the answers ``outputs`` (indices into
    ``batch.answer_positions``), with scoped hooks: the logits of a class task; for a task whose
    answers are bits (float targets ``[batch, pos, V]``, e.g. recall's value bits) the
    log-probability of each of the ``2**V`` bit patterns (:func:`bit_pattern_logprobs`), so that
    the argmax is the packed thresholded bits and ``log_softmax`` their log-probability."""
    with model.hooks(fwd_hooks=fwd_hooks or []):
        logits = run_model(model, batch)
    logits = logits.logits if hasattr(logits, "logits") else logits
    picked = logits[:, batch.answer_positions[outputs]]
    targets = getattr(batch, "targets", None)
    return bit_pattern_logprobs(picked) if targets is not None and decoding_for_targets(targets).bits else picked


def bit_pattern_logprobs(picked: Tensor) -> Tensor:
    """``[..., V]`` independent bit logits -> ``[..., 2**V]`` log-probability of each bit
    pattern, indexed by its packed id (:func:`interp_rand.losses.pack_bits`)."""
    outcomes = bit_patterns(picked.shape[-1]).to(picked.dtype)  # [2**V, V]
    return F.logsigmoid(picked) @ outcomes.T + F.logsigmoid(-picked) @ (1 - outcomes).T


@torch.no_grad()
def patched_answers(model: Any, graph: ModelGraph, batch: Any, base_rows: Tensor, acts: dict[str, Tensor],
                    patches: list[Patch], outputs: Tensor, chunk: int = 2048) -> Tensor:
    """``[len(base_rows), len(outputs), vocab]`` logits of ``batch[base_rows]`` with ``patches``
    (their ``rows`` index the recorded batch, one per base row), in chunks of ``chunk`` rows."""
    parts = []
    for start in range(0, len(base_rows), chunk):
        part = slice(start, start + chunk)
        sub = [Patch(p.site, p.rows[part], p.basis) for p in patches]
        parts.append(answer_logits(model, batch[base_rows[part]], outputs, patch_hooks(graph, acts, sub)))
    return torch.cat(parts) if parts else torch.empty(0)


def agreeing_rows(values: Tensor, generator: torch.Generator) -> Tensor:
    """For each row, a random *other* row with the same value (itself when it is alone in its
    value): the source causal scrubbing takes a variable's activation from."""
    n = len(values)
    _, group = torch.unique(values, return_inverse=True)
    shuffle = torch.randperm(n, generator=generator)
    order = shuffle[torch.sort(group[shuffle], stable=True).indices]  # grouped, random within
    sorted_groups = group[order]
    _, counts = torch.unique_consecutive(sorted_groups, return_counts=True)
    starts = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    sizes = torch.repeat_interleave(counts, counts)
    k = torch.arange(n) - starts
    step = 1 + (torch.rand(n, generator=generator) * (sizes - 1).clamp(min=1)).long().clamp(max=(sizes - 2).clamp(min=0))
    partner_k = torch.where(sizes > 1, (k + step) % sizes, k)
    rows = torch.empty(n, dtype=torch.long)
    rows[order] = order[starts + partner_k]
    return rows


def derangement(n: int, generator: torch.Generator) -> Tensor:
    """A random permutation of ``range(n)`` moving every index (needs ``n >= 2``)."""
    if n < 2:
        raise ValueError("resampling within the batch needs at least 2 examples")
    order = torch.randperm(n, generator=generator)
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = order.roll(1)
    return perm


__all__ = ["Patch", "agreeing_rows", "answer_logits", "bit_pattern_logprobs", "check_sites", "derangement",
           "mechanism_hooks", "patch_hooks", "patched_answers", "record",
           "site_hooks", "writer_locations"]
