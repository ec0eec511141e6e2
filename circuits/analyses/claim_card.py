"""A claim card: everything a reviewer needs to accept (or reject) "this is the model's circuit".

One card per circuit, computed here and rendered by :mod:`circuits.draw.claim_card` (HTML) or
written as JSON (:meth:`ClaimCard.to_dict`). It states how the circuit was found (metric,
ablation, pair generator, positions, method, selection rule, size) and measures

- **faithfulness** over sizes (MIB's CPR and CMD, :mod:`circuits.analyses.mib`) and, at the
  card's size, **sufficiency** (the circuit alone) and **necessity** (the model without it);
- the same for **random circuits** of the same size (the control every share is held against);
- a **random-initialised model** of the same architecture: the method's same-size circuit found
  on it, and the card's own edges on it (what a network that learned nothing gives);
- **stability**: Jaccard agreement of the circuit with the circuits of bootstrap resamples of
  the pairs (and, when given, with other methods' circuits).

The rules, fixed before any model's numbers were looked at
---------------------------------------------------------
*One scale.* Every effect is a difference of the metric in its own units (nats for
``logprob``): ``gap = m(full) − m(empty)`` is the trained model's behaviour, a circuit's
``effect = m(circuit) − m(empty)``, the effect of removing it ``m(full) − m(full − circuit)``.
A share is an effect divided by **the trained model's gap** and by nothing else: no claim
divides by a random-initialised model's gap (which is near zero: a model that learned nothing
barely reacts to the corruption, and a share of it can read 1.244 while meaning nothing). The
card shows every share beside its effect in the metric's units.

*The denominator's floor.* The trained gap must be at least :data:`GAP_FLOOR` in the metric's
units (:data:`circuits.analyses.faithfulness.TINY_GAP`) and its 95% interval over
:data:`N_BOOTSTRAP` bootstrap resamples of the pairs must exclude 0. Otherwise every share claim
(1–3) is INCONCLUSIVE ("the behaviour is too small to share out"), whatever its numbers.

1. *sufficient*: sufficiency ≥ the random circuits' 95th percentile + 0.1, ≥ 2× it, and ≥ 0.5.
2. *necessary*: the share removed by ablating the circuit (1 − necessity) ≥ the random
   circuits' 95th percentile of the same + 0.1, ≥ 2× it, and ≥ 0.5.
3. *learned*: the control is the random-initialised model's effect **on the trained scale**: the
   larger of (a) the effect of the method's same-size circuit found on a random-initialised model
   and (b) the effect of the card's own edges on that model, each on the same pairs and ablation,
   divided by the trained gap. The claim holds when sufficiency ≥ 0.5 and the 95% bootstrap
   interval (the pairs resampled, the same resample for both models) of sufficiency − control
   lies at or above 0.1; it fails when sufficiency < 0.5 or that interval lies below 0.1; it is
   INCONCLUSIVE when the interval contains 0.1 (one random draw cannot decide), or when either
   model's numbers are missing. The random-initialised model's own gap is shown (in units and as
   a share of the trained gap), never used as a denominator.
4. *stable*: the mean Jaccard with the resampled circuits ≥ chance + 0.1, ≥ 2× chance, and
   ≥ 0.5 (not a share: unchanged by the floor).

Each claim carries its rule (:attr:`circuits.analyses.verdict.Verdict.rule`; printed with the
claim on the card and in its JSON). The card's verdict: ``holds`` when every claim holds,
``fails`` when any fails, else ``inconclusive``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.analyses.comparison import RECOVERY_FLOOR, SHARE_MARGIN
from circuits.analyses.faithfulness import TINY_GAP, ShareMeter
from circuits.analyses.mib import MIB_FRACTIONS, FaithfulnessIntegrals, faithfulness_integrals
from circuits.analyses.stability import AgreementMatrix, across_resamples, agreement_matrix
from circuits.analyses.verdict import Claim, exceeds, verdict_counts
from circuits.graph.circuit import Circuit
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select
from circuits.interventions.ablation import Ablation
from circuits.interventions.metrics import get_metric
from circuits.methods.discovery import discover

# A stable circuit shares at least half of its edges with the circuits of resampled data.
STABILITY_FLOOR = 0.5
# The trained model's gap (metric units) below which no share is defined; the interval rules'
# bootstrap resamples of the pairs and their level.
GAP_FLOOR = TINY_GAP
N_BOOTSTRAP = 200
LEVEL = 0.95


@dataclass(frozen=True)
class ClaimCard:
    """Attributes:
    subject: what the card is about (``"zoo:sort, eap, 20 edges"``).
    found_with: metric, ablation, pair generator, positions, method, selection rule.
    circuit: the circuit (its edges and scores).
    integrals: faithfulness over sizes (CPR, CMD, sufficiency and necessity curves).
    sufficiency, necessity: at the card's size.
    random_sufficiency, random_necessity: over random circuits of that size (each a list).
    random_init_sufficiency: the method's same-size circuit on a random-initialised model
        (measured on that model and the same pairs).
    stability: agreement with resampled-data circuits; ``methods``: with other methods (or
        ``None``).
    claims: the claims with their verdicts; ``verdict``: the card's.
    """

    subject: str
    found_with: dict[str, Any]
    circuit: Circuit
    integrals: FaithfulnessIntegrals
    sufficiency: float
    necessity: float
    random_sufficiency: tuple[float, ...]
    random_necessity: tuple[float, ...]
    random_init_sufficiency: float | None
    stability: AgreementMatrix
    methods: AgreementMatrix | None = None
    claims: tuple[Claim, ...] = field(default=())

    @property
    def verdict(self) -> str:
        counts = verdict_counts(list(self.claims))
        if counts["fails"]:
            return "fails"
        return "holds" if counts["holds"] == len(self.claims) else "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject, "found_with": self.found_with, "verdict": self.verdict,
            "n_edges": len(self.circuit), "total_edges": self.circuit.total_edges,
            "sufficiency": self.sufficiency, "necessity": self.necessity,
            "cpr": self.integrals.cpr, "cmd": self.integrals.cmd,
            "necessity_cpr": self.integrals.necessity_cpr, "necessity_cmd": self.integrals.necessity_cmd,
            "random_circuits": {"n": len(self.random_sufficiency),
                                "sufficiency_p95": _p95(self.random_sufficiency),
                                "removed_p95": _p95([1 - g for g in self.random_necessity]),
                                "sufficiency": list(self.random_sufficiency),
                                "necessity": list(self.random_necessity)},
            "random_init_sufficiency": self.random_init_sufficiency,
            "stability": self.stability.to_dict(),
            "methods": None if self.methods is None else self.methods.to_dict(),
            "integrals": self.integrals.to_dict(),
            "claims": [c.to_dict() for c in self.claims],
            "circuit": self.circuit.to_dict(),
        }


def _p95(values) -> float | None:
    values = list(values)
    return float(torch.tensor(values).quantile(0.95)) if values else None


def random_keep_masks(scores: EdgeScores, k: int, n: int, seed: int) -> list[torch.Tensor]:
    """``n`` masks of ``k`` edges drawn uniformly from the graph's edges."""
    graph = scores.graph
    edges = graph.mask.nonzero()
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        keep = torch.zeros_like(graph.mask)
        picks = edges[torch.randperm(len(edges), generator=generator)[:k]]
        keep[tuple(picks.T)] = True
        out.append(keep)
    return out


