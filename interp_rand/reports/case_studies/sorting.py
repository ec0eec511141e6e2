"""Sorting passes in a trained sort model: the heads that point from each output position to
the next element in sorted order.

1. **Role scores**: ``next_larger`` per head (:func:`probes.score_roles`: attention mass of
   answer position ``L + k`` on the input element of rank ``k``) and the same mass per output
   position. Heads with score >= ``min_score`` are the next-element heads.
2. **Graph**: EAP on the task's clean/corrupted pairs (one element replaced).
3. **Ablation per output position**: mean ablation of the next-element heads against the same
   number of random other heads (every draw of them, up to ``n_controls``).
4. **Duplicates and near-ties**: accuracy and the attention split of the next-element heads
   by whether the answer value is duplicated and by the gap from the answer value to the next
   larger value in the list.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import Ablation
from interp_rand.reports.case_studies.components import correct_under_ablation
from circuits.analyses.flow import mean_attention
from interp_rand.reports.circuit import position_names
from circuits.graph.circuit import Circuit
from circuits.graph.selection import select
from circuits.methods.discovery import discover
from circuits.graph.nodes import Node
from interp_rand.tasks.base import SORTED_OUTPUT, Batch, require_capability
from interp_rand.validation import check_ints

GAP_BINS = ("1", "2", ">=3", "none")  # gap to the next larger value; none: the answer is the maximum


@dataclass(frozen=True)
class SortConfig:
    """Sizes and rules of the sort study (fixed before looking at ablation results).

    Attributes:
        n_pairs: clean/corrupted pairs for edge discovery.
        n_eval: lists for role scores, ablations and the duplicate/near-tie breakdown.
        min_score: a head is a next-element head if its ``next_larger`` score is at least this.
        n_controls: random head sets (all of them when there are fewer).
        top_k_edges: edges kept in the drawn graph.
        seed: seeds every draw.
    """

    n_pairs: int = 256
    n_eval: int = 4000
    min_score: float = 0.3
    n_controls: int = 10
    top_k_edges: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        check_ints(self, ("n_pairs", "n_eval", "n_controls", "top_k_edges"), 2)
        if not 0 < self.min_score < 1:
            raise ValueError(f"SortConfig.min_score={self.min_score!r} must lie in (0, 1)")


@dataclass(frozen=True)
class SortStudy:
    """What the sort case study measured.

    Attributes:
        heads: the next-element heads (``Node("head", layer, head)``), by score.
        role_scores: ``[layer, head]`` ``next_larger`` scores.
        mass_per_position: ``[layer, head, L]`` attention on the rank-``k`` element from answer
            position ``L + k``.
        circuit: the EAP graph.
        chance_score, random_init_best: the ``next_larger`` score of uniform causal attention
            and the best head's score in a randomly initialised model of the same architecture.
        baseline, ablated: ``[L]`` accuracy per output position, intact and with the heads
            mean-ablated; ``controls``: ``[n_controls, L]`` with random heads ablated.
        ties: accuracy and attention split by duplicate / gap bins (see :func:`_ties`).
    """

    heads: tuple[Node, ...]
    role_scores: Tensor
    mass_per_position: Tensor
    circuit: Circuit
    baseline: Tensor
    ablated: Tensor
    controls: Tensor
    control_heads: tuple[tuple[Node, ...], ...]
    ties: dict[str, Any]
    chance_score: float = 0.0
    random_init_best: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    # what the circuit was chosen from, for its claim card (not written to case_study.json)
    edge_scores: Any = field(default=None, repr=False, compare=False)
    pairs: tuple[Batch, Batch] | None = field(default=None, repr=False, compare=False)
    # for the circuit drawing: the mean attention on the pairs (key/value edges drawn to the query
    # positions) and the model's position names
    attention: Tensor | None = field(default=None, repr=False, compare=False)
    position_names: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        def r(t: Tensor) -> list:
            return [round(float(x), 4) for x in t] if t.dim() == 1 else [r(x) for x in t]

        return {
            "heads": [n.name for n in self.heads],
            "role_scores": r(self.role_scores),
            "chance_score": round(self.chance_score, 4),
            "random_init_best_score": round(self.random_init_best, 4),
            "mass_per_position": {f"a{l}.{h}": r(self.mass_per_position[l, h])
                                  for l in range(self.role_scores.shape[0]) for h in range(self.role_scores.shape[1])},
            "accuracy_per_position": {"intact": r(self.baseline), "heads_ablated": r(self.ablated),
                                      "random_heads_ablated_mean": r(self.controls.mean(0)),
                                      "random_heads_ablated_min": r(self.controls.min(0).values)},
            "control_heads": [[n.name for n in c] for c in self.control_heads],
            "ties": self.ties,
            "circuit_edges": len(self.circuit),
            "settings": self.settings,
        }


def sort_study(model: Any, task, config: SortConfig = SortConfig(), progress: bool = False) -> SortStudy:
    """Run the sort case study on a trained sort ``model`` (see the module docstring);
    ``progress``: name each stage on stderr (:mod:`interp_rand.progress`)."""
    from interp_rand.progress import bar, note
    from probes import attention_patterns, random_init_like, score_roles

    require_capability(task, SORTED_OUTPUT, "the sort study")
    gen = torch.Generator().manual_seed(config.seed)
    batch = task.sample(config.n_eval, gen)
    note(f"scoring heads on next_larger ({len(batch)} lists, with uniform and random-init controls)", progress)
    patterns = attention_patterns(model, batch)  # [b, layer, head, q, k]
    role = score_roles(model, task, batch, roles=["next_larger"], patterns=patterns).scores["next_larger"]
    # controls: uniform causal attention, and the same architecture at random initialisation
    uniform = torch.tril(torch.ones(patterns.shape[-1], patterns.shape[-1]))
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(1, 1, 1, -1, -1)
    chance = float(score_roles(model, task, batch, roles=["next_larger"],
                               patterns=uniform.expand(len(batch), -1, -1, -1, -1)).scores["next_larger"].max())
    random_role = score_roles(random_init_like(model, config.seed + 1), task, batch,
                              roles=["next_larger"]).scores["next_larger"]
    source = _source_positions(batch)  # [b, L] input position of the rank-k element
    mass = _mass_on(patterns, batch, source)  # [b, layer, head, L]
    order = role.flatten().argsort(descending=True).tolist()
    n_heads = role.shape[1]
    heads = [Node("head", i // n_heads, i % n_heads) for i in order if float(role.flatten()[i]) >= config.min_score]
    if not heads:
        raise ValueError(f"no head has a next_larger score >= {config.min_score} (best {float(role.max()):.3f})")

    note("scoring edges (eap) for the circuit drawing", progress)
    pairs = task.corrupt(task.sample(config.n_pairs, gen), gen)
    edge_scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap")
    circuit = select(edge_scores, config.top_k_edges, "connected")

    note(f"ablating the {len(heads)} next-element head(s) per output position", progress)
    ablation = Ablation("mean")
    baseline = correct_under_ablation(model, batch, [], ablation).float().mean(0)
    ablated = correct_under_ablation(model, batch, heads, ablation).float().mean(0)
    others = [Node("head", l, h) for l in range(role.shape[0]) for h in range(n_heads)
              if Node("head", l, h) not in heads]
    control_heads = _control_sets(others, len(heads), config.n_controls, gen)
    controls = torch.stack([correct_under_ablation(model, batch, list(c), ablation).float().mean(0)
                            for c in bar(control_heads, desc=f"ablating {len(control_heads)} random head sets",
                                         enabled=progress)]) if control_heads else torch.zeros(0, task.length)
    note("duplicates and near-ties", progress)
    return SortStudy(
        heads=tuple(heads), role_scores=role, mass_per_position=mass.mean(0), circuit=circuit,
        edge_scores=edge_scores, pairs=(pairs.clean, pairs.corrupted), attention=mean_attention(model, pairs.clean),
        position_names=tuple(position_names(model, task)),
        baseline=baseline, ablated=ablated, controls=controls, control_heads=tuple(control_heads),
        ties=_ties(model, task, batch, patterns, heads), chance_score=chance,
        random_init_best=float(random_role.max()),
        settings={**dataclasses.asdict(config), "length": task.length, "vocab": task.vocab,
                  "ablation": "mean"},
    )


def _control_sets(others: list[Node], k: int, n: int, gen: torch.Generator) -> list[tuple[Node, ...]]:
    """Up to ``n`` distinct random ``k``-subsets of ``others`` (all of them if there are fewer)."""
    if k > len(others):
        return []
    every = list(itertools.combinations(others, k))
    if len(every) <= n:
        return every
    picks = torch.randperm(len(every), generator=gen)[:n].tolist()
    return [every[i] for i in picks]


def _source_positions(batch: Batch) -> Tensor:
    """``[b, L]`` input position of the element of rank ``k`` (stable ranks)."""
    return batch.metadata["rank"].argsort(1)


def _mass_on(patterns: Tensor, batch: Batch, keys: Tensor) -> Tensor:
    """``[b, layer, head, L]``: attention from answer position ``L + k`` to ``keys[:, k]``."""
    q = batch.answer_positions
    rows = patterns[:, :, :, q]  # [b, layer, head, L, key]
    idx = keys[:, None, None, :, None].expand(*rows.shape[:4], 1)
    return rows.gather(-1, idx)[..., 0]


def _ties(model: Any, task, batch: Batch, patterns: Tensor, heads: list[Node]) -> dict[str, Any]:
    """Accuracy and attention split of the next-element heads per output position class.

    ``duplicate``: whether the answer value occurs more than once. ``gap``: next larger value
    in the list minus the answer value (bins :data:`GAP_BINS`). Attention: mass on the exact
    rank-``k`` element, on any element with the answer value, and on elements with the next
    larger value (the near-tie confusion)."""
    with torch.no_grad():
        logits = model(batch.inputs)
    q = batch.answer_positions
    answer = batch.targets[:, q]  # [b, L]
    correct = logits[:, q].argmax(-1) == answer
    lists = task.lists(batch)  # [b, L]
    larger = torch.where(lists[:, None, :] > answer[:, :, None], lists[:, None, :], task.vocab)
    next_value = larger.min(-1).values  # [b, L]; vocab when none
    gap = next_value - answer
    bins = {"1": gap == 1, "2": gap == 2, ">=3": (gap >= 3) & (next_value < task.vocab),
            "none": next_value == task.vocab}
    # attention of the next-element heads, averaged over them
    hp = torch.stack([patterns[:, n.layer, n.head][:, q, : task.length] for n in heads], 1).mean(1)  # [b, L, L]
    exact = hp.gather(-1, _source_positions(batch)[..., None])[..., 0]
    same = (hp * (lists[:, None, :] == answer[:, :, None])).sum(-1)
    nxt = (hp * (lists[:, None, :] == next_value[:, :, None])).sum(-1)
    dup = batch.metadata["answer_is_duplicate"]

    def summary(where: Tensor) -> dict[str, Any]:
        if not bool(where.any()):
            return {"n": 0}
        return {"n": int(where.sum()), "accuracy": round(float(correct[where].float().mean()), 4),
                "mass_exact_element": round(float(exact[where].mean()), 4),
                "mass_same_value": round(float(same[where].mean()), 4),
                "mass_next_value": round(float(nxt[where].mean()), 4)}

    out: dict[str, Any] = {"duplicate": summary(dup), "distinct": summary(~dup)}
    out["gap"] = {name: summary(where & ~dup) for name, where in bins.items()}
    # among duplicates: the first copy written (rank k, the next is the same value) vs the last
    first = dup & torch.cat([answer[:, 1:] == answer[:, :-1], torch.zeros_like(dup[:, :1])], 1)
    out["duplicate_first_copy"] = summary(first)
    out["duplicate_later_copy"] = summary(dup & ~first)
    return out


__all__ = ["GAP_BINS", "SortConfig", "SortStudy", "sort_study"]
