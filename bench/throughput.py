"""Training throughput of our hooked model against a plain PyTorch model of identical shape
that uses ``F.scaled_dot_product_attention``, measured side by side in one run.

    python bench/throughput.py [--task sort] [--batch-size 256] [--rounds 5] [--steps 10]

Both models see the same batches and the same optimiser; timings alternate between them in
rounds so that machine noise hits both. Target (ISSUE 2): ours / plain >= 0.8.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.tasks import make_task
from interp_rand.losses import answer_loss


class PlainBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.eps)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.n_heads * cfg.d_head)
        self.out = nn.Linear(cfg.n_heads * cfg.d_head, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.eps)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, cfg.d_model))

    def forward(self, x):
        b, p, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, p, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, h, p, e]
        x = x + self.out(z.transpose(1, 2).reshape(b, p, -1))
        return x + self.mlp(self.ln2(x))


class PlainTransformer(nn.Module):
    """The same architecture as a softmax/causal/token ``ModelConfig``, written plainly."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.pos = nn.Parameter(torch.randn(cfg.n_ctx, cfg.d_model) * 0.02)
        self.blocks = nn.ModuleList([PlainBlock(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = nn.LayerNorm(cfg.d_model, eps=cfg.eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.d_vocab_out)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.unembed(self.ln_final(x))


def steps_per_second(model, batches, task) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    began = time.perf_counter()
    for batch in batches:
        loss = answer_loss(model(batch.inputs), batch, task.loss_kind).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return len(batches) / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="sort")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per model per round")
    parser.add_argument("--d-model", type=int, default=128)
    args = parser.parse_args()

    task = make_task(args.task)
    cfg = task.model_config(d_model=args.d_model)
    generator = torch.Generator().manual_seed(0)
    batches = [task.sample(args.batch_size, generator) for _ in range(args.steps)]
    models = {"ours (HookedTransformer)": HookedTransformer(cfg), "plain PyTorch + SDPA": PlainTransformer(cfg)}
    n_params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    for model in models.values():
        steps_per_second(model, batches[:2], task)  # warm-up
    rates: dict[str, list[float]] = {k: [] for k in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            rates[name].append(steps_per_second(model, batches, task))
    print(f"task={args.task} d_model={cfg.d_model} n_layers={cfg.n_layers} n_heads={cfg.n_heads} "
          f"batch={args.batch_size} pos={batches[0].inputs.shape[1]} threads={torch.get_num_threads()}")
    print(f"{'model':<26} {'params':>8} {'steps/s (median)':>17} {'min':>7} {'max':>7}")
    medians = {}
    for name, values in rates.items():
        medians[name] = sorted(values)[len(values) // 2]
        print(f"{name:<26} {n_params[name]:>8} {medians[name]:>17.2f} {min(values):>7.2f} {max(values):>7.2f}")
    ours, plain = medians.values()
    print(f"ratio ours / plain = {ours / plain:.3f}   (target >= 0.8)")


if __name__ == "__main__":
    main()
