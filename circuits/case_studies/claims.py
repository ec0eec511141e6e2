"""The claims of each case study as sentences with their numbers (what the CLI prints)."""

from __future__ import annotations

from circuits.case_studies.carry import CarryStudy
from circuits.case_studies.sorting import SortStudy


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def carry_claims(study: CarryStudy) -> list[str]:
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
    for row in s.probe:
        lines.append(
            f"carry_in probe, place {row['place']} at position {row['position']}, {row['hook']} (after the layer of "
            f"the strongest carry head): accuracy {row['accuracy']:.3f}, control task {row['control']:.3f}, "
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


def sort_claims(study: SortStudy) -> list[str]:
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


__all__ = ["carry_claims", "sort_claims"]
