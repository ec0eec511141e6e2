"""The probe variables of each task (registered on import of :mod:`probes`).

addition: ``carry_in``, ``carry_out``, ``digit`` (per answer digit, written order);
sort: ``rank`` (per input element), ``next`` (the value to write next, per answer position);
recall: ``seed_bit`` (per seed bit), ``key_stored`` (per key id: does the model recall that
key's value when queried, with this seed; computed by querying every key);
coloring: ``colour`` (the model's colour per vertex), ``noise_order`` (rank of a vertex's noise
among itself and its two neighbours: 0 lowest .. 2 highest).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp_rand.tasks.base import Batch
from probes.activations import logits_of
from probes.stored_set import recalled
from probes.variables import (
    VariableLabels,
    register_groups,
    register_variable,
    rows_to_groups,
)

# ---------------------------------------------------------------------- addition


def _place_pairs(task, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    """Place-ordered operand digits padded with a zero place ``n`` (``[batch, n+1]`` each) and
    the digit-pair type ``[batch, n+1]`` (``1 + 10a + b``; 0 for place ``n``)."""
    a, b = batch.metadata["a_digits"], batch.metadata["b_digits"]
    zero = torch.zeros_like(a[:, :1])
    a, b = torch.cat([a, zero], 1), torch.cat([b, zero], 1)
    pair = 1 + 10 * a + b
    pair[:, -1] = 0
    return a, b, pair


def _index_of_place(task) -> Tensor:
    """``[n+1]``: the written-order answer index of each place."""
    return task.answer_places().argsort()


def _digit_at(task, a: Tensor, b: Tensor, place: int, carry: Tensor) -> Tensor:
    """The answer digit at ``place`` given the carry into it."""
    if place == task.n_digits:
        return carry
    return (a[:, place] + b[:, place] + carry) % 10


def _addition_instances(task) -> tuple[str, ...]:
    return tuple(f"place {int(p)}" for p in task.answer_places())


@register_variable("addition", "carry_in", "carry into the place of each answer digit (0/1)")
def _carry_in(task, batch: Batch, model) -> VariableLabels:
    a, b, pair = _place_pairs(task, batch)
    places = task.answer_places()
    # control type: the digit pair one place below, where the carry comes from
    below = torch.cat([torch.zeros_like(pair[:, :1]), pair[:, :-1]], 1)

    def counterfactual(batch_: Batch, k: int, new: Tensor) -> Tensor:
        a_, b_, _ = _place_pairs(task, batch_)
        return _digit_at(task, a_, b_, int(places[k]), new)

    return VariableLabels(
        labels=batch.metadata["carry_in"], n_classes=2, instance_names=_addition_instances(task),
        control_types=below[:, places], output_index=torch.arange(len(places)),
        counterfactual=counterfactual,
    )


@register_variable("addition", "carry_out", "carry out of the place of each answer digit (0/1)")
def _carry_out(task, batch: Batch, model) -> VariableLabels:
    _, _, pair = _place_pairs(task, batch)
    places = task.answer_places()
    index_of = _index_of_place(task)
    n = task.n_digits
    # the carry out of place p acts on the digit of place p + 1 (the top place has none)
    output = torch.tensor([int(index_of[min(int(p) + 1, n)]) for p in places])

    def counterfactual(batch_: Batch, k: int, new: Tensor) -> Tensor:
        a_, b_, _ = _place_pairs(task, batch_)
        p = int(places[k])
        return _digit_at(task, a_, b_, p + 1, new) if p < n else torch.full_like(new, -1)

    return VariableLabels(
        labels=batch.metadata["carry_out"], n_classes=2, instance_names=_addition_instances(task),
        control_types=pair[:, places], output_index=output, counterfactual=counterfactual,
    )


@register_variable("addition", "digit", "value of each answer digit (0..9)")
def _digit(task, batch: Batch, model) -> VariableLabels:
    _, _, pair = _place_pairs(task, batch)
    places = task.answer_places()
    return VariableLabels(
        labels=batch.answer_targets(), n_classes=10, instance_names=_addition_instances(task),
        control_types=pair[:, places], output_index=torch.arange(len(places)),
        counterfactual=lambda batch_, k, new: new,
    )


# ---------------------------------------------------------------------- sort


@register_groups("sort")
def _sort_groups(task, batch: Batch) -> Tensor:
    # the list multiset: permutations of one list share a group
    return rows_to_groups(task.lists(batch).sort(1).values)


@register_variable("sort", "rank", "rank of each input element in the sorted answer (0..L-1)")
def _rank(task, batch: Batch, model) -> VariableLabels:
    return VariableLabels(
        labels=batch.metadata["rank"], n_classes=task.length,
        instance_names=tuple(f"element {j}" for j in range(task.length)),
        control_types=task.lists(batch), output_index=None,
    )


@register_variable("sort", "next", "the value to write next at each answer position (next in sorted order)")
def _next(task, batch: Batch, model) -> VariableLabels:
    return VariableLabels(
        labels=batch.answer_targets(), n_classes=task.vocab,
        instance_names=tuple(f"answer {k}" for k in range(task.length)),
        # control type: the token being read there (previous answer value or SEP)
        control_types=batch.inputs[:, batch.answer_positions],
        output_index=torch.arange(task.length), counterfactual=lambda batch_, k, new: new,
    )


# ---------------------------------------------------------------------- recall


@register_variable("recall", "seed_bit", "each bit of the seed (0/1)")
def _seed_bit(task, batch: Batch, model) -> VariableLabels:
    if batch.seeds is None:
        raise ValueError("seed_bit needs a batch with seeds")
    bits = batch.seeds.long()
    return VariableLabels(
        labels=bits, n_classes=2, instance_names=tuple(f"bit {j}" for j in range(bits.shape[1])),
        control_types=batch.metadata["query_key"][:, None].expand_as(bits).contiguous(),
    )


@register_variable("recall", "key_stored", "is key i recalled (all value bits right) when queried, with this seed",
                   needs_model=True)
def _key_stored(task, batch: Batch, model) -> VariableLabels:
    meta = batch.metadata
    key_order, values = meta["key_order"], meta["values"]
    n, N = key_order.shape
    stored = torch.zeros(n, N, dtype=torch.long)
    rows = torch.arange(n)
    for i in range(N):
        correct = recalled(model, task, key_order, values, torch.full((n,), i), batch.seeds)
        stored[rows, key_order[:, i]] = correct.long()
    return VariableLabels(
        labels=stored, n_classes=2, instance_names=tuple(f"key {i}" for i in range(N)),
        # control type: where key i sits in the sequence
        control_types=key_order.argsort(1),
    )


# ---------------------------------------------------------------------- coloring


def _neighbours(batch: Batch) -> Tensor:
    """``[batch, N, 2]`` the two neighbours of each vertex, ascending."""
    return batch.attention_mask.float().topk(2, dim=-1).indices.sort(-1).values


@register_variable("coloring", "colour", "the model's colour of each vertex", needs_model=True)
def _colour(task, batch: Batch, model) -> VariableLabels:
    with torch.no_grad():
        colour = logits_of(model, batch).argmax(-1)
    nbrs = _neighbours(batch)
    N = task.n_vertices
    return VariableLabels(
        labels=colour, n_classes=task.n_colors, instance_names=tuple(f"vertex {v}" for v in range(N)),
        control_types=nbrs[..., 0] * N + nbrs[..., 1], output_index=torch.arange(N),
        counterfactual=lambda batch_, k, new: new,
    )


@register_variable("coloring", "noise_order", "rank of a vertex's noise among itself and its two neighbours")
def _noise_order(task, batch: Batch, model) -> VariableLabels:
    noise = batch.seeds[..., 0]  # [batch, N]
    nbrs = _neighbours(batch)
    nbr_noise = noise.gather(1, nbrs.flatten(1)).view_as(nbrs)  # [batch, N, 2]
    order = (nbr_noise < noise[..., None]).sum(-1)
    N = task.n_vertices
    return VariableLabels(
        labels=order, n_classes=3, instance_names=tuple(f"vertex {v}" for v in range(N)),
        control_types=nbrs[..., 0] * N + nbrs[..., 1], output_index=torch.arange(N),
    )
