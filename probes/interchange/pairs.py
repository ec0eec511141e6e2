"""Interchange pairs: a base input and a source input whose variable differs, split into
training and test halves (see the package's doc)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp_rand.tasks.base import Batch
from probes.controls import control_labels, group_split
from probes.variables import input_groups, variable_labels
from probes.interchange.causal_models import CausalModel, get_causal_model


@dataclass(frozen=True)
class Pairs:
    """Base/source pairs on one split: row indices into the sampled batch, the source's value
    of the variable and the counterfactual targets ``[n, m]`` at ``outputs`` ``[m]``."""

    base: Tensor
    source: Tensor
    new: Tensor
    targets: Tensor
    outputs: Tensor

    def __len__(self) -> int:
        return len(self.base)


def make_pairs(task, batch: Batch, causal: CausalModel, instance: int, values: Tensor, rows: Tensor,
               n_pairs: int, generator: torch.Generator, real: Tensor | None = None,
               tries: int = 16) -> Pairs:
    """Up to ``n_pairs`` base/source pairs among ``rows`` (long indices into ``batch``).

    ``values`` ``[len(batch)]``: the variable's value per example. A pair needs ``values`` to
    differ and the counterfactual (base with the source's value) to differ from the base's
    answer; given ``real`` (the real variable, when ``values`` are control labels), also from
    the counterfactual of the real variable's source value. Each base takes the first of
    ``tries`` random sources that qualifies; bases without one are dropped.
    """
    outputs = causal.outputs(task, batch, instance)
    answer = batch.targets[:, batch.answer_positions[outputs]]  # [n, m]
    base = rows[torch.randperm(len(rows), generator=generator)]
    source = torch.full_like(base, -1)
    targets = torch.full((len(base), len(outputs)), -1, dtype=torch.long)
    sub = batch[base]
    for _ in range(tries):
        open_ = source < 0
        if not bool(open_.any()):
            break
        cand = rows[torch.randint(0, len(rows), (len(base),), generator=generator)]
        cf = causal.counterfactual(task, sub, instance, values[cand])
        ok = (values[cand] != values[base]) & (cf >= 0).all(1) & (cf != answer[base]).any(1)
        if real is not None:
            ok &= (cf != causal.counterfactual(task, sub, instance, real[cand])).any(1)
        take = open_ & ok
        source[take], targets[take] = cand[take], cf[take]
    keep = (source >= 0).nonzero()[:, 0][:n_pairs]
    return Pairs(base[keep], source[keep], values[source[keep]], targets[keep], outputs)


@dataclass(frozen=True)
class Split:
    """The pairs of one interchange analysis: ``train`` ``[n]`` bool (the examples of the
    training side), real-variable pairs on each side and control-variable pairs on each side."""

    train: Tensor
    train_pairs: Pairs
    test_pairs: Pairs
    control_train: Pairs
    control_test: Pairs


def interchange_pairs(task, batch: Batch, variable: str, instance: int, n_pairs: int, test_fraction: float,
                      generator: torch.Generator) -> Split:
    """Split ``batch`` by input group (:func:`group_split`, ``test_fraction`` of the groups
    held out) and draw at most ``n_pairs`` pairs of the variable and of its control labels
    (:func:`control_labels`) on each side (:func:`make_pairs`)."""
    causal = get_causal_model(task.name, variable)
    labels = variable_labels(task, batch, variable)
    values = labels.labels[:, instance]
    train = group_split(input_groups(task, batch), test_fraction, generator)
    train_rows, test_rows = train.nonzero()[:, 0], (~train).nonzero()[:, 0]
    control = control_labels(labels.control_types, labels.labels, labels.n_classes, generator)[:, instance]
    return Split(
        train=train,
        train_pairs=make_pairs(task, batch, causal, instance, values, train_rows, n_pairs, generator),
        test_pairs=make_pairs(task, batch, causal, instance, values, test_rows, n_pairs, generator),
        control_train=make_pairs(task, batch, causal, instance, control, train_rows, n_pairs, generator, real=values),
        control_test=make_pairs(task, batch, causal, instance, control, test_rows, n_pairs, generator, real=values),
    )
