"""Train a small addition model, then ask where it represents each answer digit and each carry:
linear probes on the residual stream at every layer, each against a control task (shuffled
labels), so a probe that merely memorises scores low selectivity.

    python examples/train_and_probe_addition.py --out /tmp/addition-probe   # CPU, well under a minute
"""

import argparse
import json
from pathlib import Path

import torch

from interp_rand.seeded_evaluation import success_matrix, summarize
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train
from probes import ProbeConfig, probe_task


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n-digits", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--n-probe", type=int, default=1024, help="examples the probes are fitted on")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine

    task = make_task("addition", n_digits=args.n_digits)
    run_dir = args.out / "run"
    result = train(task, task.model_config(d_model=64, n_layers=2, n_heads=4),
                   TrainConfig(steps=args.steps, batch_size=128, lr=3e-3, warmup_steps=20,
                               eval_every=args.steps, eval_size=512, seed=0),
                   run_dir, progress=False)
    model = result.model.eval()

    # accuracy on fresh examples (a deterministic task: one "seed", None)
    generator = torch.Generator().manual_seed(1)
    batch = task.sample(args.n_probe, generator)
    accuracy = summarize(success_matrix(model, task, batch, None))["average"]

    # probes for every variable the task registers (answer digits, carries ...)
    summary = {"accuracy": accuracy, "probes": {}}
    for probe in probe_task(model, task, batch, ProbeConfig(seed=0)):
        selectivity = probe.accuracy - probe.control_accuracy  # [hook, position, instance]
        best = int(selectivity.amax(dim=(1, 2)).argmax())
        summary["probes"][probe.variable] = {
            "best_accuracy": float(probe.accuracy.max()),
            "best_selectivity": float(selectivity.max()),
            "most_selective_hook": probe.hooks[best],
            "majority": float(probe.majority.mean()),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "probes.json").write_text(json.dumps(summary, indent=2))
    print(f"exact-match accuracy {accuracy:.3f}")
    for name, p in summary["probes"].items():
        print(f"{name:>16}: best probe accuracy {p['best_accuracy']:.3f}, selectivity "
              f"{p['best_selectivity']:+.3f} at {p['most_selective_hook']} (majority {p['majority']:.3f})")
    print(f"wrote {args.out / 'probes.json'}")
    return summary


if __name__ == "__main__":
    main()
