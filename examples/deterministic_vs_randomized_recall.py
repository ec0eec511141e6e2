"""Deterministic vs randomized associative recall: the same model trained with ERM (the mean
loss: the seed can be ignored) and with the q-norm over m shared seeds (the paper's randomized
objective: worst inputs weigh more, so using the seed pays). Compare their seeded metrics
(average, worst-5%, sampled baseline), how much each node's output depends on the seed
(randomness-usage score, seed-resample patching) and which keys each stores under which seed
(stored-set map: a model that cannot store every pair can let the seed choose, so that no key
is forgotten under every seed).

    # zoo:recall-AE_R vs zoo:recall-Aq_R: about 6 s on one CPU thread, start-up included
    python examples/deterministic_vs_randomized_recall.py --out /tmp/recall
    # any recall runs (run directories or zoo:NAMEs), e.g. all five variants
    python examples/deterministic_vs_randomized_recall.py --out /tmp/recall --runs RUN_A RUN_B ...
"""

import argparse
import json
from pathlib import Path

import torch

from circuits import randomness_usage
from circuits.draw.randomness_figure import coverage_figure, usage_figure
from interp_rand.figures.html_page import write_page
from interp_rand.reproduce import evaluate_seeded
from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
from probes.stored_set import stored_set_map


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", nargs="+", default=["zoo:recall-AE_R", "zoo:recall-Aq_R"], metavar="RUN",
                        help="trained recall run directories or zoo:NAMEs (default: %(default)s)")
    parser.add_argument("--n", type=int, default=256, help="inputs for the metrics and the usage score")
    parser.add_argument("--n-seeds", type=int, default=64, help="seeds per input in the metrics")
    parser.add_argument("--stored-inputs", type=int, default=16, help="inputs of the stored-set map")
    parser.add_argument("--stored-seeds", type=int, default=64, help="seeds of the stored-set map")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    summary, figure_runs = {}, []
    for run in args.runs:
        try:
            ckpt = load_checkpoint(run, task="recall")
        except CheckpointError as err:
            parser.error(f"--runs {run}: {err}")
        task, model, config = ckpt.spec.make_task(), ckpt.model(), ckpt.spec.train_config
        fixed = config.seed_source == "fixed"  # A^E_r0 / A^q_r0: trained and evaluated on one seed r0
        generator = torch.Generator().manual_seed(1)  # every run sees the same inputs and seeds
        batch = task.sample(args.n, generator)
        metrics = evaluate_seeded(task, model, batch, args.n_seeds, generator, fixed=fixed)
        # mean total variation between the output distribution with the seed kept and resampled,
        # per node; `reference` is the whole model's (≈ 0 for a model that ignores the seed)
        usage = randomness_usage(model, batch, task.loss_kind, seed=0)
        seeds = task.fixed_seed()[None] if fixed else task.sample_seeds(args.stored_seeds, generator)
        stored, _ = stored_set_map(model, task, args.stored_inputs, generator, seeds=seeds)
        summary[run] = {
            "objective": config.objective, "q": config.q, "m_seeds": config.m_seeds, "seed_source": config.seed_source,
            "average": metrics["average"], "worst_5pct": metrics["worst_5pct"], "sampled": metrics["sampled"],
            "predictive_variance": metrics["predictive_variance"],
            "seed_usage_reference": usage.reference, "seed_usage_flip": usage.reference_flip,
            "seed_usage_per_node": usage.score,
            "n_pairs": task.n_pairs, "stored_mean_size": stored.mean_size, "coverage": stored.coverage,
            "stored_seed_dependent": stored.seed_dependent,
            # mean over inputs of the least-stored key's share of seeds (0: some key is never recalled)
            "worst_key_coverage": stored.worst_position_coverage,
        }
        figure_runs.append({"name": run, "usage": usage.to_dict(), "stored_set": stored.to_dict()})

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "recall_comparison.json").write_text(json.dumps(summary, indent=2))
    figures = [usage_figure(figure_runs), coverage_figure(figure_runs)]
    write_page(args.out / "recall_comparison.html", "recall: deterministic against randomized", figures)
    for run, s in summary.items():
        print(f"{run}: average {s['average']:.3f}, worst-5% {s['worst_5pct']:.3f}, sampled baseline "
              f"{s['sampled']['average']:.3f}; seed usage (TV) {s['seed_usage_reference']:.4f}, answers changed "
              f"by a new seed {s['seed_usage_flip']:.3f}; stored keys {s['stored_mean_size']:.1f} of "
              f"{s['n_pairs']}, seed-dependent {s['stored_seed_dependent']:.3f}, "
              f"worst key stored under {s['worst_key_coverage']:.0%} of seeds")
    print(f"wrote {args.out}/recall_comparison.json, recall_comparison.html")
    return summary


if __name__ == "__main__":
    main()
