"""A hypothesis of your own, on a model this toolkit did not ship: a running-maximum model
built with TransformerLens's own ``TransformerBridge`` and trained here in plain PyTorch, then
a 20-line :class:`~circuits.mechanisms.Mechanism` stating how it computes the maximum, checked
by interchange, causal scrubbing and a prediction (its card, with a verdict per check).

    python examples/custom_mechanism.py --out runs/custom-mechanism
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from transformer_lens import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.sources import native  # noqa: F401  (attaches boot_native)

from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable, check_mechanism
from interp_rand.tasks.base import Batch

L, V = 6, 10  # lists of 6 digits; the answer at position p is max(x_0..x_p)


def batch_of(x: torch.Tensor) -> Batch:
    """The running-max task as a plain Batch: every position is an answer position."""
    targets = x.cummax(1).values
    return Batch(inputs=x, targets=targets, loss_mask=torch.ones_like(x, dtype=torch.bool),
                 answer_positions=torch.arange(L))


def sample(task, n: int, g: torch.Generator) -> Batch:
    return batch_of(torch.randint(0, V, (n, L), generator=g))


def train_bridge(steps: int, seed: int = 0) -> TransformerBridge:
    """One attention-only layer, 2 heads, trained on running max (a few seconds on a CPU)."""
    torch.manual_seed(seed)
    cfg = TransformerBridgeConfig(d_model=32, d_head=16, n_heads=2, n_layers=1, n_ctx=L, d_vocab=V, d_vocab_out=V,
                                  attn_only=True, normalization_type="LN", positional_embedding_type="standard",
                                  act_fn="gelu", d_mlp=None, seed=seed)
    model = TransformerBridge.boot_native(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        b = sample(None, 256, g)
        loss = F.cross_entropy(model(b.inputs).reshape(-1, V), b.targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def max_head(model, g: torch.Generator) -> int:
    """The head that puts the most attention on the position of the running maximum."""
    b = sample(None, 512, g)
    _, cache = model.run_with_cache(b.inputs)
    pattern = cache["blocks.0.attn.hook_pattern"]  # [batch, head, query, key]
    where = (b.inputs[:, None, :] == b.targets[:, :, None]) & torch.ones(L, L).tril().bool()
    return int((pattern * where[:, None]).sum(-1).mean((0, 2)).argmax())


# --- the hypothesis: ~20 lines ------------------------------------------------------------
def running_max_mechanism(heads: tuple[int, ...]) -> Mechanism:
    """m_p = max(x_0..x_p), computed at each position p by ``heads`` attending to the largest
    token so far and copying it; the unembedding reads it out."""
    variables = tuple(
        Variable(f"max_{p}", (lambda b, p=p: b.inputs[:, : p + 1].max(1).values),
                 site=Site.of(*(Node("head", 0, h, position=p) for h in heads)),
                 description=f"the largest of x_0..x_{p}") for p in range(1, L))
    names = " + ".join(f"a0.{h}" for h in heads)
    near_tie = Prediction(
        "runner-up one below the max", "the head attends by value; a runner-up one below the max "
        "competes for its attention, yet copying either is nearly the same logit: the model still succeeds",
        where=lambda b, v: (b.inputs.sort(1).values[:, -2] == b.inputs.max(1).values - 1), expect="succeed",
        threshold=0.9)
    return Mechanism(
        "running-max", "running-max", variables, outputs=tuple(range(1, L)), sample=sample,
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
    model = train_bridge(args.steps)
    head = max_head(model, torch.Generator().manual_seed(1))
    summary = {}
    for name, heads in (("one head", (head,)), ("both heads", (0, 1))):
        card = check_mechanism(model, None, running_max_mechanism(heads), n=args.n, n_pairs=200, n_random=5)
        print(f"\n# hypothesis: {name}\n" + "\n".join(card.lines()))
        summary[name] = card.to_dict()
    args.out.mkdir(parents=True, exist_ok=True)
    summary["head"] = head
    (args.out / "mechanism.json").write_text(json.dumps(summary, indent=1, default=str))
    return json.loads(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
