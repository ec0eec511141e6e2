"""Interchange pairs: a base input and a source input whose variable differs, split into
training and test halves (see the package's doc)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from interp_rand.tasks.base import Batch
from probes.controls import control_labels, group_split
from probes.variables import VariableLabels, input_groups, variable_labels


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


def counterfactual_pairs(base: Tensor, candidates: Tensor, values: Tensor, answer: Tensor,
                         counterfactual: Callable[[Tensor], Tensor], n_pairs: int, generator: torch.Generator,
                         accept: Callable[[Tensor, Tensor], Tensor] | None = None,
                         tries: int = 16) -> tuple[Tensor, Tensor, Tensor]:
    """The one counterfactual-pair search (probe variables here, mechanism variables in
    :func:`circuits.mechanisms.interchange.variable_pairs`).

    ``base`` (long rows, in the order they are tried) each take the first of ``tries`` random
    sources drawn from ``candidates`` that qualifies: its value (``values``, one per row of the
    batch) differs from the base's, and the counterfactual answer ``counterfactual(new)`` (``new``
    ``[len(base)]``: a value per base; ``[len(base), m]`` long, a negative entry where the
    variable has no effect) is defined everywhere and differs from the base's own ``answer``
    (``[len(base), m]``) at some output, so that leaving the model alone scores 0.
    ``accept(source, cf) -> [len(base)]`` bool adds a condition. Returns the first ``n_pairs``
    bases that found a source, as indices into ``base``, with their sources (rows) and
    counterfactual answers: ``(kept, source, targets)``.
    """
    source = torch.full_like(base, -1)
    targets = torch.full_like(answer, -1)
    for _ in range(tries):
        open_ = source < 0
        if not bool(open_.any()):
            break
        cand = candidates[torch.randint(0, len(candidates), (len(base),), generator=generator)]
        cf = counterfactual(values[cand])
        ok = open_ & (values[cand] != values[base]) & (cf >= 0).all(1) & (cf != answer).any(1)
        if accept is not None:
            ok &= accept(cand, cf)
        source[ok], targets[ok] = cand[ok], cf[ok]
    kept = (source >= 0).nonzero()[:, 0][:n_pairs]
    return kept, source[kept], targets[kept]


def make_pairs(task, batch: Batch, labels: VariableLabels, instance: int, values: Tensor, rows: Tensor,
               n_pairs: int, generator: torch.Generator, real: Tensor | None = None,
               tries: int = 16) -> Pairs:
    """Up to ``n_pairs`` base/source pairs of a probe variable's ``instance`` among ``rows``
    (long indices into ``batch``), scored at its output (:func:`variable_outputs`) with its own
    ``counterfactual`` rule (:func:`counterfactual_pairs`).

    ``values`` ``[len(batch)]``: the variable's value per example (or control labels); given
    ``real`` (the real variable, when ``values`` are control labels), the counterfactual must
    also differ from that of the real variable's source value.
    """
    outputs = variable_outputs(task, labels, instance)
    base = rows[torch.randperm(len(rows), generator=generator)]
    sub = batch[base]
    answer = sub.targets[:, sub.answer_positions[outputs]]  # [n, m]

    def counterfactual(new: Tensor) -> Tensor:
        return labels.counterfactual(sub, instance, new)[:, None]

    accept = None if real is None else (lambda cand, cf: (cf != counterfactual(real[cand])).any(1))
    kept, source, targets = counterfactual_pairs(base, rows, values, answer, counterfactual, n_pairs, generator,
                                                 accept, tries)
    return Pairs(base[kept], source, values[source], targets, outputs)


def variable_outputs(task, labels: VariableLabels, instance: int) -> Tensor:
    """``[1]``: the answer index a probe variable's ``instance`` acts on (its ``output_index``),
    where its ``counterfactual`` rule says what the answer becomes; a variable without that rule
    cannot be interchanged."""
    if labels.counterfactual is None or labels.output_index is None:
        raise ValueError(f"probe variable {labels.name or '?'} of task {task.name!r} declares no counterfactual "
                         "rule (what the answer becomes when it changes), so it cannot be interchanged")
    index = int(labels.output_index[instance])
    if index < 0:
        raise ValueError(f"probe variable {labels.name or '?'} acts on every answer position; name one")
    return torch.tensor([index])


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
    labels = variable_labels(task, batch, variable)
    values = labels.labels[:, instance]
    train = group_split(input_groups(task, batch), test_fraction, generator)
    train_rows, test_rows = train.nonzero()[:, 0], (~train).nonzero()[:, 0]
    control = control_labels(labels.control_types, labels.labels, labels.n_classes, generator)[:, instance]
    return Split(
        train=train,
        train_pairs=make_pairs(task, batch, labels, instance, values, train_rows, n_pairs, generator),
        test_pairs=make_pairs(task, batch, labels, instance, values, test_rows, n_pairs, generator),
        control_train=make_pairs(task, batch, labels, instance, control, train_rows, n_pairs, generator, real=values),
        control_test=make_pairs(task, batch, labels, instance, control, test_rows, n_pairs, generator, real=values),
    )
