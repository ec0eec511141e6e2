"""The fast evaluation path (:mod:`interp_rand.model.fast`) against the hooked forward: logits
within 1e-5 on every zoo model (trained weights) and on configs covering every option it
implements, the colouring success matrix identical on the whole exhaustive cycle set, and the
dispatch of ``success_matrix`` (fast by default, hooked where hooks are attached or asked for)."""

from __future__ import annotations

import pytest
import torch

from interp_rand import zoo
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.fast import DecodeCache, FastForward, regular_key_index
from interp_rand.model.first_block import FirstBlockTable
from interp_rand.seeded_evaluation import success_matrix
from interp_rand.seeded_evaluation.run import evaluation_forward
from interp_rand.tasks import make_task
from interp_rand.zoo.entries import ENTRIES, AgentEntry

# Logits agree to 1e-5 of their own scale (``max(1, max |logit|)``): a trained colouring model's
# logits reach ~50, where one float32 ulp is 3.8e-6, so an absolute 1e-5 is 3 ulps; the hooked
# forward itself is further than that from a float64 forward (5.8e-5 on the addition model).
TOLERANCE = 1e-5


def _scale(logits: torch.Tensor) -> float:
    return max(1.0, logits.abs().max().item())


def _inputs(cfg: ModelConfig, batch: int, n_pos: int, g: torch.Generator) -> torch.Tensor:
    if cfg.input_kind == "tokens":
        return torch.randint(0, cfg.d_vocab, (batch, n_pos), generator=g)
    return torch.randn(batch, n_pos, cfg.d_input, generator=g)


def _kwargs(cfg: ModelConfig, batch: int, n_pos: int, g: torch.Generator, per_position: bool = False) -> dict:
    kwargs = {}
    if cfg.has_seed:
        shape = (batch, n_pos, cfg.d_seed) if per_position else (batch, cfg.d_seed)
        kwargs["seeds"] = torch.rand(shape, generator=g)
    if cfg.mask == "custom":
        kwargs["attention_mask"] = torch.rand(batch, n_pos, n_pos, generator=g) < 0.5
    return kwargs


def _assert_close(model: HookedTransformer, inputs: torch.Tensor, kwargs: dict) -> None:
    with torch.inference_mode():
        hooked = model(inputs, **kwargs)
        fast = FastForward.from_model(model)(inputs, **kwargs)
    assert fast.shape == hooked.shape
    assert (fast - hooked).abs().max().item() <= TOLERANCE * _scale(hooked)


# ------------------------------------------------------------------------------ zoo models
@pytest.mark.parametrize("name", list(ENTRIES))
def test_fast_logits_match_hooked_on_zoo_model(name):
    entry = ENTRIES[name]
    g = torch.Generator().manual_seed(0)
    if isinstance(entry, AgentEntry):
        model = zoo.load(name).model
        model = model() if callable(model) and not isinstance(model, torch.nn.Module) else model
        cfg = model.cfg
        n_pos = cfg.n_ctx - cfg.seed_offset
        inputs, kwargs = _inputs(cfg, 16, n_pos, g), _kwargs(cfg, 16, n_pos, g)
    else:
        model = zoo.load(name).model()
        task = make_task(entry.task_name, **entry.task_config)
        batch = task.sample(64, g)
        inputs, kwargs = batch.inputs, batch.model_kwargs()
        if task.name in ("coloring", "recall"):
            kwargs["seeds"] = task.sample_seeds(64, g).reshape(kwargs["seeds"].shape)
    _assert_close(model.eval(), inputs, kwargs)


