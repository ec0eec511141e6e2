"""Localisation by search: a candidate algorithm becomes a :class:`~circuits.mechanisms.Mechanism`
whose sites the model's own interventions chose.

For output ``k``, predicted at residual position ``r_k``, the candidate's steps are:

    r_k = what the primitive gathers (the source list, or the prefix)   # attention at r_k
    c_k = the current token                                             # embed @ r_k
    y_k = the primitive's answer from r_k and c_k                       # the site found
    write y_k                                                           # the components after it at r_k

``y_k``'s site is searched: every component at ``r_k`` (heads, MLPs) is swapped alone between
counterfactual pairs of the candidate (:func:`circuits.mechanisms.leads.site_sweep`, with its
random-init control), the sweep pruned to the output's own position, where the answer is
written; the earliest component whose interchange accuracy (IIA) reaches
:data:`SINGLE_SITE_IIA` is kept (later ones carry the value on), else the top components whose margin is at least half the best one's
(at most :data:`MAX_COMPONENTS`, e.g. redundant heads) together. The gathering step ``r_k`` is
mapped to the heads that can feed that site (earlier layers' heads at ``r_k``, and the same
layer's for an MLP; and the embeddings of what it reads when there are none, or when a layer-0
head of the site gathers them itself), ``c_k`` to the
embedding at ``r_k`` (every component there reads it, so a treeified scrub must keep it), and the
components after the site at ``r_k`` are the readout. Nothing here tunes a site to a threshold:
the card (:func:`circuits.mechanisms.check_mechanism`) then tests the whole on fresh pairs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.explain.candidates import Candidate
from circuits.explain.compositions import Composition
from circuits.explain.primitives import Frame
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Site, Variable
from circuits.mechanisms.leads import SiteSweep, SweepMemo, residual_hooks, row_order, site_sweep
from interp_rand.model.hook_names import seed_offset

SINGLE_SITE_IIA = 0.9
MAX_COMPONENTS = 4
NEAR_BEST = 0.05  # an intermediate step's earliest site must hold it this close to its best site
DAS_POSITIONS = 3  # an intermediate step's subspaces are fitted at its best components' positions only


@dataclass
class Located:
    """A candidate located in the model: the mechanism and each output's sweep."""

    candidate: Candidate
    mechanism: Mechanism
    sweeps: list[SiteSweep] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)  # the variable each sweep searched (default y_0, y_1, ...)
    composition: str | None = None  # the composition of the candidate's answer it states, if any

    @property
    def name(self) -> str:
        return self.candidate.name + (f"/{self.composition}" if self.composition else "")

    def sweep_lines(self) -> list[str]:
        out = []
        for k, sweep in enumerate(self.sweeps):
            name = self.swept[k] if self.swept else f"y_{k}"
            site = self.mechanism.variable(name).site
            top = ", ".join(f"{r.label} {r.iia:.2f}" for r in sweep.rows[:3])
            where = "at its position" if name.startswith("y_") else "at every position up to its consumer"
            out.append(f"{name}: swept {len(sweep.rows)} sites {where}; best {top}; chosen "
                       f"{site.label if site else '(none)'}")
        return out


def _blocks(model: Any, batch: Any) -> list[Node]:
    """The model's heads, then its MLPs (the model graph's writers, no position)."""
    writers = ModelGraph.of(model, batch.inputs.shape[1]).writers
    return sorted((n for n in writers if n.kind in ("head", "mlp")), key=lambda n: (n.kind != "head", n.layer, n.head or 0))


def _at(blocks: list[Node], position: int) -> list[Node]:
    return [n.at(position) for n in blocks]


def _before(node: Node, other: Node) -> bool:
    """``node`` writes before ``other`` reads, in the same block order (heads, then the MLP)."""
    rank = lambda n: (n.layer, 0 if n.kind == "head" else 1)  # noqa: E731
    return rank(node) < rank(other)


