"""Colouring: the learned symmetry-breaking rule against the classical routine (the paper's task 2).

The classical routine is the one-round *compare-your-neighbours'-noise* rule (the first round
of randomized local-extremum colourings, e.g. the local-maximum step of Luby-style algorithms;
not Cole–Vishkin, which needs an orientation the cycle mask does not give):

    a vertex whose noise exceeds both neighbours' (a local maximum) takes colour 0,
    a local minimum takes colour 1, every other vertex colour 2.

Two local maxima (or minima) are never adjacent, so the only clashes are two adjacent
"middle" vertices (a monotone run of four noises): :func:`classical_coloring` fails on some
cycles, and :func:`rule_comparison` measures (a) how often, on the same cycles and noise as the
model.

(b) How well a vertex's **noise-rank pattern** predicts the model's colour: the 1-hop pattern
is the vertex's rank among itself and its two neighbours (0 lowest .. 2 highest,
:func:`interp_rand.tasks.coloring.noise_rank`); the 2-hop pattern (what a 2-block model can see) adds its
two neighbours' own ranks, unordered (the cycle mask gives no orientation): ``(r, {a, b})``.
Reported as the table P(colour | pattern) with the most common colour per pattern and the
accuracy of that prediction, against a shuffled control (the same colours with another row's
patterns: what a pattern predicts by chance, finite-sample bias included) and the
majority-colour rate.

(c) The **agreement** of the model's colours with the classical routine's up to the best
relabelling of the three colours (the fraction of vertices, maximised over the 3! colour
permutations), and the fraction of cycles where they agree at every vertex; control: the
routine applied to another row's noise (shuffled).

    >>> rule = rule_comparison(model, task, batch, generator=g)
    >>> rule.classical_success, rule.agreement, rule.two_hop.accuracy
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp_rand.display import Displayed
from interp_rand.seeded_evaluation.forward import logits_of
from interp_rand.tasks.coloring import neighbours, noise_rank

CLASSICAL_RULE = "one round: local maximum of the noise -> 0, local minimum -> 1, otherwise 2"
# the unordered pairs {a <= b} of neighbour ranks, in the order of the 2-hop pattern code
_RANK_PAIRS = [(a, b) for a in range(3) for b in range(a, 3)]


def classical_coloring(noise: Tensor, nbrs: Tensor) -> Tensor:
    """``noise [batch, N]``, ``nbrs [batch, N, 2]`` (neighbour indices) -> ``[batch, N]`` long:
    :data:`CLASSICAL_RULE` (ties, of probability 0 for continuous noise, count as not larger)."""
    nbr_noise = noise.gather(1, nbrs.flatten(1)).view_as(nbrs)  # [batch, N, 2]
    higher = (noise[..., None] > nbr_noise).all(-1)
    lower = (noise[..., None] < nbr_noise).all(-1)
    return torch.where(higher, 0, torch.where(lower, 1, 2))


def valid_on(colours: Tensor, nbrs: Tensor) -> Tensor:
    """``[batch]`` bool: no vertex shares its colour with a neighbour."""
    nbr_colour = colours.gather(1, nbrs.flatten(1)).view_as(nbrs)
    return ~(nbr_colour == colours[..., None]).any(-1).any(-1)


def rank_patterns(batch: Any, hops: int) -> tuple[Tensor, list[str]]:
    """``[batch, N]`` long pattern codes and the pattern names: ``hops = 1``, the vertex's noise
    rank ``r`` (3 patterns); ``hops = 2``, ``(r, {a, b})`` with its neighbours' ranks (18 codes,
    some impossible)."""
    rank = noise_rank(batch)
    if hops == 1:
        return rank, [f"r={r}" for r in range(3)]
    if hops != 2:
        raise ValueError(f"hops={hops} must be 1 or 2")
    nbrs = neighbours(batch)
    pair = rank.gather(1, nbrs.flatten(1)).view_as(nbrs).sort(-1).values  # [batch, N, 2], a <= b
    index = {p: i for i, p in enumerate(_RANK_PAIRS)}
    lookup = torch.full((3, 3), -1, dtype=torch.long)
    for (a, b), i in index.items():
        lookup[a, b] = i
    code = rank * len(_RANK_PAIRS) + lookup[pair[..., 0], pair[..., 1]]
    names = [f"r={r} nbrs={a}{b}" for r in range(3) for a, b in _RANK_PAIRS]
    return code, names


@dataclass(frozen=True, repr=False)
class PatternTable(Displayed):
    """The model's colour given a noise-rank pattern.

    Attributes:
        patterns: names of the patterns seen (rows of the table).
        counts: vertices seen per pattern.
        colour_given_pattern: ``[n_patterns, n_colors]`` P(colour | pattern).
        most_common: the most common colour per pattern.
        accuracy: fraction of vertices whose colour is their pattern's most common colour.
        accuracy_shuffled: the same with another row's patterns (chance and estimator bias).
    """

    patterns: list[str]
    counts: list[int]
    colour_given_pattern: list[list[float]]
    most_common: list[int]
    accuracy: float
    accuracy_shuffled: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def lines(self) -> list[str]:
        return [f"the colour given the noise-rank pattern: {self.accuracy:.3f} of vertices (another row's patterns "
                f"{self.accuracy_shuffled:.3f}); {len(self.patterns)} patterns, {sum(self.counts):,} vertices"]

    def small_figure(self) -> str | None:
        from interp_rand.display import bars_svg

        return bars_svg([("pattern's commonest colour", self.accuracy), ("another row's patterns", self.accuracy_shuffled)],
                        lo=0, hi=1, caption="share of vertices")


def _table(colour: Tensor, code: Tensor, n_codes: int, n_colors: int) -> Tensor:
    joint = torch.zeros(n_codes, n_colors, dtype=torch.float64)
    joint.index_put_((code.flatten(), colour.flatten()), torch.ones(colour.numel(), dtype=torch.float64), accumulate=True)
    return joint


def pattern_table(colour: Tensor, code: Tensor, names: list[str], n_colors: int, perm: Tensor) -> PatternTable:
    """:class:`PatternTable` of ``colour, code [batch, N]``; ``perm`` pairs each row with
    another row's patterns for the control."""
    joint = _table(colour, code, len(names), n_colors)
    shuffled = _table(colour, code[perm], len(names), n_colors)
    seen = joint.sum(1) > 0
    given = joint[seen] / joint[seen].sum(1, keepdim=True)
    return PatternTable(
        patterns=[n for n, s in zip(names, seen.tolist()) if s],
        counts=joint[seen].sum(1).long().tolist(),
        colour_given_pattern=given.mul(1e4).round().div(1e4).tolist(),
        most_common=given.argmax(1).tolist(),
        accuracy=float(joint.max(1).values.sum() / joint.sum()),
        accuracy_shuffled=float(shuffled.max(1).values.sum() / shuffled.sum()),
    )


