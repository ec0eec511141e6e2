"""Tiny models for the circuits tests: random ones and a hand-set micro model with a known
two-step circuit. Fixtures are in conftest.py."""

from __future__ import annotations

import torch

from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Batch

V, N = 4, 5  # micro model: vocabulary and sequence length


def make_model(**overrides) -> HookedTransformer:
    cfg = {"d_model": 16, "n_layers": 2, "n_heads": 2, "n_ctx": 6, "d_vocab": 5}
    cfg.update(overrides)
    return HookedTransformer(ModelConfig(**cfg), seed=overrides.pop("seed", 1)).eval()


def token_pairs(n: int = 8, n_pos: int = 6, vocab: int = 5, changed: int = 2, seed: int = 0) -> tuple[Batch, Batch]:
    """Clean/corrupted batches differing in one position; the answer is the last position."""
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, vocab, (n, n_pos), generator=g)
    corrupted = inputs.clone()
    corrupted[:, changed] = (corrupted[:, changed] + 1) % vocab
    targets = torch.full((n, n_pos), -1, dtype=torch.long)
    targets[:, -1] = torch.randint(0, vocab, (n,), generator=g)
    loss_mask = targets >= 0
    answer = torch.tensor([n_pos - 1])
    # the corrupted run has another answer: metrics must read the clean batch's targets
    corrupted_targets = torch.where(loss_mask, (targets + 1) % vocab, targets)
    return (Batch(inputs, targets, loss_mask, answer), Batch(corrupted, corrupted_targets, loss_mask, answer))


def micro_model() -> HookedTransformer:
    """Hand-set weights: head a0.0 is a previous-token head (queries and keys from positions,
    value = token, written to a 'previous token' subspace); head a1.0 attends to its own position
    and copies that subspace to an 'output' subspace that the unembedding reads. So the logits at
    the last position are the one-hot token at position N-2: a two-step circuit
    ``embed@N-2 -> a0.0<v>``, ``a0.0@N-1 -> a1.0<v>``, ``a1.0@N-1 -> logits``. Heads a0.1 and
    a1.1 are zero."""
    tok, pos, prev, out = 0, V, V + N, 2 * V + N
    d_model, d_head, c = 3 * V + N, max(V, N), 12.0
    cfg = ModelConfig(d_model=d_model, n_layers=2, n_heads=2, d_head=d_head, n_ctx=N, d_vocab=V,
                      attn_only=True, normalization_type=None)
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[:, tok:tok + V] = torch.eye(V)
        model.pos_embed.W_pos[:, pos:pos + N] = torch.eye(N)
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for p in range(N):
            a0.W_Q[0, pos + p, p] = c
            if p + 1 < N:
                a0.W_K[0, pos + p, p + 1] = c  # key of p' matches the query of p' + 1
            a1.W_Q[0, pos + p, p] = c
            a1.W_K[0, pos + p, p] = c  # attend to yourself
        for t in range(V):
            a0.W_V[0, tok + t, t] = 1.0
            a0.W_O[0, t, prev + t] = 1.0
            a1.W_V[0, prev + t, t] = 1.0
            a1.W_O[0, t, out + t] = 1.0
            model.unembed.W_U[out + t, t] = 1.0
    return model.eval()


def micro_pairs(n: int = 16, seed: int = 0) -> tuple[Batch, Batch]:
    """The answer (last position) is the token at N-2; the corrupted run changes that token."""
    clean, corrupted = token_pairs(n, N, V, changed=N - 2, seed=seed)
    targets = clean.targets.clone()
    targets[:, -1] = clean.inputs[:, N - 2]
    return (Batch(clean.inputs, targets, clean.loss_mask, clean.answer_positions),
            Batch(corrupted.inputs, targets, clean.loss_mask, clean.answer_positions))


def recall_path_model():
    """A hand-set recall-style model (vector inputs, seed appended before the input MLP, one
    block of two linear-attention heads, no LayerNorm, no positions) with known paths.

    Residual dims: 0-4 the token features, 5-6 the two seed bits (through the input MLP, which
    is the identity up to GELU's tail: ``W_in = 10 I``, ``W_out = 0.1 I`` on non-negative
    inputs), 7 head a0.0's output, 8 head a0.1's. Both heads attend with weight 1 to every
    earlier position (``b_Q = b_K = 1``); a0.0 sums seed bit 0, a0.1 seed bit 1. Logits: bit 0 =
    ``4 * dim 0 - 2`` (the query's key feature), bit 1 = ``dim 7 - 2``. So the paths are
    ``embed -> input_mlp -> logits`` and ``seed -> input_mlp -> a0.0<v> -> logits``; a0.1
    carries the seed but nowhere the logits read."""
    from interp_rand.tasks.recall import RecallTask

    task = RecallTask(n_pairs=3, value_bits=2, seed_bits=2)
    cfg = task.model_config(d_model=9, n_layers=1, n_heads=2, d_head=1, d_input_mlp=9, input_mlp_w_in=True,
                            positional="none", attn_bias=True, use_attn_scale=True)
    model = HookedTransformer(cfg, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[:, :5] = torch.eye(5)
        model.seed_embed.W_seed[:, 5:7] = torch.eye(2)
        model.input_mlp.W_in.copy_(10 * torch.eye(9))
        model.input_mlp.W_out.copy_(0.1 * torch.eye(9))
        attn = model.blocks[0].attn
        attn.b_Q.fill_(1.0)
        attn.b_K.fill_(1.0)
        attn.W_V[0, 5, 0] = attn.W_V[1, 6, 0] = 1.0
        attn.W_O[0, 0, 7] = attn.W_O[1, 0, 8] = 1.0
        model.unembed.W_U[0, 0] = 4.0
        model.unembed.W_U[7, 1] = 1.0
        model.unembed.b_U.copy_(torch.tensor([-2.0, -2.0]))
    return task, model.eval()