def _mechanism(candidate: Candidate, model: Any, task: Any, batch: Any,
               sites: dict[int, tuple[Node, ...]]) -> Mechanism:
    """The candidate's mechanism with ``y_k`` at ``sites[k]`` (unmapped where absent)."""
    frame = Frame(batch, task)
    K, offset, reads = frame.n_outputs, seed_offset(model), candidate.primitive.reads
    blocks = _blocks(model, batch)
    variables: list[Variable] = []
    readout: list[Node] = []
    for k in range(K):
        r = frame.q(k) + offset
        parents = [f"cue_{k}"]
        chosen = sites.get(k)
        cue: tuple[Node, ...] = (Node("embed", position=r),)
        if reads == "match" and chosen:  # the query of a content match: the current token as the MLPs before the site make it
            last = max(chosen, key=lambda n: (n.layer, n.kind != "head"))
            cue += tuple(n for n in _at(blocks, r) if n.kind == "mlp" and _before(n, last))
        variables.append(Variable(f"cue_{k}", lambda b, k=k: Frame(b, task).current(k), site=Site.of(*cue),
                                  description=f"the current token at {r}", family="cue", instance=k))
        if reads == "position":  # the one token it copies, and the heads at r_k that move it there
            parents.insert(0, f"read_{k}")
            at = candidate.read_position(frame, k)
            feeders = ()
            if chosen:
                last = max(chosen, key=lambda n: (n.layer, n.kind != "head"))
                feeders = (Node("embed", position=at + offset),) + tuple(
                    n for n in _at(blocks, r) if n.kind == "head" and _before(n, last) and n not in chosen)
            variables.append(Variable(f"read_{k}", lambda b, at=at: b.inputs[:, at],
                                      site=Site.of(*feeders) if feeders else None,
                                      description=f"the token at {at + offset}, moved to {r} for output {k}",
                                      family="read", instance=k))
        elif reads != "none":
            parents.insert(0, f"read_{k}")
            feeders: tuple[Node, ...] = ()
            if chosen:
                last = max(chosen, key=lambda n: (n.layer, n.kind != "head"))
                heads = [n for n in _at(blocks, r) if n.kind == "head" and n not in chosen]
                feeders = tuple(n for n in heads if _before(n, last))
                if reads == "match":  # the source positions' own work before the site (a previous-token head)
                    feeders += tuple(n for p in range(frame.start, frame.q(0)) for n in _at(blocks, p + offset)
                                     if _before(n, last)) + tuple(Node("embed", position=p + offset)
                                                                  for p in range(frame.start, frame.q(0)))
                if reads != "match" and (not feeders or any(n.kind == "head" and n.layer == 0 for n in chosen)):
                    # a layer-0 head of the site reads the embeddings of what it gathers itself
                    span = range(frame.start, frame.q(0) if reads in ("source", "sequence") else frame.q(k))
                    feeders += tuple(Node("embed", position=p + offset) for p in span)
            variables.append(Variable(f"read_{k}", lambda b, k=k: Frame(b, task).read(reads, k),
                                      site=Site.of(*feeders) if feeders else None,
                                      description=f"what output {k} reads ({reads}), gathered at {r}",
                                      family="read", instance=k))
        variables.append(Variable(f"y_{k}", lambda b, k=k, **p: candidate.answer_at(Frame(b, task), k),
                                  parents=tuple(parents), site=Site.of(*chosen) if chosen else None,
                                  description=candidate.description.replace("q_k", f"position {r}")
                                  .replace("_k", f"_{k}"),
                                  family="y", instance=k))
        if chosen:
            last = max(chosen, key=lambda n: (n.layer, n.kind != "head"))
            readout += [n for n in _at(blocks, r) if _before(last, n) and n not in chosen]
    return Mechanism(candidate.name, getattr(task, "name", "task"), tuple(variables),
                     answer=lambda b, **v: torch.stack([v[f"y_{k}"] for k in range(K)], 1),
                     answer_parents=tuple(v.name for v in variables), outputs=tuple(range(K)),
                     readout=tuple(readout))