def best_relabelling(colour: Tensor, reference: Tensor, n_colors: int) -> tuple[float, list[int], float]:
    """The vertex agreement of ``colour`` with ``perm[reference]`` maximised over colour
    permutations ``perm``: ``(agreement, perm, fraction of rows agreeing at every vertex)``."""
    best = (-1.0, [], 0.0)
    for perm in itertools.permutations(range(n_colors)):
        same = torch.tensor(perm)[reference] == colour  # [batch, N]
        score = float(same.double().mean())
        if score > best[0]:
            best = (score, list(perm), float(same.all(-1).double().mean()))
    return best


@dataclass(frozen=True, repr=False)
class RuleComparison(Displayed):
    """The model's colouring against :data:`CLASSICAL_RULE` (module docstring).

    Attributes:
        rule: the classical routine, in words.
        classical_success: fraction of cycles the routine colours validly (on the batch's
            cycles and noise); classical_vertex_success: fraction of its vertices without a clash.
        model_success: fraction of cycles the model colours validly (same cycles and noise).
        one_hop, two_hop: :class:`PatternTable` of the model's colour by rank pattern.
        majority_accuracy: the most common colour's rate (no pattern).
        agreement: vertex agreement with the routine's colours, best relabelling; relabelling:
            that permutation (routine colour ``c`` -> model colour ``relabelling[c]``);
            whole_agreement: fraction of cycles agreeing at every vertex under it.
        agreement_shuffled: the same agreement with the routine run on another row's noise.
        n_cycles, n_vertices_seen: the sample.
    """

    rule: str
    classical_success: float
    classical_vertex_success: float
    model_success: float
    one_hop: PatternTable
    two_hop: PatternTable
    majority_accuracy: float
    agreement: float
    relabelling: list[int]
    whole_agreement: float
    agreement_shuffled: float
    n_cycles: int
    n_vertices_seen: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def lines(self) -> list[str]:
        return [f"the model's colouring against {self.rule}: vertex agreement {self.agreement:.3f} (best relabelling "
                f"{self.relabelling}; the routine on shuffled noise {self.agreement_shuffled:.3f}), whole cycles "
                f"{self.whole_agreement:.3f}",
                f"valid colourings: model {self.model_success:.3f}, routine {self.classical_success:.3f} "
                f"({self.n_cycles:,} cycles)",
                f"one hop: {self.one_hop.lines()[0]}", f"two hops: {self.two_hop.lines()[0]}"]

    def small_figure(self) -> str | None:
        from interp_rand.display import bars_svg

        return bars_svg([("agreement with the routine", self.agreement), ("the routine on shuffled noise",
                          self.agreement_shuffled), ("one-hop pattern rule", self.one_hop.accuracy),
                         ("two-hop pattern rule", self.two_hop.accuracy), ("majority colour", self.majority_accuracy)],
                        lo=0, hi=1, caption="share of vertices")


