"""Causal scrubbing of a whole :class:`~circuits.mechanisms.Mechanism` (after Chan et al. 2022).

The hypothesis says which activations matter and what they carry. Scrubbing replaces
everything it allows to vary and measures what is left of the model's behaviour:

1. every writer location (component × position, :func:`~circuits.mechanisms.patching.writer_locations`)
   that is neither in a variable's site nor in the mechanism's ``readout`` is **resampled**:
   its output comes from another example, one random derangement of the batch for all of them;
2. each mapped variable's site takes its value from a random other example that **agrees on
   that variable's value** (an independent draw per variable, :func:`~circuits.mechanisms.patching.agreeing_rows`);
   a subspace site swaps only its subspace (the basis the interchange check fitted);
3. the ``readout`` components and the unembedding run on what results.

This is one level of scrubbing: each source example runs the clean model (sources are not
themselves scrubbed recursively). The metric is the model's agreement with *its own clean
answer* at the mechanism's outputs, so it applies to any task, randomized ones included:
``logprob`` (mean log-probability of the clean argmax) and ``accuracy`` (share of examples
whose argmax at every output is unchanged). The share recovered is
``(M_scrubbed - M_empty) / (M_clean - M_empty)``, where the *empty* hypothesis resamples every
location; an empty gap below ``GAP_FLOOR`` makes the share undefined (NaN, inconclusive).

Controls:

- ``random_locations``: ``n_random`` draws of as many random writer locations as the
  hypothesis names (site locations, hook-site positions and readout), each taking its own
  example's clean value, everything else resampled (mean and max of the share);
- ``sites_kept``: the hypothesis's sites at their own example's clean values and its readout
  live, everything else resampled (no variable semantics): how much the localisation alone
  explains; scrubbing below it means the sites carry more than the variables say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms.hypothesis import Mechanism, Site, Values
from circuits.mechanisms.patching import Patch, agreeing_rows, derangement, patched_answers, writer_locations

GAP_FLOOR = 1e-3
METRICS = ("logprob", "accuracy")


@dataclass
class Scrubbing:
    """Metrics (``{"logprob": x, "accuracy": y}``) of the clean, empty-hypothesis and scrubbed
    runs, the shares recovered, and the controls' shares."""

    clean: dict[str, float]
    empty: dict[str, float]
    scrubbed: dict[str, float]
    share: dict[str, float]
    random_locations: dict[str, list[float]]
    sites_kept: dict[str, float]
    n_locations: int
    n_examples: int
    details: dict[str, Any] = field(default_factory=dict)

    def control_mean(self, metric: str) -> float:
        xs = [x for x in self.random_locations[metric] if x == x]
        return float(sum(xs) / len(xs)) if xs else float("nan")

    def control_max(self, metric: str) -> float:
        xs = [x for x in self.random_locations[metric] if x == x]
        return float(max(xs)) if xs else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"clean": self.clean, "empty": self.empty, "scrubbed": self.scrubbed, "share": self.share,
                "random_locations": self.random_locations,
                "random_locations_mean": {m: self.control_mean(m) for m in METRICS},
                "sites_kept": self.sites_kept, "n_locations": self.n_locations, "n_examples": self.n_examples,
                **self.details}


def _metrics(logits: Tensor, clean_answer: Tensor) -> dict[str, float]:
    logprobs = logits.log_softmax(-1).gather(-1, clean_answer[..., None])[..., 0]
    return {"logprob": float(logprobs.mean()), "accuracy": float((logits.argmax(-1) == clean_answer).all(1).float().mean())}


def _share(value: float, clean: float, empty: float) -> float:
    gap = clean - empty
    return float("nan") if abs(gap) < GAP_FLOOR else (value - empty) / gap


def hypothesis_locations(mech: Mechanism) -> set[Node]:
    """The writer locations the hypothesis names (site nodes and readout)."""
    out = set(mech.readout)
    for v in mech.mapped:
        out.update(v.site.nodes)
    return out


def scrub(model: Any, graph: ModelGraph, mech: Mechanism, batch: Any, values: Values, acts: dict[str, Tensor],
          generator: torch.Generator, bases: dict[str, Tensor | None] | None = None, n_random: int = 10) -> Scrubbing:
    """Scrub ``mech`` on ``batch`` (``acts``: the recorded writer and site hooks of ``batch``;
    ``bases``: each subspace variable's basis)."""
    bases = bases or {}
    n = len(batch)
    rows = torch.arange(n)
    outputs = torch.tensor(mech.outputs)
    locations = writer_locations(graph)
    clean_logits = patched_answers(model, graph, batch, rows, acts, [], outputs)
    clean_answer = clean_logits.argmax(-1)
    resample = derangement(n, generator)

    def run(live: set[Node], clean_sites: list[Site], variable_patches: list[Patch]) -> dict[str, float]:
        """``live`` locations compute on what reaches them; ``clean_sites`` take their own
        example's clean value; variable patches take an agreeing example's; the rest is resampled."""
        fixed = live | {n for site in clean_sites for n in site.nodes} | {
            n for p in variable_patches for n in p.site.nodes}
        varied = tuple(node for node in locations if node not in fixed)
        patches = ([Patch(Site.of(*varied), resample)] if varied else []) + [
            Patch(site, rows) for site in clean_sites] + variable_patches
        return _metrics(patched_answers(model, graph, batch, rows, acts, patches, outputs), clean_answer)

    clean = _metrics(clean_logits, clean_answer)
    empty = run(set(), [], [])
    variable_patches = [Patch(v.site, agreeing_rows(values[v.name], generator), bases.get(v.name))
                        for v in mech.mapped]
    scrubbed = run(set(mech.readout), [], variable_patches)
    n_named = min(len(hypothesis_locations(mech)) + sum(
        len(v.site.positions) for v in mech.mapped if v.site.hook is not None), len(locations))
    random_shares: dict[str, list[float]] = {m: [] for m in METRICS}
    for _ in range(n_random):
        pick = torch.randperm(len(locations), generator=generator)[:n_named]
        result = run(set(), [Site.of(*(locations[int(i)] for i in pick))] if n_named else [], [])
        for m in METRICS:
            random_shares[m].append(_share(result[m], clean[m], empty[m]))
    kept = run(set(mech.readout), [v.site for v in mech.mapped], [])
    return Scrubbing(
        clean=clean, empty=empty, scrubbed=scrubbed,
        share={m: _share(scrubbed[m], clean[m], empty[m]) for m in METRICS},
        random_locations=random_shares,
        sites_kept={m: _share(kept[m], clean[m], empty[m]) for m in METRICS},
        n_locations=n_named, n_examples=n,
    )


__all__ = ["GAP_FLOOR", "METRICS", "Scrubbing", "hypothesis_locations", "scrub"]
