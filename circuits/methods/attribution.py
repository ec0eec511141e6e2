"""Edge attribution patching: EAP (Syed et al. 2023) and EAP-IG (Hanna et al. 2024).

Score of edge ``w → r`` (denoising form, as TransformerLens 4.x's ``attribution_patch``):
``(a_clean[w] − a_corrupt[w]) · ∂metric/∂(input of r)``, averaged over examples. EAP takes the
gradient on the corrupted run (two forwards and one backward, batched over all examples);
EAP-IG averages it over ``steps`` runs whose embeddings (token and seed) are interpolated from
corrupted to clean, at ``α = 1/steps … 1``.

A reader's input gradient is the gradient at ``hook_q/k/v`` (or ``mlp.hook_pre``,
``input_mlp.hook_pre``) pulled back through that reader's own LayerNorm and weights, once per
head: no split-input hooks needed.
"""

from __future__ import annotations

from typing import Any

import einops
import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import Metric, evaluate_metric
from circuits.graph.writers import capture_hooks, reader_input, stack_writers
from interp_rand.model.capture import capture_into
from interp_rand.progress import bar

def reader_gradients(
    model: Any,
    graph: ModelGraph,
    batch: Any,
    metric: Metric,
    inputs: dict[str, Tensor] | None = None,
    metric_batch: Any = None,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """One forward and one backward of ``batch``.

    Args:
        inputs: optional replacement values for the input hooks (``hook_embed``,
            ``hook_seed_embed``: :attr:`ModelGraph.input_hooks`; EAP-IG).
        metric_batch: the batch the metric reads (targets); default ``batch``. Discovery passes
            the clean batch: the metric always measures the clean answer.

    Returns:
        ``grads [batch, P, n_readers, d_model]`` (∂metric/∂ each reader's residual input, per
        example: the metric's mean is undone, so they sum to batch-mean scores), the metric, and
        the captured writer hook values (with the reader sites' residual sources). The readers
        axis is :attr:`ModelGraph.reader_sites` concatenated, so it is :attr:`ModelGraph.readers`.
    """
    acts: dict[str, Tensor] = {}
    grads: dict[str, Tensor] = {}
    leaves: list[Tensor] = []

    # Hook names are bound in closures: a bridge reports its canonical names in ``hook.name``.
    def input_hook(name: str):
        def hook(value: Tensor, hook: Any) -> Tensor:
            # A fresh leaf, so the backward is driven to it without touching parameter grads.
            new = (value if inputs is None else inputs[name]).detach().clone().requires_grad_(True)
            acts[name] = new.detach()
            leaves.append(new)
            return new

        return hook

    sites = graph.reader_sites
    present = graph.input_hooks
    fwd = [(n, input_hook(n)) for n in present]
    fwd += capture_into(acts, list(dict.fromkeys(s.source for s in sites if s.source is not None)))
    fwd += [h for h in capture_hooks(graph, acts) if h[0] not in present]
    bwd = capture_into(grads, [s.hook for s in sites])
    with torch.enable_grad(), model.hooks(fwd_hooks=fwd, bwd_hooks=bwd):
        value = evaluate_metric(metric, run_model(model, batch), batch if metric_batch is None else metric_batch)
        torch.autograd.grad(value, leaves, allow_unused=True)

    n_batch = acts[present[0]].shape[0]
    parts: list[Tensor] = []
    with torch.enable_grad():
        for site in sites:
            # one copy of the residual input per reader of the site: [batch, P, n_readers, d_model]
            x = einops.repeat(reader_input(model, graph, site, acts), "b p d -> b p r d", r=len(site.readers))
            x = x.clone().requires_grad_(True)
            out = site.rebuild(model, x)
            g = grads.get(site.hook)
            if g is None:  # this input does not reach the metric
                g = torch.zeros_like(out)
            elif site.task_positions:
                g = graph.from_task_positions(g)
            parts.append(torch.autograd.grad(out, x, g)[0])
    return torch.cat(parts, dim=2) * n_batch, value.detach(), acts


def _scores(graph: ModelGraph, delta: Tensor, grads: Tensor) -> Tensor:
    """``delta [b, P, W, d]``, ``grads [b, P, R, d]`` → mean scores ``[n_slots, W, R]``."""
    pattern = "b p w d, b p r d -> p w r" if graph.by_position else "b p w d, b p r d -> w r"
    scores = einops.einsum(delta.detach(), grads.detach(), pattern) / delta.shape[0]
    scores = scores if graph.by_position else scores[None]
    return scores * graph.mask


def eap_scores(
    model: Any, graph: ModelGraph, clean: Any, corrupted: Any, metric: Metric, replacement: Tensor | None = None
) -> Tensor:
    """EAP edge scores ``[n_slots, n_writers, n_readers]``.

    With a ``corrupted`` batch: denoising form (gradient on the corrupted run, delta
    ``clean − corrupted``). With ``corrupted=None`` and writer ``replacement`` values (zero or
    mean ablation): noising form (gradient on the clean run, delta ``clean − replacement``).
    Either way a positive score means the edge's clean value raises the metric.
    """
    if corrupted is None:
        grads, _, clean_acts = reader_gradients(model, graph, clean, metric)
        delta = stack_writers(model, graph, clean_acts) - replacement
    else:
        clean_acts = _input_values(model, graph, clean)
        grads, _, acts = reader_gradients(model, graph, corrupted, metric, metric_batch=clean)
        delta = stack_writers(model, graph, clean_acts) - stack_writers(model, graph, acts)
    return _scores(graph, delta, grads)


def eap_ig_scores(
    model: Any,
    graph: ModelGraph,
    clean: Any,
    corrupted: Any,
    metric: Metric,
    steps: int = 5,
    baseline_values: dict[str, Tensor] | None = None,
    progress: bool = False,
) -> Tensor:
    """EAP-IG edge scores: gradients averaged over ``steps`` runs whose embeddings go from the
    corrupted run's (or ``baseline_values``', for zero/mean ablation) to the clean run's."""
    if steps < 1:
        raise ValueError(f"EAP-IG steps={steps} must be >= 1")
    clean_acts = _input_values(model, graph, clean)
    base_acts = _input_values(model, graph, corrupted) if corrupted is not None else baseline_values
    run_batch = clean if corrupted is None else corrupted
    total = None
    for k in bar(range(1, steps + 1), desc="EAP-IG interpolation steps", enabled=progress):
        alpha = k / steps
        inputs = {
            n: (base_acts[n] + alpha * (clean_acts[n] - base_acts[n])).expand_as(clean_acts[n])
            for n in graph.input_hooks
            if n in clean_acts
        }
        grads, _, _ = reader_gradients(model, graph, run_batch, metric, inputs, metric_batch=clean)
        total = grads if total is None else total + grads
    delta = stack_writers(model, graph, clean_acts) - stack_writers(model, graph, base_acts)
    return _scores(graph, delta, total / steps)


@torch.no_grad()
def _input_values(model: Any, graph: ModelGraph, batch: Any) -> dict[str, Tensor]:
    acts: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_hooks(graph, acts)):
        run_model(model, batch)
    return acts


__all__ = ["eap_ig_scores", "eap_scores", "reader_gradients"]
