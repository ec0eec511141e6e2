"""Hand-built seeded models whose randomness use is known, shared by the circuits and probes
tests of the randomness channel (tests/ is on sys.path through tests/conftest.py)."""

from __future__ import annotations

import torch

from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask


def recall_model(zero_seed: bool, seed: int = 0) -> tuple[RecallTask, HookedTransformer]:
    task = RecallTask(n_pairs=4, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=16, d_input_mlp=12), seed=seed).eval()
    if zero_seed:
        with torch.no_grad():
            model.seed_embed.W_seed.zero_()
    return task, model


def seed_path_model(zero_seed: bool = False) -> tuple[ColoringTask, HookedTransformer]:
    """One block, two heads, no LayerNorm, no MLP, under the cycle mask (uniform attention
    over the two neighbours since W_Q = W_K = 0). Residual dims: 0 = own noise (W_seed),
    2 = a vertex-id feature (W_E). Head 0 copies neighbours' dim 0 into dim 1; head 1 copies
    neighbours' dim 2 into dim 3. Logits: colour 0 = 10 * own noise, colour 1 = 10 * mean
    neighbour noise, colour 2 = 5 + dim 3. So the seed path is seed -> (logits, a0.0), and
    a0.1 and the embedding carry no seed information at all."""
    task = ColoringTask(n_vertices=6)
    cfg = task.model_config(d_model=4, d_head=1, n_heads=2, n_layers=1, attn_only=True,
                            normalization_type=None, positional="none")
    model = HookedTransformer(cfg, seed=0).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        if not zero_seed:
            model.seed_embed.W_seed[0, 0] = 1.0
        model.embed.W_E[:, 2] = torch.linspace(-1, 1, task.n_vertices)
        attn = model.blocks[0].attn
        attn.W_V[0, 0, 0] = 1.0
        attn.W_O[0, 0, 1] = 1.0
        attn.W_V[1, 2, 0] = 1.0
        attn.W_O[1, 0, 3] = 1.0
        model.unembed.W_U[0, 0] = 10.0
        model.unembed.W_U[1, 1] = 10.0
        model.unembed.W_U[3, 2] = 1.0
        model.unembed.b_U[2] = 5.0
    return task, model
