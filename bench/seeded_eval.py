"""Time of the exhaustive colouring evaluation: every cycle on 10 vertices x 100 seeds.

    python bench/seeded_eval.py [--n-inputs 181440] [--n-seeds 100] [--threads 2]

The paper's colouring evaluation: all 181,440 cycles of :meth:`ColoringTask.exhaustive`, each
with 100 per-vertex noise seeds, through the paper's 2-block colouring model (untrained:
the time does not depend on the weights), then the summary (average, worst-5%, majority-5/30,
the output-sampled baseline judged on each graph, predictive variance, histogram).
Target: <= 60 s on 2 cores. With fewer inputs the full-size time is extrapolated from the
measured rows/s (it overstates: a slice has more distinct receptive fields per cycle). The
inputs are slices of ``exhaustive()`` (one broadcast input tensor), as a user's evaluation gets
them, so ``success_matrix`` evaluates by receptive fields (``interp_rand/model/receptive_field.py``);
until 2026-12-02 the script copied them and timed the per-row path instead.

Since 2026-12-06 (issue 38, "a fast first hour") the run keeps no probabilities: the sampled
baseline is drawn from the generator while the model runs (``success_matrix(..., sample=g)``)
and the predictive variance computed there, both from the receptive fields' tables; outputs are
uint8; the majority groups' keys come from numpy's copy of the generator's stream and each group
is counted through a mask (``amplification.majority_rates``). Every number is the former flow's
(``keep_probs=True``, then ``summarize(..., correct_fn=output_judge(...))``): the summary JSON
of ``zoo:coloring-Aq_R`` on all 181,440 cycles x 100 seeds was compared whole. Printed: wall and
CPU seconds of each part (on a shared machine the wall time measures the other jobs too; the CPU
time, over the threads, is what idle cores would take) and the process's peak memory.

It first times ``success_matrix`` on a slice with chunks run one after another (each op
split over the threads) and side by side in threads (``workers``), alternating, and reports
the ratio; the full run uses the faster.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from interp_rand.model import HookedTransformer
from interp_rand.seeded_evaluation import success_matrix, summarize
from interp_rand.tasks import make_task

FULL_INPUTS, TARGET_S = 181_440, 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-inputs", type=int, default=FULL_INPUTS)
    parser.add_argument("--n-seeds", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=4096,
                        help="rows per forward pass (on CPU, 4096 beat 65536 by ~3x: cache-sized tensors)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compare-inputs", type=int, default=4000,
                        help="inputs of the slice timed both ways (0 skips the comparison)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    generator = torch.Generator().manual_seed(0)
    task = make_task("coloring")
    model = HookedTransformer(task.model_config(), seed=0)
    batch = task.exhaustive()[: args.n_inputs]  # a slice keeps the broadcast inputs (receptive fields)
    seeds = task.sample_seeds(args.n_seeds, generator)

    workers = args.threads
    if args.compare_inputs and args.threads > 1:
        part = batch[: args.compare_inputs]
        times = {1: [], args.threads: []}
        for _ in range(2):
            for w in times:
                began = time.perf_counter()
                success_matrix(model, task, part, seeds, chunk_size=args.chunk_size, workers=w)
                times[w].append(time.perf_counter() - began)
        one, many = min(times[1]), min(times[args.threads])
        print(f"slice of {len(part)} inputs: chunks in sequence ({args.threads} threads per op) {one:.2f} s, "
              f"{args.threads} chunks side by side {many:.2f} s: ratio {one / many:.2f}x")
        workers = args.threads if many <= one else 1

    began, cpu_began = time.perf_counter(), time.process_time()
    # the sampled baseline drawn from the generator while the model runs, then the majority groups
    run = success_matrix(model, task, batch, seeds, chunk_size=args.chunk_size, workers=workers, sample=generator)
    forward_s, forward_cpu = time.perf_counter() - began, time.process_time() - cpu_began
    summary = summarize(run, majority_ks=[k for k in (5, 30) if k <= args.n_seeds], generator=generator)
    total_s, total_cpu = time.perf_counter() - began, time.process_time() - cpu_began

    rows = args.n_inputs * args.n_seeds
    rate = rows / total_s
    full_s = FULL_INPUTS * args.n_seeds / rate
    print(f"{args.n_inputs} cycles x {args.n_seeds} seeds = {rows:,} rows on {args.threads} thread(s), "
          f"workers={workers}")
    print(f"success_matrix {forward_s:.2f} s ({forward_cpu:.1f} CPU-s), summarize {total_s - forward_s:.2f} s "
          f"({total_cpu - forward_cpu:.1f} CPU-s), total {total_s:.2f} s ({total_cpu:.1f} CPU-s)")
    print(f"{rate:,.0f} rows/s; full size ({FULL_INPUTS:,} x {args.n_seeds}) "
          f"{'measured' if args.n_inputs == FULL_INPUTS else 'projected'} {full_s:.1f} s; "
          f"target <= {TARGET_S:.0f} s {'met' if full_s <= TARGET_S else 'NOT met'}")
    print(f"(untrained model: average success {summary['average']:.3f}); "
          f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")


if __name__ == "__main__":
    main()
