"""The claims of each case study, each with its verdict against its control
(:mod:`interp_rand.verdicts`), and the numbers behind them as sentences (what the CLI prints).

The rules and margins are fixed here, before any model is looked at; a claim that does not
hold on a model is printed as ``FAILS`` or ``INCONCLUSIVE`` with its numbers.
"""

from __future__ import annotations

from interp_rand.reports.case_studies.carry import CarryStudy
from interp_rand.reports.case_studies.sorting import SortStudy
from interp_rand.verdicts import Claim, exceeds, inconclusive, keeps

# an ablation must remove at least this much accuracy more than its random control, and twice it
ABLATION_MARGIN = 0.05
# a role score must beat the best of uniform attention and a random-init model by this, and twice it
ROLE_MARGIN = 0.1
# probe selectivity must beat the random-init model's by this, and twice it
PROBE_MARGIN = 0.05
# accuracy that is "kept" may fall by at most this
KEEP_TOLERANCE = 0.05
# the duplicate claims are about a model that sorts: distinct values at least this accurate
SORTS = 0.9


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def carry_claims(study: CarryStudy) -> list[Claim]:
    """The carry study's claims: carry removal breaks carry digits (and cascades) more than
    removal from random same-position components, keeps digits without a carry, a plain mean
    ablation of the same components is not carry-specific (unlike carry removal), and the carry_in probe beats a random-init model per place."""
    s = study
    ctrl = {k: _mean([getattr(c, k) for c in s.controls]) for k in ("carry", "no_carry", "cascade")}
    b, r, min_cascade = s.baseline, s.removed, s.settings["min_cascade"]
    random = f"{len(s.controls)} random same-position component sets"
    claims = [
        exceeds(f"removing the carry from the {len(s.components)} carry components breaks carry digits "
                "(accuracy drop)", b.carry - r.carry, b.carry - ctrl["carry"], control_label=random,
                margin=ABLATION_MARGIN),
        keeps("digits without a carry keep their accuracy when the carry is removed", r.no_carry, b.no_carry,
              control_label="the intact model", tolerance=KEEP_TOLERANCE),
        exceeds(f"removing the carry breaks cascades of length >= {min_cascade} (accuracy drop)",
                _drop(b.cascade, r.cascade), _drop(b.cascade, ctrl["cascade"]), control_label=random,
                margin=ABLATION_MARGIN, unavailable="no cascades measured"),
        exceeds("a plain mean ablation of the carry components is not carry-specific: it also breaks digits "
                "without a carry (accuracy drop)", b.no_carry - s.mean_ablated.no_carry, b.no_carry - r.no_carry,
                control_label="carry removal from the same components", margin=ABLATION_MARGIN),
    ]
    for row in s.probe:
        claims.append(exceeds(
            f"the residual stream after the carry layer ({row['hook']}, position {row['position']}) holds the "
            f"carry into place {row['place']} (probe selectivity)", row["selectivity"],
            row["random_init_selectivity"], control_label="a random-init model", margin=PROBE_MARGIN))
    return claims


