"""Node-level activation patching sweeps (denoising: clean activations into the corrupted run).

Same results as ``transformer_lens.patching``'s ``get_act_patch_*`` (tested), and additionally
for models that take seeds or attention masks (a :class:`~interp_rand.tasks.Batch`), with
several patches run side by side in one forward (the corrupted batch repeated ``chunk`` times).

    >>> patch_sweep(model, clean, corrupted, "logprob", "z")  # [layer, pos, head]
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import check_pair
from circuits.graph.architecture import check_hook_names, run_model
from circuits.interventions.metrics import Metric, evaluate_metric, get_metric
from interp_rand.model.capture import capture_into

# activation -> (hook name pattern, has a head axis)
ACTIVATIONS = {
    "resid_pre": ("blocks.{}.hook_resid_pre", False),
    "resid_mid": ("blocks.{}.hook_resid_mid", False),
    "attn_out": ("blocks.{}.hook_attn_out", False),
    "mlp_out": ("blocks.{}.hook_mlp_out", False),
    "z": ("blocks.{}.attn.hook_z", True),
    "q": ("blocks.{}.attn.hook_q", True),
    "k": ("blocks.{}.attn.hook_k", True),
    "v": ("blocks.{}.attn.hook_v", True),
}


def _repeat(batch: Any, times: int) -> Any:
    if isinstance(batch, Tensor):
        return batch.repeat(times, *([1] * (batch.dim() - 1)))
    return type(batch).concat([batch] * times)


@torch.no_grad()
def patch_sweep(
    model: Any,
    clean: Any,
    corrupted: Any,
    metric: str | Metric,
    activation: str = "z",
    by_position: bool = True,
    chunk: int | None = None,
) -> Tensor:
    """Metric of the corrupted run with one activation patched from the clean run, per index.

    Args:
        activation: one of ``ACTIVATIONS``.
        by_position: patch one position at a time (else every position at once; head
            activations only, as TL's ``*_all_pos``).
        chunk: patches per forward (default: as many as fit 4096 rows).

    Returns:
        ``[layer, pos]`` for residual-stream activations, ``[layer, pos, head]`` for head
        activations (``[layer, head]`` with ``by_position=False``). The metric is evaluated with
        the clean batch (its targets).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not allowed; choose from {sorted(ACTIVATIONS)}")
    check_pair(clean, corrupted)
    metric = get_metric(metric)
    pattern, has_head = ACTIVATIONS[activation]
    n_layers = int(model.cfg.n_layers)
    names = [pattern.format(layer) for layer in range(n_layers)]
    check_hook_names(model, names)
    cached: dict[str, Tensor] = {}
    with model.hooks(fwd_hooks=capture_into(cached, names)):
        run_model(model, clean)
    n_pos = cached[names[0]].shape[1]
    axes = [range(n_layers)]
    if by_position or not has_head:
        axes.append(range(n_pos))
    if has_head:
        axes.append(range(cached[names[0]].shape[2]))
    indices = list(itertools.product(*axes))
    n = len(clean)
    chunk = chunk or max(1, 4096 // n)
    out = torch.zeros(len(indices))
    for start in range(0, len(indices), chunk):
        group = indices[start : start + chunk]
        reps = len(group)

        def patch(layer_of_hook: int, group: list = group):
            def hook(value: Tensor, hook: Any) -> Tensor:
                value = value.clone()
                for i, index in enumerate(group):
                    if index[0] != layer_of_hook:
                        continue
                    rows = slice(i * n, (i + 1) * n)
                    sel = _selector(index, by_position or not has_head, has_head)
                    value[(rows, *sel)] = cached[names[layer_of_hook]][(slice(None), *sel)]
                return value

            return hook

        layers = sorted({index[0] for index in group})
        with model.hooks(fwd_hooks=[(names[layer], patch(layer)) for layer in layers]):
            logits = run_model(model, _repeat(corrupted, reps))
        for i in range(reps):
            out[start + i] = evaluate_metric(metric, logits[i * n : (i + 1) * n], clean)
    return out.reshape([len(a) for a in axes])


def _selector(index: tuple, positional: bool, has_head: bool) -> tuple:
    pos = index[1] if positional else slice(None)
    if has_head:
        return (pos, index[-1])
    return (pos,)


__all__ = ["ACTIVATIONS", "patch_sweep"]
