"""Training throughput of our trainer's step against a plain PyTorch model of identical shape
(``F.scaled_dot_product_attention``, ``nn.Linear``, no hook points), measured side by side in
one run, for the paper's recall and colouring models at the paper's batch and for the sort model.

    python bench/throughput.py [--models recall coloring sort] [--rounds 10] [--steps 2]
    python bench/throughput.py --models recall --profile      # op-by-op, ours against plain

The models (``interp_rand/zoo/entries.py``): ``recall`` is ``zoo:recall-Aq_R`` (N = 12 pairs,
the paper's 4,565-parameter linear-attention model, q-norm q = 100 over m = 30 seeds) at the
paper's batch 512 (``reproduce``'s ``paper`` scale; the zoo's CPU recipe uses 128);
``coloring`` is ``zoo:coloring-Aq_R`` (10-cycles, 2 softmax blocks under the cycle-adjacency
mask, q = 10 over m = 10 seeds) at the paper's batch 256 (the CPU recipe: 64); ``sort`` is the
ERM sort model of width 128 at batch 256 (the benchmark of issue 2). ``--batch-size`` overrides
every model's batch.

Ways, each on the same batches, the same seeds and the same starting weights (the losses are
checked equal to 1e-5 before timing):

- ``ours: trainer step``: ``interp_rand.training.trainer.training_step``, what ``train`` runs
  each step (the run's objective, backward, gradient clipping, the trainer's AdamW);
- ``ours: expanded rows`` (seeded models only): the same step with the model behind a wrapper
  that hides ``forward_over_seeds``, so the objective runs ``forward`` on the ``B*m`` rows that
  repeat each input once per seed, exactly the rows the plain model gets: the like-for-like
  measure of what the hooked model costs;
- ``plain PyTorch + SDPA``: the same architecture written plainly, the same loss written
  plainly, backward, ``clip_grad_norm_`` and ``torch.optim.AdamW`` with the run's settings.

Data sampling is not timed in any way (every way reads the same pre-drawn batches); its cost
per step is printed on its own line. Timings alternate between the ways in short rounds so that
machine noise hits each; the ratios of the wall-time medians and minima and of the CPU-time
medians (process time of the one torch thread: on a loaded machine it leaves out the waits for
a core, so it is the steadier figure) are printed with the load average and this command.
Target (issue 16): ours / plain >= 0.95.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from interp_rand.losses import answer_loss, get_loss_kind
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.tasks import make_task
from interp_rand.training.config import TrainConfig
from interp_rand.training.objectives import make_objective
from interp_rand.training.trainer import make_optimizer, training_step
from interp_rand.zoo.entries import ENTRIES

PAPER_BATCH = {"recall": 512, "coloring": 256, "sort": 256}


# ---------------------------------------------------------------------- plain models
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


class PlainRecall(nn.Module):
    """The paper's recall model: [token, seed] -> 40 -> GELU -> 40, 2 blocks of one causal
    linear-attention head (no scale, no bias, no MLP, no LayerNorm), a linear readout; the
    hooked ``model``'s weights copied in, so both compute one function."""

    def __init__(self, model: HookedTransformer):
        super().__init__()
        cfg = model.cfg
        self.first = nn.Linear(cfg.d_input + cfg.d_seed, cfg.d_model)
        self.second = nn.Linear(cfg.d_model, cfg.d_model)
        self.qkv = nn.ModuleList([nn.Linear(cfg.d_model, 3 * cfg.d_head, bias=False) for _ in range(cfg.n_layers)])
        self.out = nn.ModuleList([nn.Linear(cfg.d_head, cfg.d_model, bias=False) for _ in range(cfg.n_layers)])
        self.readout = nn.Linear(cfg.d_model, cfg.d_vocab_out)
        with torch.no_grad():
            self.first.weight.copy_(torch.cat([model.embed.W_E, model.seed_embed.W_seed]).T)
            self.first.bias.copy_(model.input_mlp.b_in)
            self.second.weight.copy_(model.input_mlp.W_out.T)
            self.second.bias.copy_(model.input_mlp.b_out)
            for layer, block in enumerate(model.blocks):
                attn = block.attn
                self.qkv[layer].weight.copy_(torch.cat([attn.W_Q[0], attn.W_K[0], attn.W_V[0]], dim=1).T)
                self.out[layer].weight.copy_(attn.W_O[0].T)
            self.readout.weight.copy_(model.unembed.W_U.T)
            self.readout.bias.copy_(model.unembed.b_U)

    def forward(self, inputs, seeds, attention_mask=None):
        n_pos = inputs.shape[1]
        x = torch.cat([inputs, seeds[:, None].expand(-1, n_pos, -1)], dim=-1)
        x = self.second(F.gelu(self.first(x)))
        causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
        for qkv, out in zip(self.qkv, self.out):
            q, k, v = qkv(x).chunk(3, dim=-1)
            pattern = (q @ k.transpose(1, 2)).masked_fill(~causal, 0.0)
            x = x + out(pattern @ v)
        return self.readout(x)


