"""Score circuit-discovery methods against circuits known by construction: hand-set models at the
shapes of this toolkit's tasks (sort, addition, recall, a seed reader, and a seed reader with a
decoy for gradients; :mod:`circuits.analyses.planted`), and stressors that each break one
method's assumption (a ReLU off where EAP takes its gradient, a saturated clip, a cancelling
pair, an AND gate, an OR gate). For each method and model: the edge
AUROC of the method's scores against the known edge set, MIB's CPR and CMD (and the necessity
CMD) of the circuits chosen from them, and the method's seconds. Prints the method x model
table and writes it as JSON and HTML.

    # every method on every planted model: about 25 s of one CPU thread (longer on a busy machine)
    python examples/ground_truth_suite.py --out /tmp/ground-truth
    python examples/ground_truth_suite.py --out /tmp/ground-truth --methods exact eap --models sort recall
"""

import argparse
from pathlib import Path

import torch

from circuits.analyses.ground_truth import SUITE_METHODS, format_table, ground_truth_suite, to_json, write_tables
from circuits.analyses.planted import PLANTED_MODELS
from circuits.methods.discovery import method_names


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--methods", nargs="+", default=list(SUITE_METHODS), choices=method_names(),
                        help="discovery methods (default: %(default)s)")
    parser.add_argument("--models", nargs="+", default=list(PLANTED_MODELS), choices=list(PLANTED_MODELS),
                        help="planted models (default: %(default)s)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    rows = ground_truth_suite(methods=tuple(args.methods), models=tuple(args.models))
    args.out.mkdir(parents=True, exist_ok=True)
    write_tables(rows, args.out / "ground_truth.json", args.out / "ground_truth.html")
    print(format_table(rows))
    print(f"wrote {args.out}/ground_truth.json, ground_truth.html")
    return to_json(rows)


if __name__ == "__main__":
    main()
