"""``interp-rand case-study carry|sort RUN_DIR --out DIR``: run a case study on a trained run,
print each claim with its verdict against its control (HOLDS / FAILS / INCONCLUSIVE), then the
numbers behind them, and write ``case_study.json`` and ``case_study.html``
(the circuit drawing and the ablation figures, offline)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from interp_rand import progress
from interp_rand.cli.options import at_least, output_path

STUDIES = ("carry", "sort")


def add_parser(commands) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "case-study", help="carry propagation (addition) or sorting passes (sort), backed by ablations",
        description="carry: the components that move carries (carry-flip patching), carry-removal "
        "ablation against random same-position components, the carry probe, cascades. sort: the "
        "heads that point to the next element, per-position ablation against random heads, "
        "duplicates and near-ties. Prints one line per claim with its verdict against its control "
        "(HOLDS, FAILS or INCONCLUSIVE, with the numbers), then the details; writes JSON and HTML.",
    )
    parser.add_argument("study", choices=STUDIES)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw (default: 0)")
    parser.add_argument("--controls", type=at_least(2), default=10, help="random control sets (default: 10)")
    parser.add_argument("--n", type=at_least(2), default=None,
                        help="evaluation examples (default: carry 2000, sort 4000)")
    return parser


def run(args: argparse.Namespace) -> int:
    from interp_rand.reports.case_studies import CarryConfig, SortConfig, carry_study, sort_study
    from interp_rand.reports.case_studies.claims import carry_claims, carry_details, sort_claims, sort_details
    from interp_rand.reports.case_studies.draw import study_figures, write_case_study_html
    from circuits.analyses.verdict import summary_line, verdict_counts
    from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
    from interp_rand.zoo.location import run_label

    # the config first: a bad option is refused before the checkpoint is even read
    config = (CarryConfig if args.study == "carry" else SortConfig)(seed=args.seed, n_controls=args.controls)
    config = dataclasses.replace(config, n_eval=args.n) if args.n else config
    expected = "addition" if args.study == "carry" else "sort"
    try:
        ckpt = load_checkpoint(args.run_dir, task=expected)
    except CheckpointError as err:
        raise CheckpointError(f"case study {args.study!r} needs a {expected} run: {err}") from None
    task = ckpt.spec.make_task()
    model = ckpt.model().eval()
    study_fn, claims_of, details_of = ((carry_study, carry_claims, carry_details) if args.study == "carry"
                                       else (sort_study, sort_claims, sort_details))
    with progress.scope(f"case-study {args.study}"):
        study = study_fn(model, task, config, progress=True)
        progress.note("writing case_study.json, circuit.json, case_study.html")
    claims, details = claims_of(study), details_of(study)
    lines = [c.line() for c in claims] + [summary_line(claims)] + details
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"study": args.study, "run": str(ckpt.path), "claims": [c.to_dict() for c in claims],
            "verdicts": verdict_counts(claims), "details": details, **study.to_dict()}
    (args.out / "case_study.json").write_text(json.dumps(data, indent=1))
    study.circuit.save(args.out / "circuit.json")
    write_case_study_html(args.out / "case_study.html", f"{args.study} case study: {run_label(args.run_dir)}", lines,
                          study_figures(study))
    print("\n".join(lines))
    print(f"wrote {args.out}/case_study.json, circuit.json, case_study.html")
    return 0

