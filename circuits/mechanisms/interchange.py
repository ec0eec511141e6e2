"""Interchange interventions per variable of a :class:`~circuits.mechanisms.Mechanism`.

For variable ``v`` mapped to site ``S``: pairs of a *base* and a *source* example whose values
of ``v`` differ and for which the algorithm's counterfactual answer (the base with ``v`` set
to the source's value, everything downstream of ``v`` recomputed) differs from the base's own
answer. The model runs the base with ``S`` taken from the source. The
**interchange-intervention accuracy** (IIA) is the share of pairs on which the model's answers
at every output equal the counterfactual; leaving the model alone scores 0 by construction. A
``per_output`` mechanism scores instead the (pair, output) entries where the counterfactual
answer differs from the base's: the outputs the swap is predicted to move.

Controls, each a share of the same kind on the same pairs (bounded in [0, 1], no denominator):

- ``random_site``: the same swap at a random site of the same shape elsewhere (the same
  component kinds at other positions or heads; another position set of the same hook);
- ``random_init``: the same site on a randomly initialised model of the same architecture;
- ``random_direction`` (subspace sites): a random orthonormal basis of the same ``k``.

A subspace site with ``subspace=k`` fits a k-dim DAS rotation
(:func:`probes.interchange.train_das`) on pairs from a training half of the batch; every
reported share is measured on pairs from the other half.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms.hypothesis import Mechanism, Site, Values, Variable
from circuits.mechanisms.patching import Patch, patched_answers, writer_locations
from probes.interchange import DASConfig, Pairs, counterfactual_pairs, random_subspace, train_das


@dataclass(frozen=True)
class VariablePairs:
    """Base rows, source rows (into the evaluation batch) and the counterfactual answers ``[n, m]``;
    ``scored`` ``[n, m]`` bool: the outputs a pair is scored on (``None``: all of them, and a
    pair counts only when every output matches; a per-output mechanism scores the outputs the
    counterfactual moves, each on its own)."""

    base: Tensor
    source: Tensor
    targets: Tensor
    scored: Tensor | None = None

    def __len__(self) -> int:
        return len(self.base)


def variable_pairs(mech: Mechanism, batch: Any, values: Values, name: str, rows: Tensor, n_pairs: int,
                   generator: torch.Generator, tries: int = 16) -> VariablePairs:
    """Up to ``n_pairs`` pairs among ``rows`` from the toolkit's one counterfactual-pair search
    (:func:`probes.interchange.counterfactual_pairs`, the probes' too): each of ``4 n_pairs``
    random bases takes the first of ``tries`` random sources whose value of ``name`` differs and
    whose counterfactual answer (the algorithm with ``name`` set to the source's value,
    everything downstream recomputed) differs from the base's answer."""
    base = rows[torch.randperm(len(rows), generator=generator)][: 4 * n_pairs]
    sub = batch[base]
    sub_values = {k: v[base] for k, v in values.items()}
    answer = mech.answer_of(sub, sub_values)
    kept, source, targets = counterfactual_pairs(
        base, rows, values[name], answer, lambda new: mech.counterfactual(sub, sub_values, name, new), n_pairs,
        generator, tries=tries)
    scored = (targets != answer[kept]) if mech.per_output else None
    return VariablePairs(base[kept], source, targets, scored)


def accuracy_on(model: Any, graph: ModelGraph, batch: Any, acts: dict[str, Tensor], pairs: VariablePairs,
                site: Site | None, outputs: Tensor, basis: Tensor | None = None) -> float:
    """The share of ``pairs`` whose patched answers all equal the counterfactual; with
    ``pairs.scored``, the share of the scored (pair, output) entries (NaN: no pairs).
    ``site=None``: the bases run unpatched (what every site scores that no answer reads)."""
    if not len(pairs):
        return float("nan")
    patches = [] if site is None else [Patch(site, pairs.source, basis)]
    logits = patched_answers(model, graph, batch, pairs.base, acts, patches, outputs)
    hit = logits.argmax(-1) == pairs.targets
    if pairs.scored is not None:
        return float(hit[pairs.scored].float().mean())
    return float(hit.all(1).float().mean())


def random_site(site: Site, graph: ModelGraph, generator: torch.Generator,
                avoid: frozenset[Node] = frozenset()) -> Site:
    """A site of the same shape elsewhere: each node replaced by a random writer of the same
    kind at another location, not one in ``avoid`` (the locations the hypothesis names: another
    variable's site or the readout may hold the same value downstream, which would make the
    control pass for the wrong reason); a hook site moved to other positions of the same hook."""
    if site.nodes:
        pool = writer_locations(graph)
        taken = set(site.nodes) | set(avoid)
        out: list[Node] = []
        for node in site.nodes:
            same = [n for n in pool if n.kind == node.kind and n not in taken and n not in out]
            same = same or [n for n in pool if n not in taken and n not in out]
            same = same or [n for n in pool if n not in site.nodes and n not in out]
            out.append(same[int(torch.randint(len(same), (1,), generator=generator))])
        return Site.of(*out)
    others = [p for p in range(graph.n_positions) if p not in site.positions]
    if len(others) < len(site.positions):
        others = list(range(graph.n_positions))
    pick = torch.randperm(len(others), generator=generator)[: len(site.positions)]
    return Site(hook=site.hook, positions=tuple(sorted(others[int(i)] for i in pick)), subspace=site.subspace)


@dataclass
class VariableCheck:
    """The interchange result of one variable: its IIA and controls on the test pairs."""

    variable: str
    site: str
    iia: float
    controls: dict[str, float]
    n_pairs: int
    base_accuracy: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"variable": self.variable, "site": self.site, "iia": self.iia, "controls": self.controls,
                "n_pairs": self.n_pairs, "base_accuracy": self.base_accuracy, **self.details}


