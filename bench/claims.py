"""Circuit claims end to end, timed: the ground-truth suite (every method on every planted
model) and the claim cards of the zoo's circuits (sort and addition on the task's pairs, the
carry study's circuit on its carry-flip pairs, the colouring seed circuit on seed pairs).

For each card subject the faithfulness integrals (MIB's CPR and CMD, connected selection) of
exact patching, EAP-IG and ACDC (and EAP, for reference) are measured on the same pairs; the
card is built on the method with the best (lowest) CMD, at the size the smallest faithful
circuit of that method picks, so a card's CMD is the best of the three by construction: the
table shows by how much the methods differ. Prints the tables, the total wall time (target: the
whole in <= 10 minutes on 2 cores) and the command; writes ``claims.json`` and one card HTML
per subject to ``--out``.

    python bench/claims.py --out /tmp/claims            # everything, one thread
    python bench/claims.py --out /tmp/claims --quick    # 64 pairs, no ground truth: a smoke run
    python bench/claims.py --out /tmp/claims --only colouring   # one card subject, no ground truth
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from circuits import discover, smallest_faithful_circuit
from circuits.analyses.claim_card import claim_card
from circuits.analyses.ground_truth import format_table, ground_truth_suite, to_json
from circuits.analyses.mib import faithfulness_integrals
from circuits.draw.claim_card import claim_card_html
from interp_rand.defaults import DEFAULT_SEED
from interp_rand.reports.case_studies import CarryConfig, carry_study
from interp_rand.reports.case_studies.carry import carry_metric
from interp_rand.reports.inputs import load_run_inputs

CARD_METHODS = ("exact", "eap-ig", "acdc")


SUBJECTS = ("zoo:sort", "zoo:addition", "carry study (zoo:addition)", "colouring seed circuit (zoo:coloring-Aq_R)")


def subjects(n: int, only: str = ""):
    """``(name, model, clean, corrupted, metric, pairs description)`` per card subject (those of
    :data:`SUBJECTS` whose name contains ``only``)."""
    wanted = [name for name in SUBJECTS if only in name]
    if not wanted:
        raise SystemExit(f"--only={only!r} matches no card subject; choose a part of one of {list(SUBJECTS)}")
    for run in ("zoo:sort", "zoo:addition"):
        if run in wanted:
            x = load_run_inputs(run, n, DEFAULT_SEED, "task")
            yield run, x.model, x.pairs.clean, x.pairs.corrupted, "logprob", f"the task's corruption, {n} pairs"
    if SUBJECTS[2] in wanted:
        x = load_run_inputs("zoo:addition", 2, DEFAULT_SEED, "task")
        study = carry_study(x.model, x.task, CarryConfig(n_pairs=max(n, 64)))
        clean, corrupted = study.pairs
        yield SUBJECTS[2], x.model, clean, corrupted, carry_metric, f"carry-flip pairs, {len(clean)} (the study's)"
    if SUBJECTS[3] in wanted:
        x = load_run_inputs("zoo:coloring-Aq_R", n, DEFAULT_SEED, "seed")
        yield SUBJECTS[3], x.model, x.pairs.clean, x.pairs.corrupted, "logprob", \
            f"seed pairs (same cycles, fresh noise), {n}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=256, help="pairs per card subject (default: 256)")
    parser.add_argument("--quick", action="store_true", help="64 pairs and no ground-truth suite")
    parser.add_argument("--only", default="", help="only the card subjects whose name contains this (e.g. "
                        "'colouring'); skips the ground-truth suite")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n = 64 if args.quick else args.n
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    out: dict = {"command": " ".join(["python", *sys.argv]), "load_average": os.getloadavg()}
    if not args.quick and not args.only:
        t = time.perf_counter()
        rows = ground_truth_suite()
        out["ground_truth"] = {**to_json(rows), "seconds": time.perf_counter() - t}
        print(format_table(rows))
        print(f"ground-truth suite: {out['ground_truth']['seconds']:.0f} s\n")
    out["cards"] = []
    print(f"{'subject':45s} " + " ".join(f"{m + ' CMD':>11s}" for m in (*CARD_METHODS, "eap")) +
          "  card method  edges  verdict   seconds")
    for name, model, clean, corrupted, metric, pairs in subjects(n, args.only):
        t = time.perf_counter()
        integrals, scores = {}, {}
        for method in (*CARD_METHODS, "eap"):
            scores[method] = discover(model, clean, corrupted, metric=metric, method=method)
            integrals[method] = faithfulness_integrals(model, scores[method], clean, corrupted, metric=metric,
                                                       selection="connected")
        best = min(CARD_METHODS, key=lambda m: integrals[m].cmd)
        circuit, _ = smallest_faithful_circuit(model, scores[best], clean, corrupted, metric=metric)
        card = claim_card(model, clean, corrupted, circuit=circuit, scores=scores[best], method=best,
                          metric=metric, selection="connected", pairs=pairs, subject=f"{name}: {best}")
        seconds = time.perf_counter() - t
        slug = name.split(" (")[0].replace(" ", "-").replace(":", "-")
        (args.out / f"card-{slug}.html").write_text(claim_card_html(card), encoding="utf-8")
        out["cards"].append({"subject": name, "cmd": {m: r.cmd for m, r in integrals.items()},
                             "cpr": {m: r.cpr for m, r in integrals.items()}, "card_method": best,
                             "seconds": seconds, "card": card.to_dict()})
        print(f"{name:45s} " + " ".join(f"{integrals[m].cmd:11.3f}" for m in (*CARD_METHODS, "eap")) +
              f"  {best:11s}  {len(circuit):5d}  {card.verdict:9s} {seconds:7.0f}")
        for claim in card.claims:
            print("    " + claim.line())
    out["seconds"] = time.perf_counter() - began
    (args.out / "claims.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"\ntotal {out['seconds']:.0f} s (load average at start {out['load_average'][0]:.1f}); "
          f"command: {out['command']}; wrote {args.out}/claims.json and card-*.html")
    return out


if __name__ == "__main__":
    main()
