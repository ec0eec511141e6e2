"""Where does a trained addition model represent each answer digit and each carry? Linear probes
on the residual stream at every layer, each against a control task (shuffled labels) and the
same probes on a randomly initialised model, plus a causal check: steer the activation along
the probe's direction at the digit's output position and see whether the answer follows.

    # zoo:addition: about 6 s on one CPU thread, start-up included
    python examples/train_and_probe_addition.py --out /tmp/addition-probe
    # an addition run of your own
    python examples/train_and_probe_addition.py --out /tmp/addition-probe --run RUN_DIR
    # train a fresh 2-digit model (300 steps) into OUT/run first, then probe it: about 16 s
    python examples/train_and_probe_addition.py --out /tmp/addition-probe --train
"""

import argparse
import json
from pathlib import Path

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from interp_rand.seeded_evaluation import success_matrix, summarize
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train
from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
from probes import ProbeConfig, probe_task


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run", default="zoo:addition",
                        help="a trained addition run directory or zoo:NAME (default: %(default)s)")
    parser.add_argument("--train", action="store_true", help="train a fresh model into OUT/run and probe it instead")
    parser.add_argument("--n-digits", type=int, default=2, help="digits of the model --train trains")
    parser.add_argument("--steps", type=int, default=300, help="training steps of --train")
    parser.add_argument("--n-probe", type=int, default=1024, help="examples the probes are fitted on")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine

    if args.train:
        task, run = make_task("addition", n_digits=args.n_digits), str(args.out / "run")
        model = train(task, task.model_config(d_model=64, n_layers=2, n_heads=4),
                      TrainConfig(steps=args.steps, batch_size=128, lr=3e-3, warmup_steps=20,
                                  eval_every=args.steps, eval_size=512, seed=0),
                      Path(run), progress=False).model.eval()
    else:
        try:
            ckpt = load_checkpoint(args.run, task="addition")
        except CheckpointError as err:
            parser.error(f"--run {args.run}: {err}")
        task, model, run = ckpt.spec.make_task(), ckpt.model(), args.run

    # accuracy on fresh examples (a deterministic task: one "seed", None)
    generator = torch.Generator().manual_seed(1)
    batch = task.sample(args.n_probe, generator)
    accuracy = summarize(success_matrix(model, task, batch, None))["average"]

    # every variable the task registers (answer digits, carries in and out), per answer place:
    # the most selective probe, and the probe accuracy by layer where the answer digit is written
    summary = {"run": run, "n_digits": task.n_digits, "accuracy": accuracy, "probes": {}}
    for probe in probe_task(model, task, batch, ProbeConfig(seed=0)):
        places = summary["probes"][probe.variable] = {}
        for k, row in enumerate(probe.rows()):
            if "causal_position" in row:  # a constant instance (no carry into place 0) has no check
                _, p = probe.at(row["causal_hook"], row["causal_position"])
                row["hooks"] = list(probe.hooks)
                row["accuracy_by_hook"] = probe.accuracy[:, p, k].tolist()
                row["random_accuracy_by_hook"] = probe.random_accuracy[:, p, k].tolist()
            places[row["instance"]] = row

    fig = make_subplots(rows=1, cols=len(summary["probes"]), subplot_titles=list(summary["probes"]))
    for col, places in enumerate(summary["probes"].values(), start=1):
        for place, row in places.items():
            if "hooks" not in row:
                continue
            hooks = [h.replace("blocks.", "").replace("hook_", "") for h in row["hooks"]]
            fig.add_trace(go.Scatter(x=hooks, y=row["accuracy_by_hook"], mode="lines+markers", name=place,
                                     legendgroup=place, showlegend=col == 1), row=1, col=col)
            fig.add_trace(go.Scatter(x=hooks, y=row["random_accuracy_by_hook"], mode="lines", line={"dash": "dot"},
                                     name=f"{place} (random init)", legendgroup=place, showlegend=False),
                          row=1, col=col)
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(title="probe accuracy by layer at each answer digit's output position (dotted: random init)",
                      height=450, width=1200)
    args.out.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(args.out / "probes.html"), include_plotlyjs=True, full_html=True)
    (args.out / "probes.json").write_text(json.dumps(summary, indent=2))

    print(f"{run}: exact-match accuracy {accuracy:.3f} on {args.n_probe} fresh examples")
    for variable, places in summary["probes"].items():
        for place, row in places.items():
            line = (f"{variable:>9} {place}: most selective at {row['hook']} pos {row['position']} "
                    f"(accuracy {row['accuracy']:.3f}, selectivity {row['selectivity']:+.3f}, "
                    f"random init {row['random_selectivity']:+.3f})")
            if "causal_changed" in row:
                line += (f"; steering at pos {row['causal_position']} changes the answer {row['causal_changed']:.0%} "
                         f"(placebo {row['causal_placebo']:.0%})")
            print(line)
    print(f"wrote {args.out}/probes.json, probes.html")
    return summary


if __name__ == "__main__":
    main()