def choose_site(sweep: SiteSweep) -> tuple[Node, ...]:
    """The earliest component (lowest layer, a head before its layer's MLP) whose IIA reaches
    :data:`SINGLE_SITE_IIA`: where the value is computed, later components carrying it on (the
    readout); else the top components
    (not the embedding: that is the cue) whose margin is at least half the best's, at most
    :data:`MAX_COMPONENTS`."""
    rows = [r for r in sweep.rows if r.site.nodes and r.site.nodes[0].kind in ("head", "mlp")]
    if not rows:
        return ()
    best = rows[0]
    holding = [r for r in rows if r.iia >= SINGLE_SITE_IIA]
    if holding:  # the earliest component that holds it computes it; later ones carry it on
        first = min(holding, key=lambda r: (r.site.nodes[0].layer, r.site.nodes[0].kind != "head"))
        return first.site.nodes
    chosen = [r for r in rows if r.margin >= 0.5 * best.margin][:MAX_COMPONENTS] if best.margin > 0 else [best]
    return tuple(dict.fromkeys(n for r in chosen for n in r.site.nodes))


def locate(model: Any, task: Any, candidate: Candidate, batch: Any, *, n_pairs: int = 200, seed: int = 0,
           random_model: Any = None, memo: SweepMemo | None = None) -> Located:
    """Sweep each output's components at its position and build the located mechanism (``memo``:
    the search's shared activations and sweeps, :class:`~circuits.mechanisms.leads.SweepMemo`)."""
    offset = seed_offset(model)
    frame = Frame(batch, task)
    unlocated = _mechanism(candidate, model, task, batch, {})
    sweeps, sites = [], {}
    for k in range(frame.n_outputs):
        sweep = site_sweep(model, task, unlocated, f"y_{k}", batch=batch, positions=[frame.q(k) + offset], hooks=(),
                           n_pairs=n_pairs, seed=seed + k, random_model=random_model, memo=memo)
        sweeps.append(sweep)
        sites[k] = choose_site(sweep)
    mech = _mechanism(candidate, model, task, batch, sites)
    return Located(candidate, dataclasses.replace(mech, pseudocode=pseudocode(mech, candidate)), sweeps)


def site_rank(site: Site) -> tuple[int, float]:
    """Where a site sits in the forward pass: a component by its layer (heads before the MLP); a
    residual hook just after what writes it (``resid_mid.L`` after layer ``L``'s heads,
    ``resid_pre.L`` / ``resid_post.(L-1)`` after layer ``L-1``'s MLP, so a component that holds
    the value comes before the stream it writes into)."""
    if site.nodes:
        return max((n.layer if n.layer is not None else -1, 0 if n.kind == "head" else 1) for n in site.nodes)
    _, layer, where = site.hook.split(".")
    layer = int(layer)
    return {"hook_resid_pre": (layer - 1, 2.0), "hook_resid_mid": (layer, 0.5)}.get(where, (layer, 2.0))


