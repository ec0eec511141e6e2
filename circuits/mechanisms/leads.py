"""When a hypothesis fails, a lead: where the model holds a variable, and what a scrub misses.

A failing :class:`~circuits.mechanisms.MechanismCard` says *that* a variable is not where the
mechanism puts it, or *that* resampling what the hypothesis leaves unnamed breaks the model. Two
searches say where to look instead, with the engine's own interventions and pairs:

- :func:`site_sweep`: for one variable, its interchange accuracy (IIA) at **every** candidate
  site on the mechanism's own counterfactual pairs (:func:`~circuits.mechanisms.interchange.variable_pairs`):
  every writer location (component × position, patched whole) and every residual hook ×
  position with a small DAS subspace fitted on a training half of the examples and scored on
  the other half, each beside its controls (the same swap on a random-initialised model; for a
  subspace, a random direction), ranked by IIA minus the worst control;
- :func:`scrub_restorers`: the writer locations the hypothesis does not name, ranked by how much
  of the model's behaviour causal scrubbing recovers when each one alone keeps its own clean
  value instead of being resampled: the component a hypothesis forgot.

    >>> sweep = site_sweep(model, task, mech, "y_2", n=1000)
    >>> print("\\n".join(sweep.lines()))            # ranked table; sweep.best(5), sweep.to_dict()
    >>> scrub_restorers(model, task, mech, top=5)    # [Restorer(location="m0@7", share_gained=0.4, ...)]

Both are searches over many sites on one batch: a high entry is a lead to state as a hypothesis
and check with :func:`~circuits.mechanisms.check_mechanism` on fresh inputs, not a verdict.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms.hypothesis import Mechanism, Site, Values
from circuits.mechanisms.interchange import VariablePairs, _fit_basis, accuracy_on, variable_pairs
from circuits.mechanisms.patching import (Patch, agreeing_rows, check_sites, derangement, patched_answers, record,
                                          writer_locations)
from circuits.mechanisms.card import prepare
from circuits.mechanisms.scrubbing import METRICS, _metrics, _resampled, _share, hypothesis_locations
from probes.controls import random_init_like
from probes.interchange import DASConfig, Pairs, random_subspace, train_das
from probes.interchange.das import skip_das

LEADS_DAS = DASConfig(steps=40, batch_size=64, lr=2e-2)
"""The sweep's default DAS training: 40 Adam steps on 64 pairs (the card's :class:`DASConfig`: 400 on 128),
enough for a 1-dim subspace of a small model to reach its IIA within a few points, so that
~50 hook × position candidates of a 2-layer model fit in a minute or two on one core. Pass
``das=DASConfig()`` to fit each as the card does."""


PRUNE_UNREAD = True
"""Whether :func:`site_sweep` skips the patched forwards (and DAS fits) of sites that no scored
answer reads. A patch at residual position ``p`` reaches the logits at an answer position only
through ``p`` itself (when it is one) or through a cross-position mixer (an attention head) that
comes later in the stream and reads ``p`` from there (:func:`answers_read`). A last-layer
component, or a last-layer ``hook_resid_mid`` / ``hook_resid_post``, at any other position has
neither path: in a 2-layer model, 6 of the 13 components (4 heads, their group, the MLP) at every
position before the first answer, and two of the five residual hooks there. Patching such a site
leaves every answer's logits exactly as in the unpatched run, so its row is that run's share (its
IIA and each control: one unpatched forward per model and sweep instead of two patched forwards
per site, or a DAS fit and three forwards), and the table is the one an unpruned sweep makes, row
for row; a skipped DAS fit still takes its draws from the sweep's generator
(:func:`probes.interchange.das.skip_das`), so every later fit gets the subspace it would have had.
``False`` patches every site (tests/circuits/mechanisms/test_leads.py checks the two equal)."""


def _hook_column(hook: str) -> float | None:
    """A residual hook's place among :meth:`ModelGraph.column`'s columns (layer ``L``'s heads at
    ``2L + 1``, its MLP at ``2L + 2``): ``hook_resid_pre`` before the heads, ``hook_resid_mid``
    between them and the MLP, ``hook_resid_post`` after the MLP; ``None`` for any other hook."""
    parts = hook.split(".")
    if len(parts) != 3 or parts[0] != "blocks" or not parts[1].isdigit():
        return None
    offset = {"hook_resid_pre": 0.5, "hook_resid_mid": 1.5, "hook_resid_post": 2.5}.get(parts[2])
    return None if offset is None else 2 * int(parts[1]) + offset


def answers_read(graph: ModelGraph, site: Site, answers: frozenset[int]) -> bool:
    """Whether a patch of ``site`` can change the logits at the residual positions ``answers``:
    some position of the site is an answer's, or a cross-position mixer (a head, in a later
    column than the site) reads the site's position after it. The other blocks act within a
    position, so a site with neither path changes no answer (:data:`PRUNE_UNREAD`). Unsure is
    read: a site of no position, or a hook that is not a residual one."""
    mixers = [graph.column(Node("head", layer, 0)) for layer in range(graph.arch.n_layers)]
    last = max(mixers, default=-math.inf)
    if site.nodes:
        return any(n.position is None or n.position in answers or graph.column(n) < last for n in site.nodes)
    column = _hook_column(site.hook)
    return column is None or not site.positions or column < last or any(p in answers for p in site.positions)


@dataclass
class SweepMemo:
    """What the sweeps of one search on one batch share (``explain``'s: its candidates' outputs
    and every step of every composition), so that nothing is computed twice:

    - each model's recorded activations (the model's and the random control's): one forward
      per model for the whole search, not two per sweep;
    - each sweep's rows, under everything they are computed from: the variable's test and
      training pairs (bases, sources, counterfactual targets, scored entries), its values, the
      sweep's generator state after drawing them, the sites swept and the DAS settings. A
      composition that shares a step with another (the same values, hence the same pairs:
      ``lookahead_carry``'s and ``ripple_carry``'s carry classes) takes that step's rows from the
      first one's sweep, the rows it would have computed, instead of sweeping it again.
    """

    model: Any
    random_model: Any
    batch: Any
    acts: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    sweeps: list[tuple[tuple, list[Tensor], list[SweepRow], int]] = field(default_factory=list)
    reused: int = 0  # sweeps answered from the memo

    def record(self, model: Any, hooks: list[str]) -> dict[str, Tensor]:
        """``model``'s clean values of ``hooks`` on the memo's batch, recorded once."""
        if model is not self.model and model is not self.random_model:
            raise ValueError("SweepMemo: a model the memo was not made for")
        held = self.acts.setdefault(id(model), {})
        missing = [h for h in hooks if h not in held]
        if missing:
            held.update(record(model, self.batch, missing))
        return held

    def find(self, key: tuple, tensors: list[Tensor]) -> tuple[list[SweepRow], int] | None:
        for k, ts, rows, n_train in self.sweeps:
            if k == key and len(ts) == len(tensors) and all(
                    a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(ts, tensors)):
                self.reused += 1
                return rows, n_train
        return None

    def keep(self, key: tuple, tensors: list[Tensor], rows: list[SweepRow], n_train: int) -> None:
        self.sweeps.append((key, tensors, rows, n_train))


# ---------------------------------------------------------------------- the site sweep
@dataclass
class SweepRow:
    """One candidate site: its IIA on the test pairs and its controls (``kind``: ``"node"``, a
    component at a position patched whole; ``"das"``, a ``k``-dim subspace of a hook at a
    position)."""

    label: str
    kind: str
    iia: float
    controls: dict[str, float]
    n_pairs: int
    site: Site = field(repr=False, compare=False)

    @property
    def worst_control(self) -> float:
        xs = [x for x in self.controls.values() if not math.isnan(x)]
        return max(xs) if xs else 0.0

    @property
    def margin(self) -> float:
        """IIA minus the worst control (the ranking key; NaN without pairs)."""
        return self.iia - self.worst_control

    def to_dict(self) -> dict[str, Any]:
        return {"site": self.label, "kind": self.kind, "iia": self.iia, "controls": self.controls,
                "margin": self.margin, "n_pairs": self.n_pairs}


def row_order(row: SweepRow) -> tuple[float, float]:
    """A sweep's ranking key: best margin first, then best IIA; rows without pairs (NaN) last."""
    return (-row.margin if not math.isnan(row.margin) else math.inf, -row.iia if not math.isnan(row.iia) else math.inf)


