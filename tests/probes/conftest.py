"""Shared fixtures of the probes tests: hand-built models whose answers are known, and one small
addition model trained once per session."""

from __future__ import annotations

import pytest
import torch

from interp_rand import HookedTransformer, TrainConfig, make_task, train


def _zero_(model: HookedTransformer) -> HookedTransformer:
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
    return model


def build_previous_token_model(task, sharpness: float = 100.0) -> HookedTransformer:
    """Attention-only, no LayerNorm; the residual stream is a one-hot of the position. Head 0 of
    layer 0 attends from position q to q-1 (position 0 to itself); every other head has zero
    weights, so it attends uniformly."""
    cfg = task.model_config(d_model=32, n_heads=2, d_head=16, attn_only=True, normalization_type=None,
                            positional="learned")
    assert cfg.n_ctx <= cfg.d_head
    model = _zero_(HookedTransformer(cfg))
    with torch.no_grad():
        model.pos_embed.W_pos.copy_(torch.eye(cfg.n_ctx, cfg.d_model))
        attn = model.blocks[0].attn
        for i in range(cfg.n_ctx):
            attn.W_Q[0, i, i] = sharpness
            if i + 1 < cfg.d_head:
                attn.W_K[0, i, i + 1] = 1.0  # key k lines up with query k + 1
    return model.eval()


@pytest.fixture
def previous_token_model():
    return build_previous_token_model


@pytest.fixture(scope="session")
def trained_addition(tmp_path_factory):
    """A 3-digit addition model trained for 600 steps (~92% exact match; ~20 s on one core),
    trained once per test run (tests/built_once.py). Returns ``(run_dir, model, task)``."""
    from built_once import built_once

    def build(run_dir):
        task = make_task("addition", n_digits=3)
        cfg = task.model_config(d_model=48, n_heads=4, d_mlp=192)
        config = TrainConfig(steps=600, batch_size=128, lr=3e-3, warmup_steps=50, eval_every=200, eval_size=512,
                             checkpoint_every=10_000, seed=0)
        result = train(task, cfg, config, run_dir, resume=False, progress=False)
        return run_dir, result.model.eval(), task

    return built_once(tmp_path_factory, "addition-run", build)
