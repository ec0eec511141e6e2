"""Controls for probes: the Hewitt & Liang (2019) control task, the group-held-out split, a
randomly initialised model of the same architecture, and the input token's own readout (a
lookup from the token at each position to the label: where it is as good as the probe, the
position leaks the label).

Randomness is always an argument (a ``torch.Generator``), never global state.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from interp_rand.model.transformer import HookedTransformer
from probes.variables import rows_to_groups


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


def token_lookup_accuracy(inputs: Tensor, positions: Tensor, labels: Tensor, n_classes: int,
                          train: Tensor) -> Tensor:
    """How well the input token alone gives each label: per position, a lookup table from the
    token there to each instance's most frequent label, fitted on the ``train`` rows (a token
    unseen in training gets the training majority) and scored on the held-out rows.

    Under teacher forcing the token at an answer position is the previous answer (or the target
    itself): a probe there reads the token, and any network, trained or not, passes it. This
    measures that, whatever the variable is called.

    Args:
        inputs: ``[n, T]`` token ids, or ``[n, T, d]`` real vectors (each distinct vector is
            one "token"; continuous inputs never repeat, so their lookup is the majority).
        positions: ``[P]`` long task positions; labels: ``[n, k]`` long; train: ``[n]`` bool.

    Returns:
        ``[P, k]`` held-out accuracy of the lookup.
    """
    test = ~train
    n_test = max(int(test.sum()), 1)
    k = labels.shape[1]
    instance = torch.arange(k).expand(int(train.sum()), k)
    majority = torch.stack([torch.bincount(labels[train, j], minlength=n_classes).argmax() for j in range(k)]) \
        if bool(train.any()) else torch.zeros(k, dtype=torch.long)
    out = torch.zeros(len(positions), k)
    for i, p in enumerate(positions.tolist()):
        tokens = inputs[:, p]
        tokens = rows_to_groups(tokens) if tokens.dim() > 1 or tokens.is_floating_point() else tokens.long()
        ids, tokens = torch.unique(tokens, return_inverse=True)
        counts = torch.zeros(len(ids), k, n_classes)
        counts.index_put_((tokens[train, None].expand_as(instance), instance, labels[train]),
                          torch.ones(instance.shape), accumulate=True)
        guess = torch.where(counts.sum(-1) > 0, counts.argmax(-1), majority)  # [ids, k]
        out[i] = (guess[tokens[test]] == labels[test]).float().sum(0) / n_test
    return out


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


__all__ = ["control_labels", "group_split", "random_init_like", "token_lookup_accuracy"]