@dataclass
class SiteSweep:
    """Every candidate site of one variable, best first (by :attr:`SweepRow.margin`)."""

    mechanism: str
    variable: str
    claimed: str | None
    rows: list[SweepRow]
    n_pairs: int
    n_train_pairs: int
    seconds: float
    config: dict[str, Any] = field(default_factory=dict)

    def best(self, k: int = 5) -> list[SweepRow]:
        return self.rows[:k]

    def rank_of(self, label: str) -> int | None:
        """1-based rank of the site labelled ``label`` (``None``: not swept)."""
        for i, row in enumerate(self.rows):
            if row.label == label:
                return i + 1
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "variable": self.variable, "claimed": self.claimed,
                "n_pairs": self.n_pairs, "n_train_pairs": self.n_train_pairs, "seconds": self.seconds,
                "config": self.config, "rows": [r.to_dict() for r in self.rows]}

    def lines(self, k: int | None = 15) -> list[str]:
        """A ranked table (the first ``k`` rows; ``None``: all), the claimed site marked ``*``."""
        rows = self.rows if k is None else self.rows[:k]
        names = sorted({c for r in self.rows for c in r.controls})
        width = max([len(r.label) for r in rows] + [4])
        head = f"{'rank':>4}  {'site':<{width}}  {'kind':<4}  {'IIA':>6}  " + "  ".join(
            f"{c:>16}" for c in names) + f"  {'margin':>7}  pairs"
        out = [f"site sweep of {self.variable} ({self.mechanism}): {len(self.rows)} sites, {self.n_pairs} test pairs, "
               f"claimed {self.claimed or '(not localised)'}; {self.seconds:.1f} s", head]
        for i, r in enumerate(rows):
            mark = "*" if r.label == self.claimed else " "
            ctl = "  ".join(f"{r.controls[c]:>16.3f}" if c in r.controls else f"{'-':>16}" for c in names)
            out.append(f"{i + 1:>4}{mark} {r.label:<{width}}  {r.kind:<4}  {r.iia:>6.3f}  {ctl}  {r.margin:>7.3f}"
                       f"  {r.n_pairs}")
        if k is not None and len(self.rows) > k:
            out.append(f"... {len(self.rows) - k} more")
        rank = self.rank_of(self.claimed) if self.claimed else None
        if self.claimed and rank is not None and (k is None or rank > k):
            r = self.rows[rank - 1]
            out.append(f"claimed site {self.claimed}: rank {rank}, IIA {r.iia:.3f}, margin {r.margin:.3f}")
        return out


