"""One q-norm training step of the paper's recall model (batch B x m shared seeds), three ways,
measured side by side in one run:

- ``hooked, expanded``: our HookedTransformer on the ``B*m``-row batch that repeats each input
  once per seed (the toolkit's path before ``forward_over_seeds``);
- ``hooked, forward_over_seeds``: the same model and the same function, computed in the cheaper
  order the trainer now uses (the embedding once per input, the input MLP once per distinct
  token and seed);
- ``plain PyTorch``: the same architecture written plainly (nn.Linear, no hook points) on the
  expanded batch: the reference for what the hook machinery costs.

    python bench/recall_training.py [--n-pairs 12] [--batch-size 128] [--m-seeds 30] [--rounds 5]

All three compute the same loss from the same weights (checked to 1e-5 before timing); rounds
alternate between them so that machine noise hits each. Prints the median s/step and the ratios.
Forward and backward only (no optimiser step): ``bench/throughput.py`` times the trainer's
whole step against the plain model.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

import torch

from interp_rand.losses import answer_loss
from interp_rand.model import HookedTransformer
from interp_rand.seeded_evaluation import expand_over_seeds
from interp_rand.tasks import make_task
from interp_rand.training.qnorm import q_norm

from throughput import PlainRecall  # the one plain recall model (bench/throughput.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-pairs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--m-seeds", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="steps per way per round")
    args = parser.parse_args()
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))

    task = make_task("recall", n_pairs=args.n_pairs)
    model = HookedTransformer(task.model_config(), seed=0)
    plain = PlainRecall(model)
    generator = torch.Generator().manual_seed(0)
    work = [(task.sample(args.batch_size, generator), task.sample_seeds(args.m_seeds, generator))
            for _ in range(args.steps)]

    def loss_of(logits, rows):
        return q_norm(answer_loss(logits, rows, "bce").view(args.batch_size, args.m_seeds).mean(1), 100.0)

    def expanded(batch, seeds):
        rows = expand_over_seeds(batch, seeds)
        return loss_of(model(rows.inputs, seeds=rows.seeds), rows)

    def over_seeds(batch, seeds):
        rows = expand_over_seeds(batch, seeds)
        return loss_of(model.forward_over_seeds(batch.inputs, seeds).flatten(0, 1), rows)

    def plain_loss(batch, seeds):
        rows = expand_over_seeds(batch, seeds)
        return loss_of(plain(rows.inputs, rows.seeds), rows)

    ways = {"hooked, expanded": (expanded, model), "hooked, forward_over_seeds": (over_seeds, model),
            "plain PyTorch, expanded": (plain_loss, plain)}
    losses = [fn(*work[0]).item() for fn, _ in ways.values()]
    assert max(losses) - min(losses) < 1e-5, f"the three ways disagree: {losses}"

    def seconds_per_step(fn, module) -> float:
        began = time.perf_counter()
        for batch, seeds in work:
            module.zero_grad(set_to_none=True)
            fn(batch, seeds).backward()
        return (time.perf_counter() - began) / len(work)

    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, (fn, module) in ways.items():
            times[name].append(seconds_per_step(fn, module))
    print(f"recall N={args.n_pairs}: batch {args.batch_size} x m {args.m_seeds} seeds, "
          f"{sum(p.numel() for p in model.parameters())} parameters, threads={torch.get_num_threads()}")
    medians = {name: sorted(v)[len(v) // 2] for name, v in times.items()}
    for name, value in medians.items():
        print(f"{name:<28} {value * 1000:8.1f} ms/step (min {min(times[name]) * 1000:.1f})")
    base, fast, ref = medians.values()
    print(f"speed-up of forward_over_seeds over the expanded path: {base / fast:.2f}x; "
          f"forward_over_seeds / plain PyTorch time: {fast / ref:.2f} (below 1 = faster than plain)")


if __name__ == "__main__":
    main()