class PlainColoring(nn.Module):
    """The paper's colouring model: one-hot vertex ids -> width 16, plus the per-vertex noise
    projected, plus learned positions; 2 attention-only blocks of one softmax head under the
    per-example adjacency mask (SDPA, scaled, no bias, no LayerNorm); a linear readout. The
    hooked ``model``'s weights copied in."""

    def __init__(self, model: HookedTransformer):
        super().__init__()
        cfg = model.cfg
        self.embed = nn.Linear(cfg.d_input, cfg.d_model, bias=False)
        self.seed = nn.Linear(cfg.d_seed, cfg.d_model, bias=False)
        self.pos = nn.Parameter(model.pos_embed.W_pos.detach().clone())
        self.qkv = nn.ModuleList([nn.Linear(cfg.d_model, 3 * cfg.d_head, bias=False) for _ in range(cfg.n_layers)])
        self.out = nn.ModuleList([nn.Linear(cfg.d_head, cfg.d_model, bias=False) for _ in range(cfg.n_layers)])
        self.readout = nn.Linear(cfg.d_model, cfg.d_vocab_out)
        with torch.no_grad():
            self.embed.weight.copy_(model.embed.W_E.T)
            self.seed.weight.copy_(model.seed_embed.W_seed.T)
            for layer, block in enumerate(model.blocks):
                attn = block.attn
                self.qkv[layer].weight.copy_(torch.cat([attn.W_Q[0], attn.W_K[0], attn.W_V[0]], dim=1).T)
                self.out[layer].weight.copy_(attn.W_O[0].T)
            self.readout.weight.copy_(model.unembed.W_U.T)
            self.readout.bias.copy_(model.unembed.b_U)

    def forward(self, inputs, seeds, attention_mask):
        x = self.embed(inputs) + self.seed(seeds) + self.pos[: inputs.shape[1]]
        mask = attention_mask[:, None]  # [batch, 1 head, query, key]
        for qkv, out in zip(self.qkv, self.out):
            q, k, v = qkv(x)[:, None].chunk(3, dim=-1)  # [batch, 1 head, pos, d_head]
            x = x + out(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0])
        return self.readout(x)


# ---------------------------------------------------------------------- one benchmark setting
@dataclasses.dataclass
class Setting:
    name: str
    task: object
    model: HookedTransformer
    plain: nn.Module
    train: TrainConfig
    batches: list

    @property
    def seeded(self) -> bool:
        return self.train.objective == "qnorm"


def make_setting(name: str, batch_size: int | None, steps: int) -> Setting:
    if name == "sort":
        task = make_task("sort")
        cfg = task.model_config(d_model=128)
        train = TrainConfig(batch_size=batch_size or PAPER_BATCH[name], lr=1e-3, grad_clip=1.0)
        model = HookedTransformer(cfg, seed=0)
        plain = PlainTransformer(cfg)
    else:
        entry = ENTRIES[f"{name}-Aq_R"]
        task = make_task(entry.task_name, **entry.task_config)
        train = dataclasses.replace(entry.train, batch_size=batch_size or PAPER_BATCH[name])
        model = HookedTransformer(task.model_config(**entry.model), seed=0)
        plain = (PlainRecall if name == "recall" else PlainColoring)(model)
    generator = torch.Generator().manual_seed(0)
    batches = [task.sample(train.batch_size, generator) for _ in range(steps)]
    return Setting(name, task, model, plain, train, batches)