def residual_hooks(model: Any) -> list[str]:
    """Each layer's ``hook_resid_pre``, its ``hook_resid_mid`` where the stream has one (not on
    a ``TransformerBridge``, where it feeds only the MLP), and the last ``hook_resid_post``."""
    bridge = type(model).__name__ == "TransformerBridge"
    out = []
    for layer in range(model.cfg.n_layers):
        for name in (f"blocks.{layer}.hook_resid_pre", f"blocks.{layer}.hook_resid_mid"):
            if name in model.hook_dict and not (bridge and name.endswith("mid")):
                out.append(name)
    last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    return out + ([last] if last in model.hook_dict else [])


def _das_basis(model: Any, mech: Mechanism, batch: Any, values: Values, name: str, pairs: VariablePairs,
               hook: str, position: int, k: int, generator: torch.Generator, das: DASConfig) -> Tensor:
    """A ``k``-dim DAS basis at ``hook`` @ ``position`` (a residual position) from ``pairs``, as
    :func:`circuits.mechanisms.interchange.check_variable` fits a subspace site."""
    offset = int(getattr(model.cfg, "seed_offset", 0) or 0)
    probe_pairs = Pairs(pairs.base, pairs.source, values[name][pairs.source], pairs.targets, torch.tensor(mech.outputs))
    return train_das(model, batch, probe_pairs, hook, [position - offset], k, generator, das)


