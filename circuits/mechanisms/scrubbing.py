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

With ``recursive=True`` (the default, and the card's) the scrubbing is *treeified*, as Chan
et al. define it: only the hypothesis's **inputs** (mapped variables with no mapped ancestor:
values the hypothesis reads off the input) take an agreeing example's clean activation. Every
other mapped variable's site is **recomputed by the model** from its parents' sites: a forward of
an example that agrees with its consumer on that variable, with each parent's site set to the
value the parent's own subtree produced (recursively, a fresh agreeing draw per node of the
tree), its own computing components (:func:`computing_nodes`) and the ``readout`` live and
every other writer location resampled from an unrelated example; the answer's forward
sets the answer's nearest mapped ancestors the same way, its readout live, all else resampled.
A hypothesis whose intermediate variable sits where the model does not compute it from the
named parents (a carry "formed at b0 and only copied" while the model gathers it from b1 and
b0) is caught here: its site no longer gets its value from outside. ``recursive=False`` is one
level: every mapped site takes an agreeing example's clean activation (what the card did
before; a variable mapped to a site that merely *holds* the right value passes however the
model computes it). The metric is the model's agreement with *its own clean
answer* at the mechanism's outputs, so it applies to any task, randomized ones included:
``logprob`` (mean log-probability of the clean argmax) and ``accuracy``, the *whole-output
agreement* (share of examples whose argmax at every output is unchanged; the card's rule reads
it as an absolute value beside the log-prob share, since one changed output in nine moves the
mean log-probability little). The share recovered is
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
from circuits.graph.architecture import run_model
from circuits.mechanisms.patching import (Patch, agreeing_rows, derangement, patch_hooks, patched_answers, site_hooks,
                                          writer_locations)
from interp_rand.model.capture import capture_into

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
    same = logits.argmax(-1) == clean_answer
    return {"logprob": float(logprobs.mean()), "accuracy": float(same.all(1).float().mean()),
            "per_output": [round(float(x), 4) for x in same.float().mean(0)]}


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
          generator: torch.Generator, bases: dict[str, Tensor | None] | None = None, n_random: int = 10,
          recursive: bool = True) -> Scrubbing:
    """Scrub ``mech`` on ``batch`` (``acts``: the recorded writer and site hooks of ``batch``;
    ``bases``: each subspace variable's basis); ``recursive``: treeified (see the module
    docstring), else one level."""
    bases = bases or {}
    n = len(batch)
    rows = torch.arange(n)
    outputs = torch.tensor(mech.outputs)
    locations = writer_locations(graph)
    clean_logits = patched_answers(model, graph, batch, rows, acts, [], outputs)
    clean_answer = clean_logits.argmax(-1)
    resample = derangement(n, generator)

    def run(live: set[Node], clean_sites: list[Site], variable_patches: list[Patch],
            source: dict[str, Tensor] = acts) -> dict[str, float]:
        """``live`` locations compute on what reaches them; ``clean_sites`` take their own
        example's clean value; variable patches take an agreeing example's; the rest is resampled."""
        patches = _resampled(locations, live | {n for site in clean_sites for n in site.nodes} | {
            n for p in variable_patches for n in p.site.nodes}, resample) + [
            Patch(site, rows) for site in clean_sites] + variable_patches
        return _metrics(patched_answers(model, graph, batch, rows, source, patches, outputs), clean_answer)

    clean = _metrics(clean_logits, clean_answer)
    empty = run(set(), [], [])
    if recursive:
        tree = _Tree(model, graph, mech, batch, values, acts, bases, locations, generator)
        patches, source = tree.patches(list(mech.answer_parents), rows)
        scrubbed = run(set(mech.readout), [], patches, source)
        details: dict[str, Any] = {"recursive": True, "forwards": tree.forwards}
    else:
        variable_patches = [Patch(v.site, agreeing_rows(values[v.name], generator), bases.get(v.name))
                            for v in mech.mapped]
        scrubbed = run(set(mech.readout), [], variable_patches)
        details = {"recursive": False}
    n_named = min(len(hypothesis_locations(mech)) + sum(
        len(v.site.positions) for v in mech.mapped if v.site.hook is not None), len(locations))
    random_shares: dict[str, list[float]] = {m: [] for m in METRICS}
    random_agreement: list[float] = []
    for _ in range(n_random):
        pick = torch.randperm(len(locations), generator=generator)[:n_named]
        result = run(set(), [Site.of(*(locations[int(i)] for i in pick))] if n_named else [], [])
        random_agreement.append(result["accuracy"])
        for m in METRICS:
            random_shares[m].append(_share(result[m], clean[m], empty[m]))
    details["random_locations_agreement"] = random_agreement
    kept = run(set(mech.readout), [v.site for v in mech.mapped], [])
    return Scrubbing(
        clean=clean, empty=empty, scrubbed=scrubbed,
        share={m: _share(scrubbed[m], clean[m], empty[m]) for m in METRICS},
        random_locations=random_shares,
        sites_kept={m: _share(kept[m], clean[m], empty[m]) for m in METRICS},
        n_locations=n_named, n_examples=n, details=details,
    )


