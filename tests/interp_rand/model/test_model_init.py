"""The two initialisation schemes (interp_rand.model.init)."""

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.init import POSITIONAL_STD, fan_in, fan_in_scale


def make_cfg(**overrides) -> ModelConfig:
    base = dict(d_model=64, n_layers=2, n_heads=4, d_head=16, n_ctx=8, d_vocab=32, init="fan_in")
    return ModelConfig(**{**base, **overrides})


def test_fan_in_init_has_the_variance_its_rule_states():
    # Large enough matrices that the sample std is within a few percent of the target.
    cfg = make_cfg(d_model=256, d_head=64, d_mlp=512, d_vocab=256)
    model = HookedTransformer(cfg, seed=3)
    params = dict(model.named_parameters())
    expected = {
        "embed.W_E": (1 / 256) ** 0.5,
        "blocks.0.attn.W_Q": (1 / 256) ** 0.5,
        "blocks.1.attn.W_O": (1 / (2 * 4 * 64)) ** 0.5,  # residual writer: / (n_layers * n_heads)
        "blocks.0.mlp.W_in": (2 / 256) ** 0.5,
        "blocks.0.mlp.W_out": (1 / (2 * 512)) ** 0.5,  # residual writer: / n_layers
        "unembed.W_U": (1 / 256) ** 0.5,
        "pos_embed.W_pos": POSITIONAL_STD,
    }
    for name, std in expected.items():
        measured = params[name].std().item()
        assert measured == pytest.approx(std, rel=0.06), name
        # truncated at two standard deviations of the untruncated normal (2 / 0.8796 of std)
        assert params[name].abs().max().item() <= 2 * std / 0.87962566103423978 + 1e-6, name
    assert params["blocks.0.attn.b_Q"].abs().max() == 0 and params["blocks.0.ln1.w"].min() == 1


def test_appended_seed_shares_the_embeddings_fan_in():
    cfg = ModelConfig(d_model=40, n_layers=2, n_heads=1, d_head=5, n_ctx=13, d_input=17, d_vocab_out=5,
                      input_kind="vectors", attn_only=True, d_input_mlp=40, input_mlp_w_in=False,
                      d_seed=10, seed_mode="append", normalization_type=None, init="fan_in")
    model = HookedTransformer(cfg)
    assert fan_in("embed.W_E", model.embed.W_E, cfg) == fan_in("seed_embed.W_seed", model.seed_embed.W_seed, cfg) == 27
    assert fan_in_scale("blocks.0.attn.W_O", cfg) == 0.5 and fan_in_scale("input_mlp.W_out", cfg) == 1.0


def test_init_is_seeded_and_normal_is_unchanged():
    a, b = HookedTransformer(make_cfg(), seed=1), HookedTransformer(make_cfg(), seed=1)
    c = HookedTransformer(make_cfg(), seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.blocks[0].attn.W_Q, c.blocks[0].attn.W_Q)
    normal = HookedTransformer(make_cfg(init="normal", init_range=0.02), seed=1)
    assert normal.blocks[0].attn.W_Q.std().item() == pytest.approx(0.02, rel=0.1)
    with pytest.raises(ValueError, match="init"):
        make_cfg(init="xavier")


def test_no_attention_bias_and_no_scale():
    cfg = make_cfg(attn_bias=False, use_attn_scale=False, init="normal")
    model = HookedTransformer(cfg, seed=0)
    names = dict(model.named_parameters())
    assert "blocks.0.attn.b_Q" not in names and torch.equal(model.blocks[0].attn.b_O, torch.zeros(64))
    tokens = torch.randint(0, 32, (2, 8))
    _, cache = model.run_with_cache(tokens)
    q, k = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k)  # unscaled
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    assert torch.allclose(cache["blocks.0.attn.hook_attn_scores"][..., causal], scores[..., causal], atol=1e-5)


def test_input_mlp_without_w_in_reads_the_embedding():
    cfg = ModelConfig(d_model=8, n_layers=1, n_heads=1, d_head=4, n_ctx=3, d_input=5, d_vocab_out=2,
                      input_kind="vectors", attn_only=True, d_input_mlp=8, input_mlp_w_in=False,
                      normalization_type=None)
    model = HookedTransformer(cfg, seed=0)
    x = torch.randn(2, 3, 5)
    _, cache = model.run_with_cache(x)
    assert torch.allclose(cache["input_mlp.hook_pre"], cache["hook_embed"] + model.input_mlp.b_in)
    with pytest.raises(ValueError, match="d_input_mlp must equal d_model"):
        cfg.replace(d_input_mlp=16)
