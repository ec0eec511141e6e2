"""A hypothesis of your own, on a model this toolkit did not ship: the running-maximum
``TransformerBridge`` of ``examples/bring_your_own_model.py`` (trained in plain PyTorch), then
a 20-line :class:`~circuits.mechanisms.Mechanism` stating how it computes the maximum, checked
by interchange, causal scrubbing and a prediction (its card, with a verdict per check).

    python examples/custom_mechanism.py --out runs/custom-mechanism
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable, check_mechanism

sys.path.insert(0, str(Path(__file__).parent))  # the running-max task and bridge of the example beside this one
from bring_your_own_model import L, TASK, train_bridge  # noqa: E402


def max_head(model, g: torch.Generator) -> int:
    """The head that puts the most attention on the position of the running maximum."""
    b = TASK.sample(512, g)
    _, cache = model.run_with_cache(b.inputs)
    pattern = cache["blocks.0.attn.hook_pattern"]  # [batch, head, query, key]
    where = (b.inputs[:, None, :] == b.targets[:, :, None]) & torch.ones(L, L).tril().bool()
    return int((pattern * where[:, None]).sum(-1).mean((0, 2)).argmax())


# --- the hypothesis: ~20 lines ------------------------------------------------------------
def running_max_mechanism(heads: tuple[int, ...]) -> Mechanism:
    """m_p = max(x_0..x_p), computed at each position p by ``heads`` attending to the largest
    token so far and copying it; the unembedding reads it out."""
    variables = Variable.each(  # one variable per position p, written once
        "max", range(1, L), lambda b, p: b.inputs[:, : p + 1].max(1).values,
        site=lambda p: Site.of(*(Node("head", 0, h, position=p) for h in heads)),
        description=lambda p: f"the largest of x_0..x_{p}")
    names = " + ".join(f"a0.{h}" for h in heads)
    near_tie = Prediction(
        "runner-up one below the max", "the head attends by value; a runner-up one below the max "
        "competes for its attention, yet copying either is nearly the same logit: the model still succeeds",
        where=lambda b, v: (b.inputs.sort(1).values[:, -2] == b.inputs.max(1).values - 1), expect="succeed",
        threshold=0.9)
    return Mechanism(
        "running-max", "running-max", variables, outputs=tuple(range(1, L)),
        answer=lambda b, **m: torch.stack([m[f"max_{p}"] for p in range(1, L)], 1),
        answer_parents=tuple(v.name for v in variables), predictions=(near_tie,),
        pseudocode=f"for p in 1..{L - 1}:\n    m_p = x at argmax(x_0..x_p)   # {names} @ p: attend to the largest token, copies it\n"
                   "    answer_p = m_p                # unembedding")
# ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/custom-mechanism"))
    parser.add_argument("--steps", type=int, default=400, help="training steps (default: 400)")
    parser.add_argument("--n", type=int, default=1000, help="examples the card uses (default: 1000)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    # one attention-only layer of 2 heads: small enough for the whole algorithm to be read off it
    model = train_bridge(args.steps, n_layers=1, n_heads=2, d_model=32, attn_only=True, d_mlp=None)
    head = max_head(model, torch.Generator().manual_seed(1))
    summary = {}
    for name, heads in (("one head", (head,)), ("both heads", (0, 1))):
        card = check_mechanism(model, TASK, running_max_mechanism(heads), n=args.n, n_pairs=200, n_random=5)
        print(f"\n# hypothesis: {name}\n" + "\n".join(card.lines()))
        summary[name] = card.to_dict()
    args.out.mkdir(parents=True, exist_ok=True)
    summary["head"] = head
    (args.out / "mechanism.json").write_text(json.dumps(summary, indent=1, default=str))
    return json.loads(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
