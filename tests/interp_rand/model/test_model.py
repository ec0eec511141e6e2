"""Tests of the toolkit's model: TransformerLens hook/weight names and shapes, the
ActivationCache and hook API, masks, linear attention, the seed channel, vector inputs,
positional tables, config validation, seeded initialisation and ``transformer_lens.patching``.

Everything is tiny (d_model=16, 2 heads, 2 layers, n_ctx=8, 7 tokens) and seeded."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import ActivationCache, patching

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.embedding import sinusoidal_table

D_MODEL, N_HEADS, N_LAYERS, N_CTX, D_VOCAB = 16, 2, 2, 8, 7
D_HEAD = D_MODEL // N_HEADS




def make_cfg(**overrides) -> ModelConfig:
    base = dict(d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS, n_ctx=N_CTX, d_vocab=D_VOCAB)
    base.update(overrides)
    return ModelConfig(**base)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make_tokens(batch: int = 3, pos: int = N_CTX, seed: int = 0, d_vocab: int = D_VOCAB) -> torch.Tensor:
    return torch.randint(0, d_vocab, (batch, pos), generator=gen(seed))


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed))


@torch.no_grad()
def perturb(model: HookedTransformer, seed: int = 123, scale: float = 0.3) -> HookedTransformer:
    """Add seeded noise to every parameter so biases and LayerNorm weights are non-trivial."""
    g = gen(seed)
    for p in model.parameters():
        p.add_(scale * torch.randn(p.shape, generator=g))
    return model


def differs(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> bool:
    return bool((a - b).abs().max() > tol)


# ----------------------------------------------------------------------------------------
# Hook names and weight names/shapes
# ----------------------------------------------------------------------------------------
ATTN_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z", "hook_result")
LN_HOOKS = ("hook_scale", "hook_normalized")


def expected_hook_names(cfg: ModelConfig) -> set[str]:
    """The TransformerLens hook names of a model with this config. ``attn.hook_result`` is a
    hook point whether or not ``use_attn_result`` is on (as in TransformerLens: the flag can be
    switched at run time); it only fires with the flag on."""
    ln = LN_HOOKS if cfg.normalization_type == "LN" else ()
    names = {"hook_embed"}
    if cfg.has_pos_table:
        names.add("hook_pos_embed")
    if cfg.d_seed > 0:
        names |= {"hook_seed", "hook_seed_embed"}
    if cfg.d_input_mlp > 0:
        names |= {"input_mlp.hook_pre", "input_mlp.hook_post"}
    for layer in range(cfg.n_layers):
        p = f"blocks.{layer}."
        names |= {p + "hook_resid_pre", p + "hook_attn_out", p + "hook_resid_post"}
        names |= {p + "attn." + h for h in ATTN_HOOKS}
        names |= {p + "ln1." + h for h in ln}
        if not cfg.attn_only:
            names |= {p + "hook_resid_mid", p + "hook_mlp_out", p + "mlp.hook_pre", p + "mlp.hook_post"}
            names |= {p + "ln2." + h for h in ln}
    names |= {"ln_final." + h for h in ln}
    return names


HOOK_CONFIGS = {
    "default": {},
    "attn_only": dict(attn_only=True),
    "no_ln": dict(normalization_type=None),
    "attn_result": dict(use_attn_result=True),
    "seed_add": dict(d_seed=3),
    "seed_append": dict(d_seed=3, seed_mode="append", d_input_mlp=12),
    "seed_token": dict(d_seed=3, seed_mode="token"),
    "no_pos": dict(positional="none"),
    "alibi": dict(positional="alibi"),
    "digit_index": dict(positional="digit_index", digit_tokens=3),
    "three_layers": dict(n_layers=3),
}


def run_inputs(cfg: ModelConfig, batch: int = 2) -> tuple[tuple, dict]:
    pos = cfg.n_ctx - cfg.seed_offset
    kwargs = {"seeds": randn(batch, cfg.d_seed, seed=5)} if cfg.d_seed else {}
    return (make_tokens(batch, pos),), kwargs


@pytest.mark.parametrize("name", list(HOOK_CONFIGS))
def test_hook_points_are_exactly_the_transformer_lens_names(name):
    cfg = make_cfg(**HOOK_CONFIGS[name])
    model = HookedTransformer(cfg, seed=0)
    assert set(model.hook_dict) == expected_hook_names(cfg)
    # And exactly these fire in a forward pass (hook_result only with use_attn_result).
    args, kwargs = run_inputs(cfg)
    _, cache = model.run_with_cache(*args, **kwargs)
    fired = expected_hook_names(cfg)
    if not cfg.use_attn_result:
        fired = {n for n in fired if not n.endswith("attn.hook_result")}
    assert set(cache.keys()) == fired


def test_hook_variants_add_and_drop_the_right_names():
    default = set(HookedTransformer(make_cfg(), seed=0).hook_dict)
    attn_only = set(HookedTransformer(make_cfg(attn_only=True), seed=0).hook_dict)
    no_ln = set(HookedTransformer(make_cfg(normalization_type=None), seed=0).hook_dict)
    seeded = set(HookedTransformer(make_cfg(d_seed=2), seed=0).hook_dict)
    no_pos = set(HookedTransformer(make_cfg(positional="none"), seed=0).hook_dict)
    assert default - attn_only == {
        f"blocks.{l}.{h}"
        for l in range(N_LAYERS)
        for h in ("hook_resid_mid", "hook_mlp_out", "mlp.hook_pre", "mlp.hook_post", "ln2.hook_scale", "ln2.hook_normalized")
    }
    assert attn_only < default
    assert default - no_ln == {n for n in default if ".ln" in n or n.startswith("ln_final")}
    assert not any("hook_scale" in n or "hook_normalized" in n for n in no_ln)
    assert seeded - default == {"hook_seed", "hook_seed_embed"}
    assert default - no_pos == {"hook_pos_embed"}
    assert "hook_seed" not in default


def test_weight_names_and_shapes_match_transformer_lens():
    cfg = make_cfg()
    model = HookedTransformer(cfg, seed=0)
    d, h, e, m, v = D_MODEL, N_HEADS, D_HEAD, 4 * D_MODEL, D_VOCAB
    expected = {
        "embed.W_E": (v, d),
        "pos_embed.W_pos": (N_CTX, d),
        "ln_final.w": (d,),
        "ln_final.b": (d,),
        "unembed.W_U": (d, v),
        "unembed.b_U": (v,),
    }
    for l in range(N_LAYERS):
        p = f"blocks.{l}."
        expected.update(
            {
                p + "attn.W_Q": (h, d, e),
                p + "attn.W_K": (h, d, e),
                p + "attn.W_V": (h, d, e),
                p + "attn.W_O": (h, e, d),
                p + "attn.b_Q": (h, e),
                p + "attn.b_K": (h, e),
                p + "attn.b_V": (h, e),
                p + "attn.b_O": (d,),
                p + "mlp.W_in": (d, m),
                p + "mlp.b_in": (m,),
                p + "mlp.W_out": (m, d),
                p + "mlp.b_out": (d,),
                p + "ln1.w": (d,),
                p + "ln1.b": (d,),
                p + "ln2.w": (d,),
                p + "ln2.b": (d,),
            }
        )
    got = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    assert got == expected
    assert model.W_E is model.embed.W_E and model.W_U is model.unembed.W_U
    # d_vocab_out defaults to d_vocab; a different one sizes the unembedding.
    wide = HookedTransformer(make_cfg(d_vocab_out=11), seed=0)
    assert wide.W_U.shape == (d, 11) and wide.unembed.b_U.shape == (11,)
    assert wide(make_tokens()).shape == (3, N_CTX, 11)


# ----------------------------------------------------------------------------------------
# ActivationCache, run_with_hooks, hooks()
# ----------------------------------------------------------------------------------------
def test_run_with_cache_gives_activation_cache_with_tl_shapes():
    cfg = make_cfg()
    model = perturb(HookedTransformer(cfg, seed=0))
    tokens = make_tokens(3, 6)
    logits, cache = model.run_with_cache(tokens)
    assert isinstance(cache, ActivationCache)
    # the cached run takes the explicit attention and LayerNorm (test_fast_paths.py): the same
    # function as the hook-free forward, to float rounding
    torch.testing.assert_close(logits, model(tokens), rtol=0, atol=1e-6 * float(logits.abs().max()))
    b, p, d, h, e, m = 3, 6, D_MODEL, N_HEADS, D_HEAD, 4 * D_MODEL
    shapes = {
        "hook_embed": (b, p, d),
        "hook_pos_embed": (b, p, d),
        "blocks.0.hook_resid_pre": (b, p, d),
        "blocks.0.ln1.hook_scale": (b, p, 1),
        "blocks.0.ln1.hook_normalized": (b, p, d),
        "blocks.0.attn.hook_q": (b, p, h, e),
        "blocks.0.attn.hook_k": (b, p, h, e),
        "blocks.0.attn.hook_v": (b, p, h, e),
        "blocks.0.attn.hook_z": (b, p, h, e),
        "blocks.0.attn.hook_attn_scores": (b, h, p, p),
        "blocks.0.attn.hook_pattern": (b, h, p, p),
        "blocks.0.hook_attn_out": (b, p, d),
        "blocks.0.hook_resid_mid": (b, p, d),
        "blocks.0.mlp.hook_pre": (b, p, m),
        "blocks.0.mlp.hook_post": (b, p, m),
        "blocks.0.hook_mlp_out": (b, p, d),
        "blocks.1.hook_resid_post": (b, p, d),
        "ln_final.hook_scale": (b, p, 1),
        "ln_final.hook_normalized": (b, p, d),
    }
    for name, shape in shapes.items():
        assert tuple(cache[name].shape) == shape, name
    # TL's short names resolve too.
    torch.testing.assert_close(cache["pattern", 0], cache["blocks.0.attn.hook_pattern"])
    # Softmax pattern rows are distributions.
    torch.testing.assert_close(cache["pattern", 1].sum(-1), torch.ones(b, h, p))
    # remove_batch_dim drops the batch axis.
    _, single = model.run_with_cache(tokens[:1], remove_batch_dim=True)
    assert tuple(single["blocks.0.attn.hook_pattern"].shape) == (h, p, p)


def test_accumulated_and_decomposed_residual_sum_to_final_residual():
    model = perturb(HookedTransformer(make_cfg(), seed=0))
    tokens = make_tokens(3, 6)
    logits, cache = model.run_with_cache(tokens)
    final = cache[f"blocks.{N_LAYERS - 1}.hook_resid_post"]

    accumulated, labels = cache.accumulated_resid(return_labels=True)
    assert tuple(accumulated.shape) == (N_LAYERS + 1, 3, 6, D_MODEL)
    assert labels == ["0_pre", "1_pre", "final_post"]
    torch.testing.assert_close(accumulated[0], cache["blocks.0.hook_resid_pre"], rtol=0, atol=1e-6)
    torch.testing.assert_close(accumulated[-1], final, rtol=0, atol=1e-6)

    components, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "pos_embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    assert tuple(components.shape) == (2 + 2 * N_LAYERS, 3, 6, D_MODEL)
    assert (components.sum(0) - final).abs().max() <= 1e-5
    # ... and ln_final + unembed of that sum are the logits.
    with torch.no_grad():
        rebuilt = model.unembed(model.ln_final(components.sum(0)))
    assert (rebuilt - logits).abs().max() <= 1e-5
    # apply_ln uses the cached ln_final scale.
    assert tuple(cache.accumulated_resid(apply_ln=True).shape) == (N_LAYERS + 1, 3, 6, D_MODEL)


def test_run_with_hooks_and_hooks_context_leave_nothing_behind():
    model = HookedTransformer(make_cfg(), seed=0)
    tokens = make_tokens(2, 6)
    clean = model(tokens)
    calls = []

    def zero_pattern(pattern, hook):
        calls.append(hook.name)
        return torch.zeros_like(pattern)

    hooked = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", zero_pattern)])
    assert calls == ["blocks.0.attn.hook_pattern"]
    assert differs(hooked, clean)
    torch.testing.assert_close(model(tokens), clean, rtol=0, atol=0)

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", zero_pattern)]):
        inside = model(tokens)
        assert model.hook_dict["blocks.0.attn.hook_pattern"].fwd_hooks
    torch.testing.assert_close(inside, hooked, rtol=0, atol=0)
    torch.testing.assert_close(model(tokens), clean, rtol=0, atol=0)
    assert all(not hp.fwd_hooks and not hp.bwd_hooks for hp in model.hook_dict.values())

    # Zeroing the pattern is the same as ablating the layer-0 attention output to b_O.
    def ablate_attn_out(out, hook):
        return torch.zeros_like(out) + model.blocks[0].attn.b_O

    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_attn_out", ablate_attn_out)])
    assert (ablated - hooked).abs().max() <= 1e-5


def test_attn_result_sums_over_heads_to_attn_out():
    model = perturb(HookedTransformer(make_cfg(use_attn_result=True), seed=0))
    tokens = make_tokens(2, 6)
    logits, cache = model.run_with_cache(tokens)
    for layer in range(N_LAYERS):
        result = cache[f"blocks.{layer}.attn.hook_result"]
        assert tuple(result.shape) == (2, 6, N_HEADS, D_MODEL)
        b_O = model.blocks[layer].attn.b_O
        assert b_O.abs().max() > 0.01  # perturbed, so the bias matters
        summed = result.sum(dim=2) + b_O
        assert (summed - cache[f"blocks.{layer}.hook_attn_out"]).abs().max() <= 1e-5
    stacked = cache.stack_head_results(layer=-1)
    assert tuple(stacked.shape) == (N_LAYERS * N_HEADS, 2, 6, D_MODEL)
    # Switching the flag off keeps the logits and stops the hook firing.
    model.set_use_attn_result(False)
    logits_off, cache_off = model.run_with_cache(tokens)
    assert (logits_off - logits).abs().max() <= 1e-5
    assert "blocks.0.attn.hook_result" not in cache_off.keys()
    model.set_use_attn_result(True)
    assert "blocks.0.attn.hook_result" in model.run_with_cache(tokens)[1].keys()


# ----------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------
def replace_token(tokens: torch.Tensor, pos: int) -> torch.Tensor:
    out = tokens.clone()
    out[:, pos] = (out[:, pos] + 1) % D_VOCAB
    return out


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_causal_mask_later_tokens_do_not_affect_earlier_logits(attention):
    model = HookedTransformer(make_cfg(attention=attention), seed=0)
    tokens = make_tokens(3, N_CTX)
    base = model(tokens)
    for j in (2, 5, N_CTX - 1):
        changed = model(replace_token(tokens, j))
        assert (changed[:, :j] - base[:, :j]).abs().max() <= 1e-6
        assert differs(changed[:, j], base[:, j])


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_full_mask_later_tokens_affect_earlier_logits(attention):
    model = HookedTransformer(make_cfg(mask="full", attention=attention), seed=0)
    tokens = make_tokens(3, N_CTX)
    base = model(tokens)
    j = N_CTX - 1
    changed = model(replace_token(tokens, j))
    for i in range(j):
        assert differs(changed[:, i], base[:, i]), i


def cycle_mask(batch: int, n: int) -> torch.Tensor:
    """Each query i may attend only its cycle neighbours i-1 and i+1 (mod n), not itself."""
    mask = torch.zeros(batch, n, n, dtype=torch.bool)
    for i in range(n):
        mask[:, i, (i - 1) % n] = True
        mask[:, i, (i + 1) % n] = True
    return mask


def test_custom_mask_only_allowed_keys_affect_a_query():
    n = 6
    model = HookedTransformer(make_cfg(mask="custom", n_layers=1), seed=0)
    tokens = make_tokens(3, n)
    mask = cycle_mask(3, n)
    base, cache = model.run_with_cache(tokens, attention_mask=mask)
    for i in range(n):
        for j in range(n):
            changed = model(replace_token(tokens, j), attention_mask=mask)
            if j == i or mask[0, i, j]:
                # an allowed key, or the query's own residual stream
                assert differs(changed[:, i], base[:, i]), (i, j)
            else:
                assert (changed[:, i] - base[:, i]).abs().max() <= 1e-6, (i, j)
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert (pattern[~mask[:, None].expand_as(pattern)] == 0).all()
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, N_HEADS, n))
    assert (pattern[mask[:, None].expand_as(pattern)] > 0).all()


def test_custom_mask_is_per_example():
    n = 5
    model = HookedTransformer(make_cfg(mask="custom", n_layers=1), seed=0)
    tokens = make_tokens(1, n).expand(2, n)
    mask = torch.ones(2, n, n, dtype=torch.bool)
    mask[1] = torch.eye(n, dtype=torch.bool)  # example 1 attends only to itself
    _, cache = model.run_with_cache(tokens, attention_mask=mask)
    pattern = cache["blocks.0.attn.hook_pattern"]
    torch.testing.assert_close(pattern[1], torch.eye(n).expand(N_HEADS, n, n))
    assert (pattern[0] > 0).all()


def test_custom_mask_row_with_no_allowed_key_is_finite():
    n = 5
    model = HookedTransformer(make_cfg(mask="custom"), seed=0)
    tokens = make_tokens(2, n)
    mask = cycle_mask(2, n)
    mask[:, 0, :] = False  # query 0 may attend nothing
    logits, cache = model.run_with_cache(tokens, attention_mask=mask)
    assert torch.isfinite(logits).all()
    for layer in range(N_LAYERS):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
        assert torch.isfinite(pattern).all()
        assert (pattern[:, :, 0] == 0).all()
        assert (cache[f"blocks.{layer}.attn.hook_z"][:, 0] == 0).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_attention_mask_argument_errors():
    tokens = make_tokens(2, 5)
    custom = HookedTransformer(make_cfg(mask="custom"), seed=0)
    with pytest.raises(ValueError, match="attention_mask"):
        custom(tokens)
    with pytest.raises(ValueError, match="attention_mask"):
        custom(tokens, attention_mask=torch.ones(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="attention_mask"):
        custom(tokens, attention_mask=torch.ones(2, 5, 5))  # not bool
    causal = HookedTransformer(make_cfg(), seed=0)
    with pytest.raises(ValueError, match="mask='custom'"):
        causal(tokens, attention_mask=torch.ones(2, 5, 5, dtype=torch.bool))


# ----------------------------------------------------------------------------------------
# Linear attention
# ----------------------------------------------------------------------------------------
def test_linear_attention_pattern_is_masked_scores():
    model = perturb(HookedTransformer(make_cfg(attention="linear"), seed=0))
    tokens = make_tokens(3, 6)
    _, cache = model.run_with_cache(tokens)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    for layer in range(N_LAYERS):
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"]
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
        q, k = cache[f"blocks.{layer}.attn.hook_q"], cache[f"blocks.{layer}.attn.hook_k"]
        raw = torch.einsum("bqhe,bkhe->bhqk", q, k) / D_HEAD**0.5
        torch.testing.assert_close(pattern, scores, rtol=0, atol=0)
        torch.testing.assert_close(pattern, raw.masked_fill(~causal, 0.0), rtol=1e-5, atol=1e-6)
        assert (pattern[..., ~causal] == 0).all()
        # No softmax: rows are not distributions.
        assert (pattern.sum(-1) - 1).abs().max() > 1e-2
        assert (pattern < 0).any()


def test_linear_attention_full_mask_pattern_is_raw_scores():
    model = HookedTransformer(make_cfg(attention="linear", mask="full"), seed=0)
    _, cache = model.run_with_cache(make_tokens(2, 6))
    q, k = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
    raw = torch.einsum("bqhe,bkhe->bhqk", q, k) / D_HEAD**0.5
    torch.testing.assert_close(cache["blocks.0.attn.hook_pattern"], raw, rtol=1e-5, atol=1e-6)


def test_linear_attention_with_custom_mask_is_rejected():
    with pytest.raises(ValueError, match="mask"):
        make_cfg(attention="linear", mask="custom")


# ----------------------------------------------------------------------------------------
# Seed channel
# ----------------------------------------------------------------------------------------
def assert_every_position_changes(a: torch.Tensor, b: torch.Tensor) -> None:
    per_pos = (a - b).abs().amax(dim=-1)  # [batch, pos]
    assert (per_pos > 1e-5).all(), per_pos


def test_seed_add_mode_batch_seeds():
    cfg = make_cfg(d_seed=3, seed_mode="add")
    model = HookedTransformer(cfg, seed=0)
    assert model.seed_embed.W_seed.shape == (3, D_MODEL)
    tokens = make_tokens(2, 6)
    seeds = randn(2, 3, seed=1)
    logits, cache = model.run_with_cache(tokens, seeds=seeds)
    assert logits.shape == (2, 6, D_VOCAB)
    torch.testing.assert_close(cache["hook_seed"], seeds[:, None].expand(2, 6, 3))
    torch.testing.assert_close(cache["hook_seed_embed"], cache["hook_seed"] @ model.seed_embed.W_seed)
    # The seed is added to the embedding in the residual stream.
    torch.testing.assert_close(
        cache["blocks.0.hook_resid_pre"],
        cache["hook_embed"] + cache["hook_seed_embed"] + cache["hook_pos_embed"],
    )
    other = model(tokens, seeds=randn(2, 3, seed=2))
    assert_every_position_changes(logits, other)


def test_seed_add_mode_per_position_seeds():
    model = HookedTransformer(make_cfg(d_seed=3, seed_mode="add"), seed=0)
    tokens = make_tokens(2, 6)
    seeds = randn(2, 6, 3, seed=1)
    logits, cache = model.run_with_cache(tokens, seeds=seeds)
    torch.testing.assert_close(cache["hook_seed"], seeds)
    assert_every_position_changes(logits, model(tokens, seeds=randn(2, 6, 3, seed=2)))
    # A per-position seed only reaches its own and later positions (causal).
    changed = seeds.clone()
    changed[:, 4] += 1.0
    out = model(tokens, seeds=changed)
    assert (out[:, :4] - logits[:, :4]).abs().max() <= 1e-6
    assert differs(out[:, 4], logits[:, 4])
    # A [batch, d_seed] seed is the same as that seed repeated at every position.
    flat = randn(2, 3, seed=3)
    torch.testing.assert_close(
        model(tokens, seeds=flat), model(tokens, seeds=flat[:, None].expand(2, 6, 3)), rtol=0, atol=1e-6
    )


def test_seed_append_mode_needs_input_mlp():
    with pytest.raises(ValueError, match="d_input_mlp"):
        make_cfg(d_seed=3, seed_mode="append")
    cfg = make_cfg(d_seed=3, seed_mode="append", d_input_mlp=12)
    model = HookedTransformer(cfg, seed=0)
    tokens = make_tokens(2, 6)
    seeds = randn(2, 3, seed=1)
    logits, cache = model.run_with_cache(tokens, seeds=seeds)
    assert logits.shape == (2, 6, D_VOCAB)
    torch.testing.assert_close(cache["hook_seed"], seeds[:, None].expand(2, 6, 3))
    assert tuple(cache["input_mlp.hook_pre"].shape) == (2, 6, 12)
    assert_every_position_changes(logits, model(tokens, seeds=randn(2, 3, seed=2)))
    # Per-position seeds are allowed in append mode too.
    per_pos = randn(2, 6, 3, seed=4)
    _, cache_pp = model.run_with_cache(tokens, seeds=per_pos)
    torch.testing.assert_close(cache_pp["hook_seed"], per_pos)


def test_seed_token_mode_is_position_zero():
    cfg = make_cfg(d_seed=3, seed_mode="token")
    assert cfg.seed_offset == 1
    model = HookedTransformer(cfg, seed=0)
    n = N_CTX - 1
    tokens = make_tokens(2, n)
    seeds = randn(2, 3, seed=1)
    logits, cache = model.run_with_cache(tokens, seeds=seeds)
    assert logits.shape == (2, n, D_VOCAB)
    assert tuple(cache["blocks.0.hook_resid_pre"].shape) == (2, N_CTX, D_MODEL)
    assert tuple(cache["blocks.0.attn.hook_pattern"].shape) == (2, N_HEADS, N_CTX, N_CTX)
    torch.testing.assert_close(cache["hook_seed"], seeds[:, None])
    W_pos = model.pos_embed.W_pos
    torch.testing.assert_close(
        cache["blocks.0.hook_resid_pre"][:, 0], seeds @ model.seed_embed.W_seed + W_pos[0]
    )
    torch.testing.assert_close(
        cache["blocks.0.hook_resid_pre"][:, 1:], cache["hook_embed"] + W_pos[1:N_CTX]
    )
    # The logits are those of positions 1.. of the full sequence.
    with torch.no_grad():
        full_logits = model.unembed(model.ln_final(cache[f"blocks.{N_LAYERS - 1}.hook_resid_post"]))
    torch.testing.assert_close(logits, full_logits[:, 1:])
    assert_every_position_changes(logits, model(tokens, seeds=randn(2, 3, seed=2)))
    # n_ctx must cover the input plus the seed token.
    with pytest.raises(ValueError, match="n_ctx"):
        model(make_tokens(2, N_CTX), seeds=seeds)


def test_seed_token_mode_with_custom_mask():
    model = HookedTransformer(make_cfg(d_seed=3, seed_mode="token", mask="custom"), seed=0)
    n = 5
    tokens = make_tokens(2, n)
    seeds = randn(2, 3, seed=1)
    mask = cycle_mask(2, n)
    logits, cache = model.run_with_cache(tokens, seeds=seeds, attention_mask=mask)
    assert logits.shape == (2, n, D_VOCAB)
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert tuple(pattern.shape) == (2, N_HEADS, n + 1, n + 1)
    torch.testing.assert_close(pattern[:, :, 0, 0], torch.ones(2, N_HEADS))  # seed reads itself
    assert (pattern[:, :, 1:, 0] > 0).all()  # every token reads the seed
    assert (pattern[:, :, 1:, 1:][~mask[:, None].expand(2, N_HEADS, n, n)] == 0).all()
    assert_every_position_changes(logits, model(tokens, seeds=randn(2, 3, seed=2), attention_mask=mask))


def test_bad_seeds_raise_useful_errors():
    tokens = make_tokens(2, 6)
    seeded = HookedTransformer(make_cfg(d_seed=3), seed=0)
    with pytest.raises(ValueError, match="d_seed=3"):
        seeded(tokens)
    with pytest.raises(ValueError, match="d_seed"):
        seeded(tokens, seeds=randn(2, 4))
    with pytest.raises(ValueError, match="batch"):
        seeded(tokens, seeds=randn(3, 3))
    with pytest.raises(ValueError, match="per-position"):
        seeded(tokens, seeds=randn(2, 5, 3))  # wrong number of positions
    with pytest.raises(ValueError, match="d_seed"):
        seeded(tokens, seeds=randn(2, 6, 3, 1))
    unseeded = HookedTransformer(make_cfg(), seed=0)
    with pytest.raises(ValueError, match="d_seed=0"):
        unseeded(tokens, seeds=randn(2, 3))
    token_mode = HookedTransformer(make_cfg(d_seed=3, seed_mode="token"), seed=0)
    with pytest.raises(ValueError, match="seed_mode"):
        token_mode(tokens, seeds=randn(2, 6, 3))


# ----------------------------------------------------------------------------------------
# Vector inputs, positional embeddings
# ----------------------------------------------------------------------------------------
def test_vector_inputs():
    cfg = make_cfg(input_kind="vectors", d_input=5, d_vocab_out=3)
    model = HookedTransformer(cfg, seed=0)
    assert model.W_E.shape == (5, D_MODEL)
    x = randn(2, 6, 5, seed=1)
    logits, cache = model.run_with_cache(x)
    assert logits.shape == (2, 6, 3)
    torch.testing.assert_close(cache["hook_embed"], x @ model.W_E)
    y = x.clone()
    y[:, 3] += 1.0
    out = model(y)
    assert (out[:, :3] - logits[:, :3]).abs().max() <= 1e-6
    assert differs(out[:, 3], logits[:, 3])
    with pytest.raises(ValueError, match="d_input=5"):
        model(randn(2, 6, 4))
    with pytest.raises(ValueError, match="d_input"):
        model(make_tokens(2, 6))
    with pytest.raises(ValueError, match="n_ctx"):
        model(randn(2, N_CTX + 1, 5))
    with pytest.raises(ValueError, match="d_input"):
        make_cfg(input_kind="vectors", d_vocab_out=3)


def test_sinusoidal_positions_are_a_fixed_buffer():
    a = HookedTransformer(make_cfg(positional="sinusoidal"), seed=0)
    b = HookedTransformer(make_cfg(positional="sinusoidal"), seed=1)
    assert "pos_embed.W_pos" not in dict(a.named_parameters())
    assert "pos_embed.W_pos" in dict(a.named_buffers())
    assert "pos_embed.W_pos" in a.state_dict()
    torch.testing.assert_close(a.pos_embed.W_pos, b.pos_embed.W_pos, rtol=0, atol=0)
    torch.testing.assert_close(a.pos_embed.W_pos, sinusoidal_table(N_CTX, D_MODEL), rtol=0, atol=0)
    # sin(0)=0 in even columns, cos(0)=1 in odd columns; rows differ.
    row0 = a.pos_embed.W_pos[0]
    assert (row0[0::2] == 0).all() and (row0[1::2] == 1).all()
    assert len({tuple(r.tolist()) for r in a.pos_embed.W_pos}) == N_CTX
    # Other weights still depend on the seed.
    assert differs(a.W_E, b.W_E)
    # Odd widths work too.
    assert sinusoidal_table(4, 5).shape == (4, 5)
    # The table reaches the residual stream.
    tokens = make_tokens(2, 6)
    _, cache = a.run_with_cache(tokens)
    torch.testing.assert_close(cache["hook_pos_embed"][0], a.pos_embed.W_pos[:6])


def test_no_positional_embedding_is_permutation_equivariant_with_full_mask():
    model = HookedTransformer(make_cfg(positional="none", mask="full"), seed=0)
    assert not hasattr(model, "pos_embed")
    tokens = make_tokens(2, 6)
    perm = torch.randperm(6, generator=gen(9))
    torch.testing.assert_close(model(tokens)[:, perm], model(tokens[:, perm]), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Config and input errors
# ----------------------------------------------------------------------------------------
def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model.*n_heads"):
        make_cfg(d_model=10, n_heads=4)
    cfg = make_cfg(d_model=10, n_heads=4, d_head=3)  # explicit d_head is fine
    model = HookedTransformer(cfg, seed=0)
    assert model.blocks[0].attn.W_Q.shape == (4, 10, 3)
    assert model(make_tokens(1, 4)).shape == (1, 4, D_VOCAB)


@pytest.mark.parametrize(
    "field, allowed",
    [
        ("attention", ("softmax", "linear")),
        ("mask", ("causal", "full", "custom")),
        ("input_kind", ("tokens", "vectors")),
        ("seed_mode", ("append", "add", "token")),
        ("positional", ("learned", "sinusoidal", "none", "alibi", "digit_index")),
        ("normalization_type", ("LN",)),
        ("act_fn", ("gelu", "gelu_new", "relu")),
    ],
)
def test_invalid_choice_names_field_and_allowed_values(field, allowed):
    with pytest.raises(ValueError) as info:
        make_cfg(**{field: "foo"})
    message = str(info.value)
    assert field in message and "'foo'" in message
    for value in allowed:
        assert repr(value) in message


@pytest.mark.parametrize("field, value", [("d_model", 0), ("n_layers", 0), ("n_ctx", -1), ("d_seed", -1), ("n_heads", 1.5)])
def test_invalid_sizes_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        make_cfg(**{field: value})


def test_tokens_config_needs_d_vocab():
    with pytest.raises(ValueError, match="d_vocab"):
        ModelConfig(d_model=16, n_heads=2, n_ctx=8)


def test_config_is_frozen_and_round_trips():
    cfg = make_cfg(d_seed=2)
    assert cfg.d_head == D_HEAD and cfg.d_mlp == 4 * D_MODEL and cfg.d_vocab_out == D_VOCAB
    assert cfg.init_range == pytest.approx(0.8 / D_MODEL**0.5)
    with pytest.raises(dataclasses_frozen_error()):
        cfg.d_model = 32  # type: ignore[misc]
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.replace(n_layers=3).n_layers == 3
    with pytest.raises(ValueError, match="nonsense"):
        cfg.replace(nonsense=1)
    with pytest.raises(ValueError, match="nonsense"):
        ModelConfig.from_dict({**cfg.to_dict(), "nonsense": 1})


def dataclasses_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_bad_inputs_raise():
    model = HookedTransformer(make_cfg(), seed=0)
    with pytest.raises(ValueError, match="n_ctx"):
        model(make_tokens(1, N_CTX + 1))
    with pytest.raises(ValueError, match=str(D_VOCAB)):
        model(torch.full((1, 4), D_VOCAB, dtype=torch.long))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 4), -1, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(4, dtype=torch.long))
    assert model(make_tokens(1, N_CTX)).shape == (1, N_CTX, D_VOCAB)


# ----------------------------------------------------------------------------------------
# Seeded initialisation
# ----------------------------------------------------------------------------------------
def test_init_is_seeded_and_leaves_global_rng_alone():
    cfg = make_cfg()
    state = torch.random.get_rng_state()
    a = HookedTransformer(cfg, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    b = HookedTransformer(cfg, seed=3)
    c = HookedTransformer(cfg, seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    weights = [k for k in sa if k.rsplit(".", 1)[-1].startswith("W_")]
    assert all(not torch.equal(sa[k], sc[k]) for k in weights)
    tokens = make_tokens(2, 6)
    torch.testing.assert_close(a(tokens), b(tokens), rtol=0, atol=0)
    assert differs(a(tokens), c(tokens))


def test_init_follows_transformer_lens_rule():
    cfg = make_cfg()
    model = HookedTransformer(cfg, seed=0)
    weights = []
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("W_"):
            weights.append(p.detach().flatten())
        elif leaf == "w":
            assert (p == 1).all(), name
        else:
            assert (p == 0).all(), name
    std = torch.cat(weights).std().item()
    assert abs(std - cfg.init_range) < 0.1 * cfg.init_range
    custom = HookedTransformer(make_cfg(init_range=0.02), seed=0)
    assert abs(custom.W_E.std().item() - 0.02) < 0.01


# ----------------------------------------------------------------------------------------
# transformer_lens.patching on our model
# ----------------------------------------------------------------------------------------
def test_transformer_lens_patching_runs_unchanged():
    model = perturb(HookedTransformer(make_cfg(), seed=0)).eval()
    n, j = 6, 2
    clean = make_tokens(3, n)
    corrupted = replace_token(clean, j)  # differs from clean only at position j

    def metric(logits):
        return logits[:, -1, 0].mean()

    clean_logits, clean_cache = model.run_with_cache(clean)
    clean_metric = metric(clean_logits).item()
    corrupted_metric = metric(model(corrupted)).item()
    assert abs(clean_metric - corrupted_metric) > 1e-4

    # Clean cache into the clean run: the clean metric everywhere.
    same = patching.get_act_patch_resid_pre(model, clean, clean_cache, metric)
    assert tuple(same.shape) == (N_LAYERS, n)
    assert (same - clean_metric).abs().max() <= 1e-5

    out = patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric)
    assert tuple(out.shape) == (N_LAYERS, n)
    # At layer 0 only position j differs: patching it restores the clean run exactly,
    # patching any other position changes nothing.
    assert abs(out[0, j].item() - clean_metric) <= 1e-5
    others = [p for p in range(n) if p != j]
    assert (out[0, others] - corrupted_metric).abs().max() <= 1e-5
    # Causal: before position j the clean and corrupted residuals agree at every layer.
    assert (out[:, :j] - corrupted_metric).abs().max() <= 1e-5

    heads = patching.get_act_patch_attn_head_out_by_pos(model, corrupted, clean_cache, metric)
    assert tuple(heads.shape) == (N_LAYERS, n, N_HEADS)
    values = patching.get_act_patch_attn_head_v_by_pos(model, corrupted, clean_cache, metric)
    assert tuple(values.shape) == (N_LAYERS, n, N_HEADS)
    pattern = patching.get_act_patch_attn_head_pattern_by_pos(model, corrupted, clean_cache, metric)
    assert tuple(pattern.shape) == (N_LAYERS, N_HEADS, n)
    assert torch.isfinite(heads).all() and torch.isfinite(values).all() and torch.isfinite(pattern).all()


# ------------------------------------------------------------------------------ ALiBi, lengths
def test_alibi_penalises_each_head_by_distance_and_adds_no_table():
    """With the query/key maps zeroed, a head's scores are exactly ``-m_h |i - j|`` (masked
    causally) and its pattern their softmax: the penalty is the only positional signal."""
    from interp_rand.model.alibi import alibi_slopes
    cfg = make_cfg(positional="alibi")
    model = HookedTransformer(cfg, seed=0)
    assert not hasattr(model, "pos_embed") and "hook_pos_embed" not in model.hook_dict
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_(); block.attn.b_Q.zero_()
    _, cache = model.run_with_cache(make_tokens(2, N_CTX))
    i = torch.arange(N_CTX)
    distance = (i[:, None] - i[None]).float()
    for h, slope in enumerate(alibi_slopes(cfg.n_heads)):
        expected = (-slope * distance).masked_fill(distance < 0, float("-inf"))
        torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"][0, h], expected)
        torch.testing.assert_close(cache["blocks.0.attn.hook_pattern"][1, h], torch.softmax(expected, -1))
    assert len(set(alibi_slopes(cfg.n_heads).tolist())) == cfg.n_heads  # each head its own scale


def test_only_a_learned_table_limits_the_length():
    """ALiBi, no positions and a sinusoidal table run past n_ctx (the sinusoidal table computed
    afresh: the same function, so its first n_ctx rows are the stored ones); a learned table
    refuses, naming n_ctx."""
    tokens = make_tokens(2, 3 * N_CTX)
    for positional in ("alibi", "none", "sinusoidal"):
        model = HookedTransformer(make_cfg(positional=positional), seed=0)
        assert model(tokens).shape[:2] == (2, 3 * N_CTX)
    sinusoidal = HookedTransformer(make_cfg(positional="sinusoidal"), seed=0)
    torch.testing.assert_close(sinusoidal.pos_embed(3 * N_CTX)[0, :N_CTX], sinusoidal.pos_embed.W_pos)
    with pytest.raises(ValueError, match=f"n_ctx={N_CTX}.*learned positional table"):
        HookedTransformer(make_cfg(), seed=0)(tokens)


def test_alibi_needs_softmax_attention():
    with pytest.raises(ValueError, match="alibi.*softmax"):
        make_cfg(positional="alibi", attention="linear")


def test_digit_index_positions_are_the_sinusoidal_rows_of_each_digit_s_index_in_its_number():
    """Tokens below digit_tokens are digits; the position of each is its 1-based index in its run
    of digits (0 for other tokens), through the fixed sinusoidal table: the same two numbers give
    the same positions wherever they sit, and the model runs at any length."""
    from interp_rand.model.digit_index import digit_indices
    cfg = make_cfg(positional="digit_index", digit_tokens=3, d_vocab=5)
    model = HookedTransformer(cfg, seed=0)
    tokens = torch.tensor([[0, 2, 1, 4, 2, 2, 3, 1], [3, 1, 0, 4, 4, 2, 0, 0]])
    assert digit_indices(tokens, 3).tolist() == [[1, 2, 3, 0, 1, 2, 0, 1], [0, 1, 2, 0, 0, 1, 2, 3]]
    _, cache = model.run_with_cache(tokens)
    table = sinusoidal_table(10, D_MODEL)
    torch.testing.assert_close(cache["hook_pos_embed"], table[digit_indices(tokens, 3)])
    assert model(torch.randint(0, 5, (2, 5 * N_CTX))).shape[1] == 5 * N_CTX
    with pytest.raises(ValueError, match="digit_tokens >= 1"):
        make_cfg(positional="digit_index")
    with pytest.raises(ValueError, match="digit_tokens <= d_vocab"):
        make_cfg(positional="digit_index", digit_tokens=D_VOCAB + 1)


def test_digit_offset_shifts_each_row_s_digit_indices_in_training_only():
    """In training mode every row's digit indices move by one offset in 0..digit_offset (a hash
    of its tokens: the same row, the same offset), non-digits stay at 0; evaluation mode uses the
    plain indices."""
    from interp_rand.model.digit_index import digit_indices
    cfg = make_cfg(positional="digit_index", digit_tokens=3, digit_offset=6, d_vocab=5)
    model = HookedTransformer(cfg, seed=0)
    tokens = torch.randint(0, 5, (64, N_CTX), generator=gen(3))
    table = sinusoidal_table(40, D_MODEL)
    plain = digit_indices(tokens, 3)
    model.eval()
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["hook_pos_embed"], table[plain])
    model.train()
    _, cache = model.run_with_cache(tokens)
    _, again = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["hook_pos_embed"], again["hook_pos_embed"])  # reproducible
    shifts = set()
    for row in range(64):
        fits = [o for o in range(7) if torch.allclose(cache["hook_pos_embed"][row], table[plain[row] + o * (plain[row] > 0)])]
        assert fits, f"row {row} is not the plain indices shifted by one offset in 0..6"
        shifts.add(fits[0])
    assert len(shifts) >= 5  # the rows spread over the offsets
    with pytest.raises(ValueError, match="digit_offset"):
        make_cfg(digit_offset=2)
