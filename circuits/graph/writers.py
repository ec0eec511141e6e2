"""Writer contributions: what each embedding, seed channel, input MLP, head and MLP adds to the
residual stream (or, for the embedding and an appended seed of a model with an input MLP, to the
input MLP's input), stacked as ``[batch, n_positions, n_writers, d_model]`` in
:class:`ModelGraph` order, and the residual input of a reader site rebuilt from them."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import head_results, input_mlp_output, run_model
from circuits.graph.model_graph import ModelGraph, ReaderSite
from interp_rand.model.capture import capture_into


def writer_hook_names(graph: ModelGraph) -> list[str]:
    """The writer hooks, in :attr:`ModelGraph.writers` order (:attr:`ModelGraph.writer_hooks`)."""
    return graph.writer_hooks


def stack_writers(
    model: Any, graph: ModelGraph, acts: dict[str, Tensor], upto: int | None = None, positions: Tensor | None = None
) -> Tensor:
    """``[batch, P, n_writers(upto), d_model]`` from captured hook values (those present, in
    order; stops at the first writer not captured yet); only ``positions`` if given."""
    parts: list[Tensor] = []
    for site in graph.writer_sites:
        if site.hook not in acts:
            break
        value = acts[site.hook]
        if site.kind == "input_mlp":
            value = input_mlp_output(model, value)
        value = graph.to_stream_positions(site.kind, value)
        if positions is not None:
            value = value[:, positions]
        if site.kind == "head":
            parts.append(head_results(model, site.layer, value))
        else:
            parts.append(value[:, :, None])
    stacked = torch.cat(parts, dim=2)
    if upto is not None:
        if stacked.shape[2] < upto:
            raise RuntimeError(f"only {stacked.shape[2]} writers captured, {upto} needed")
        stacked = stacked[:, :, :upto]
    return stacked


def reader_input(
    model: Any, graph: ModelGraph, site: ReaderSite, values: dict[str, Tensor], positions: Tensor | slice | None = None
) -> Tensor:
    """``[batch, P (or len(positions)), d_model]``: the residual input of ``site``'s readers, from
    captured hook values: its ``source`` hook's value, or for the input MLP the sum of its source
    writers' values (zero at a seed token)."""
    if site.source is None:
        return stack_writers(model, graph, values, graph.writers_upto[site.readers[0]], positions).sum(2)
    value = values[site.source]
    return value if positions is None else value[:, positions]


def capture_hooks(graph: ModelGraph, sink: dict[str, Tensor], detach: bool = True) -> list:
    """Forward hooks that store every writer's hook value in ``sink``."""
    return capture_into(sink, graph.writer_hooks, detach=detach)


@torch.no_grad()
def writer_values(model: Any, graph: ModelGraph, batch: Any) -> Tensor:
    """One forward of ``batch``: every writer's contribution ``[batch, P, n_writers, d_model]``."""
    acts: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_hooks(graph, acts)):
        run_model(model, batch)
    return stack_writers(model, graph, acts)


__all__ = ["capture_hooks", "reader_input", "stack_writers", "writer_hook_names", "writer_values"]
