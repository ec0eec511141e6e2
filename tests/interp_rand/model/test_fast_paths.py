"""The hook-free forward (hook points skipped, SDPA, ``F.layer_norm``, broadcast positions) is
the same function as the explicit hooked one: logits and gradients within 1e-6 of their scale in
float32 and within 1e-12 in float64, on every config path (softmax/linear attention; causal,
full and per-example masks, an empty mask row; seed modes add/append/token; LayerNorm, MLP,
attention bias and scale, per-head results). With hooks attached every hook point fires and the
cache holds the explicit computation's values; a training run gives the same losses either way."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.hook_dispatch import fire, listening
from interp_rand.tasks import make_task
from interp_rand.training.objectives import make_objective
from interp_rand.training.trainer import make_optimizer, training_step
from interp_rand.zoo.entries import ENTRIES

BASE = dict(d_model=16, n_heads=2, n_layers=2, n_ctx=7, d_vocab=9, d_vocab_out=9)
CONFIGS = {
    "softmax_causal_ln_mlp": {},
    "softmax_full": dict(mask="full"),
    "softmax_custom_mask": dict(mask="custom"),
    "softmax_no_attn_bias_result": dict(attn_bias=False, use_attn_result=True),
    "softmax_unscaled_attn_only": dict(use_attn_scale=False, attn_only=True, normalization_type=None),
    "linear_causal": dict(attention="linear", use_attn_scale=False, normalization_type=None),
    "linear_full_scaled": dict(attention="linear", mask="full"),
    "seed_add_vectors_custom": dict(input_kind="vectors", d_vocab=0, d_input=5, d_seed=3, seed_mode="add",
                                    mask="custom", positional="learned"),
    "seed_append_input_mlp": dict(input_kind="vectors", d_vocab=0, d_input=5, d_seed=3, seed_mode="append",
                                  d_input_mlp=16, attention="linear", positional="none"),
    "seed_token_sinusoidal": dict(d_seed=4, seed_mode="token", positional="sinusoidal"),
    "alibi_causal": dict(positional="alibi"),
    "digit_index_seed_add": dict(positional="digit_index", digit_tokens=5, d_seed=2),
    "alibi_custom_seed_token": dict(positional="alibi", mask="custom", d_seed=2, seed_mode="token"),
}


def perturbed(cfg: ModelConfig) -> HookedTransformer:
    model = HookedTransformer(cfg, seed=0)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return model


def make_inputs(cfg: ModelConfig, batch: int = 5, dtype=torch.float32) -> tuple[torch.Tensor, dict]:
    g = torch.Generator().manual_seed(3)
    n_pos = cfg.n_ctx - cfg.seed_offset
    if cfg.input_kind == "tokens":
        inputs = torch.randint(0, cfg.d_vocab, (batch, n_pos), generator=g)
    else:
        inputs = torch.randn(batch, n_pos, cfg.d_input, generator=g, dtype=dtype)
    kwargs = {}
    if cfg.has_seed:
        kwargs["seeds"] = torch.randn(batch, cfg.d_seed, generator=g, dtype=dtype)
    if cfg.mask == "custom":
        mask = torch.rand(batch, n_pos, n_pos, generator=g) < 0.5
        mask[0, 2] = False  # a query with no allowed key: it reads nothing on both paths
        kwargs["attention_mask"] = mask
    return inputs, kwargs


def noop(value, hook):
    return None


def every_hook(model: HookedTransformer):
    """A no-op forward hook on every hook point: the explicit path everywhere, same values."""
    return model.hooks(fwd_hooks=[(name, noop) for name in model.hook_dict])


def logits_and_grads(model, inputs, kwargs):
    model.zero_grad(set_to_none=True)
    logits = model(inputs, **kwargs)
    (logits.sin().sum()).backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_near(a: torch.Tensor, b: torch.Tensor, rel: float, what: str) -> None:
    a, b = a.detach(), b.detach()
    scale = max(1.0, float(b.abs().max()))
    assert float((a - b).abs().max()) <= rel * scale, f"{what}: {float((a - b).abs().max()):.3g} > {rel} * {scale:.3g}"


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype, rel", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_hook_free_forward_equals_the_explicit_one(name, dtype, rel):
    cfg = ModelConfig(**{**BASE, **CONFIGS[name]})
    model = perturbed(cfg).to(dtype)
    inputs, kwargs = make_inputs(cfg, dtype=dtype)
    fast, fast_grads = logits_and_grads(model, inputs, kwargs)
    with every_hook(model):
        assert all(listening(hp) for hp in model.hook_dict.values())
        slow, slow_grads = logits_and_grads(model, inputs, kwargs)
    assert not any(listening(hp) for hp in model.hook_dict.values())
    assert torch.isfinite(fast).all()
    assert_near(fast, slow, rel, f"{name} logits")
    for key in slow_grads:
        assert_near(fast_grads[key], slow_grads[key], rel * 10, f"{name} grad {key}")


@pytest.mark.parametrize("name", ["softmax_causal_ln_mlp", "softmax_custom_mask", "linear_causal",
                                  "seed_add_vectors_custom", "softmax_no_attn_bias_result"])
def test_run_with_cache_sees_every_hook_with_the_explicit_values(name):
    cfg = ModelConfig(**{**BASE, **CONFIGS[name]})
    model = perturbed(cfg)
    inputs, kwargs = make_inputs(cfg)
    logits, cache = model.run_with_cache(inputs, **kwargs)
    never = set() if cfg.use_attn_result else {n for n in model.hook_dict if n.endswith("hook_result")}
    assert set(cache.keys()) == set(model.hook_dict) - never
    assert_near(logits, model(inputs, **kwargs), 1e-6, "cached logits")
    for layer in range(cfg.n_layers):
        a = f"blocks.{layer}.attn."
        q, k, v = cache[a + "hook_q"], cache[a + "hook_k"], cache[a + "hook_v"]
        # the explicit attention, recomputed here from the cached q, k, v
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / (cfg.d_head**0.5 if cfg.use_attn_scale else 1.0)
        n_pos = q.shape[1]
        keep = (torch.ones(n_pos, n_pos, dtype=torch.bool).tril() if cfg.mask == "causal"
                else kwargs["attention_mask"][:, None] if cfg.mask == "custom" else None)
        if cfg.attention == "softmax":
            masked = scores if keep is None else scores.masked_fill(~keep, float("-inf"))
            pattern = torch.softmax(masked, -1).nan_to_num(0.0)
        else:
            pattern = scores if keep is None else scores.masked_fill(~keep, 0.0)
        torch.testing.assert_close(cache[a + "hook_pattern"], pattern, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cache[a + "hook_z"], torch.einsum("bhqk,bkhe->bqhe", pattern, v),
                                   rtol=1e-5, atol=1e-6)
        if cfg.normalization_type == "LN":
            resid = cache[f"blocks.{layer}.hook_resid_pre"]
            centred = resid - resid.mean(-1, keepdim=True)
            scale = (centred.pow(2).mean(-1, keepdim=True) + cfg.eps).sqrt()
            torch.testing.assert_close(cache[f"blocks.{layer}.ln1.hook_scale"], scale, rtol=1e-5, atol=1e-6)


def test_patching_the_pattern_takes_the_explicit_path():
    cfg = ModelConfig(**BASE, attn_bias=False)
    model = perturbed(cfg)
    tokens, _ = make_inputs(cfg)
    zero_pattern = [(f"blocks.{l}.attn.hook_pattern", lambda value, hook: torch.zeros_like(value))
                    for l in range(cfg.n_layers)]
    zero_attn_out = [(f"blocks.{l}.hook_attn_out", lambda value, hook: torch.zeros_like(value))
                     for l in range(cfg.n_layers)]
    # no attention bias: a zero pattern means a zero attention output
    patched = model.run_with_hooks(tokens, fwd_hooks=zero_pattern)
    torch.testing.assert_close(patched, model.run_with_hooks(tokens, fwd_hooks=zero_attn_out), rtol=1e-5, atol=1e-6)
    assert (patched - model(tokens)).abs().max() > 1e-3


def test_backward_hooks_fire_on_silent_forward_paths():
    cfg = ModelConfig(**BASE)
    model = perturbed(cfg)
    tokens, _ = make_inputs(cfg)
    grads = {}
    hooks = [(f"blocks.0.{n}", lambda g, hook: grads.__setitem__(hook.name, g)) for n in
             ("attn.hook_pattern", "hook_resid_pre", "ln1.hook_scale")]
    with model.hooks(bwd_hooks=hooks):
        model(tokens).sum().backward()
    assert set(grads) == {f"blocks.0.{n}" for n in ("attn.hook_pattern", "hook_resid_pre", "ln1.hook_scale")}
    # the pattern's gradient, computed independently from a retained activation
    kept = {}

    def keep(value, hook):
        value.retain_grad()
        kept["p"] = value

    model.zero_grad()
    model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", keep)]).sum().backward()
    # two kernels (the hook-free backward and the hooked one) sum in different orders: float32
    # rounding of the pattern's gradient, up to ~2e-5 measured on a loaded machine
    torch.testing.assert_close(grads["blocks.0.attn.hook_pattern"], kept["p"].grad, rtol=1e-4, atol=1e-4)


def test_fire_calls_a_hook_point_only_when_listened_to():
    cfg = ModelConfig(**BASE)
    model = perturbed(cfg)
    point = model.blocks[0].hook_resid_pre
    x = torch.randn(2, 3)
    assert not listening(point) and fire(point, x) is x
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda value, hook: value * 2)]):
        assert listening(point)
        torch.testing.assert_close(fire(point, x), 2 * x)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, out: None)
    try:
        assert listening(point)  # a global module hook must see every call
    finally:
        handle.remove()
    assert not listening(point)


@pytest.mark.parametrize("zoo_name", ["recall-Aq_R", "coloring-Aq_R", "sort"])
def test_training_losses_match_the_explicit_path(zoo_name):
    """The trainer's steps on a zoo recipe (small batch), hook-free against a twin whose every
    hook point carries a no-op hook (explicit attention and LayerNorm, hooks fired, the
    expanded forward for the seeds): the same losses to float rounding, step after step."""
    entry = ENTRIES[zoo_name]
    task = make_task(entry.task_name, **entry.task_config)
    cfg = task.model_config(**entry.model)
    train = dataclasses.replace(entry.train, batch_size=16, m_seeds=min(entry.train.m_seeds, 4))
    curves = []
    for hooked in (False, True):
        model = HookedTransformer(cfg, seed=0)
        optimizer, objective = make_optimizer(model, train), make_objective(train)
        generator = torch.Generator().manual_seed(0)
        losses = []
        with model.hooks(fwd_hooks=[(n, noop) for n in model.hook_dict] if hooked else []):
            for step in range(8):
                batch = task.sample(train.batch_size, generator)
                losses.append(training_step(model, optimizer, objective, task, batch, generator, step,
                                            train.grad_clip).item())
        curves.append(torch.tensor(losses))
    fast, slow = curves
    assert (fast[0] - fast[-1]).abs() > 0  # it trained
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("d_in, d_out, bias", [(40, 5, True), (5, 40, False), (16, 16, True)])
def test_linear_gradients_equal_autograd_of_the_plain_product(d_in, d_out, bias):
    from interp_rand.model.linear import linear

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 7, d_in, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(d_in, d_out, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(d_out, generator=g, dtype=torch.float64, requires_grad=True) if bias else None
    upstream = torch.randn(6, 7, d_out, generator=g, dtype=torch.float64)
    leaves = [t for t in (x, w, b) if t is not None]
    ours = linear(x, w, b)
    reference = x @ w + (b if bias else 0)
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-12)
    mine = torch.autograd.grad(ours, leaves, upstream)
    theirs = torch.autograd.grad(reference, leaves, upstream)
    for a, r in zip(mine, theirs):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-12)
    # under vmap (the grid world's populations) as well
    batched = torch.func.vmap(lambda weight: linear(x.detach(), weight, None))(torch.stack([w.detach()] * 2))
    torch.testing.assert_close(batched[1], x.detach() @ w.detach(), rtol=0, atol=1e-12)


def test_linear_without_gradients_is_the_autograd_function_s_forward_bitwise():
    """Under no_grad ``linear`` skips the autograd Function's call; the numbers are its forward's."""
    from interp_rand.model.linear import _Linear, linear

    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(4, 3, 16, generator=g), torch.randn(16, 5, generator=g), torch.randn(5, generator=g)
    with_grad = _Linear.apply(x, w.requires_grad_(), b)
    with torch.no_grad():
        plain = linear(x, w, b)
    assert not plain.requires_grad and with_grad.requires_grad
    assert torch.equal(plain, with_grad.detach())