def choose_step_site(sweep: SiteSweep, stream: bool = False) -> Site | None:
    """An intermediate step's site: the earliest site (:func:`site_rank`) whose IIA reaches
    :data:`SINGLE_SITE_IIA` and is within :data:`NEAR_BEST` of the best (an earlier site that
    holds the value only in part, a correlate, does not displace the one that holds it),
    components or a 1-dim subspace of a residual hook, the best margin among equally early
    ones; else the best site by margin (a component with the redundant ones at its position,
    :func:`choose_site`'s rule). ``stream``: the residual stream only (a hook
    whole or a subspace of it), for a step the hypothesis reads off the input at one position
    and later positions read from there, and the *latest* such site that holds it, where they
    read it: a component site, or an earlier hook, would leave the writers after it at that
    position, which those layers read too, to be resampled by the treeified scrub."""
    rows = [r for r in sweep.rows if (r.kind != "node" if stream else r.kind == "das" or
                                      r.site.nodes[0].kind in ("head", "mlp"))]
    top = max((r.iia for r in rows), default=0.0)
    holding = [r for r in rows if r.iia >= max(SINGLE_SITE_IIA, top - NEAR_BEST)]
    if holding:  # rows come best margin first: min keeps the first of the earliest (max: of the latest)
        if stream:
            return max(reversed(holding), key=lambda r: site_rank(r.site)).site
        return min(holding, key=lambda r: site_rank(r.site)).site
    if not rows:
        return None
    best = rows[0]
    if best.kind != "node":  # a residual hook, whole or a subspace
        return best.site
    # redundant components at the best one's position (choose_site's rule), never across positions
    here = dataclasses.replace(sweep, rows=[r for r in rows if r.kind == "node" and
                                            r.site.nodes[0].position == best.site.nodes[0].position])
    nodes = choose_site(here)
    return Site.of(*nodes) if nodes else None


def composed_mechanism(composition: Composition, candidate: Candidate, model: Any, task: Any, batch: Any,
                       sites: dict[str, Site]) -> Mechanism:
    """``composition``'s steps as variables at ``sites`` (unmapped where absent): each output's
    step ``y_k`` also reads the current token (embed @ ``r_k``), and the components after its site
    at ``r_k`` are the readout."""
    frame, offset, blocks = Frame(batch, task), seed_offset(model), _blocks(model, batch)
    variables: list[Variable] = []
    readout: list[Node] = []
    outputs = []
    cues: set[int] = set()

    def cue(k: int) -> str:  # the token at output k's position, made once, before its first reader
        if k not in cues:
            cues.add(k)
            r = frame.q(k) + offset
            variables.append(Variable(f"cue_{k}", lambda b, k=k: Frame(b, task).current(k),
                                      site=Site.of(Node("embed", position=r)), description=f"the current token at {r}",
                                      family="cue", instance=k))
        return f"cue_{k}"

    for step in composition.steps(frame):
        parents = step.parents
        for name in parents:
            if name.startswith("cue_"):
                cue(int(name.removeprefix("cue_")))
        site = sites.get(step.name)
        if step.reads:  # read off the input: the embeddings of its tokens
            site = Site.of(*(Node("embed", position=p + offset) for p in step.reads))
        if step.family == "y":
            k = step.instance
            r = frame.q(k) + offset
            outputs.append(k)
            parents = parents + (cue(k),)
            if site is not None and site.nodes:
                last = max(site.nodes, key=lambda n: (n.layer, n.kind != "head"))
                readout += [n for n in _at(blocks, r) if _before(last, n) and n not in site.nodes]
        variables.append(Variable(step.name, step.compute, parents, site=site,
                                  description=step.description, family=step.family, instance=step.instance))
    K = len(outputs)
    return Mechanism(f"{candidate.name}/{composition.name}", getattr(task, "name", "task"), tuple(variables),
                     answer=lambda b, **v: torch.stack([v[f"y_{k}"] for k in range(K)], 1),
                     answer_parents=tuple(f"y_{k}" for k in range(K)), outputs=tuple(range(K)),
                     readout=tuple(dict.fromkeys(readout)))