# ------------------------------------------------------------------------------ every option
OPTION_CONFIGS = {
    "tokens_ln_mlp": dict(d_vocab=7),
    "gelu_new": dict(d_vocab=7, act_fn="gelu_new"),
    "relu_no_ln": dict(d_vocab=7, act_fn="relu", normalization_type=None),
    "full_mask": dict(d_vocab=7, mask="full"),
    "custom_mask": dict(d_vocab=7, mask="custom"),
    "linear_causal": dict(d_vocab=7, attention="linear", use_attn_scale=False),
    "linear_full": dict(d_vocab=7, attention="linear", mask="full"),
    "no_bias_sinusoidal": dict(d_vocab=7, attn_bias=False, positional="sinusoidal"),
    "no_positions": dict(d_vocab=7, positional="none"),
    "alibi": dict(d_vocab=7, positional="alibi"),
    "alibi_full_mask": dict(d_vocab=7, positional="alibi", mask="full"),
    "alibi_seed_token_custom": dict(d_vocab=7, positional="alibi", d_seed=3, seed_mode="token", mask="custom"),
    "digit_index": dict(d_vocab=7, positional="digit_index", digit_tokens=4),
    "digit_index_seed_token": dict(d_vocab=7, positional="digit_index", digit_tokens=4, d_seed=3, seed_mode="token"),
    "seed_add": dict(d_vocab=7, d_seed=3, seed_mode="add"),
    "seed_append_mlp": dict(d_vocab=7, d_seed=3, seed_mode="append", d_input_mlp=24),
    "seed_append_no_w_in": dict(d_vocab=7, d_seed=3, seed_mode="append", d_input_mlp=32, input_mlp_w_in=False),
    "seed_token": dict(d_vocab=7, d_seed=3, seed_mode="token"),
    "seed_token_custom": dict(d_vocab=7, d_seed=3, seed_mode="token", mask="custom"),
    "vectors_custom_seed": dict(input_kind="vectors", d_input=5, d_vocab_out=3, mask="custom", d_seed=1),
    "input_mlp_tokens": dict(d_vocab=7, d_input_mlp=20),
}


@pytest.mark.parametrize("name", list(OPTION_CONFIGS))
def test_fast_logits_match_hooked_on_every_option(name):
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, n_ctx=9, **OPTION_CONFIGS[name])
    model = HookedTransformer(cfg, seed=1).eval()
    with torch.no_grad():  # non-zero biases, so that a dropped bias would show
        for param_name, param in model.named_parameters():
            if param_name.split(".")[-1].startswith("b") or param_name.endswith(".w"):
                param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(len(param_name))))
    g = torch.Generator().manual_seed(2)
    n_pos = cfg.n_ctx - cfg.seed_offset
    _assert_close(model, _inputs(cfg, 12, n_pos, g), _kwargs(cfg, 12, n_pos, g))
    if cfg.has_seed and not cfg.seed_offset:
        _assert_close(model, _inputs(cfg, 12, n_pos, g), _kwargs(cfg, 12, n_pos, g, per_position=True))


BROADCAST_CONFIGS = {
    "seed_add_1_feature": dict(d_seed=1, seed_mode="add", mask="custom"),
    "seed_add_3_features": dict(d_seed=3, seed_mode="add"),
    "seed_append_mlp": dict(d_seed=1, seed_mode="append", d_input_mlp=12),
    "seed_token": dict(d_seed=2, seed_mode="token", mask="custom"),
    "no_seed_no_positions": dict(positional="none", mask="custom"),
    "no_seed_sinusoidal_many_outputs": dict(positional="sinusoidal", d_vocab_out=11),
}


@pytest.mark.parametrize("name", list(BROADCAST_CONFIGS))
def test_one_input_broadcast_over_the_batch_matches_hooked(name):
    """A stride-0 input (the colouring's one-hot vertex ids for every cycle) is embedded once and
    its positions added to that copy; the logits, units-first for a few output units (a
    transposed view) or not, match the hooked forward on the materialised input."""
    options = {"input_kind": "vectors", "d_input": 6, "d_vocab_out": 3, **BROADCAST_CONFIGS[name]}
    cfg = ModelConfig(d_model=16, n_layers=2, n_heads=2, n_ctx=6, **options)
    model = HookedTransformer(cfg, seed=3).eval()
    g = torch.Generator().manual_seed(4)
    n_pos = cfg.n_ctx - cfg.seed_offset
    one = torch.randn(1, n_pos, cfg.d_input, generator=g)
    inputs = one.expand(20, -1, -1)
    assert inputs.stride(0) == 0
    kwargs = _kwargs(cfg, 20, n_pos, g, per_position=cfg.has_seed and not cfg.seed_offset)
    if cfg.mask == "custom":  # every query reads 2 keys: the gathered path
        keys = torch.stack([torch.randperm(n_pos, generator=g)[:2] for _ in range(20 * n_pos)])
        kwargs["attention_mask"] = torch.zeros(20, n_pos, n_pos, dtype=torch.bool).scatter_(
            2, keys.view(20, n_pos, 2), True)
    with torch.inference_mode():
        hooked = model(inputs.contiguous(), **kwargs)
        fast = FastForward.from_model(model)(inputs, **kwargs)
    assert fast.shape == hooked.shape
    assert (fast - hooked).abs().max().item() <= TOLERANCE * _scale(hooked)
    assert torch.equal(fast.reshape(-1, cfg.d_vocab_out), fast.contiguous().view(-1, cfg.d_vocab_out))


