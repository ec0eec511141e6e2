"""Adding a mixer kind is its class and one registration: a causal running-mean mixer defined
here, registered as a user would (:data:`~interp_rand.model.config.MIXERS`), runs the hooked
forward, the fast path and decoding, batched (block and incremental) exact patching against the
one-edge reference, and the readers of an attention pattern skip or refuse it by its declared
capabilities (it has none), with no file of the package naming it."""

import pytest
import torch
from circuit_models import token_pairs

from circuits import ModelGraph, writer_values
from circuits.analyses.flow import mean_attention
from circuits.interventions.batched_patching import batched_edge_scores
from circuits.interventions.edge_patching import exact_edge_scores
from circuits.interventions.incremental_run import IncrementalRun
from circuits.interventions.metrics import logprob
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.config import MIXERS
from interp_rand.model.fast import DecodeCache, FastForward
from interp_rand.model.mixer import Mixer, capability_hook
from probes.attention import attention_patterns
from probes.qk_attribution import qk_attribution


def running_mean(q, k, v):
    """``z_t = q_t * mean_{s <= t} (k_s * v_s)`` over the position axis ``-3``."""
    n = torch.arange(1, k.shape[-3] + 1, dtype=k.dtype, device=k.device)[:, None, None]
    return q * ((k * v).cumsum(-3) / n)


class RunningMean(Mixer):
    """A causal running mean: the whole of a new mixer kind (its three hook-free forms)."""

    @classmethod
    def check_config(cls, cfg):
        if cfg.mask != "causal":
            raise ValueError(f"ModelConfig.mask={cfg.mask!r}: a running mean needs mask 'causal'")

    def mix(self, q, k, v, allowed):
        return running_mean(q, k, v)

    def mix_at(self, q, k, v, allowed, queries, per_example, heads=None):
        n = torch.arange(1, k.shape[-3] + 1, dtype=k.dtype)[:, None, None]
        return q * ((k * v).cumsum(-3) / n).index_select(-3, queries)

    @classmethod
    def fast_plan(cls, cfg, allowed, index, batch, n_pos):
        # q may be the last positions only (decoding: the new ones over every key so far)
        def plan(q, k, v, scale):
            n = torch.arange(1, k.shape[1] + 1, dtype=k.dtype)[:, None, None]
            return q * ((k * v).cumsum(1) / n)[:, k.shape[1] - q.shape[1]:]

        return plan


CFG = dict(attention="running_mean", n_layers=2, n_heads=2, d_model=8, n_ctx=5, d_vocab=5, d_mlp=8)


@pytest.fixture(scope="module")
def model():
    with MIXERS.temporarily("running_mean", RunningMean, description="a causal running mean (a test's)"):
        yield HookedTransformer(ModelConfig(**CFG), seed=2).eval()
    assert "running_mean" not in MIXERS


def test_the_config_checks_the_kind_by_the_registry_and_the_mixer_s_own_rule(model):
    assert "running_mean" in MIXERS.names() and isinstance(model.blocks[1].attn, RunningMean)
    with pytest.raises(ValueError, match="a running mean needs mask 'causal'"):
        ModelConfig(**{**CFG, "mask": "full"})
    with pytest.raises(ValueError, match="attention='nope' is not allowed; choose from .*running_mean"):
        ModelConfig(**{**CFG, "attention": "nope"})


def test_the_hooked_forward_fast_path_and_decoding(model):
    tokens = torch.randint(0, 5, (3, 5), generator=torch.Generator().manual_seed(0))
    logits, cache = model.run_with_cache(tokens)
    for layer in range(2):
        q, k, v = (cache[f"blocks.{layer}.attn.hook_{t}"] for t in "qkv")
        z = torch.stack([q[:, t] * (k[:, : t + 1] * v[:, : t + 1]).mean(1) for t in range(5)], 1)
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_z"], z, rtol=1e-5, atol=1e-6)
    queries = torch.tensor([1, 4])
    attn = model.blocks[1].attn
    q, k, v = (cache[f"blocks.1.attn.hook_{t}"] for t in "qkv")
    assert torch.equal(attn.mix_at(q[:, queries], k, v, None, queries, False), cache["blocks.1.attn.hook_z"][:, queries])
    fast = FastForward.from_model(model)
    torch.testing.assert_close(fast(tokens), logits, rtol=0, atol=1e-5)
    decode = DecodeCache.empty(model.cfg, 3)
    steps = [fast(tokens[:, :2], cache=decode)] + [fast(tokens[:, t : t + 1], cache=decode) for t in range(2, 5)]
    torch.testing.assert_close(torch.cat(steps, 1), logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("by_position", [True, False])
def test_batched_exact_patching_equals_the_one_edge_reference(model, by_position):
    clean, corrupted = token_pairs(n=4, n_pos=5)
    assert IncrementalRun.supports(model)
    graph = ModelGraph.of(model, 5, by_position)
    replacement = writer_values(model, graph, corrupted)
    reference = exact_edge_scores(model, graph, clean, replacement, logprob)
    assert reference[graph.mask].abs().max() > 1e-3
    for incremental in (True, False):
        scores = batched_edge_scores(model, graph, clean, replacement, logprob, incremental=incremental)
        torch.testing.assert_close(scores, reference, atol=1e-5, rtol=0)


def test_readers_of_a_pattern_read_its_capabilities(model):
    """No pattern declared: the drawing draws key/value edges unsplit, attention probes and
    query/key attribution refuse in one line; a softmax model's capabilities are its hooks."""
    clean, _ = token_pairs(n=4, n_pos=5)
    assert capability_hook(model, 0, "pattern") is None and capability_hook(model, 1, "scores") is None
    assert mean_attention(model, clean) is None
    with pytest.raises(ValueError, match=r"blocks \[0, 1\] \(RunningMean\) have none"):
        attention_patterns(model, clean)
    with pytest.raises(ValueError, match=r"blocks.1.attn \(RunningMean\) has none"):
        qk_attribution(model, clean, 1, 0, 4)
    softmax = HookedTransformer(ModelConfig(**{**CFG, "attention": "softmax"}), seed=2).eval()
    assert capability_hook(softmax, 1, "pattern") == "blocks.1.attn.hook_pattern"
    assert capability_hook(softmax, 1, "scores") == "blocks.1.attn.hook_attn_scores"
    assert mean_attention(softmax, clean).shape == (2, 2, 5, 5)
    with pytest.raises(ValueError, match="unknown mixer capability 'gates'"):
        capability_hook(softmax, 0, "gates")
