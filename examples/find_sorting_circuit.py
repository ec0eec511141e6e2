"""Discover the circuit of a trained sorting model with EAP-IG (per position), measure how much
of the model's behaviour it recovers when every other edge is resample-ablated, against random
circuits of the same size, and draw it as an offline HTML graph.

    # zoo:sort: about 5 s on one CPU thread, start-up included
    python examples/find_sorting_circuit.py --out /tmp/sort-circuit
    # a sort run of your own
    python examples/find_sorting_circuit.py --out /tmp/sort-circuit --run RUN_DIR
"""

import argparse
import json
from pathlib import Path

import torch

from circuits import Ablation, discover, faithfulness
from circuits.draw.circuit_figure import write_circuit_html
from interp_rand.seeded_evaluation import success_matrix, summarize
from interp_rand.training.checkpoint import CheckpointError, load_checkpoint


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run", default="zoo:sort",
                        help="a trained sort run directory or zoo:NAME (default: %(default)s)")
    parser.add_argument("--n", type=int, default=64, help="clean/corrupted pairs for discovery")
    parser.add_argument("--top-k", type=int, default=60, help="edges kept in the circuit")
    parser.add_argument("--n-random", type=int, default=5, help="random circuits of the same size (the control)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    try:
        ckpt = load_checkpoint(args.run, task="sort")
    except CheckpointError as err:
        parser.error(f"--run {args.run}: {err}")
    task, model = ckpt.spec.make_task(), ckpt.model()
    generator = torch.Generator().manual_seed(1)
    accuracy = summarize(success_matrix(model, task, task.sample(512, generator), None))["average"]

    # clean/corrupted pairs from the task itself; edges outside the circuit carry the corrupted run
    pairs = task.corrupt(task.sample(args.n, generator), generator)
    scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap-ig", steps=3)
    circuit = scores.circuit(top_k=args.top_k)
    result = faithfulness(model, circuit, pairs.clean, pairs.corrupted, ablation=Ablation("resample"), scores=scores)

    # control: the same number of edges drawn at random from the model's graph
    edges = scores.graph.mask.nonzero()  # [n_edges, 3] (slot, writer, reader)
    random_recovered = []
    for _ in range(args.n_random):
        keep = torch.zeros_like(scores.graph.mask)
        keep[tuple(edges[torch.randperm(len(edges), generator=generator)[: args.top_k]].T)] = True
        random_recovered.append(faithfulness(model, scores.circuit_from_mask(keep), pairs.clean, pairs.corrupted,
                                             ablation=Ablation("resample")).recovered)

    args.out.mkdir(parents=True, exist_ok=True)
    circuit.save(args.out / "circuit.json")
    write_circuit_html(circuit, args.out / "circuit.html")
    summary = {"run": args.run, "task_config": ckpt.spec.task_config, "accuracy": accuracy, "n_edges": len(circuit),
               "total_edges": circuit.total_edges, "recovered": result.recovered, "random_recovered": random_recovered,
               "curve": result.curve,
               "top_edges": [[e.name, s] for e, s in sorted(circuit.edges.items(), key=lambda kv: -abs(kv[1]))[:10]]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"{args.run} ({ckpt.spec.task_config}): exact-match accuracy {accuracy:.3f}")
    print(f"circuit of {len(circuit)} / {circuit.total_edges} edges recovers {result.recovered:.3f} of the "
          f"full-vs-corrupted logprob gap; {args.n_random} random circuits of that size recover "
          f"{', '.join(f'{r:.3f}' for r in random_recovered)}")
    print("recovered by the top-k edges: " + ", ".join(f"k={k}: {r:.3f}" for k, r in result.curve))
    for name, score in summary["top_edges"]:
        print(f"  {score:+.4f}  {name}")
    print(f"wrote {args.out}/circuit.json, circuit.html, summary.json")
    return summary


if __name__ == "__main__":
    main()
