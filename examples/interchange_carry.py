"""Is the carry a swappable variable of the addition model? Interchange interventions on
``carry_in`` (:func:`probes.interchange.interchange_accuracy`): swap the carry's subspace (the
ridge probe's direction, or a rotation learned by distributed alignment search) at the
position that writes each answer digit between two problems whose carry into that place
differs, and count how often the model then writes the digit the carry of the other problem
implies. Controls: a random direction, the same search on a randomly initialised model, and a
control variable (random labels per digit pair) the model does not use.

    # zoo:addition at the carry study's layer, every place that can receive a carry: about 2
    # minutes on one CPU thread
    python examples/interchange_carry.py --out /tmp/interchange
    python examples/interchange_carry.py --out /tmp/interchange --hook blocks.1.hook_resid_mid
"""

import argparse
import json
from pathlib import Path

import torch

from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
from probes.interchange import DASConfig, interchange_accuracy

# Where the carry study (`interp-rand case-study carry zoo:addition`, its default sizes) says the
# carry is on zoo:addition: its probe_hook, the residual stream after the layer of the strongest
# carry head (a0.2 at the position writing place 2's digit).
CARRY_STUDY_HOOK = "blocks.0.hook_resid_mid"
FIELDS = ("das", "probe", "probe_pattern", "random_direction", "random_init", "control_variable")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run", default="zoo:addition",
                        help="a trained addition run directory or zoo:NAME (default: %(default)s)")
    parser.add_argument("--hook", default=CARRY_STUDY_HOOK,
                        help="where to intervene (default: the carry study's probe hook on zoo:addition, %(default)s)")
    parser.add_argument("--n-examples", type=int, default=4000, help="problems sampled and split (default: %(default)s)")
    parser.add_argument("--n-pairs", type=int, default=1000, help="pairs per split (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=DASConfig().steps,
                        help="training steps of each rotation (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is fastest on a busy machine

    try:
        ckpt = load_checkpoint(args.run, task="addition")
    except CheckpointError as err:
        parser.error(f"--run {args.run}: {err}")
    task, model = ckpt.spec.make_task(), ckpt.model().eval()
    if args.hook not in model.hook_dict:
        parser.error(f"--hook {args.hook}: the model has no such hook point")

    summary = {"run": args.run, "hook": args.hook, "places": {}}
    for k, place in enumerate(task.answer_places().tolist()):
        if place == 0:
            continue  # nothing carries into the units
        result = interchange_accuracy(model, task, "carry_in", args.hook, k, n_examples=args.n_examples,
                                      n_pairs=args.n_pairs, das=DASConfig(steps=args.steps), seed=args.seed)
        summary["places"][result.instance] = result.to_dict()
        numbers = ", ".join(f"{name} {getattr(result, name):.3f}" for name in FIELDS)
        print(f"carry_in {result.instance} at {args.hook} pos {result.positions[0]}: IIA {numbers} "
              f"({result.n_test} test pairs; base accuracy {result.base_accuracy:.3f}) -> {result.verdict}")
    print(f"verdict rule: {next(iter(summary['places'].values()))['rule']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "interchange.json").write_text(json.dumps(summary, indent=2))
    print(f"wrote {args.out}/interchange.json")
    return summary


if __name__ == "__main__":
    main()