def test_sparse_and_dense_masks_agree_and_empty_rows_read_nothing():
    cfg = ModelConfig(d_model=16, n_heads=2, n_ctx=6, d_vocab=5, mask="custom")
    model = HookedTransformer(cfg, seed=0).eval()
    g = torch.Generator().manual_seed(0)
    inputs = torch.randint(0, 5, (8, 6), generator=g)
    # every query reads exactly 2 keys (the regular case the gathered path serves)
    keys = torch.stack([torch.randperm(6, generator=g)[:2] for _ in range(48)]).view(8, 6, 2)
    regular = torch.zeros(8, 6, 6, dtype=torch.bool).scatter_(2, keys, True)
    assert torch.equal(regular_key_index(regular), keys.sort(-1).values)
    with torch.inference_mode():
        hooked = model(inputs, attention_mask=regular)
        for sparse in (True, False):
            out = FastForward(model, sparse_keys=sparse)(inputs, attention_mask=regular)
            assert (out - hooked).abs().max().item() <= TOLERANCE * _scale(hooked)
        fast = FastForward(model)
        index = fast.key_index(regular)
        assert torch.equal(fast(inputs, attention_mask=regular, key_index=index), fast(inputs, attention_mask=regular))
        with pytest.raises(ValueError, match="key_index"):
            fast(inputs, attention_mask=regular, key_index=index[:3])
    # a query with no allowed key reads nothing (the hooked rule), and the mask is not regular
    irregular = regular.clone()
    irregular[:, 0] = False
    assert regular_key_index(irregular) is None
    _assert_close(model, inputs, {"attention_mask": irregular})


def test_fast_forward_follows_weight_changes_and_checks_inputs():
    cfg = ModelConfig(d_model=16, n_heads=2, n_ctx=6, d_vocab=5)
    model = HookedTransformer(cfg, seed=0).eval()
    fast = FastForward.from_model(model)
    inputs = torch.randint(0, 5, (3, 6), generator=torch.Generator().manual_seed(0))
    before = fast(inputs)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.mul_(2.0)  # the fused q/k/v matrix must be rebuilt
    after = fast(inputs)
    assert not torch.allclose(before, after)
    assert (after - model(inputs)).abs().max().item() <= TOLERANCE * _scale(after)
    with pytest.raises(ValueError, match="token ids"):
        fast(inputs + 10)
    with pytest.raises(ValueError, match="no seed channel"):
        fast(inputs, seeds=torch.zeros(3, 1))


# ------------------------------------------------------------------------------ dispatch
def test_success_matrix_runs_the_fast_path_unless_hooks_or_asked():
    task = make_task("coloring")
    model = HookedTransformer(task.model_config(), seed=0)
    assert isinstance(evaluation_forward(model), FastForward)
    assert evaluation_forward(model, hooked=True) is model
    model.blocks[0].attn.hook_pattern.add_hook(lambda t, hook: t)
    try:
        assert model._hooks_attached() and evaluation_forward(model) is model
    finally:
        model.reset_hooks()
    assert not model._hooks_attached()
    handle = model.blocks[1].attn.register_forward_hook(lambda module, args, out: out)  # a plain torch hook
    assert evaluation_forward(model) is model
    handle.remove()
    assert isinstance(evaluation_forward(model), FastForward)

    seen = []  # a hook that would change the result must act: success_matrix runs hooked then
    model.blocks[0].hook_attn_out.add_hook(lambda t, hook: seen.append(1) or t * 0.0)
    batch = task.sample(6, torch.Generator().manual_seed(0))
    seeds = task.sample_seeds(3, torch.Generator().manual_seed(1))
    ablated = success_matrix(model, task, batch, seeds, keep_probs=True)
    model.reset_hooks()
    assert seen
    plain = success_matrix(model, task, batch, seeds, keep_probs=True)
    forced = success_matrix(model, task, batch, seeds, hooked=True, keep_probs=True)
    assert torch.equal(plain.success, forced.success) and torch.equal(plain.outputs, forced.outputs)
    assert (plain.probs - forced.probs).abs().max().item() <= TOLERANCE
    assert not torch.equal(ablated.probs, plain.probs)