@torch.no_grad()
def rule_comparison(model: Any, task: Any, batch: Any, generator: torch.Generator | None = None) -> RuleComparison:
    """Compare ``model``'s argmax colouring of ``batch`` with the classical routine."""
    if batch.seeds is None or batch.attention_mask is None:
        raise ValueError("rule_comparison needs a colouring batch (seeds = vertex noise, cycle mask)")
    if len(batch) < 2:
        raise ValueError("rule_comparison needs at least 2 cycles (the shuffled control pairs rows)")
    n_colors = int(task.n_colors)
    colour = logits_of(model, batch).argmax(-1)  # [batch, N]
    nbrs = neighbours(batch)
    noise = batch.seeds[..., 0]
    classical = classical_coloring(noise, nbrs)
    generator = generator or torch.Generator().manual_seed(0)
    # a derangement, so that no row keeps its own patterns or noise
    order = torch.randperm(len(batch), generator=generator)
    perm = torch.empty_like(order)
    perm[order] = order.roll(1)
    # the routine on another row's noise, read through this row's neighbours
    shuffled_classical = classical_coloring(noise[perm], nbrs)
    agreement, relabelling, whole = best_relabelling(colour, classical, n_colors)
    counts = torch.bincount(colour.flatten(), minlength=n_colors).double()
    clash = (classical.gather(1, nbrs.flatten(1)).view_as(nbrs) == classical[..., None]).any(-1)
    return RuleComparison(
        rule=CLASSICAL_RULE,
        classical_success=float(valid_on(classical, nbrs).double().mean()),
        classical_vertex_success=float((~clash).double().mean()),
        model_success=float(valid_on(colour, nbrs).double().mean()),
        one_hop=pattern_table(colour, *rank_patterns(batch, 1), n_colors, perm),
        two_hop=pattern_table(colour, *rank_patterns(batch, 2), n_colors, perm),
        majority_accuracy=float(counts.max() / counts.sum()),
        agreement=agreement,
        relabelling=relabelling,
        whole_agreement=whole,
        agreement_shuffled=best_relabelling(colour, shuffled_classical, n_colors)[0],
        n_cycles=len(batch),
        n_vertices_seen=colour.numel(),
    )


__all__ = [
    "CLASSICAL_RULE",
    "PatternTable",
    "RuleComparison",
    "best_relabelling",
    "classical_coloring",
    "pattern_table",
    "rank_patterns",
    "rule_comparison",
    "valid_on",
]
