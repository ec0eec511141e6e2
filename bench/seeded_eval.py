"""Time of seeded evaluation (``success_matrix`` + ``summarize``) at the colouring task's shape.

    python bench/seeded_eval.py [--n-inputs 181440] [--n-seeds 100] [--threads 2]

Synthetic stand-in for PAPER.md's colouring evaluation (the colouring task module is not
needed): 10 vertices, each token a one-hot id (``d_input = 10``) of a random permutation, a
fixed ring adjacency as the custom attention mask (each token sees its two neighbours), one
uniform noise scalar per vertex as the seed (``d_seed = 1``, per-position seeds), and the
2-layer, 1-head, ``d_model = 16`` :class:`~interp_rand.model.HookedTransformer` with
``mask="custom"`` and 3 output colours, untrained. For timing only, success uses
``loss_kind="ce"`` against random colour targets (the real task judges validity of the whole
colouring; that costs about the same). Default = the paper's full evaluation: all 181,440
cycles x 100 seeds. Target: <= 60 s on 2 cores. With fewer inputs the full-size time is
extrapolated from the measured rows/s.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.seeded_evaluation import success_matrix, summarize
from interp_rand.tasks.base import Batch

N_POS, N_COLOURS = 10, 3
FULL_INPUTS, TARGET_S = 181_440, 60.0


@dataclass(frozen=True)
class TimingTask:
    """What ``success_matrix`` reads of a task: the loss kind and the model it expects."""

    cfg: ModelConfig
    loss_kind: str = "ce"

    def model_config(self) -> ModelConfig:
        return self.cfg


def model_config() -> ModelConfig:
    return ModelConfig(d_model=16, n_layers=2, n_heads=1, d_head=16, n_ctx=N_POS, input_kind="vectors",
                       d_input=N_POS, d_vocab_out=N_COLOURS, mask="custom", d_seed=1)


def ring_mask() -> torch.Tensor:
    eye = torch.eye(N_POS, dtype=torch.bool)
    return eye.roll(1, 1) | eye.roll(-1, 1)  # [pos, pos]: the two neighbours on the cycle


def make_batch(n: int, generator: torch.Generator) -> Batch:
    ids = torch.rand(n, N_POS, generator=generator).argsort(-1)  # a random permutation per input
    inputs = torch.nn.functional.one_hot(ids, N_POS).float()
    return Batch(
        inputs=inputs,
        targets=torch.randint(0, N_COLOURS, (n, N_POS), generator=generator),
        loss_mask=torch.ones(n, N_POS, dtype=torch.bool),
        answer_positions=torch.arange(N_POS),
        attention_mask=ring_mask().expand(n, N_POS, N_POS),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-inputs", type=int, default=FULL_INPUTS)
    parser.add_argument("--n-seeds", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=4096,
                        help="rows per forward pass (on CPU, 4096 beat 65536 by ~3x: cache-sized tensors)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    generator = torch.Generator().manual_seed(0)
    cfg = model_config()
    model = HookedTransformer(cfg, seed=0)
    batch = make_batch(args.n_inputs, generator)
    seeds = torch.rand(args.n_seeds, N_POS, 1, generator=generator)

    began = time.perf_counter()
    run = success_matrix(model, TimingTask(cfg), batch, seeds, chunk_size=args.chunk_size)
    forward_s = time.perf_counter() - began
    summary = summarize(run, majority_ks=[k for k in (5, 30) if k <= args.n_seeds], generator=generator)
    total_s = time.perf_counter() - began

    rows = args.n_inputs * args.n_seeds
    rate = rows / total_s
    full_s = FULL_INPUTS * args.n_seeds / rate
    print(f"{args.n_inputs} inputs x {args.n_seeds} seeds = {rows:,} rows on {args.threads} thread(s)")
    print(f"success_matrix {forward_s:.2f} s, summarize {total_s - forward_s:.2f} s, total {total_s:.2f} s")
    print(f"{rate:,.0f} rows/s; full size ({FULL_INPUTS:,} x {args.n_seeds}) "
          f"{'measured' if args.n_inputs == FULL_INPUTS else 'projected'} {full_s:.1f} s; "
          f"target <= {TARGET_S:.0f} s {'met' if full_s <= TARGET_S else 'NOT met'}")
    print(f"(untrained model: average success {summary['average']:.3f})")


if __name__ == "__main__":
    main()