def test_exhaustive_coloring_success_identical_on_trained_models():
    """Every one of the 181,440 cycles, 2 seeds, each zoo colouring model: the fast path's success
    matrix and outputs are identical to the hooked path's."""
    task = make_task("coloring")
    batch = task.exhaustive()
    seeds = task.sample_seeds(2, torch.Generator().manual_seed(0))
    for name in ("coloring-Aq_R", "coloring-AE_R"):
        model = zoo.load(name).model()
        fast = success_matrix(model, task, batch, seeds, keep_probs=False, chunk_size=16384)
        hooked = success_matrix(model, task, batch, seeds, keep_probs=False, chunk_size=16384, hooked=True)
        differing = (fast.success != hooked.success).any(1).nonzero().flatten().tolist()
        assert differing == [], f"{name}: rows {differing[:10]} differ"
        assert torch.equal(fast.outputs, hooked.outputs)


def test_success_matrix_identical_over_chunks_workers_and_broadcast_inputs():
    """The fast path's results do not depend on the chunking, the workers, or whether the
    one-hot inputs are a broadcast view (a slice of ``exhaustive()``) or materialised; they equal
    the hooked path's (probabilities within float rounding); chunks fill preallocated results."""
    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    broadcast = task.exhaustive()[:300]
    materialised = broadcast[torch.arange(300)]
    assert broadcast.inputs.stride(0) == 0 and materialised.inputs.stride(0) != 0
    seeds = task.sample_seeds(7, torch.Generator().manual_seed(5))
    hooked = success_matrix(model, task, materialised, seeds, hooked=True, chunk_size=4096, keep_probs=True)
    assert 0 < hooked.success.float().mean() < 1
    for batch in (broadcast, materialised):
        for chunk_size, workers in ((2100, 1), (64, 2), (333, 3)):
            fast = success_matrix(model, task, batch, seeds, chunk_size=chunk_size, workers=workers, keep_probs=True)
            assert torch.equal(fast.success, hooked.success) and torch.equal(fast.outputs, hooked.outputs)
            assert fast.probs.shape == hooked.probs.shape and fast.probs.is_contiguous()
            assert (fast.probs - hooked.probs).abs().max().item() <= TOLERANCE


