"""Carry propagation in a trained addition model.

1. **Find** the components that move carries: clean/corrupted pairs that flip one carry
   (:meth:`AdditionTask.corrupt`), scored with a metric restricted to the answer digits whose
   carry-in flipped but whose own digit pair did not change (:func:`carry_pairs`). Every head
   and MLP at every position gets its denoising share of that gap
   (:func:`~interp_rand.reports.case_studies.components.node_patch_scores`); those at the answer positions
   with share >= ``min_share`` are the carry components; edge discovery (EAP) on the same
   pairs gives the position-resolved graph.
2. **Ablate** them with *carry removal*: each component at the position that predicts the digit
   of place ``p`` takes its value from the same problem with every digit below ``p`` set to 0
   (same digits at ``p`` and above, no carry into ``p``). On digits without a carry this changes
   nothing a pure carry mechanism reads; on digits with a carry it removes it. Control: the
   same number of random other components at the same positions. A plain mean ablation of the
   same components is reported beside it.
3. **Probe** ``carry_in`` (:func:`probes.probe_task`, with its control task and random-init
   model) at the carry layer: the residual hook where the carry mechanism's interchange holds
   (``CarryConfig.probe_hook``, which the case study sets), else right after the layer of the
   strongest carry head.
4. **Cascades** of length >= 2 (:meth:`AdditionTask.sample_with_cascade`): accuracy with and
   without the carry components, the nodes that carry a cascade (scores on pairs whose
   generating place is zeroed) and how far down the carry heads look.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from circuits.interventions.ablation import Ablation, node_hook_name, replaced_nodes
from interp_rand.reports.case_studies.components import (
    ComponentScores,
    correct_under_ablation,
    node_patch_scores,
    random_controls,
)
from circuits.analyses.flow import mean_attention
from interp_rand.reports.circuit import position_names
from circuits.graph.circuit import Circuit
from circuits.graph.architecture import run_model
from circuits.graph.selection import select
from circuits.methods.discovery import discover
from circuits.graph.nodes import Node
from interp_rand.losses import answer_correct
from interp_rand.model.hook_names import hook_name
from interp_rand.tasks.base import CARRIES, Batch, require_capability
from interp_rand.validation import check_ints


@dataclass(frozen=True)
class CarryConfig:
    """Sizes and rules of the carry study (all fixed before looking at ablation results).

    Attributes:
        n_pairs: clean/carry-flipped pairs for node scores and edge discovery.
        n_eval: problems for the ablation accuracies (drawn like training data).
        n_cascade: problems with a cascade of length >= 2.
        n_probe: problems for the carry probe.
        min_share: a component is a carry component if patching it alone recovers at least
            this share of the carry-flip gap.
        n_controls: random same-position control sets.
        top_k_edges: edges kept in the drawn graph.
        seed: seeds every draw.
        probe_hook: the residual hook the ``carry_in`` probe reads (the case study passes the
            one where the carry mechanism's interchange holds); ``None``: the layer of the
            strongest carry head.
    """

    n_pairs: int = 512
    n_eval: int = 2000
    n_cascade: int = 1000
    n_probe: int = 4000
    min_share: float = 0.1
    n_controls: int = 10
    top_k_edges: int = 40
    seed: int = 0
    probe_hook: str | None = None

    def __post_init__(self) -> None:
        check_ints(self, ("n_pairs", "n_eval", "n_cascade", "n_probe", "n_controls", "top_k_edges"), 2)
        if not 0 < self.min_share < 1:
            raise ValueError(f"CarryConfig.min_share={self.min_share!r} must lie in (0, 1)")


@dataclass(frozen=True)
class DigitAccuracy:
    """Per-digit accuracy split by carry: ``carry`` (carry_in = 1), ``no_carry`` and
    ``cascade`` (cascade_len >= 2 and carry_in = 1; ``None`` when not measured)."""

    carry: float
    no_carry: float
    cascade: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: None if v is None else round(v, 4) for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class CarryStudy:
    """Everything the carry case study measured (see the module docstring).

    ``controls`` are per random draw; ``probe`` holds the selectivity of ``carry_in`` per place
    at ``probe_hook`` and its profile over the residual stream."""

    components: tuple[Node, ...]
    scores: ComponentScores
    circuit: Circuit
    baseline: DigitAccuracy
    removed: DigitAccuracy
    controls: tuple[DigitAccuracy, ...]
    mean_ablated: DigitAccuracy
    mean_controls: tuple[DigitAccuracy, ...]
    probe_hook: str
    probe: list[dict[str, Any]]
    cascade_nodes: list[dict[str, Any]]
    lookback: dict[str, list[float]]
    settings: dict[str, Any] = field(default_factory=dict)
    # what the circuit was chosen from, for its claim card (not written to case_study.json)
    edge_scores: Any = field(default=None, repr=False, compare=False)
    pairs: tuple[Batch, Batch] | None = field(default=None, repr=False, compare=False)
    # for the circuit drawing: the mean attention on the pairs (key/value edges drawn to the query
    # positions) and the model's position names
    attention: Tensor | None = field(default=None, repr=False, compare=False)
    position_names: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        def mean(accs: tuple[DigitAccuracy, ...]) -> dict[str, Any]:
            keys = ("carry", "no_carry", "cascade")
            return {k: None if getattr(accs[0], k) is None
                    else round(sum(getattr(a, k) for a in accs) / len(accs), 4) for k in keys}

        return {
            "components": [n.name for n in self.components],
            "scores": self.scores.to_dict(),
            "baseline": self.baseline.to_dict(),
            "carry_removed": self.removed.to_dict(),
            "control_mean": mean(self.controls),
            "controls": [c.to_dict() for c in self.controls],
            "mean_ablated": self.mean_ablated.to_dict(),
            "mean_ablated_control_mean": mean(self.mean_controls),
            "probe_hook": self.probe_hook,
            "probe": self.probe,
            "cascade_nodes": self.cascade_nodes,
            "lookback": self.lookback,
            "settings": self.settings,
        }


# ---------------------------------------------------------------------- pairs and metric


def carry_pairs(task, clean: Batch, corrupted: Batch, changed: Tensor) -> tuple[Batch, Batch]:
    """The clean batch with metadata ``carry_flipped`` ``[batch, n_answer]``: answer digits whose
    carry-in differs in ``corrupted`` while their own place was not edited (``changed``)."""
    own = task.answer_places()[None, :] == changed[:, None]
    flipped = (clean.metadata["carry_in"] != corrupted.metadata["carry_in"]) & ~own
    return dataclasses.replace(clean, metadata={**clean.metadata, "carry_flipped": flipped}), corrupted


def carry_metric(logits: Tensor, batch: Batch) -> Tensor:
    """Mean log-probability of the right digit over the ``carry_flipped`` answer digits."""
    pos = batch.answer_positions
    logprob = F.log_softmax(logits[:, pos], -1).gather(-1, batch.targets[:, pos, None])[..., 0]
    mask = batch.metadata["carry_flipped"].float()
    return (logprob * mask).sum() / mask.sum().clamp_min(1.0)


def cascade_pairs(task, batch: Batch) -> tuple[Batch, Batch]:
    """Pairs that cut a cascade at its root: the generating place below the lowest cascade is
    set to ``0 + 0``, so every carry of the cascade flips."""
    a, b = task.operand_digits(batch)
    a, b = a.clone(), b.clone()
    places = batch.metadata["place"]  # [batch, n_answer]
    in_cascade = batch.metadata["cascade_len"] >= 1
    big = task.n_digits + 1
    lowest = torch.where(in_cascade, places, big).min(1).values  # [batch]
    keep = lowest < big
    gen = (lowest - 1).clamp_min(0)
    rows = torch.arange(len(batch))[keep]
    a[rows, gen[keep]] = 0
    b[rows, gen[keep]] = 0
    corrupted = task.build(a, b)
    return carry_pairs(task, batch, corrupted, torch.where(keep, gen, -1))


# ---------------------------------------------------------------------- carry removal


def _carry_free(task, batch: Batch, place: int) -> Batch:
    """The same problems with every digit below ``place`` set to 0 (no carry into it)."""
    a, b = task.operand_digits(batch)
    a, b = a.clone(), b.clone()
    a[:, :place] = 0
    b[:, :place] = 0
    return task.build(a, b)


@torch.no_grad()
def carry_removed_values(model: Any, task, batch: Batch, nodes: list[Node]) -> dict[str, Tensor]:
    """Hook values for ``nodes`` in which the components at the position predicting place ``p``
    come from :func:`_carry_free` ``(batch, p)``."""
    names = sorted({node_hook_name(n) for n in nodes})
    values: dict[str, Tensor] = {}
    for k, place in enumerate(task.answer_places().tolist()):
        pos = int(batch.answer_positions[k])
        _, cache = model.run_with_cache(_carry_free(task, batch, place).inputs, names_filter=lambda n: n in names)
        for name in names:
            values.setdefault(name, cache[name].clone())[:, pos] = cache[name][:, pos]
    return values


@torch.no_grad()
def correct_with_carry_removed(model: Any, task, batch: Batch, nodes: list[Node]) -> Tensor:
    """``[batch, n_answer]`` bool: digit right with ``nodes`` given their carry-free values."""
    if nodes:
        with replaced_nodes(model, nodes, carry_removed_values(model, task, batch, nodes)):
            logits = run_model(model, batch)
    else:
        logits = run_model(model, batch)
    return answer_correct(logits, batch, task.loss_kind)


def digit_accuracy(correct: Tensor, batch: Batch, cascade: Batch | None = None,
                   cascade_correct: Tensor | None = None, min_cascade: int = 2) -> DigitAccuracy:
    carry = batch.metadata["carry_in"] == 1
    out = DigitAccuracy(float(correct[carry].float().mean()), float(correct[~carry].float().mean()))
    if cascade is not None:
        where = (cascade.metadata["cascade_len"] >= min_cascade) & (cascade.metadata["carry_in"] == 1)
        out = dataclasses.replace(out, cascade=float(cascade_correct[where].float().mean()))
    return out


# ---------------------------------------------------------------------- the study


def carry_study(model: Any, task, config: CarryConfig = CarryConfig(), progress: bool = False) -> CarryStudy:
    """Run the carry case study on a trained addition ``model`` (see the module docstring);
    ``progress``: name each stage on stderr (:mod:`interp_rand.progress`)."""
    from interp_rand.progress import bar, note
    from probes import ProbeConfig, probe_task

    require_capability(task, CARRIES, "the carry study")
    if task.n_digits < 2:
        raise ValueError(f"the carry study needs n_digits >= 2 (a carry to propagate); got {task!r}")
    # one generator per stage, so that e.g. more controls leave the other draws unchanged
    gen = torch.Generator().manual_seed(config.seed)
    pairs = task.corrupt(task.sample(config.n_pairs, gen), gen)
    clean, corrupted = carry_pairs(task, pairs.clean, pairs.corrupted, pairs.changed)
    note(f"scoring every component by carry-flip patching ({len(clean)} pairs)", progress)
    scores = node_patch_scores(model, clean, corrupted, carry_metric)
    answer_pos = set(batch_positions(clean))
    components = [n for n in scores.select(config.min_share) if n.position in answer_pos]
    if not components:
        raise ValueError(f"no component at the answer positions recovers >= {config.min_share} of the carry gap")
    note("scoring edges (eap) for the circuit drawing", progress)
    edge_scores = discover(model, clean, corrupted, metric=carry_metric, method="eap")
    circuit = select(edge_scores, config.top_k_edges, "connected")
    circuit = dataclasses.replace(circuit, settings={**circuit.settings, "metric": "carry logprob",
                                                     "pairs": "carry flip"})

    evaluation = task.sample(config.n_eval, gen)
    # cascades of length >= 2 need 3 digits; a 2-digit model is checked on length 1
    min_cascade = min(2, task.n_digits - 1)
    cascade = task.sample_with_cascade(config.n_cascade, gen, min_len=min_cascade)
    n_pos = clean.inputs.shape[1]
    controls_sets = random_controls(model, components, n_pos, config.n_controls,
                                    torch.Generator().manual_seed(config.seed + 1))

    def removal(nodes: list[Node]) -> DigitAccuracy:
        return digit_accuracy(correct_with_carry_removed(model, task, evaluation, nodes), evaluation,
                              cascade, correct_with_carry_removed(model, task, cascade, nodes), min_cascade)

    def mean_ablation(nodes: list[Node]) -> DigitAccuracy:
        ablation = Ablation("mean")
        return digit_accuracy(correct_under_ablation(model, evaluation, nodes, ablation), evaluation,
                              cascade, correct_under_ablation(model, cascade, nodes, ablation, reference=evaluation),
                              min_cascade)

    note(f"removing the carry from {len(components)} components ({len(evaluation)} problems)", progress)
    baseline = removal([])
    removed = removal(components)
    controls = tuple(removal(c) for c in bar(controls_sets, desc="carry removal: random control sets",
                                             enabled=progress))
    note("mean-ablating the same components", progress)
    mean_ablated = mean_ablation(components)
    mean_controls = tuple(mean_ablation(c) for c in bar(controls_sets, desc="mean ablation: random control sets",
                                                        enabled=progress))

    # The carry layer: where the mechanism's carry interchange holds, when given; else the layer
    # of the strongest carry head (else of the strongest component).
    heads = [n for n in components if n.kind == "head"]
    first = heads[0] if heads else components[0]
    probe_hook = config.probe_hook or hook_name(first.layer, f"hook_resid_{'mid' if first.kind == 'head' else 'post'}")
    probe_batch = task.sample(config.n_probe, torch.Generator().manual_seed(config.seed + 2))
    note(f"probing carry_in ({len(probe_batch)} problems)", progress)
    result = probe_task(model, task, probe_batch, ProbeConfig(variables=("carry_in",), causal=False,
                                                              seed=config.seed))[0]
    # where carries are generated: the strongest component away from the answer positions
    # (an operand position); the carry into place p is probed at b_(p-1) after its layer
    elsewhere = [n for n, _ in scores.items() if n.position not in answer_pos]
    gen_node = elsewhere[0] if elsewhere else first
    gen_hook = hook_name(gen_node.layer, f"hook_resid_{'mid' if gen_node.kind == 'head' else 'post'}")
    probe = _probe_rows(task, result, probe_hook, gen_hook)

    note("patching carry cascades", progress)
    c_clean, c_corrupted = cascade_pairs(task, cascade)
    cascade_scores = node_patch_scores(model, c_clean, c_corrupted, carry_metric)
    cascade_nodes = [{"node": n.name, "share": round(s, 4)} for n, s in cascade_scores.items()[:12]]
    return CarryStudy(
        components=tuple(components), scores=scores, circuit=circuit, baseline=baseline, removed=removed,
        controls=controls, mean_ablated=mean_ablated, mean_controls=mean_controls,
        probe_hook=probe_hook, probe=probe, cascade_nodes=cascade_nodes, edge_scores=edge_scores,
        pairs=(clean, corrupted), attention=mean_attention(model, clean),
        position_names=tuple(position_names(model, task)),
        lookback=_lookback(model, task, cascade, heads),
        settings={**dataclasses.asdict(config), "n_digits": task.n_digits, "min_cascade": min_cascade,
                  "answer_order": task.answer_order},
    )


def batch_positions(batch: Batch) -> list[int]:
    return [int(p) for p in batch.answer_positions]


def _probe_rows(task, result, hook: str, gen_hook: str) -> list[dict[str, Any]]:
    """Per place with a possible carry: selectivity at ``hook`` and at every residual hook, at
    the position predicting that digit, with the random-init model's beside it; and at
    ``gen_hook`` on the operand digit ``b`` one place below (where the carry is generated)."""
    rows = []
    for k, place in enumerate(task.answer_places().tolist()):
        if place == 0:
            continue  # the units digit never receives a carry
        pos = _answer_pos(task, k)
        h, p = result.at(hook, pos)
        rows.append({
            "place": place, "position": pos, "hook": hook,
            "accuracy": round(float(result.accuracy[h, p, k]), 4),
            "control": round(float(result.control_accuracy[h, p, k]), 4),
            "selectivity": round(float(result.selectivity[h, p, k]), 4),
            "random_init_selectivity": round(float(result.random_selectivity[h, p, k]), 4),
            "majority": round(float(result.majority[k]), 4),
            "profile": {name: round(float(result.selectivity[i, p, k]), 4) for i, name in enumerate(result.hooks)},
        })
        b_pos = 2 * task.n_digits - (place - 1)
        gh, gp = result.at(gen_hook, b_pos)
        rows[-1]["generation"] = {
            "hook": gen_hook, "position": b_pos, "accuracy": round(float(result.accuracy[gh, gp, k]), 4),
            "control": round(float(result.control_accuracy[gh, gp, k]), 4),
            "selectivity": round(float(result.selectivity[gh, gp, k]), 4),
            "random_init_selectivity": round(float(result.random_selectivity[gh, gp, k]), 4)}
    return rows


def _answer_pos(task, k: int) -> int:
    return int(task.answer_positions()[k])


@torch.no_grad()
def _lookback(model: Any, task, cascade: Batch, heads: list[Node]) -> dict[str, list[float]]:
    """Per carry head at an answer position: mean attention (on cascade >= 2 digits with a
    carry) on the operand digits of each place ``1, 2, ...`` below the digit's own place."""
    from probes import attention_patterns

    patterns = attention_patterns(model, cascade)  # [b, layer, head, q, k]
    places = task.answer_places().tolist()
    out: dict[str, list[float]] = {}
    n = task.n_digits
    for node in heads:
        k = batch_positions(cascade).index(node.position)
        place = places[k]
        rows = (cascade.metadata["cascade_len"][:, k] >= 2) & (cascade.metadata["carry_in"][:, k] == 1)
        if place == 0 or not bool(rows.any()):
            continue
        pattern = patterns[rows, node.layer, node.head, node.position]  # [rows, key]
        masses = []
        for below in range(1, place + 1):
            src = place - below
            masses.append(round(float(pattern[:, [n - 1 - src, 2 * n - src]].sum(-1).mean()), 4))
        out[node.name] = masses
    return out


__all__ = ["CarryConfig", "CarryStudy", "DigitAccuracy", "carry_metric", "carry_pairs", "carry_study",
           "cascade_pairs", "correct_with_carry_removed"]
