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

Each claim carries its rule (:attr:`interp_rand.verdicts.Verdict.rule`; printed with the
claim on the card and in its JSON). The card's verdict: ``holds`` when every claim holds,
``fails`` when any fails, else ``inconclusive``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.analyses.comparison import RECOVERY_FLOOR, SHARE_MARGIN
from circuits.analyses.faithfulness import TINY_GAP, ShareMeter
from circuits.analyses.mib import MIB_FRACTIONS, FaithfulnessIntegrals, faithfulness_integrals
from circuits.analyses.stability import AgreementMatrix, across_resamples, agreement_matrix
from interp_rand.display import Displayed
from interp_rand.verdicts import Claim, exceeds, exceeds_on_scale, gap_floor_reason, inconclusive, verdict_counts
from circuits.graph.circuit import Circuit
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select
from circuits.interventions.ablation import Ablation
from circuits.interventions.metrics import evaluate_metric, get_metric
from circuits.methods.discovery import discover

# A stable circuit shares at least half of its edges with the circuits of resampled data.
STABILITY_FLOOR = 0.5
# The trained model's gap (metric units) below which no share is defined; the interval rules'
# bootstrap resamples of the pairs and their level.
GAP_FLOOR = TINY_GAP
N_BOOTSTRAP = 200
LEVEL = 0.95


@dataclass(frozen=True)
class RandomInitControl:
    """The random-initialised model's numbers, in the metric's units (shares of the *trained*
    gap are taken by the card, never of this model's own gap).

    Attributes:
    gap: its own full − empty gap (shown, never divided by).
    circuit_effect: the effect of the method's same-size circuit found on it
        (``None`` when the method found none).
    same_edges_effect: the effect of the card's own edges on it.
    """

    gap: float
    circuit_effect: float | None
    same_edges_effect: float

    @property
    def effect(self) -> float:
        """The control: the larger of the two effects."""
        return max(e for e in (self.circuit_effect, self.same_edges_effect) if e is not None)

    def to_dict(self, trained_gap: float) -> dict[str, Any]:
        share = (lambda e: None if e is None or not _usable(trained_gap) else e / trained_gap)
        return {"gap": self.gap, "circuit_effect": self.circuit_effect, "same_edges_effect": self.same_edges_effect,
                "effect": self.effect, "gap_share_of_trained_gap": share(self.gap),
                "circuit_share_of_trained_gap": share(self.circuit_effect),
                "same_edges_share_of_trained_gap": share(self.same_edges_effect),
                "control_share_of_trained_gap": share(self.effect)}


def _usable(gap: float) -> bool:
    return abs(gap) >= GAP_FLOOR