def site_sweep(model: Any, task: Any, mech: Mechanism, variable: str, *, n: int = 1000, n_pairs: int = 200,
               seed: int = 0, hooks: list[str] | tuple[str, ...] | None = None, das_k: int = 1,
               das: DASConfig | None = None, positions: list[int] | tuple[int, ...] | None = None,
               random_model: Any = None, batch: Any = None, groups: bool = False, whole: bool = False,
               nodes: bool = True, memo: SweepMemo | None = None) -> SiteSweep:
    """The interchange accuracy of ``variable`` at every candidate site, ranked.

    Candidates: (a) every writer location of the model (component × position,
    :func:`~circuits.mechanisms.patching.writer_locations`), patched whole as ``Site.of(node)``;
    (b) every hook of ``hooks`` (default :func:`residual_hooks`) × position, with a
    ``das_k``-dim DAS subspace fitted on pairs from a training half of the ``n`` examples and
    scored, like every candidate, on the same ``n_pairs`` test pairs from the other half (the
    mechanism's counterfactual pairs: the variable's value differs and the answer it predicts
    changes, so leaving the model alone scores 0). ``hooks=()`` sweeps the components only.

    Controls per candidate: ``random_init``, the same swap on a random-initialised model of the
    same architecture (a subspace site: along a random direction there, as the card does); for a
    subspace site also ``random_direction``, a random ``das_k``-dim basis on the trained model.
    Rows are ranked by IIA minus the worst control.

    Speed: activations are recorded once per model; each component candidate costs two
    patched forwards of the test pairs; each subspace candidate a DAS fit of ``das`` (default
    :data:`LEADS_DAS`, 40 steps, not the card's 400: a lead, not a verdict) and three forwards;
    a site no answer reads costs nothing (:data:`PRUNE_UNREAD`: its row is the unpatched run's).
    ``positions`` restricts both kinds to those residual positions (default: all). ``groups``
    adds, per layer and position, all that layer's heads together (``a0.*@9``: a value the heads
    of a layer write between them, as a pair's sum read by several heads); ``whole`` adds each
    hook x position replaced whole (kind ``"hook"``: everything later layers read there);
    ``nodes=False`` leaves out the components (a caller that swept them already). ``memo``
    (a :class:`SweepMemo` of this ``model``, ``batch`` and ``random_model``): the activations
    recorded once for all the memo's sweeps, and a sweep of the same pairs taken from it.
    """
    start = time.perf_counter()
    v = mech.variable(variable)
    das = das or LEADS_DAS
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    if batch is None:
        batch = mech.sample_batch(task, n, generator)
    if memo is not None and (memo.model is not model or memo.batch is not batch
                             or (random_model is not None and random_model is not memo.random_model)):
        raise ValueError("site_sweep: the memo was made for another model, batch or random model")
    graph = ModelGraph.of(model, batch.inputs.shape[1])
    hooks = residual_hooks(model) if hooks is None else list(hooks)
    positions = list(range(graph.n_positions)) if positions is None else list(positions)
    hook_sites = [Site.at(h, p) for h in hooks for p in positions]
    check_sites(model, hook_sites)
    locations = [node for node in writer_locations(graph) if node.position in positions] if nodes else []
    values = mech.values(batch)
    if memo is not None:
        random_model = memo.random_model
        wanted = list(dict.fromkeys(graph.writer_hooks + residual_hooks(model) + hooks))
        acts, random_acts = memo.record(model, wanted), memo.record(random_model, wanted)
    else:
        random_model = random_init_like(model, seed=seed + 1) if random_model is None else random_model
        wanted = list(dict.fromkeys(graph.writer_hooks + hooks))
        acts, random_acts = record(model, batch, wanted), record(random_model, batch, wanted)
    train = torch.rand(len(batch), generator=generator) < 0.5
    test_rows, train_rows = (~train).nonzero()[:, 0], train.nonzero()[:, 0]
    pairs = variable_pairs(mech, batch, values, variable, test_rows, n_pairs, generator)
    outputs = torch.tensor(mech.outputs)
    train_pairs, n_train = None, 0
    if hooks:  # drawn before any candidate is scored (scoring draws nothing): the memo's key holds them
        train_pairs = variable_pairs(mech, batch, values, variable, train_rows, n_pairs, generator)
        n_train = len(train_pairs)
        if not n_train:
            raise ValueError(f"mechanism {mech.name!r}: no training pairs for {variable!r} "
                             "(its value never changes the answer)")
    key, tensors = None, []
    if memo is not None:
        key = (tuple(positions), tuple(hooks), das_k, das, groups, whole, nodes, PRUNE_UNREAD, len(pairs), n_train)
        tensors = [values[variable], outputs, generator.get_state()]
        for ps in (pairs, train_pairs):
            if ps is not None:
                tensors += [ps.base, ps.source, ps.targets] + ([ps.scored] if ps.scored is not None else [])
        found = memo.find(key, tensors)
        if found is not None:
            rows = list(found[0])
            claimed = v.site.label if v.site is not None else None
            return SiteSweep(mech.name, variable, claimed, rows, len(pairs), n_train, time.perf_counter() - start,
                             _config(len(batch), seed, n_pairs, hooks, das_k, das, positions))
    answers = frozenset(int(p) + graph.arch.seed_offset for p in batch.answer_positions[outputs].reshape(-1).tolist())
    unpatched: dict[int, float] = {}

    def share(m: Any, m_acts: dict[str, Tensor], site: Site, basis: Tensor | None = None) -> float:
        """``accuracy_on``, or the unpatched run's share where no answer reads ``site``."""
        if PRUNE_UNREAD and not answers_read(graph, site, answers):
            if id(m) not in unpatched:
                unpatched[id(m)] = accuracy_on(m, graph, batch, m_acts, pairs, None, outputs)
            return unpatched[id(m)]
        return accuracy_on(m, graph, batch, m_acts, pairs, site, outputs, basis)

    rows: list[SweepRow] = []
    candidates = [Site.of(node) for node in locations]
    if groups:
        layers: dict[tuple[int, int], list[Node]] = {}
        for node in locations:
            if node.kind == "head":
                layers.setdefault((node.layer, node.position), []).append(node)
        candidates += [Site.of(*heads) for heads in layers.values() if len(heads) > 1]
    for site in candidates:
        iia = share(model, acts, site)
        ctl = share(random_model, random_acts, site)
        label = site.nodes[0].name if len(site.nodes) == 1 else f"a{site.nodes[0].layer}.*@{site.nodes[0].position}"
        rows.append(SweepRow(label, "node", iia, {"random_init": ctl}, len(pairs), site))
    for hook in hooks:
        for p in positions:
            if whole:
                site = Site.at(hook, p)
                iia = share(model, acts, site)
                ctl = share(random_model, random_acts, site)
                rows.append(SweepRow(site.label, "hook", iia, {"random_init": ctl}, len(pairs), site))
            site = Site.at(hook, p, subspace=das_k)
            if PRUNE_UNREAD and not answers_read(graph, site, answers):  # no fit: its draws only
                basis, d = None, int(acts[hook].shape[2:].numel())
                skip_das(d, n_train, generator, das)
            else:
                basis = _das_basis(model, mech, batch, values, variable, train_pairs, hook, p, das_k, generator, das)
                d = basis.shape[0]
            iia = share(model, acts, site, basis)
            controls = {
                "random_init": share(random_model, random_acts, site, random_subspace(d, das_k, generator)),
                "random_direction": share(model, acts, site, random_subspace(d, das_k, generator)),
            }
            rows.append(SweepRow(site.label, "das", iia, controls, len(pairs), site))
    rows.sort(key=row_order)
    if memo is not None:
        memo.keep(key, tensors, list(rows), n_train)
    claimed = v.site.label if v.site is not None else None  # a sweep label when it is one candidate
    return SiteSweep(mech.name, variable, claimed, rows, len(pairs), n_train, time.perf_counter() - start,
                     _config(len(batch), seed, n_pairs, hooks, das_k, das, positions))