def computing_nodes(site: Site, graph: ModelGraph) -> set[Node]:
    """The writers that compute ``site``: its nodes; for a residual hook at some positions, the
    components of the sub-block just before that hook at those positions (``resid_mid.L``: layer
    ``L``'s heads; ``resid_pre.L`` / ``resid_post.(L-1)``: layer ``L-1``'s heads and MLP;
    ``resid_pre.0``: the embedding). A treeified scrub runs them live when it recomputes the
    site; a hook that is not a residual hook names none (its site is then only patched)."""
    if site.nodes:
        return set(site.nodes)
    parts = (site.hook or "").split(".")
    if len(parts) != 3 or parts[0] != "blocks" or not parts[2].startswith("hook_resid_"):
        return set()
    layer, where = int(parts[1]), parts[2].removeprefix("hook_resid_")
    if where == "pre":
        layer, where = layer - 1, "post"
    kinds = ("head",) if where == "mid" else ("head", "mlp")
    out = set()
    for node in graph.writers:
        if layer < 0 and node.kind in ("embed", "seed", "input_mlp") or node.layer == layer and node.kind in kinds:
            out.update(node.at(p) for p in site.positions)
    return out


def _resampled(locations: list[Node], fixed: set[Node], rows: Tensor) -> list[Patch]:
    """One patch resampling every location not in ``fixed`` from ``rows``."""
    varied = tuple(node for node in locations if node not in fixed)
    return [Patch(Site.of(*varied), rows)] if varied else []


class _Tree:
    """The treeified scrub's recursion: :meth:`patches` gives, for a consumer evaluated on
    ``rows``, the patches that set each named variable's site to the value its subtree
    computes, and the activations those patches read (the recorded ones with every computed
    value appended as extra rows)."""

    def __init__(self, model: Any, graph: ModelGraph, mech: Mechanism, batch: Any, values: Values,
                 acts: dict[str, Tensor], bases: dict[str, Tensor | None], locations: list[Node],
                 generator: torch.Generator) -> None:
        self.model, self.graph, self.mech, self.batch, self.values = model, graph, mech, batch, values
        self.acts, self.bases, self.locations, self.generator = acts, bases, locations, generator
        self.forwards = 0

    def patches(self, names: list[str], rows: Tensor) -> tuple[list[Patch], dict[str, Tensor]]:
        """Patches for the nearest mapped ancestors of ``names``, for a consumer on ``rows``."""
        source = dict(self.acts)
        out = []
        for name in self.mech.mapped_parents(names):
            variable = self.mech.variable(name)
            agree = agreeing_rows(self.values[name], self.generator)[rows]  # an input agreeing on name
            if self.mech.is_input(name):
                out.append(Patch(variable.site, agree, self.bases.get(name)))
                continue
            computed = self._compute(name, agree)
            first = max(len(source[hook]) for hook in computed)  # a site's hooks share their rows
            for hook, value in computed.items():
                pad = source[hook].new_zeros((first - len(source[hook]),) + tuple(source[hook].shape[1:]))
                source[hook] = torch.cat([source[hook], pad, value.to(source[hook].dtype)])
            out.append(Patch(variable.site, first + torch.arange(len(rows)), self.bases.get(name)))
        return out, source

    @torch.no_grad()
    def _compute(self, name: str, rows: Tensor) -> dict[str, Tensor]:
        """The model's own value of ``name``'s site hooks on ``rows``, its parents' sites set by
        their subtrees, its site live, every other location resampled from unrelated rows."""
        variable = self.mech.variable(name)
        parent_patches, source = self.patches(list(variable.parents), rows)
        # the readout is part of the hypothesis's computation: it runs live in every forward
        fixed = computing_nodes(variable.site, self.graph) | set(self.mech.readout) | {
            n for p in parent_patches for n in p.site.nodes}
        unrelated = rows[torch.randperm(len(rows), generator=self.generator)]
        unrelated = torch.where(unrelated == rows, rows.roll(1), unrelated)
        patches = _resampled(self.locations, fixed, unrelated) + parent_patches
        hooks = site_hooks([variable.site])
        kept: dict[str, Tensor] = {}
        fwd = patch_hooks(self.graph, source, patches) + capture_into(kept, hooks)
        self.forwards += 1
        with self.model.hooks(fwd_hooks=fwd):
            run_model(self.model, self.batch[rows])
        return {h: kept[h] for h in hooks}


__all__ = ["GAP_FLOOR", "METRICS", "Scrubbing", "computing_nodes", "hypothesis_locations", "scrub"]
