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