def check_variable(model: Any, random_model: Any, graph: ModelGraph, mech: Mechanism, variable: Variable,
                   batch: Any, values: Values, acts: dict[str, Tensor], random_acts: dict[str, Tensor],
                   train: Tensor, base_accuracy: float, n_pairs: int, generator: torch.Generator,
                   das: DASConfig = DASConfig()) -> tuple[VariableCheck, Tensor | None]:
    """IIA of ``variable`` at its site with its controls; also the fitted basis of a subspace
    site (``None`` otherwise), which causal scrubbing reuses."""
    site = variable.site
    outputs = torch.tensor(mech.outputs)
    test_rows, train_rows = (~train).nonzero()[:, 0], train.nonzero()[:, 0]
    pairs = variable_pairs(mech, batch, values, variable.name, test_rows, n_pairs, generator)
    named = frozenset(mech.readout) | frozenset(n for v in mech.mapped for n in v.site.nodes)
    basis = None
    details: dict[str, Any] = {}
    if site.subspace is not None:
        basis = _fit_basis(model, mech, batch, values, variable.name, site, train_rows, n_pairs, generator, das)
        details["k"] = int(basis.shape[1])
    controls = {
        "random_site": accuracy_on(model, graph, batch, acts, pairs, random_site(site, graph, generator, named),
                                   outputs, basis),
        "random_init": accuracy_on(random_model, graph, batch, random_acts, pairs, site, outputs,
                                   None if basis is None else random_subspace(basis.shape[0], basis.shape[1], generator)),
    }
    if basis is not None:
        controls["random_direction"] = accuracy_on(model, graph, batch, acts, pairs, site, outputs,
                                                   random_subspace(basis.shape[0], basis.shape[1], generator))
    value = accuracy_on(model, graph, batch, acts, pairs, site, outputs, basis)
    return VariableCheck(variable.name, site.label, value, controls, len(pairs), base_accuracy, details), basis


def _fit_basis(model: Any, mech: Mechanism, batch: Any, values: Values, name: str, site: Site, rows: Tensor,
               n_pairs: int, generator: torch.Generator, das: DASConfig) -> Tensor:
    """A DAS basis of ``site.subspace`` dims (or the given basis) from pairs among ``rows``."""
    if isinstance(site.subspace, Tensor):
        return site.subspace
    pairs = variable_pairs(mech, batch, values, name, rows, n_pairs, generator)
    if not len(pairs):
        raise ValueError(f"mechanism {mech.name!r}: no training pairs for {name!r} (its value never changes the answer)")
    offset = int(getattr(model.cfg, "seed_offset", 0) or 0)
    task_positions = [p - offset for p in site.positions]
    probe_pairs = Pairs(pairs.base, pairs.source, values[name][pairs.source], pairs.targets, torch.tensor(mech.outputs))
    return train_das(model, batch, probe_pairs, site.hook, task_positions, int(site.subspace), generator, das)


__all__ = ["VariableCheck", "VariablePairs", "accuracy_on", "check_variable", "random_site", "variable_pairs"]