@dataclass(frozen=True, repr=False)
class ClaimCard(Displayed):
    """A circuit's claims with their verdicts (in a notebook: the verdict, the headline numbers
    and each claim's value against its control; drawn by :mod:`circuits.draw.claim_card`).

    Attributes:
    subject: what the card is about (``"zoo:sort, eap, 20 edges"``).
    found_with: metric, ablation, pair generator, positions, method, selection rule.
    circuit: the circuit (its edges and scores).
    integrals: faithfulness over sizes (CPR, CMD, sufficiency and necessity curves).
    gap: the trained model's full − empty gap (metric units), the denominator of every share.
    sufficiency, necessity: at the card's size (shares of ``gap``).
    random_sufficiency, random_necessity: over random circuits of that size (each a list).
    random_init: the :class:`RandomInitControl` (measured on that model and the same pairs).
    stability: agreement with resampled-data circuits; ``methods``: with other methods (or
        ``None``).
    claims: the claims with their verdicts (each with its rule); ``verdict``: the card's.
    """

    subject: str
    found_with: dict[str, Any]
    circuit: Circuit
    integrals: FaithfulnessIntegrals
    gap: float
    sufficiency: float
    necessity: float
    random_sufficiency: tuple[float, ...]
    random_necessity: tuple[float, ...]
    random_init: RandomInitControl
    stability: AgreementMatrix
    methods: AgreementMatrix | None = None
    claims: tuple[Claim, ...] = field(default=())

    @property
    def verdict(self) -> str:
        counts = verdict_counts(list(self.claims))
        if counts["fails"]:
            return "fails"
        return "holds" if counts["holds"] == len(self.claims) else "inconclusive"

    def failing(self) -> list[Claim]:
        """The claims that fail."""
        return [c for c in self.claims if c.verdict.outcome == "fails"]

    def effect(self, share: float | None) -> float | None:
        """A share of the trained gap back in the metric's units."""
        return None if share is None else share * self.gap

    def headline(self) -> str:
        """One line: the verdict, the subject, sufficiency against random circuits, necessity
        and the integrals, and the first failing claim."""
        p95 = _p95(self.random_sufficiency)
        random = "" if p95 is None else f" (random circuits p95 {p95:.2f})"
        bad = self.failing()
        return (f"{self.verdict.upper()} · {self.subject}: sufficiency {self.sufficiency:.2f}{random}, necessity "
                f"{self.necessity:.2f}, CPR {self.integrals.cpr:.2f}, CMD {self.integrals.cmd:.2f}"
                + (f"; fails: {bad[0].text}" if bad else ""))

    def lines(self) -> list[str]:
        """The headline, then one line per claim with its verdict."""
        return [self.headline()] + [c.line() for c in self.claims]

    def to_dict(self) -> dict[str, Any]:
        p95_suff, p95_removed = _p95(self.random_sufficiency), _p95([1 - g for g in self.random_necessity])
        return {
            "subject": self.subject, "found_with": self.found_with, "verdict": self.verdict,
            "n_edges": len(self.circuit), "total_edges": self.circuit.total_edges,
            "gap": self.gap, "gap_floor": GAP_FLOOR,
            "sufficiency": self.sufficiency, "necessity": self.necessity,
            "effects": {"circuit": self.effect(self.sufficiency), "removed": self.effect(1 - self.necessity),
                        "random_circuits_p95": self.effect(p95_suff),
                        "random_circuits_removed_p95": self.effect(p95_removed)},
            "cpr": self.integrals.cpr, "cmd": self.integrals.cmd,
            "necessity_cpr": self.integrals.necessity_cpr, "necessity_cmd": self.integrals.necessity_cmd,
            "random_circuits": {"n": len(self.random_sufficiency),
                                "sufficiency_p95": p95_suff, "removed_p95": p95_removed,
                                "sufficiency": list(self.random_sufficiency),
                                "necessity": list(self.random_necessity)},
            "random_init": self.random_init.to_dict(self.gap),
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
    n_bootstrap: int = N_BOOTSTRAP,
    options: dict[str, Any] | None = None,
) -> ClaimCard:
    """The claim card of the ``k``-edge circuit ``method`` finds (or that ``scores`` give) on
    ``model`` for ``clean`` vs ``corrupted``; or of a given ``circuit`` chosen from ``scores``
    (its size ``k`` is its ``settings["top_k"]`` or its edge count: the random circuits, the
    random-initialised control and the resampled circuits are chosen at that size). ``pairs``
    says how the pairs were made (for the card); ``random_init``: the random-initialised control model (default: one of the same
    architecture, :func:`probes.random_init_like`); ``compare_methods``: other methods whose
    ``k``-edge circuits the card's is compared with; ``n_bootstrap``: resamples of the pairs for
    the intervals of the rules (the module's docstring states them)."""
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
    control_meter = ShareMeter.of_pairs(control, graph, clean, corrupted, ablation, metric_fn, require_gap=False)
    try:
        control_scores = discover(control, clean, corrupted, metric=metric, method=method, ablation=ablation,
                                  by_position=by_position, **options)
        control_keep: torch.Tensor | None = graph.keep_mask(list(select(control_scores, k, selection).edges))
    except ValueError:  # the method finds nothing on the random model
        control_keep = None
    init, resamples = _random_init_control(meter, control_meter, keep, control_keep, n_bootstrap, seed)
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
    gap = meter.gap
    floor_reason = gap_floor_reason(gap, [g for _, _, g in resamples], gap_floor=GAP_FLOOR, level=LEVEL)
    claims = (
        _on_scale(exceeds("the circuit alone recovers the behaviour (sufficiency)", suff, _p95(rand_suff),
                          control_label="random circuits of its size (95th percentile)", margin=SHARE_MARGIN,
                          floor=RECOVERY_FLOOR, unavailable="no random circuits measured"), gap, floor_reason),
        _on_scale(exceeds("ablating the circuit removes the behaviour (1 - necessity)", 1 - nec, _p95(rand_removed),
                          control_label="random circuits of its size (95th percentile)", margin=SHARE_MARGIN,
                          floor=RECOVERY_FLOOR, unavailable="no random circuits measured"), gap, floor_reason),
        exceeds_on_scale("the circuit is learned: it recovers more of the trained model's behaviour than a "
                         "random-initialised model's circuit does (effects on the trained scale)",
                         suff * gap, init.effect, gap,
                         control_label="the random-initialised model (the larger of the method's circuit on it "
                         "and the same edges on it)", resamples=resamples, margin=SHARE_MARGIN,
                         floor=RECOVERY_FLOOR, gap_floor=GAP_FLOOR, level=LEVEL),
        exceeds("the circuit is stable under resampling the pairs (mean Jaccard with the resampled circuits)",
                sum(resample_jaccards) / len(resample_jaccards), stability.chance_jaccard,
                control_label="two random circuits of its size", margin=SHARE_MARGIN, floor=STABILITY_FLOOR),
    )
    metric_name = metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")
    found_with = {"metric": metric_name, "ablation": ablation.to_dict(), "pairs": pairs,
                  "by_position": by_position, "n_positions": graph.n_positions, "method": method,
                  "selection": selection, "k": k, "n_pairs": len(clean), "options": options}
    subject = subject or f"{method}, {len(circuit)} edges"
    return ClaimCard(subject, found_with, circuit, integrals, gap, suff, nec, tuple(rand_suff),
                     tuple(g for _, g in rand), init, stability, methods, claims)