def _drop(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else before - after


def carry_details(study: CarryStudy) -> list[str]:
    """The carry study's numbers as sentences."""
    s = study
    c = s.settings["min_cascade"]
    ctrl = {k: _mean([getattr(c, k) for c in s.controls]) for k in ("carry", "no_carry", "cascade")}
    mctrl = {k: _mean([getattr(c, k) for c in s.mean_controls]) for k in ("carry", "no_carry", "cascade")}
    lines = [
        f"carry components ({len(s.components)}; each recovers >= {s.settings['min_share']} of the carry-flip gap "
        f"when patched alone, at the answer positions): " + ", ".join(n.name for n in s.components),
        "strongest components anywhere (share of the carry-flip gap): "
        + ", ".join(f"{n.name} {v:.2f}" for n, v in s.scores.items()[:8]),
        (f"intact model: carry digits {s.baseline.carry:.4f}, no-carry digits {s.baseline.no_carry:.4f}, "
        f"cascade >= {c} digits {s.baseline.cascade:.4f}"),
        (f"carry removed from the carry components: carry digits {s.removed.carry:.4f} (chance 0.1), "
        f"no-carry digits {s.removed.no_carry:.4f}, cascade >= {c} digits {s.removed.cascade:.4f}"),
        (f"control, carry removed from {len(s.components)} random other components at the same positions "
        f"(mean of {len(s.controls)} draws): carry {ctrl['carry']:.4f}, no-carry {ctrl['no_carry']:.4f}, "
        f"cascade >= {c} {ctrl['cascade']:.4f}"),
        (f"plain mean ablation of the carry components: carry {s.mean_ablated.carry:.4f}, no-carry "
        f"{s.mean_ablated.no_carry:.4f}, cascade >= {c} {s.mean_ablated.cascade:.4f} (random: carry "
        f"{mctrl['carry']:.4f}, no-carry {mctrl['no_carry']:.4f}) -- whole components also carry digit sums"),
    ]
    layer = ("where the carry mechanism's interchange holds" if s.settings.get("probe_hook")
             else "after the layer of the strongest carry head")
    for row in s.probe:
        lines.append(
            f"carry_in probe, place {row['place']} at position {row['position']}, {row['hook']} ({layer}): accuracy {row['accuracy']:.3f}, control task {row['control']:.3f}, "
            f"selectivity {row['selectivity']:.3f} (random-init model {row['random_init_selectivity']:.3f}; "
            f"majority {row['majority']:.3f})")
        g = row["generation"]
        lines.append(
            f"  same probe at b one place below (position {g['position']}, {g['hook']}, where the carry is "
            f"generated): accuracy {g['accuracy']:.3f}, control {g['control']:.3f}, selectivity "
            f"{g['selectivity']:.3f} (random-init {g['random_init_selectivity']:.3f})")
    lines.append("cascade path (share of the gap when the cascade's generating place is zeroed): "
                 + ", ".join(f"{d['node']} {d['share']:.2f}" for d in s.cascade_nodes[:8]))
    for name, masses in s.lookback.items():
        lines.append(f"carry head {name} on cascade >= {c} digits: attention on the operand digits "
                     + ", ".join(f"{i + 1} place(s) below {m:.2f}" for i, m in enumerate(masses)))
    return lines


def sort_claims(study: SortStudy) -> list[Claim]:
    """The sort study's claims: the named heads attend to the next element beyond uniform
    attention and a random-init model; ablating them hurts more than ablating random heads;
    duplicated values are sorted as well as distinct ones, the heads spreading their attention
    over every copy."""
    s = study
    weakest = min(float(s.role_scores[n.layer, n.head]) for n in s.heads)
    names = ", ".join(n.name for n in s.heads)
    drop = float((s.baseline - s.ablated).mean())
    control = float((s.baseline - s.controls.mean(0)).mean()) if len(s.controls) else None
    dup, distinct = s.ties["duplicate"], s.ties["distinct"]
    claims = [
        exceeds(f"the next-element heads ({names}) attend to the next element in sorted order (weakest head's "
                "next_larger score)", weakest, max(s.chance_score, s.random_init_best),
                control_label="the best of uniform attention and a random-init model's heads", margin=ROLE_MARGIN),
        exceeds("mean-ablating the next-element heads hurts sorting (mean accuracy drop per output position)",
                drop, control, control_label=f"random sets of {len(s.heads)} other heads", margin=ABLATION_MARGIN,
                unavailable="no random head sets of that size"),
    ]
    duplicates = [
        keeps("duplicated answer values are sorted as well as distinct ones (accuracy)", dup.get("accuracy"),
              distinct.get("accuracy"), control_label="distinct values", tolerance=KEEP_TOLERANCE,
              unavailable="no duplicated or no distinct answer values"),
        exceeds("on a duplicated value the heads spread their attention over every copy (attention on all copies)",
                dup.get("mass_same_value"), dup.get("mass_exact_element"), control_label="the exact element",
                margin=ROLE_MARGIN, ratio=1.5, unavailable="no duplicated answer values"),
    ]
    sorts = distinct.get("accuracy")
    if sorts is not None and sorts < SORTS:
        # how a model that does not sort handles duplicates explains nothing
        duplicates = [inconclusive(c, f"the model does not sort distinct values either (accuracy {sorts:.3f})")
                      for c in duplicates]
    return claims + duplicates


def sort_details(study: SortStudy) -> list[str]:
    """The sort study's numbers as sentences."""
    s = study
    L = len(s.baseline)
    lines = [
        f"next-element heads (next_larger score >= {s.settings['min_score']}): "
        + ", ".join(f"{n.name} {float(s.role_scores[n.layer, n.head]):.3f}" for n in s.heads)
        + f"; uniform attention scores {s.chance_score:.3f}, best head of a random-init model "
        f"{s.random_init_best:.3f}",
        "next_larger score per head: " + ", ".join(
            f"a{l}.{h} {float(s.role_scores[l, h]):.3f}" for l in range(s.role_scores.shape[0])
            for h in range(s.role_scores.shape[1])),
    ]
    for n in s.heads:
        lines.append(f"{n.name}: attention on the next element per output position "
                     + " ".join(f"{float(v):.2f}" for v in s.mass_per_position[n.layer, n.head]))
    ctrl = s.controls.mean(0) if len(s.controls) else s.baseline * float("nan")
    lines.append("accuracy per output position, intact: " + " ".join(f"{float(v):.3f}" for v in s.baseline))
    lines.append("  next-element heads mean-ablated:  " + " ".join(f"{float(v):.3f}" for v in s.ablated))
    lines.append(f"  random {len(s.heads)} other heads ablated (mean of {len(s.controls)} sets): "
                 + " ".join(f"{float(v):.3f}" for v in ctrl))
    drop = (s.baseline - s.ablated).mean()
    lines.append(f"mean drop over the {L} positions: {float(drop):.3f} (heads) vs "
                 f"{float((s.baseline - ctrl).mean()):.3f} (random heads)")
    t = s.ties
    for key, label in (("duplicate", "duplicated answer value"), ("distinct", "distinct answer value"),
                       ("duplicate_first_copy", "first copy of a duplicate"),
                       ("duplicate_later_copy", "later copy of a duplicate")):
        lines.append(_tie_line(label, t[key]))
    for name, row in t["gap"].items():
        lines.append(_tie_line(f"distinct, gap to the next larger value {name}", row))
    return lines


def _tie_line(label: str, row: dict) -> str:
    if not row.get("n"):
        return f"{label}: no cases"
    return (f"{label} (n={row['n']}): accuracy {row['accuracy']:.4f}; heads' attention on the exact element "
            f"{row['mass_exact_element']:.2f}, on all copies of the value {row['mass_same_value']:.2f}, on the "
            f"next larger value {row['mass_next_value']:.2f}")


__all__ = ["carry_claims", "carry_details", "sort_claims", "sort_details"]