def step_sweep(model: Any, task: Any, mech: Mechanism, name: str, batch: Any, positions: list[int], *,
               n_pairs: int, seed: int, random_model: Any, das_positions: int = DAS_POSITIONS,
               leaf: bool = False, memo: SweepMemo | None = None) -> tuple[SiteSweep, bool]:
    """An intermediate step's sweep, pruned: every component (each layer's heads alone and
    together) at every position; where none holds the step (IIA below :data:`SINGLE_SITE_IIA`),
    also a 1-dim DAS subspace of each residual hook at only the ``das_positions`` positions of
    the best components (a DAS fit costs as much as hundreds of component swaps); the rows of all,
    best margin first, and whether the step is to sit in the stream (:func:`choose_step_site`):
    a ``leaf`` (a step read off the input) whose best components are at a position before its
    last possible one, where later positions' layers read it; its sweep then also has, at
    those positions, each residual hook replaced whole. The subspace sweep leaves out the
    components (swept already); sites no answer reads cost nothing
    (:data:`~circuits.mechanisms.leads.PRUNE_UNREAD`), and ``memo`` shares activations and a
    step's rows between compositions that share the step."""
    sweep = site_sweep(model, task, mech, name, batch=batch, positions=positions, hooks=(), n_pairs=n_pairs,
                       seed=seed, random_model=random_model, groups=True, memo=memo)
    best = list(dict.fromkeys(r.site.nodes[0].position for r in sweep.rows if r.iia > 0))[:das_positions]
    stream = leaf and bool(best) and best[0] < max(positions)
    if not best or not stream and any(r.iia >= SINGLE_SITE_IIA for r in sweep.rows):  # no subspace needed
        return sweep, stream
    subspaces = site_sweep(model, task, mech, name, batch=batch, positions=best, hooks=residual_hooks(model), das_k=1,
                           n_pairs=n_pairs, seed=seed, random_model=random_model, whole=stream, nodes=False,
                           memo=memo)
    rows = sweep.rows + [r for r in subspaces.rows if r.kind != "node"]
    rows.sort(key=row_order)
    return dataclasses.replace(sweep, rows=rows, n_train_pairs=subspaces.n_train_pairs,
                               seconds=sweep.seconds + subspaces.seconds), stream


def locate_composition(model: Any, task: Any, candidate: Candidate, composition: Composition, batch: Any, *,
                       n_pairs: int = 200, seed: int = 0, random_model: Any = None,
                       memo: SweepMemo | None = None) -> Located:
    """Search every step of ``composition``, parents first: the outputs' at their own position
    (components outside their parents' sites, as :func:`locate` chooses), every other step over the components at every position up to its last
    consumer (each layer's heads alone and together) and a 1-dim subspace of each residual hook
    there (:func:`choose_step_site`). ``memo``: as :func:`locate`'s."""
    frame, offset = Frame(batch, task), seed_offset(model)
    unlocated = composed_mechanism(composition, candidate, model, task, batch, {})
    sweeps, swept, sites = [], [], {}
    for i, step in enumerate(composition.steps(frame)):
        if step.reads:  # read off the input: its site is the embeddings of its tokens, nothing to search
            continue
        if step.family == "y":  # at its position, outside its parents' sites
            sweep = site_sweep(model, task, unlocated, step.name, batch=batch, positions=[frame.q(step.instance) + offset],
                               hooks=(), n_pairs=n_pairs, seed=seed + i, random_model=random_model, memo=memo)
            taken = {n for p in step.parents if p in sites for n in sites[p].nodes}
            sweep = dataclasses.replace(sweep, rows=[r for r in sweep.rows if not taken & set(r.site.nodes)])
            nodes = choose_site(sweep)
            site = Site.of(*nodes) if nodes else None
        else:
            sweep, stream = step_sweep(model, task, unlocated, step.name, batch,
                                       [p + offset for p in range(step.upto + 1)], n_pairs=n_pairs, seed=seed + i,
                                       random_model=random_model, leaf=not step.parents, memo=memo)
            site = choose_step_site(sweep, stream=stream)
        sweeps.append(sweep)
        swept.append(step.name)
        if site is not None:
            sites[step.name] = site
    mech = composed_mechanism(composition, candidate, model, task, batch, sites)
    mech = dataclasses.replace(mech, pseudocode=composed_pseudocode(mech, composition))
    return Located(candidate, mech, sweeps, swept, composition.name)


