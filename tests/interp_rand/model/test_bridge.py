"""``to_bridge``: our model as TransformerLens's own ``TransformerBridge`` computes the same
logits and attention patterns (to 1e-5); configs the bridge cannot express are refused with
the offending field named."""

from __future__ import annotations

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.bridge import bridge_config, bridge_incompatibilities, to_bridge

TOL = 1e-5


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Within ``TOL`` of the values' scale (``max(1, max |b|)``): float32 sums in another order
    differ by a few ulps of the largest logit (the unscaled ``no_ln`` model's reach ~60)."""
    return bool((a - b).abs().max() <= TOL * max(1.0, float(b.abs().max())))




def make_cfg(**overrides) -> ModelConfig:
    base = dict(d_model=16, n_heads=2, n_layers=2, n_ctx=8, d_vocab=7)
    base.update(overrides)
    return ModelConfig(**base)


def make_model(cfg: ModelConfig, seed: int = 0, noise_seed: int = 100) -> HookedTransformer:
    """A model with every parameter perturbed by seeded noise, so biases and LayerNorm
    weights are not their trivial init values."""
    model = HookedTransformer(cfg, seed=seed)
    g = torch.Generator().manual_seed(noise_seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model.eval()


def make_tokens(cfg: ModelConfig, batch: int = 3, pos: int | None = None) -> torch.Tensor:
    pos = cfg.n_ctx if pos is None else pos
    return torch.randint(0, cfg.d_vocab, (batch, pos), generator=torch.Generator().manual_seed(1))


BRIDGEABLE = {
    "default": {},
    "attn_only": dict(attn_only=True),
    "no_ln": dict(normalization_type=None),
    "sinusoidal": dict(positional="sinusoidal"),
    "relu": dict(act_fn="relu"),
    "gelu_new": dict(act_fn="gelu_new"),
    "d_vocab_out": dict(d_vocab_out=11),
    "three_layers_four_heads": dict(n_layers=3, n_heads=4),
}


@pytest.mark.parametrize("name", list(BRIDGEABLE))
def test_bridge_logits_match(name):
    cfg = make_cfg(**BRIDGEABLE[name])
    assert bridge_incompatibilities(cfg) == []
    model = make_model(cfg)
    # The perturbation really made biases and LayerNorm non-trivial.
    state = model.state_dict()
    assert state["blocks.0.attn.b_O"].abs().max() > 0.01
    if cfg.normalization_type == "LN":
        assert (state["blocks.0.ln1.w"] - 1).abs().max() > 0.01
    tokens = make_tokens(cfg)
    with torch.no_grad():
        ours = model(tokens)
        bridge = to_bridge(model)
        theirs = bridge(tokens)
    assert theirs.shape == ours.shape == (3, cfg.n_ctx, cfg.d_vocab_out)
    assert close(theirs, ours)
    # Shorter inputs too (positions sliced the same way).
    short = tokens[:, :5]
    with torch.no_grad():
        assert close(bridge(short), model(short))
    # The bridge is a copy: our parameters are untouched by it.
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k


def test_bridge_caches_match_ours():
    cfg = make_cfg(n_heads=4)
    model = make_model(cfg)
    tokens = make_tokens(cfg, batch=2, pos=6)
    bridge = to_bridge(model)
    with torch.no_grad():
        ours_logits, ours = model.run_with_cache(tokens)
        theirs_logits, theirs = bridge.run_with_cache(tokens)
    assert close(theirs_logits, ours_logits)
    for name in (
        "blocks.0.attn.hook_pattern",
        "blocks.1.attn.hook_pattern",
        "hook_embed",
        "hook_pos_embed",
        "blocks.0.hook_resid_pre",
        "blocks.1.hook_resid_mid",
        "blocks.1.hook_resid_post",
        "blocks.0.attn.hook_z",
        "blocks.0.mlp.hook_post",
        "blocks.0.ln1.hook_scale",
        "ln_final.hook_scale",
    ):
        a, b = ours[name], theirs[name]
        assert a.shape == b.shape, name
        assert (a - b).abs().max() <= TOL, name


def test_bridge_sinusoidal_table_is_loaded_not_reinitialised():
    cfg = make_cfg(positional="sinusoidal")
    model = make_model(cfg)
    bridge = to_bridge(model)
    tokens = make_tokens(cfg, batch=2, pos=6)
    with torch.no_grad():
        _, theirs = bridge.run_with_cache(tokens)
    expected = model.pos_embed.W_pos[:6].expand(2, 6, cfg.d_model)
    assert (theirs["hook_pos_embed"] - expected).abs().max() <= TOL


NOT_BRIDGEABLE = {
    "linear": (dict(attention="linear"), ["attention"]),
    "full_mask": (dict(mask="full"), ["mask"]),
    "custom_mask": (dict(mask="custom"), ["mask"]),
    "seed_add": (dict(d_seed=2), ["d_seed"]),
    "seed_token": (dict(d_seed=2, seed_mode="token"), ["d_seed"]),
    "seed_append": (dict(d_seed=2, seed_mode="append", d_input_mlp=8), ["d_seed", "d_input_mlp"]),
    "input_mlp": (dict(d_input_mlp=8), ["d_input_mlp"]),
    "vectors": (dict(input_kind="vectors", d_input=5, d_vocab_out=3), ["input_kind"]),
    "no_pos": (dict(positional="none"), ["positional"]),
    "alibi": (dict(positional="alibi"), ["positional"]),
    "digit_index": (dict(positional="digit_index", digit_tokens=3), ["positional"]),
    "linear_full_seeded": (dict(attention="linear", mask="full", d_seed=2), ["attention", "mask", "d_seed"]),
}


@pytest.mark.parametrize("name", list(NOT_BRIDGEABLE))
def test_non_bridgeable_configs_are_refused(name):
    overrides, fields = NOT_BRIDGEABLE[name]
    cfg = make_cfg(**overrides)
    problems = bridge_incompatibilities(cfg)
    assert len(problems) == len(fields)
    for field, problem in zip(fields, problems):
        assert problem.startswith(field), (field, problem)
    model = HookedTransformer(cfg, seed=0)
    with pytest.raises(ValueError) as info:
        to_bridge(model)
    message = str(info.value)
    assert "TransformerBridge" in message
    for field in fields:
        assert f"{field}=" in message, (field, message)
    with pytest.raises(ValueError):
        bridge_config(cfg)
