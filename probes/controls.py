"""Controls for probes: the Hewitt & Liang (2019) control task, the group-held-out split and a
randomly initialised model of the same architecture.

Randomness is always an argument (a ``torch.Generator``), never global state.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from interp_rand.model.transformer import HookedTransformer


def control_labels(types: Tensor, labels: Tensor, n_classes: int, generator: torch.Generator) -> Tensor:
    """Random but fixed labels per input type (Hewitt & Liang 2019).

    For every instance (column) each distinct type gets one label drawn from that instance's
    empirical label distribution, so the control has the real task's class balance but no
    meaning: a probe reaches it only by memorising input types.

    Args:
        types: ``[batch, k]`` long input-type ids.
        labels: ``[batch, k]`` long real labels (for the class distribution).

    Returns:
        ``[batch, k]`` long control labels.
    """
    out = torch.empty_like(labels)
    for j in range(labels.shape[1]):
        ids, inverse = torch.unique(types[:, j], return_inverse=True)
        counts = torch.bincount(labels[:, j], minlength=n_classes).float()
        drawn = torch.multinomial(counts / counts.sum(), len(ids), replacement=True, generator=generator)
        out[:, j] = drawn[inverse]
    return out


def group_split(groups: Tensor, test_fraction: float, generator: torch.Generator) -> Tensor:
    """``[batch]`` bool, true for training rows: whole groups go to one side, a random
    ``test_fraction`` of the groups (at least one) is held out."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction!r} must lie in (0, 1)")
    ids, inverse = torch.unique(groups, return_inverse=True)
    if len(ids) < 2:
        raise ValueError("a held-out split needs at least two distinct input groups")
    n_test = min(max(1, round(test_fraction * len(ids))), len(ids) - 1)
    held_out = torch.zeros(len(ids), dtype=torch.bool)
    held_out[torch.randperm(len(ids), generator=generator)[:n_test]] = True
    return ~held_out[inverse]


@torch.no_grad()
def random_init_like(model: nn.Module, seed: int = 12345) -> nn.Module:
    """A model of the same architecture with fresh random weights.

    Ours is rebuilt from its config (TransformerLens's initialisation rule); any other module
    (e.g. a ``TransformerBridge``) is copied and re-initialised: matrices ``N(0, 0.8 /
    sqrt(d_model))``, normalisation scales 1, biases 0.
    """
    if isinstance(model, HookedTransformer):
        return HookedTransformer(model.cfg, seed=seed).eval()
    fresh = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    std = 0.8 / float(model.cfg.d_model) ** 0.5
    for name, param in fresh.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if param.dim() >= 2:
            param.copy_(torch.randn(param.shape, generator=generator) * std)
        elif leaf in ("w", "weight") and ("ln" in name or "norm" in name):
            param.fill_(1.0)
        else:
            param.zero_()
    return fresh.eval()


__all__ = ["control_labels", "group_split", "random_init_like"]