def composed_pseudocode(mech: Mechanism, composition: Composition) -> str:
    """One line per step family, in the composition's order, each with its sites per instance."""
    readout = sorted({n.name.split("@")[0] for n in mech.readout})
    lines = [f"{composition.description}:"]
    families = list(dict.fromkeys(v.family for v in mech.variables if v.family != "cue"))
    for family in families:
        members = mech.family(family)
        texts = list(dict.fromkeys(v.description for v in members))
        sites = "; ".join(f"{v.name}: {v.site.label if v.site else '(not localised)'}" for v in members)
        text = texts[0] if len(texts) == 1 or family != "y" else " | ".join(texts)
        lines.append(f"    {text}   # {sites}")
    lines.append("    c_k = the current token   # embed @ r_k, read by y_k")
    lines.append(f"    write y_k   # readout: {', '.join(readout) or 'the unembedding'}")
    return "\n".join(lines)


def relocate(located: Located, model: Any, task: Any, batch: Any) -> Mechanism:
    """``located``'s mechanism restated for ``task`` at another length (``batch`` its inputs):
    output ``k``'s answer at the components found for output ``min(k, K - 1)`` (``K`` the
    outputs it was located on), each at output ``k``'s own position; the gathering, cue and
    readout steps rebuilt around them as :func:`locate` builds them. What the length study
    checks at every length (:mod:`circuits.analyses.length_generalization`)."""
    trained = {v.instance: v.site.nodes for v in located.mechanism.family("y") if v.site is not None}
    if not trained:
        raise ValueError(f"{located.mechanism.name}: no output was localised, so there is nothing to carry to another length")
    frame, offset, last = Frame(batch, task), seed_offset(model), max(trained)
    sites = {}
    for k in range(frame.n_outputs):
        nodes = trained.get(min(k, last))
        if nodes:
            sites[k] = tuple(n.at(frame.q(k) + offset) for n in nodes)
    mech = _mechanism(located.candidate, model, task, batch, sites)
    return dataclasses.replace(mech, pseudocode=pseudocode(mech, located.candidate))


def where(mech: Mechanism, family: str) -> str:
    """The components of a variable family, once when every output uses the same ones at its own
    position (``a0.0 + a0.1 @ r_k``), else per output."""
    labels = [" + ".join(n.name if n.kind == "embed" else n.name.split("@")[0] for n in v.site.nodes)
              if v.site else "(not localised)" for v in mech.family(family)]
    distinct = list(dict.fromkeys(labels))
    if len(distinct) == 1:
        return f"{distinct[0]} @ r_k"
    return "; ".join(f"k={k}: {label}" for k, label in enumerate(labels))


def pseudocode(mech: Mechanism, candidate: Candidate) -> str:
    """The located mechanism in a few lines, each step naming its components."""
    readout = sorted({n.name.split("@")[0] for n in mech.readout})
    lines = ["for each output k, at its position r_k:"]
    if candidate.primitive.reads != "none":
        what = {"source": "the source tokens, as a multiset", "sequence": "the source tokens, in order",
                "match": "the source tokens in order, each position's own work (its neighbour's token)",
                "prefix": "the tokens up to r_k, as a multiset",
                "position": "the token the step copies, moved to r_k by attention"}[
            candidate.primitive.reads]
        lines.append(f"    read_k = {what}   # {where(mech, 'read')}")
    lines.append("    c_k = the current token   # embed @ r_k")
    lines.append(f"    {candidate.description}   # {where(mech, 'y')}")
    lines.append(f"    write y_k   # readout: {', '.join(readout) or 'the unembedding'}")
    return "\n".join(lines)


__all__ = ["Located", "MAX_COMPONENTS", "SINGLE_SITE_IIA", "choose_site", "choose_step_site", "composed_mechanism",
           "composed_pseudocode", "locate", "locate_composition", "pseudocode", "relocate", "site_rank", "where"]