class _Expanded(nn.Module):
    """``model`` without ``forward_over_seeds``: the q-norm objective then runs ``forward`` on
    the rows that repeat each input once per seed."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.inner = model

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def plain_loss(s: Setting, model: nn.Module, batch, generator: torch.Generator) -> torch.Tensor:
    """The run's objective written plainly: the mean answer loss (sort), or the q-norm over
    inputs of the loss averaged over m shared seeds, on the B*m expanded rows."""
    if not s.seeded:
        return answer_loss(model(batch.inputs), batch, s.task.loss_kind).mean()
    m, n = s.train.m_seeds, len(batch)
    seeds = s.task.sample_seeds(m, generator)  # the same draw as the objective's
    seeds_rows = seeds.repeat(n, *([1] * (seeds.dim() - 1)))  # row i*m + j: seed j
    mask = None if batch.attention_mask is None else batch.attention_mask.repeat_interleave(m, 0)
    logits = model(batch.inputs.repeat_interleave(m, 0), seeds_rows, mask)
    picked = logits[:, batch.answer_positions]
    if s.task.loss_kind == "bce":
        targets = batch.answer_targets().repeat_interleave(m, 0).to(picked.dtype)
        per_row = F.binary_cross_entropy_with_logits(picked, targets, reduction="none").mean((-1, -2))
    else:  # the task's own loss (colouring: expected monochromatic edges), on the rows
        rows = dataclasses.replace(batch, attention_mask=mask)
        per_row = get_loss_kind(s.task.loss_kind).loss(picked, rows)
    per_input = per_row.view(n, m).mean(1)
    top = per_input.max()
    return top * (per_input / top).pow(s.train.q).mean().pow(1.0 / s.train.q)


def ways(s: Setting) -> dict[str, tuple[nn.Module, Callable[..., torch.Tensor], torch.Generator]]:
    """name -> (module whose parameters train, one step ``(module, optimizer, batch, step)``,
    the generator its seeds come from)."""
    objective = make_objective(s.train)
    generator = torch.Generator()

    def ours(module, optimizer, batch, step):
        return training_step(module, optimizer, objective, s.task, batch, generator, step, s.train.grad_clip)

    def plain(module, optimizer, batch, step):
        loss = plain_loss(s, module, batch, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), s.train.grad_clip or float("inf"))
        optimizer.step()
        return loss

    found = {"ours: trainer step": (s.model, ours, generator)}
    if s.seeded:
        found["ours: expanded rows"] = (_Expanded(s.model), ours, generator)
    found["plain PyTorch + SDPA"] = (s.plain, plain, generator)
    return found


def timed(s: Setting, module, step_fn, generator, batches) -> tuple[float, float]:
    """Wall and CPU seconds per step over ``batches`` (one thread: CPU time leaves out the
    time spent waiting for a core on a loaded machine), from the same weights, optimiser state
    and seed stream each time (the module is restored afterwards)."""
    saved = {k: v.clone() for k, v in module.state_dict().items()}
    optimizer = make_optimizer(module, s.train)
    generator.manual_seed(1)
    began, began_cpu = time.perf_counter(), time.process_time()
    for step, batch in enumerate(batches):
        step_fn(module, optimizer, batch, step)
    seconds = (time.perf_counter() - began) / len(batches)
    cpu = (time.process_time() - began_cpu) / len(batches)
    module.load_state_dict(saved)
    return seconds, cpu


def check_same_loss(s: Setting, found) -> None:
    """The ways compute one loss from one set of weights (sort's plain model has its own
    initialisation: it is the same shape, not the same function)."""
    if not s.seeded:
        return
    losses = {}
    for name, (module, _, generator) in found.items():
        generator.manual_seed(1)
        if name.startswith("ours"):
            objective = make_objective(s.train)
            losses[name] = objective(module, s.task, s.batches[0], generator).item()
        else:
            losses[name] = plain_loss(s, module, s.batches[0], generator).item()
    spread = max(losses.values()) - min(losses.values())
    if spread > 1e-5 * max(1.0, max(abs(v) for v in losses.values())):
        raise SystemExit(f"{s.name}: the ways disagree on the loss: {losses}")


def sample_seconds(s: Setting, repeats: int = 5) -> float:
    generator = torch.Generator().manual_seed(2)
    began = time.perf_counter()
    for _ in range(repeats):
        s.task.sample(s.train.batch_size, generator)
        if s.seeded:
            s.task.sample_seeds(s.train.m_seeds, generator)
    return (time.perf_counter() - began) / repeats


def profile(s: Setting, found, steps: int, rows: int) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for name, (module, step_fn, generator) in found.items():
        timed(s, module, step_fn, generator, s.batches[:1])  # warm-up
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            timed(s, module, step_fn, generator, s.batches[:steps])
        events = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
        total = sum(e.self_cpu_time_total for e in events)
        print(f"\n== {s.name}: {name}: {total / steps / 1e3:.1f} ms/step of self CPU time over {steps} steps; "
              f"the top {rows} ops (with input shapes):")
        print(f"  {'self ms/step':>12} {'share':>6} {'calls/step':>10}  op  shapes")
        for e in events[:rows]:
            shapes = str([sh for sh in e.input_shapes if sh])[:70]
            print(f"  {e.self_cpu_time_total / steps / 1e3:>12.2f} {e.self_cpu_time_total / total:>6.1%} "
                  f"{e.count / steps:>10.1f}  {e.key[:44]}  {shapes}")


def run_setting(s: Setting, rounds: int, profile_steps: int | None, rows: int) -> dict[str, float]:
    found = ways(s)
    check_same_loss(s, found)
    if profile_steps:
        profile(s, found, profile_steps, rows)
        return {}
    for module, step_fn, generator in found.values():
        timed(s, module, step_fn, generator, s.batches[:2])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in found}
    cpu: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(rounds):
        for name, (module, step_fn, generator) in found.items():
            wall, used = timed(s, module, step_fn, generator, s.batches)
            times[name].append(wall)
            cpu[name].append(used)
    median = lambda values: sorted(values)[len(values) // 2]  # noqa: E731
    seeds = f" x m {s.train.m_seeds} seeds ({s.train.objective} q={s.train.q:g})" if s.seeded else f" ({s.train.objective})"
    print(f"\n{s.name}: batch {s.train.batch_size}{seeds}, "
          f"{sum(p.numel() for p in s.model.parameters())} parameters, threads={torch.get_num_threads()}, "
          f"{rounds} rounds x {len(s.batches)} steps")
    print(f"  {'way':<24} {'wall ms/step: median':>21} {'min':>7} {'max':>7} {'CPU ms/step: median':>21} {'min':>7}")
    for name in found:
        print(f"  {name:<24} {median(times[name]) * 1e3:>21.1f} {min(times[name]) * 1e3:>7.1f} "
              f"{max(times[name]) * 1e3:>7.1f} {median(cpu[name]) * 1e3:>21.1f} {min(cpu[name]) * 1e3:>7.1f}")
    print(f"  data sampling (not timed above): {sample_seconds(s) * 1e3:.2f} ms/step")
    ref = "plain PyTorch + SDPA"
    ratios = {}
    for name in found:
        if name.startswith("ours"):
            ratios[name] = median(times[ref]) / median(times[name])
            print(f"  throughput ratio {name} / plain: wall {ratios[name]:.3f} (medians), "
                  f"{min(times[ref]) / min(times[name]):.3f} (minima); CPU time "
                  f"{median(cpu[ref]) / median(cpu[name]):.3f} (medians)   (target >= 0.95)")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(PAPER_BATCH), default=["recall", "coloring", "sort"],
                        help="which models (default: all three)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="inputs per step for every model (default: the paper's, recall 512, coloring 256; sort 256)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--steps", type=int, default=2, help="steps per way per round (default 2)")
    parser.add_argument("--profile", action="store_true",
                        help="instead of timing, print torch.profiler's op table of each way over --steps steps")
    parser.add_argument("--rows", type=int, default=20, help="rows of each --profile table (default 20)")
    args = parser.parse_args()
    if args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1; got {args.batch_size}")
    if args.rounds < 1 or args.steps < 1:
        parser.error(f"--rounds and --steps must be >= 1; got {args.rounds} and {args.steps}")

    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name in args.models:
        s = make_setting(name, args.batch_size, args.steps)
        run_setting(s, args.rounds, args.steps if args.profile else None, args.rows)
    print("\nload average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