def _config(n: int, seed: int, n_pairs: int, hooks: list[str], das_k: int, das: DASConfig,
            positions: list[int]) -> dict[str, Any]:
    return {"n": n, "seed": seed, "n_pairs": n_pairs, "hooks": hooks, "das_k": das_k,
            "das": {"steps": das.steps, "batch_size": das.batch_size, "lr": das.lr}, "positions": positions}


# ---------------------------------------------------------------------- scrub restorers
@dataclass
class Restorer:
    """An unnamed writer location and what keeping it at its own clean value (instead of
    resampling it) adds to the scrubbing share: ``share_gained`` in the log-prob share,
    ``accuracy_gained`` in the whole-output accuracy share; ``share`` / ``accuracy`` the shares
    with it kept."""

    location: str
    node: Node = field(repr=False)
    share_gained: float
    accuracy_gained: float
    share: float
    accuracy: float

    def to_dict(self) -> dict[str, Any]:
        return {"location": self.location, "share_gained": self.share_gained,
                "accuracy_gained": self.accuracy_gained, "share": self.share, "accuracy": self.accuracy}


@torch.no_grad()
def scrub_restorers(model: Any, task: Any, mech: Mechanism, *, n: int = 1000, seed: int = 0, top: int | None = 10,
                    bases: dict[str, Tensor | None] | None = None, das: DASConfig | None = None,
                    batch: Any = None) -> list[Restorer]:
    """The writer locations the hypothesis leaves unnamed (in no variable's site nor the
    readout, :func:`~circuits.mechanisms.scrubbing.hypothesis_locations`), ranked by the
    scrubbing share recovered when each alone keeps its own example's clean value: the best
    first, ``top`` of them (``None``: all).

    The scrub is the one-level scrub of :func:`~circuits.mechanisms.scrubbing.scrub` (every
    unnamed location resampled from one derangement of the ``n`` examples, each mapped site from
    an example that agrees on its variable, the readout live), drawn once and shared by every
    variant, so the gains differ only by the location kept. A subspace site swaps its
    ``bases`` entry; missing ones are fitted by DAS (``das``, default :data:`LEADS_DAS`) on
    pairs of the whole batch. Shares are in units of the gap between the clean and the
    everything-resampled run (``share_gained = 0.3``: keeping that location alone recovers 30%
    of the behaviour the scrub loses and the hypothesis should explain).
    """
    generator, batch, graph, values = prepare(model, task, mech, n, seed, batch)
    bases = dict(bases or {})
    for v in mech.mapped:
        if v.site.subspace is None or bases.get(v.name) is not None:
            continue
        if isinstance(v.site.subspace, Tensor):
            bases[v.name] = v.site.subspace
            continue
        with torch.enable_grad():
            bases[v.name] = _fit_basis(model, mech, batch, values, v.name, v.site, torch.arange(len(batch)), 256,
                                       generator, das or LEADS_DAS)
    sites = [v.site for v in mech.mapped]
    acts = record(model, batch, list(dict.fromkeys(graph.writer_hooks + [s.hook for s in sites if s.hook])))
    locations = writer_locations(graph)
    rows = torch.arange(len(batch))
    outputs = torch.tensor(mech.outputs)
    clean_logits = patched_answers(model, graph, batch, rows, acts, [], outputs)
    clean_answer = clean_logits.argmax(-1)
    resample = derangement(len(batch), generator)
    variable_patches = [Patch(v.site, agreeing_rows(values[v.name], generator), bases.get(v.name))
                        for v in mech.mapped]
    named = hypothesis_locations(mech)

    def run(fixed: set[Node], variables: list[Patch], kept: list[Node]) -> dict[str, float]:
        """As :func:`~circuits.mechanisms.scrubbing.scrub` runs a variant: ``fixed`` and the
        ``kept`` locations are not resampled, ``kept`` take their own example's clean value."""
        fixed = fixed | set(kept) | {node for p in variables for node in p.site.nodes}
        patches = _resampled(locations, fixed, resample) + ([Patch(Site.of(*kept), rows)] if kept else []) + variables
        return _metrics(patched_answers(model, graph, batch, rows, acts, patches, outputs), clean_answer)

    clean = _metrics(clean_logits, clean_answer)
    empty = run(set(), [], [])
    base = run(set(mech.readout), variable_patches, [])
    base_share = {m: _share(base[m], clean[m], empty[m]) for m in METRICS}
    out = []
    for node in (loc for loc in locations if loc not in named):
        result = run(set(mech.readout), variable_patches, [node])
        share = {m: _share(result[m], clean[m], empty[m]) for m in METRICS}
        out.append(Restorer(node.name, node, share["logprob"] - base_share["logprob"],
                            share["accuracy"] - base_share["accuracy"], share["logprob"], share["accuracy"]))
    out.sort(key=lambda r: (-r.share_gained if not math.isnan(r.share_gained) else math.inf, -r.accuracy_gained))
    return out if top is None else out[:top]


__all__ = ["LEADS_DAS", "PRUNE_UNREAD", "Restorer", "SiteSweep", "SweepMemo", "SweepRow", "answers_read",
           "residual_hooks", "scrub_restorers", "site_sweep"]
