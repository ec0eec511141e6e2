"""The mechanism lines of the randomness report (:mod:`interp_rand.reports.randomness`):
recall's per-seed stored sets against the deterministic capacity, which seed bits decide
storage and through which nodes (:mod:`interp_rand.seeded_evaluation.mixing`, :mod:`circuits.analyses.seed_bits`),
and colouring's learned rule against the classical one (:mod:`interp_rand.seeded_evaluation.symmetry_rule`). Each
function returns JSON-ready dicts; the printed rows come from :func:`mechanism_numbers`."""

from __future__ import annotations

from typing import Any

import torch

# the random-init control's stored-set matrix is measured on this many inputs at most
CONTROL_INPUTS = 8
ROUTE_BITS = 2


def recall_mechanism(model: Any, task: Any, seed_source: str, inputs: Any, stored: torch.Tensor,
                     seed: int) -> dict[str, Any]:
    """``stored [n_inputs, 2**bits, N]`` over ``task.all_seeds()`` for the key/value ``inputs``."""
    from circuits.analyses.seed_bits import bit_flip_effect, bit_flip_routes
    from probes.controls import random_init_like
    from interp_rand.seeded_evaluation.mixing import deterministic_capacity, mixing_strategies
    from probes.stored_set import stored_matrix

    seeds = task.all_seeds()
    key_order, values = inputs.metadata["key_order"], inputs.metadata["values"]
    generator = torch.Generator().manual_seed(seed)
    # the capacity this run shows as a deterministic model: under its one seed if trained on it
    own = stored_matrix(model, task, key_order, values, task.fixed_seed()[None]) if seed_source == "fixed" else stored
    effect = bit_flip_effect(stored, seeds)
    n = min(CONTROL_INPUTS, len(key_order))
    control = bit_flip_effect(stored_matrix(random_init_like(model), task, key_order[:n], values[:n], seeds), seeds)
    routes = bit_flip_routes(model, task, key_order, values, stored, seeds, effect.strongest[:ROUTE_BITS],
                             generator=generator)
    return {
        "mixing": mixing_strategies(stored, generator=generator).to_dict(),
        "deterministic_capacity": deterministic_capacity(own),
        "deterministic_capacity_seeds": "fixed seed r0" if seed_source == "fixed" else "all seeds",
        "bit_flip": effect.to_dict(),
        "bit_flip_random_init": control.to_dict(),
        "routes": routes.to_dict(),
    }


def coloring_mechanism(model: Any, task: Any, batch: Any, seed: int) -> dict[str, Any]:
    from interp_rand.seeded_evaluation.symmetry_rule import rule_comparison

    return {"rule": rule_comparison(model, task, batch, torch.Generator().manual_seed(seed)).to_dict()}


def compare_capacity(runs: list[dict[str, Any]]) -> None:
    """Judge the first recall run's per-seed sets against the second run's capacity (the
    ``--compare`` model, e.g. its ERM twin) when both have the same task size; in place."""
    from interp_rand.seeded_evaluation.mixing import MixingStrategies

    if len(runs) < 2 or not all("mechanism" in r and "mixing" in r["mechanism"] for r in runs[:2]):
        return
    first, other = runs[0]["mechanism"], runs[1]["mechanism"]
    if first["mixing"]["n_positions"] != other["mixing"]["n_positions"]:
        first["capacity_note"] = "--compare run has another task size: capacity left at max over seeds"
        return
    mixing = MixingStrategies(**first["mixing"]).against(other["deterministic_capacity"], runs[1]["name"])
    first["mixing"] = mixing.to_dict()


def mechanism_numbers(run: dict[str, Any]) -> dict[str, Any]:
    """The printed rows of the mechanism analyses (none for other tasks)."""
    mech = run.get("mechanism", {})
    row: dict[str, Any] = {}
    if "mixing" in mech:
        mix, effect, control = mech["mixing"], mech["bit_flip"], mech["bit_flip_random_init"]
        row.update({
            "per seed: mean stored-set size": mix["mean_size"],
            "per seed: deterministic capacity": mix["capacity"],
            "per seed: capacity from": mix["capacity_source"],
            "per seed: size / capacity": mix["size_ratio"],
            "per seed: Jaccard of two seeds' sets": mix["mean_jaccard"],
            "per seed: Jaccard, uniform-position control": mix["jaccard_control"],
            "per seed: set diversity (0 same, 1 random)": mix["set_diversity"],
            "per seed: union coverage over seeds": mix["union_coverage"],
            "per seed: mixes strategies": mix["mixes"],
            "own capacity as deterministic model": mech["deterministic_capacity"],
            "bit flip: mean storage change": effect["mean_effect"],
            "bit flip: max (bit, key) change": effect["max_effect"],
            "bit flip: mean change, random-init control": control["mean_effect"],
            "bit flip: max change, random-init control": control["max_effect"],
            "bit flip: strongest bit": effect["strongest"][0],
        })
        routes = mech["routes"]
        if routes["bits"]:
            role = routes["by_role"][0]
            row.update({f"strongest bit acts via {k}": v for k, v in role.items()})
    if "rule" in mech:
        rule = mech["rule"]
        row.update({
            "rule: classical routine success": rule["classical_success"],
            "rule: model success (same cycles)": rule["model_success"],
            "rule: colour from 1-hop rank pattern": rule["one_hop"]["accuracy"],
            "rule: 1-hop, shuffled control": rule["one_hop"]["accuracy_shuffled"],
            "rule: colour from 2-hop rank pattern": rule["two_hop"]["accuracy"],
            "rule: 2-hop, shuffled control": rule["two_hop"]["accuracy_shuffled"],
            "rule: most common colour, rank 0/1/2": "/".join(map(str, rule["one_hop"]["most_common"])),
            "rule: agreement with classical (relabelled)": rule["agreement"],
            "rule: agreement, shuffled-noise control": rule["agreement_shuffled"],
            "rule: whole-cycle agreement": rule["whole_agreement"],
        })
    return row


__all__ = ["coloring_mechanism", "compare_capacity", "mechanism_numbers", "recall_mechanism"]