def test_seed_rows_index_a_table_of_seeds_and_give_the_indexed_seeds_result():
    """``seed_rows`` (the seeds as a table, the stream up to the first mix once per seed) gives
    the numbers of ``seeds=seeds[seed_rows]``: through attention's table form (a broadcast input,
    gathered keys), and where it does not apply (materialised inputs, a dense mask); bad rows are
    refused."""
    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model().eval()
    batch = task.exhaustive()[:6]
    table = task.sample_seeds(4, torch.Generator().manual_seed(3))
    seed_rows = torch.tensor([0, 3, 3, 1, 2, 0])
    expected = model(batch.inputs, seeds=table[seed_rows], attention_mask=batch.attention_mask)
    for fast, inputs in ((FastForward(model), batch.inputs), (FastForward(model), batch.inputs.contiguous()),
                         (FastForward(model, sparse_keys=False), batch.inputs)):
        rows = fast(inputs, seeds=table, seed_rows=seed_rows, attention_mask=batch.attention_mask)
        indexed = fast(inputs, seeds=table[seed_rows], attention_mask=batch.attention_mask)
        assert torch.equal(rows, indexed)
        assert (rows - expected).abs().max().item() <= TOLERANCE * _scale(expected)
    with pytest.raises(ValueError, match="seed_rows must be long"):
        FastForward(model)(batch.inputs, seeds=table, seed_rows=seed_rows[:3], attention_mask=batch.attention_mask)

    # the first block looked up from its table of every (seed, key set, position): the same numbers
    fast = FastForward(model)
    key_index = fast.key_index(batch.attention_mask)
    first = FirstBlockTable.build(fast, batch.inputs, table, key_index)
    assert first is not None and FirstBlockTable.build(fast, batch.inputs.contiguous(), table, key_index) is None
    looked_up = fast(batch.inputs, seeds=table, seed_rows=seed_rows, attention_mask=batch.attention_mask,
                     key_index=key_index, first_block=first)
    assert torch.equal(looked_up, fast(batch.inputs, seeds=table[seed_rows], attention_mask=batch.attention_mask))
    with torch.no_grad():
        model.blocks[0].attn.W_V.mul_(2.0)
    with pytest.raises(ValueError, match="other weights"):
        fast(batch.inputs, seeds=table, seed_rows=seed_rows, attention_mask=batch.attention_mask,
             key_index=key_index, first_block=first)


# ------------------------------------------------------------------------------ decoding
def _model_with_biases(cfg: ModelConfig, seed: int = 1) -> HookedTransformer:
    model = HookedTransformer(cfg, seed=seed).eval()
    with torch.no_grad():  # non-zero biases, so that a dropped bias would show
        for param_name, param in model.named_parameters():
            if param_name.split(".")[-1].startswith("b") or param_name.endswith(".w"):
                param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(len(param_name))))
    return model


# (digit-index positions depend on the tokens before each one, which a cache does not keep: refused)
CAUSAL_OPTIONS = [name for name, changes in OPTION_CONFIGS.items()
                  if changes.get("mask", "causal") == "causal" and changes.get("positional") != "digit_index"]


def test_decoding_digit_index_positions_with_a_cache_is_refused():
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, n_ctx=9, **OPTION_CONFIGS["digit_index"])
    with pytest.raises(ValueError, match="cannot read digit-index positions"):
        FastForward(HookedTransformer(cfg)).__call__(torch.zeros(2, 3, dtype=torch.long), cache=DecodeCache.empty(cfg, 2))


@pytest.mark.parametrize("name", CAUSAL_OPTIONS)
def test_decoding_with_a_cache_matches_the_full_forward(name):
    # positions fed in pieces of 2, 1, 3, 1 and the rest: every piece's logits equal those
    # positions' logits of one hooked forward over the whole sequence
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, n_ctx=9, **OPTION_CONFIGS[name])
    model = _model_with_biases(cfg)
    g = torch.Generator().manual_seed(2)
    n_pos = cfg.n_ctx - cfg.seed_offset
    per_position = [False] + ([True] if cfg.has_seed and not cfg.seed_offset else [])
    for per_pos in per_position:
        inputs, kwargs = _inputs(cfg, 12, n_pos, g), _kwargs(cfg, 12, n_pos, g, per_position=per_pos)
        with torch.inference_mode():
            full = model(inputs, **kwargs)
            fast, cache = FastForward(model), DecodeCache.empty(cfg, 12)
            pieces = []
            for a, b in [(0, 2), (2, 3), (3, 6), (6, 7), (7, n_pos)]:
                piece = {k: (v[:, a:b] if v.dim() == 3 else v) for k, v in kwargs.items()}
                pieces.append(fast(inputs[:, a:b], cache=cache, **piece))
        decoded = torch.cat(pieces, 1)
        assert decoded.shape == full.shape and cache.length == cfg.n_ctx
        assert (decoded - full).abs().max().item() <= TOLERANCE * _scale(full)


