"""Writer contributions: what each embedding, seed channel, input MLP, head and MLP adds to the
residual stream (or, for the embedding and an appended seed of a model with an input MLP, to the
input MLP's input), stacked as ``[batch, n_positions, n_writers, d_model]`` in
:class:`ModelGraph` order."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from circuits.graph.architecture import head_results, input_mlp_output, run_model
from circuits.graph.model_graph import ModelGraph
from interp_rand.model.capture import capture_into


def writer_hook_names(graph: ModelGraph) -> list[str]:
    names = ["hook_embed"] + (["hook_seed_embed"] if graph.arch.has_seed else [])
    names += ["input_mlp.hook_post"] if graph.arch.has_input_mlp else []
    for layer in range(graph.arch.n_layers):
        names.append(f"blocks.{layer}.attn.hook_z")
        if not graph.arch.attn_only:
            names.append(f"blocks.{layer}.hook_mlp_out")
    return names


def stack_writers(
    model: Any, graph: ModelGraph, acts: dict[str, Tensor], upto: int | None = None, positions: Tensor | None = None
) -> Tensor:
    """``[batch, P, n_writers(upto), d_model]`` from captured hook values (those present, in
    order; stops at the first writer not captured yet); only ``positions`` if given."""
    offset, n_pos = graph.arch.seed_offset, graph.n_positions
    parts: list[Tensor] = []
    for name in writer_hook_names(graph):
        if name not in acts:
            break
        value = acts[name]
        if name == "input_mlp.hook_post":
            value = input_mlp_output(model, value)
        if name in ("hook_embed", "input_mlp.hook_post"):  # task positions follow a seed token
            value = F.pad(value, (0, 0, offset, 0))
        elif name == "hook_seed_embed":
            value = F.pad(value, (0, 0, 0, n_pos - value.shape[1]))
        if positions is not None:
            value = value[:, positions]
        if name.endswith("hook_z"):
            parts.append(head_results(model, int(name.split(".")[1]), value))
        else:
            parts.append(value[:, :, None])
    stacked = torch.cat(parts, dim=2)
    if upto is not None:
        if stacked.shape[2] < upto:
            raise RuntimeError(f"only {stacked.shape[2]} writers captured, {upto} needed")
        stacked = stacked[:, :, :upto]
    return stacked


def capture_hooks(graph: ModelGraph, sink: dict[str, Tensor], detach: bool = True) -> list:
    """Forward hooks that store every writer's hook value in ``sink``."""
    return capture_into(sink, writer_hook_names(graph), detach=detach)


@torch.no_grad()
def writer_values(model: Any, graph: ModelGraph, batch: Any) -> Tensor:
    """One forward of ``batch``: every writer's contribution ``[batch, P, n_writers, d_model]``."""
    acts: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_hooks(graph, acts)):
        run_model(model, batch)
    return stack_writers(model, graph, acts)


__all__ = ["capture_hooks", "stack_writers", "writer_hook_names", "writer_values"]
