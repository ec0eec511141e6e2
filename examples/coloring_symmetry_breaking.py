"""Symmetry breaking in cycle colouring: every vertex sees only its two neighbours, so a
deterministic model cannot colour a cycle properly everywhere; a randomized one can use its
noise to break the tie. For trained ERM and q-norm models ask (1) how often each colours
properly, (2) how much a vertex's colour tells about its noise rank among its neighbours
(mutual information, against a shuffled control), (3) whether redrawing the noise of the
vertex itself, or of a vertex at ring distance d, changes its colour, and (4) how much the
whole model's output depends on the noise (seed-resample patching).

    # zoo:coloring-AE_R vs zoo:coloring-Aq_R: about 5 s on one CPU thread, start-up included
    python examples/coloring_symmetry_breaking.py --out /tmp/coloring
    # any colouring runs (run directories or zoo:NAMEs), e.g. all five variants
    python examples/coloring_symmetry_breaking.py --out /tmp/coloring --runs RUN_A RUN_B ...
"""

import argparse
import json
from pathlib import Path

import torch

from circuits import randomness_usage
from circuits.draw.randomness_figure import resample_distance_figure, usage_figure
from interp_rand.figures.html_page import write_page
from interp_rand.reproduce import evaluate_seeded
from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
from probes import colour_noise_information, noise_resample_effect


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", nargs="+", default=["zoo:coloring-AE_R", "zoo:coloring-Aq_R"], metavar="RUN",
                        help="trained colouring run directories or zoo:NAMEs (default: %(default)s)")
    parser.add_argument("--n", type=int, default=512, help="cycles for the metrics and the information")
    parser.add_argument("--n-seeds", type=int, default=32, help="noise draws per cycle in the metrics")
    parser.add_argument("--n-resample", type=int, default=128, help="cycles for the noise-resample effect")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    summary, figure_runs = {}, []
    for run in args.runs:
        try:
            ckpt = load_checkpoint(run, task="coloring")
        except CheckpointError as err:
            parser.error(f"--runs {run}: {err}")
        task, model, config = ckpt.spec.make_task(), ckpt.model(), ckpt.spec.train_config
        generator = torch.Generator().manual_seed(1)  # every run sees the same cycles and noise
        batch = task.sample(args.n, generator)
        metrics = evaluate_seeded(task, model, batch, args.n_seeds, generator, fixed=config.seed_source == "fixed")
        info = colour_noise_information(model, task, batch, generator)
        effect = noise_resample_effect(model, task, batch[: args.n_resample], generator)
        usage = randomness_usage(model, batch, task.loss_kind, seed=0)
        summary[run] = {
            "objective": config.objective, "q": config.q, "m_seeds": config.m_seeds, "seed_source": config.seed_source,
            "n_vertices": task.n_vertices, "proper_colouring_average": metrics["average"],
            "worst_5pct": metrics["worst_5pct"],
            "mi_colour_rank_bits": info.mi, "mi_shuffled_bits": info.mi_shuffled,
            "colour_entropy_bits": info.colour_entropy,
            "change_rate_by_distance": dict(zip(effect.distance, effect.change_rate)),
            "receptive_field": effect.receptive_field,
            "seed_usage_reference": usage.reference, "seed_usage_flip": usage.reference_flip,
        }
        figure_runs.append({"name": run, "usage": usage.to_dict(), "symmetry": {"resample": effect.to_dict()}})

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "symmetry_breaking.json").write_text(json.dumps(summary, indent=2))
    figures = [resample_distance_figure(figure_runs), usage_figure(figure_runs)]
    write_page(args.out / "symmetry_breaking.html", "colouring: symmetry breaking by noise", figures)
    for run, s in summary.items():
        change = ", ".join(f"d={d}: {r:.3f}" for d, r in s["change_rate_by_distance"].items())
        print(f"{run}: proper colouring {s['proper_colouring_average']:.3f} (worst-5% {s['worst_5pct']:.3f}); "
              f"I(colour; noise rank) {s['mi_colour_rank_bits']:.3f} bits (shuffled {s['mi_shuffled_bits']:.3f}); "
              f"seed usage (TV) {s['seed_usage_reference']:.3f}; colour changes when the noise at distance d "
              f"is redrawn: {change}")
    print(f"wrote {args.out}/symmetry_breaking.json, symmetry_breaking.html")
    return summary


if __name__ == "__main__":
    main()
