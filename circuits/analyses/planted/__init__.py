"""Planted circuits: hand-set models, at the shapes of this toolkit's tasks, whose circuit is
known by construction, to score discovery methods against (:mod:`circuits.analyses.ground_truth`).

Each builder returns a :class:`PlantedModel`: one of our ``HookedTransformer``s with every
weight set by hand (all others zero, no LayerNorm), clean and corrupted batches of the task's
layout, the **known edge set** (position-free :class:`~circuits.graph.nodes.Edge`s) and the
**distractors**: components that carry the corrupted signal (their inputs differ between the
clean and the corrupted run) but whose output nothing downstream reads (they write into a
subspace that no later component and not the unembedding reads), so patching any of their
edges changes nothing.

The models need not solve the whole task: each computes a stated sub-function exactly on the
positions the metric reads (its batches' ``answer_positions``), and its targets are that
sub-function's answers. The corruption of each changes exactly the variables the circuit
carries, so the known edge set is the set of edges whose patching (resample ablation from the
corrupted batch, position-free) changes the metric: every other edge either carries the same
value in both runs or writes where its reader does not read. The tests check this on the
exact scores, and that the known circuit alone recovers the behaviour and ablating it removes
it.

- :func:`sort_model`: one head copies the next-larger list element (sort, distinct lists).
- :func:`addition_model`: two-digit addition's tens digit with its carry wired by hand.
- :func:`recall_model`: associative recall with a seed-chosen storage rule.
- :func:`seed_reader_model`: a head reads the seed and flips the recalled bits; with
  ``decoy=True`` (``seed-reader+decoy``) a distractor's output is read through a function that
  is flat in value but not in slope at the values it takes, which misleads gradients.

Stressors (a gated seed reader, :func:`_gated_seed_reader`; each breaks one assumption of a
method, and its docstring says which method it should fool):

- :func:`off_relu_model` (``off-relu``): a known ReLU off at the corrupted point, where EAP
  takes its gradient (EAP scores its upstream edges 0).
- :func:`saturated_model` (``saturated``): a known clip flat at both the clean and the
  corrupted value (a gradient at either point is 0).
- :func:`cancel_model` (``cancel``): two paths that add ``+2x`` and ``-2x`` to the gate's input;
  each matters alone, the pair not at all (not known: no single-edge method can be right).
- :func:`and_gate_model` (``and-gate``): two paths, each necessary (known; single-edge
  denoising, as exact discovery does, sees neither).
- :func:`or_gate_model` (``or-gate``): two redundant paths, each alone sufficient (known;
  single-edge noising, as ACDC does, sees neither).

Their known sets follow MIB's definition (the union of the minimal circuits); on every model
but ``cancel``, ``and-gate`` and ``or-gate`` it is also the set of edges whose patching alone
changes the metric.

    >>> planted = sort_model()
    >>> sorted(e.name for e in planted.known)
    ['a0.0->logits', 'embed->a0.0<k>', 'embed->a0.0<q>', 'embed->a0.0<v>']
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from circuits.analyses.planted.base import PlantedModel
from circuits.analyses.planted.stressors import (STRESSORS, and_gate_model, cancel_model, off_relu_model,
                                                 or_gate_model, saturated_model)
from circuits.analyses.planted.tasks import addition_model, recall_model, seed_reader_model, sort_model
from interp_rand.registry import Registry

PLANTED_MODELS: Registry[Callable[..., PlantedModel]] = Registry("planted model")
for _name, _make in {
        "sort": sort_model, "addition": addition_model, "recall": recall_model, "seed-reader": seed_reader_model,
        "seed-reader+decoy": functools.partial(seed_reader_model, decoy=True),
        "off-relu": off_relu_model, "saturated": saturated_model, "cancel": cancel_model, "and-gate": and_gate_model,
        "or-gate": or_gate_model}.items():
    PLANTED_MODELS.register(_name, _make)


def planted_models(names: tuple[str, ...] | None = None) -> list[PlantedModel]:
    """The planted models by name (default: all of :data:`PLANTED_MODELS`)."""
    names = tuple(PLANTED_MODELS) if names is None else names
    unknown = [n for n in names if n not in PLANTED_MODELS]
    if unknown:
        raise ValueError(f"unknown planted model(s) {unknown}; choose from {list(PLANTED_MODELS)}")
    return [PLANTED_MODELS.get(n)() for n in names]


__all__ = ["PLANTED_MODELS", "STRESSORS", "PlantedModel", "addition_model", "and_gate_model", "cancel_model",
           "off_relu_model",
           "or_gate_model", "planted_models", "recall_model", "saturated_model", "seed_reader_model", "sort_model"]