def test_decoding_vmapped_over_members_matches_each_member():
    # a population: each member's weights stacked, one vmap over functional_call of the fast
    # path per step, the caches' buffers batched over members (dim 2)
    from torch.func import functional_call, vmap

    cfg = ModelConfig(input_kind="vectors", d_input=5, d_vocab_out=3, d_seed=5, seed_mode="token", d_model=16,
                      n_heads=2, n_ctx=8, attn_only=False, d_mlp=24)
    members = [_model_with_biases(cfg, seed=i) for i in range(3)]
    params = {f"model.{n}": torch.stack([dict(m.named_parameters())[n].detach() for m in members])
              for n, _ in members[0].named_parameters()}

    class Fast(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model, self.fast = model, FastForward(model)

        def forward(self, inputs, seeds, cache):
            return self.fast(inputs, seeds=seeds, cache=cache)

    module = Fast(HookedTransformer(cfg, seed=9))
    g = torch.Generator().manual_seed(3)
    inputs, seeds = torch.randn(3, 4, 7, 5, generator=g), torch.randn(3, 4, 5, generator=g)
    cache = DecodeCache.empty(cfg, (3, 4))

    def member(p, keys, values, x, s):
        inner = DecodeCache(keys, values, cache.length)
        out = functional_call(module, p, (x, s, inner))
        lengths.append(inner.length)
        return out

    lengths, steps = [], []
    with torch.no_grad():
        for t in range(7):
            steps.append(vmap(member, in_dims=(0, 2, 2, 0, 0))(params, cache.keys, cache.values, inputs[:, :, t : t + 1], seeds))
            cache.length = lengths[-1]
        decoded = torch.cat(steps, 2)
        expected = torch.stack([m(inputs[i], seeds=seeds[i]) for i, m in enumerate(members)])
    assert lengths == list(range(2, 9))
    assert (decoded - expected).abs().max().item() <= TOLERANCE * _scale(expected)
    assert (expected[0] - expected[1]).abs().max() > 0.1  # the members differ


def test_decoding_refuses_what_it_cannot_decode():
    cfg = ModelConfig(d_model=16, n_heads=2, n_ctx=6, d_vocab=5)
    fast, inputs = FastForward(HookedTransformer(cfg)), torch.zeros(3, 4, dtype=torch.long)
    custom = HookedTransformer(cfg.replace(mask="custom"))
    with pytest.raises(ValueError, match="needs a causal model; this model has mask='custom'"):
        FastForward(custom)(inputs, attention_mask=torch.ones(3, 4, 4, dtype=torch.bool),
                            cache=DecodeCache.empty(cfg, 3))
    with pytest.raises(ValueError, match=r"buffers must be 2 keys and values of shape \(6, 8, 3, 2\)"):
        fast(inputs, cache=DecodeCache.empty(cfg, 4))
    cache = DecodeCache.empty(cfg, 3)
    fast(inputs, cache=cache)
    with pytest.raises(ValueError, match="decoding 3 more positions after 4 exceeds n_ctx=6"):
        fast(inputs[:, :3], cache=cache)


def test_fused_weights_follow_swapped_parameters():
    # functional_call swaps fresh tensors in on every call (ids of freed ones are reused): the
    # fused q/k/v matrix must be rebuilt for each, and again for the model's own weights after
    from torch.func import functional_call

    cfg = ModelConfig(d_model=16, n_heads=2, n_ctx=6, d_vocab=5)
    model = HookedTransformer(cfg, seed=0).eval()

    class Fast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.fast = model, FastForward(model)

        def forward(self, inputs):
            return self.fast(inputs)

    module = Fast()
    inputs = torch.randint(0, 5, (3, 6), generator=torch.Generator().manual_seed(0))
    others = [HookedTransformer(cfg, seed=seed) for seed in range(1, 5)]
    weights = [{f"model.{n}": p.detach() for n, p in other.named_parameters()} for other in others]
    with torch.no_grad():
        own = module(inputs)
        # fresh clones per call, freed right after it: CPython hands their addresses (ids) to
        # the next call's clones, whose version counters are 0 again
        swapped = [functional_call(module, {n: w.clone() for n, w in weight.items()}, (inputs,)) for weight in weights]
        for other, logits in zip(others, swapped):
            assert (logits - other(inputs)).abs().max().item() <= TOLERANCE * _scale(logits)
        assert torch.equal(module(inputs), own)
