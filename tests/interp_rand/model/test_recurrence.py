"""The gated linear recurrence mixer (``attention="recurrent"``): its maths against a plain loop,
its written-out backward, its recompute-at-these-queries form, the fast path and decoding."""

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.fast import DecodeCache, FastForward
from interp_rand.model.recurrence import DECAY_OFFSET, GatedRecurrence, _Scan, scan

CFG = dict(d_model=16, n_layers=2, n_heads=2, n_ctx=7, d_vocab=5, attention="recurrent")


def _model(**overrides):
    return HookedTransformer(ModelConfig(**{**CFG, **overrides}), seed=3).eval()


def test_the_hooked_forward_is_the_recurrence_written_as_a_loop():
    model = _model(d_seed=2)
    tokens = torch.randint(0, 5, (4, 7), generator=torch.Generator().manual_seed(0))
    seeds = torch.randn(4, 2, generator=torch.Generator().manual_seed(1))
    logits, cache = model.run_with_cache(tokens, seeds=seeds)
    assert isinstance(model.blocks[0].attn, GatedRecurrence) and "blocks.0.attn.hook_pattern" not in model.hook_dict
    for layer in range(2):
        q, k, v = (cache[f"blocks.{layer}.attn.hook_{t}"] for t in "qkv")
        a = torch.sigmoid(k + DECAY_OFFSET)
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_decay"], a, rtol=0, atol=0)
        h, z = torch.zeros_like(v[:, 0]), []
        for t in range(7):
            h = a[:, t] * h + (1 - a[:, t] ** 2).sqrt() * v[:, t]
            z.append(q[:, t] * h)
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_z"], torch.stack(z, 1), rtol=1e-5, atol=1e-6)
    # hooks change nothing but the LayerNorm's kernel (explicit while its scale is cached)
    plain = model(tokens, seeds=seeds)
    torch.testing.assert_close(plain, logits, rtol=0, atol=1e-5)
    # causal: a later token changes no earlier output
    later = tokens.clone()
    later[:, 5] = (later[:, 5] + 1) % 5
    changed = model(later, seeds=seeds)
    assert torch.equal(changed[:, :5], plain[:, :5]) and not torch.allclose(changed[:, 5], plain[:, 5])


def test_the_scan_backward_is_the_gradient():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(2, 5, 1, 3, generator=g, dtype=torch.float64).requires_grad_()
    u = torch.randn(2, 5, 1, 3, generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(_Scan.apply, (a, u))


def test_a_saturated_decay_keeps_the_gradient_finite_and_elsewhere_it_is_autograd_s():
    """Where ``sigmoid(k + 3)`` rounds to 1 (k large), the plain ``sqrt(1 - a**2)`` has an infinite
    derivative times a zero one: a NaN gradient (the recurrent recall model stopped at step 1475
    on it). The bounded square root keeps it finite; off saturation it is autograd's, bitwise."""
    g = torch.Generator().manual_seed(0)
    k = torch.randn(3, 6, 1, 4, generator=g)
    k[0, 2, 0, 1] = 40.0  # a = 1.0 in float32
    v = torch.randn(3, 6, 1, 4, generator=g)

    def grads(sqrt):
        kk, vv = k.clone().requires_grad_(), v.clone().requires_grad_()
        a = torch.sigmoid(kk + DECAY_OFFSET)
        h = _Scan.apply(a, sqrt((1 - a) * (1 + a)) * vv) if sqrt else scan(a, vv)
        h.square().sum().backward()
        return kk.grad, vv.grad

    plain_k, _ = grads(torch.sqrt)
    assert torch.isnan(plain_k).any()  # the failure this guards against
    bounded_k, bounded_v = grads(None)
    assert torch.isfinite(bounded_k).all() and torch.isfinite(bounded_v).all()
    k[0, 2, 0, 1] = 0.5  # no saturation: the same gradient as autograd's sqrt, to the bit
    assert torch.equal(grads(torch.sqrt)[0], grads(None)[0])


def test_recomputing_some_queries_gives_the_forward_s_numbers_there():
    model = _model()
    attn = model.blocks[1].attn
    tokens = torch.randint(0, 5, (3, 7), generator=torch.Generator().manual_seed(2))
    _, cache = model.run_with_cache(tokens)
    q, k, v = (cache[f"blocks.1.attn.hook_{t}"] for t in "qkv")
    queries = torch.tensor([2, 5, 6])
    z = attn.mix_at(q[:, queries], k, v, None, queries, per_example=False)
    assert torch.equal(z, cache["blocks.1.attn.hook_z"][:, queries])


@pytest.mark.parametrize("overrides", [{}, {"attn_only": True, "normalization_type": None, "positional": "none"},
                                       {"d_seed": 3, "seed_mode": "token"}])
def test_the_fast_path_and_decoding_equal_the_hooked_forward(overrides):
    model = _model(**overrides)
    fast = FastForward.from_model(model)
    tokens = torch.randint(0, 5, (4, 6), generator=torch.Generator().manual_seed(4))
    seeds = torch.randn(4, 3, generator=torch.Generator().manual_seed(5)) if "d_seed" in overrides else None
    full = model(tokens, seeds=seeds)
    torch.testing.assert_close(fast(tokens, seeds=seeds), full, rtol=0, atol=1e-5)
    cache = DecodeCache.empty(model.cfg, 4)
    steps = [fast(tokens[:, :3], seeds=seeds, cache=cache)] + [fast(tokens[:, t : t + 1], seeds=seeds, cache=cache)
                                                              for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-5)


def test_a_recurrence_needs_a_causal_mask():
    with pytest.raises(ValueError, match="attention='recurrent'.*needs mask 'causal'"):
        ModelConfig(**{**CFG, "mask": "full"})