def _on_scale(claim: Claim, gap: float, floor_reason: str) -> Claim:
    """A share claim with its numbers also in the metric's units; inconclusive when the trained
    gap cannot share anything out (``floor_reason``)."""
    note = ("" if claim.value is None or claim.control is None else
            f"metric units: {claim.value * gap:.4g} vs {claim.control * gap:.4g} of a gap of {gap:.4g}")
    rule = (f"{claim.verdict.rule}; shares of the trained model's gap (|gap| >= {GAP_FLOOR:g} metric units, its "
            f"{LEVEL:.0%} interval excluding 0; else inconclusive)")
    claim = dataclasses.replace(claim, note=note, verdict=dataclasses.replace(claim.verdict, rule=rule))
    return inconclusive(claim, floor_reason) if floor_reason else claim


def _random_init_control(meter: ShareMeter, control: ShareMeter, keep: torch.Tensor,
                         control_keep: torch.Tensor | None, n_bootstrap: int, seed: int,
                         ) -> tuple[RandomInitControl, list[tuple[float, float, float]]]:
    """The random-initialised model's effects, and ``(trained effect, control effect, trained
    gap)`` on ``n_bootstrap`` resamples of the pairs (the same rows for both models; the logits
    are computed once and the metric re-read on each resample)."""
    graph = meter.graph
    none, every = torch.zeros_like(graph.mask), graph.mask
    trained = {"full": meter.logits(every), "empty": meter.logits(none), "circuit": meter.logits(keep)}
    random = {"full": control.logits(every), "empty": control.logits(none), "same": control.logits(keep)}
    if control_keep is not None:
        random["circuit"] = control.logits(control_keep)
    batch, metric = meter.batch, meter.metric

    def read(logits: dict[str, torch.Tensor], rows: Any) -> dict[str, float]:
        sub = batch if rows is None else batch[rows]
        return {name: float(evaluate_metric(metric, x if rows is None else x[rows], sub)) for name, x in logits.items()}

    def control_effect(r: dict[str, float]) -> float:
        return max(r[name] - r["empty"] for name in ("circuit", "same") if name in r)

    r = read(random, None)
    init = RandomInitControl(r["full"] - r["empty"], r["circuit"] - r["empty"] if "circuit" in r else None,
                             r["same"] - r["empty"])
    generator = torch.Generator().manual_seed(seed)
    n = len(batch)
    resamples = []
    for _ in range(n_bootstrap):
        rows = torch.randint(n, (n,), generator=generator)
        t, r = read(trained, rows), read(random, rows)
        resamples.append((t["circuit"] - t["empty"], control_effect(r), t["full"] - t["empty"]))
    return init, resamples


__all__ = ["GAP_FLOOR", "LEVEL", "N_BOOTSTRAP", "STABILITY_FLOOR", "ClaimCard", "RandomInitControl", "claim_card",
           "random_keep_masks"]
