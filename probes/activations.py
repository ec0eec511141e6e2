"""Activation collection: chosen hook points and positions of any model that speaks the
TransformerLens hook-name protocol (ours or a ``TransformerBridge``), batched, into tensors with
the task's metadata kept alongside.

    >>> acts = collect_activations(model, batch, ["blocks.0.hook_resid_post"])
    >>> acts["blocks.0.hook_resid_post"].shape     # [batch, pos, d_model]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from interp_rand.model.hook_names import residual_hooks, seed_offset  # re-exported: probes' API
from interp_rand.seeded_evaluation.forward import logits_of, model_args  # the core's one forward on a batch
from interp_rand.tasks.base import Batch


@dataclass(frozen=True)
class Activations:
    """Activations of one model on one batch.

    Attributes:
        values: ``{hook name: [batch, n_positions, d]}`` float (one vector per kept position;
            attention-pattern-shaped hooks are not collected here).
        positions: ``[n_positions]`` long, the task positions kept (seed token excluded).
        metadata: the batch's metadata, ``{name: [batch, ...]}``.
    """

    values: dict[str, Tensor]
    positions: Tensor
    metadata: dict[str, Tensor]

    def __getitem__(self, name: str) -> Tensor:
        try:
            return self.values[name]
        except KeyError:
            raise KeyError(f"no activations for hook {name!r}; collected: {sorted(self.values)}") from None

    def __len__(self) -> int:
        return len(next(iter(self.values.values())))


def hook_names(model: nn.Module) -> list[str]:
    """Every hook point name of ``model``, sorted."""
    return sorted(model.hook_dict)


def check_hooks(model: nn.Module, names: list[str]) -> None:
    """Raise ``ValueError`` naming the hooks ``model`` lacks and listing those it has."""
    missing = [n for n in names if n not in model.hook_dict]
    if missing:
        raise ValueError(f"the model has no hook point(s) {missing}; it has: {', '.join(hook_names(model))}")


def n_layers(model: nn.Module) -> int:
    return int(model.cfg.n_layers)




@torch.no_grad()
def collect_activations(
    model: nn.Module,
    batch: Batch,
    hooks: list[str] | None = None,
    positions: Tensor | list[int] | None = None,
    *,
    batch_size: int = 2048,
) -> Activations:
    """Run ``model`` over ``batch`` in chunks and keep ``hooks`` (default: :func:`residual_hooks`)
    at task ``positions`` (default: all).

    Returns:
        :class:`Activations` with ``values[hook]: [len(batch), len(positions), d]``.
    """
    hooks = residual_hooks(model) if hooks is None else list(hooks)
    check_hooks(model, hooks)
    n_pos = batch.inputs.shape[1]
    positions = torch.arange(n_pos) if positions is None else torch.as_tensor(positions).long()
    if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= n_pos):
        raise ValueError(f"positions must lie in 0..{n_pos - 1}; got {positions.tolist()}")
    offset = seed_offset(model)
    wanted = set(hooks)
    chunks: dict[str, list[Tensor]] = {h: [] for h in hooks}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(batch), batch_size):
            part = batch[slice(start, start + batch_size)]
            args, kwargs = model_args(model, part)
            _, cache = model.run_with_cache(*args, names_filter=lambda name: name in wanted, **kwargs)
            for h in hooks:
                act = cache[h]
                if act.dim() < 3:
                    raise ValueError(f"hook {h!r} has shape {tuple(act.shape)}; probes need [batch, pos, ...]")
                # A seed token (seed_mode="token") sits before the task positions.
                shift = offset if act.shape[1] == n_pos + offset else 0
                act = act[:, positions + shift]
                chunks[h].append(act.reshape(act.shape[0], act.shape[1], -1).float())  # [b, P, d]
    finally:
        model.train(was_training)
    return Activations(
        values={h: torch.cat(c) for h, c in chunks.items()},
        positions=positions,
        metadata=dict(batch.metadata),
    )


__all__ = [
    "Activations",
    "check_hooks",
    "collect_activations",
    "hook_names",
    "logits_of",
    "model_args",
    "residual_hooks",
]