def claim_card(
    model: Any,
    clean: Any,
    corrupted: Any = None,
    *,
    k: int | None = None,
    method: str = "eap-ig",
    scores: EdgeScores | None = None,
    circuit: Circuit | None = None,
    metric: Any = "logprob",
    ablation: Ablation | None = None,
    selection: str = "greedy",
    by_position: bool = True,
    pairs: str = "",
    subject: str = "",
    n_random: int = 20,
    n_resamples: int = 3,
    random_init: Any = None,
    compare_methods: tuple[str, ...] = (),
    fractions: tuple[float, ...] = MIB_FRACTIONS,
    seed: int = 0,
    options: dict[str, Any] | None = None,
) -> ClaimCard:
    """The claim card of the ``k``-edge circuit ``method`` finds (or that ``scores`` give) on
    ``model`` for ``clean`` vs ``corrupted``; or of a given ``circuit`` chosen from ``scores``
    (its size ``k`` is its ``settings["top_k"]`` or its edge count: the random circuits, the
    random-initialised control and the resampled circuits are chosen at that size). ``pairs`` says how the pairs were made (for the
    card); ``random_init``: the random-initialised control model (default: one of the same
    architecture, :func:`probes.random_init_like`); ``compare_methods``: other methods whose
    ``k``-edge circuits the card's is compared with."""
    from probes.controls import random_init_like

    ablation = Ablation("resample") if ablation is None else ablation
    metric_fn = get_metric(metric)
    options = options or {}
    if scores is None:
        scores = discover(model, clean, corrupted, metric=metric, method=method, ablation=ablation,
                          by_position=by_position, **options)
    if circuit is None:
        if k is None:
            raise ValueError("give k= (the circuit size) or circuit=")
        circuit = select(scores, k, selection)
    elif k is None:
        k = int(circuit.settings.get("top_k") or len(circuit))
    graph = scores.graph
    keep = graph.keep_mask(list(circuit.edges))
    meter = ShareMeter.of_pairs(model, graph, clean, corrupted, ablation, metric_fn)
    suff, nec = meter.share(keep), meter.necessity(keep)
    rand = [(meter.share(m), meter.necessity(m)) for m in random_keep_masks(scores, len(circuit), n_random, seed)]
    integrals = faithfulness_integrals(model, scores, clean, corrupted, metric=metric, ablation=ablation,
                                       selection=selection, fractions=fractions, meter=meter)
    control = random_init if random_init is not None else random_init_like(model, seed=12345)
    try:
        control_scores = discover(control, clean, corrupted, metric=metric, method=method, ablation=ablation,
                                  by_position=by_position, **options)
        control_keep = graph.keep_mask(list(select(control_scores, k, selection).edges))
        init_suff: float | None = ShareMeter.of_pairs(control, graph, clean, corrupted, ablation,
                                                      metric_fn).share(control_keep)
    except ValueError:  # the random model's behaviour does not move under the corruption
        init_suff = None
    stability = across_resamples(model, clean, corrupted, k=k, method=method, n_resamples=n_resamples, seed=seed,
                                 metric=metric, ablation=ablation, selection=selection, by_position=by_position,
                                 full=scores, **options)
    methods = None
    if compare_methods:
        others = {m: discover(model, clean, corrupted, metric=metric, method=m, ablation=ablation,
                              by_position=by_position) for m in compare_methods if m != method}
        methods = agreement_matrix({method: scores, **others}, k, selection=selection, what="methods")
    rand_suff = [s for s, _ in rand]
    rand_removed = [1 - g for _, g in rand]
    resample_jaccards = [stability.jaccard[0][j] for j in range(1, len(stability.labels))]
    claims = (
        exceeds("the circuit alone recovers the behaviour (sufficiency)", suff, _p95(rand_suff),
                control_label="random circuits of its size (95th percentile)", margin=SHARE_MARGIN,
                floor=RECOVERY_FLOOR, unavailable="no random circuits measured"),
        exceeds("ablating the circuit removes the behaviour (1 - necessity)", 1 - nec, _p95(rand_removed),
                control_label="random circuits of its size (95th percentile)", margin=SHARE_MARGIN,
                floor=RECOVERY_FLOOR, unavailable="no random circuits measured"),
        exceeds("the circuit is learned: it recovers more than the method's circuit on a random-initialised model",
                suff, init_suff, control_label="the random-initialised model", margin=SHARE_MARGIN, ratio=1.0,
                floor=RECOVERY_FLOOR, unavailable="the random-initialised model's behaviour does not move"),
        exceeds("the circuit is stable under resampling the pairs (mean Jaccard with the resampled circuits)",
                sum(resample_jaccards) / len(resample_jaccards), stability.chance_jaccard,
                control_label="two random circuits of its size", margin=SHARE_MARGIN, floor=STABILITY_FLOOR),
    )
    metric_name = metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")
    found_with = {"metric": metric_name, "ablation": ablation.to_dict(), "pairs": pairs,
                  "by_position": by_position, "n_positions": graph.n_positions, "method": method,
                  "selection": selection, "k": k, "n_pairs": len(clean), "options": options}
    subject = subject or f"{method}, {len(circuit)} edges"
    return ClaimCard(subject, found_with, circuit, integrals, suff, nec, tuple(rand_suff), tuple(g for _, g in rand),
                     init_suff, stability, methods, claims)


__all__ = ["STABILITY_FLOOR", "ClaimCard", "claim_card", "random_keep_masks"]
