"""RecallTask: layout, targets recomputed from the tokens, seeds (enumeration, fixed seed, the
seed reaching every token), corruption, validation, the paper's model on it."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from interp_rand.evaluation import evaluate
from interp_rand.losses import answer_loss
from interp_rand.model import HookedTransformer
from interp_rand.tasks import RandomizedTask, RecallTask, make_task, task_names
from interp_rand.tasks.recall import RECALL_CPU, RECALL_PAPER
from interp_rand.training.config import TrainConfig


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_shapes_dtypes_and_loss_mask():
    task = RecallTask(n_pairs=6, value_bits=3, seed_bits=4)
    batch = task.sample(32, gen())
    assert batch.inputs.shape == (32, 7, 9) and batch.inputs.dtype == torch.float32
    assert batch.targets.shape == (32, 7, 3) and batch.targets.dtype == torch.float32
    assert batch.seeds.shape == (32, 4) and batch.seeds.dtype == torch.float32
    assert set(batch.seeds.unique().tolist()) == {0.0, 1.0}
    assert torch.equal(batch.answer_positions, torch.tensor([6]))
    assert torch.equal(batch.loss_mask, (torch.arange(7) == 6).expand(32, 7))
    assert (batch.targets[:, :6] == 0).all()
    assert batch.attention_mask is None
    meta = batch.metadata
    assert meta["query_index"].shape == meta["query_key"].shape == (32,)
    assert meta["values"].shape == (32, 6, 3) and meta["values"].dtype == torch.long
    assert meta["key_order"].shape == (32, 6)
    # Seeds differ between examples (fresh per example).
    assert len(batch.seeds.unique(dim=0)) > 1


def test_keys_are_a_permutation_and_targets_match_the_tokens():
    task = RecallTask(n_pairs=8)
    batch = task.sample(64, gen(1))
    keys, values = batch.inputs[:, :8, :8], batch.inputs[:, :8, 8:]
    eye = torch.eye(8)
    for row in range(64):
        # 0/1 rows with pairwise dot products = identity: N distinct one-hots, a permutation.
        assert ((keys[row] == 0) | (keys[row] == 1)).all()
        assert torch.equal(keys[row] @ keys[row].T, eye)
        assert torch.equal(keys[row].argmax(1), batch.metadata["key_order"][row])
        query = batch.inputs[row, 8]
        assert torch.equal(query[8:], torch.zeros(5))
        matches = [i for i in range(8) if torch.equal(keys[row, i], query[:8])]
        assert len(matches) == 1
        (i,) = matches
        assert torch.equal(batch.answer_targets()[row, 0], values[row, i])
        assert batch.metadata["query_index"][row] == i
        assert batch.metadata["key_order"][row, i] == batch.metadata["query_key"][row]
        assert keys[row, i, batch.metadata["query_key"][row]] == 1


def test_all_seeds_enumerates_every_bit_pattern():
    task = RecallTask()
    seeds = task.all_seeds()
    assert seeds.shape == (1024, 10)
    as_ints = (seeds.long() * 2 ** torch.arange(9, -1, -1)).sum(1)
    assert torch.equal(as_ints, torch.arange(1024))  # binary order, every pattern once
    with pytest.raises(ValueError, match="seed_bits"):
        RecallTask(seed_bits=17).all_seeds()


def test_fixed_seed_is_deterministic_and_a_seed_of_the_distribution():
    task = RecallTask()
    r0 = task.fixed_seed()
    assert r0.shape == (10,)
    assert torch.equal(r0, RecallTask().fixed_seed())
    assert torch.equal(r0, task.sample_seeds(1, gen(0))[0])
    assert set(r0.tolist()) <= {0.0, 1.0}


def test_with_seeds_replaces_and_validates():
    task = RecallTask(n_pairs=4)
    batch = task.sample(5, gen())
    fixed = task.fixed_seed().expand(5, 10)
    replaced = task.with_seeds(batch, fixed)
    assert torch.equal(replaced.seeds, fixed) and torch.equal(replaced.inputs, batch.inputs)
    assert torch.equal(task.with_seeds(batch, fixed.bool()).seeds, fixed)
    for bad in (torch.zeros(5, 9), torch.zeros(4, 10), torch.zeros(5, 5, 10)):
        with pytest.raises(ValueError, match="seed_shape"):
            task.with_seeds(batch, bad)


def test_the_seed_reaches_every_token():
    task = RecallTask(n_pairs=6)
    model = HookedTransformer(task.model_config(d_model=16), seed=0)
    batch = task.sample(4, gen(2))
    _, cache = model.run_with_cache(batch.inputs, seeds=batch.seeds)
    assert torch.equal(cache["hook_seed"], batch.seeds[:, None].expand(4, 7, 10))
    flipped = task.with_seeds(batch, 1 - batch.seeds)
    _, flipped_cache = model.run_with_cache(flipped.inputs, seeds=flipped.seeds)
    change = (flipped_cache["blocks.0.hook_resid_pre"] - cache["blocks.0.hook_resid_pre"]).abs()
    assert (change.amax(-1) > 1e-6).all()  # every example, every position


def test_model_config_is_the_papers():
    cfg = RecallTask(n_pairs=12).model_config()
    assert (cfg.input_kind, cfg.d_input, cfg.d_vocab_out, cfg.n_ctx) == ("vectors", 17, 5, 13)
    assert (cfg.attention, cfg.mask) == ("linear", "causal")
    assert (cfg.attn_only, cfg.normalization_type) == (True, None)
    assert (cfg.n_layers, cfg.n_heads, cfg.d_head, cfg.d_input_mlp) == (2, 1, 5, 40)
    assert (cfg.d_seed, cfg.seed_mode, cfg.d_model, cfg.input_mlp_w_in) == (10, "append", 40, False)
    assert (cfg.positional, cfg.use_attn_scale, cfg.attn_bias, cfg.init) == ("none", False, False, "fan_in")
    # the paper's (and its public port's) parameter count: token -> 40 -> 40, 2 x 4 matrices of
    # 40 x 5, a readout with bias
    model = HookedTransformer(cfg)
    assert sum(p.numel() for p in model.parameters()) == 4565
    assert {n for n, _ in model.named_parameters()} >= {"embed.W_E", "seed_embed.W_seed", "input_mlp.W_out"}
    assert "input_mlp.W_in" not in dict(model.named_parameters())
    # a narrower model keeps the input MLP's width equal to the residual stream's
    assert RecallTask(n_pairs=8).model_config(d_model=16).d_input_mlp == 16
    with pytest.raises(ValueError, match="no field"):
        RecallTask().model_config(d_modle=8)


def test_only_a_learned_table_rejects_more_positions_than_n_ctx():
    """The recall model has no positional table, so n_ctx does not bound it; with a learned
    table it does. A key alphabet of another size is refused by its width either way."""
    task = RecallTask(n_pairs=8)
    batch = task.sample(2, gen())
    assert HookedTransformer(task.model_config(d_model=16, n_ctx=8))(batch.inputs, **batch.model_kwargs()).shape[1] == 9
    short = HookedTransformer(task.model_config(d_model=16, n_ctx=8, positional="learned"))
    with pytest.raises(ValueError, match="n_ctx=8"):
        short(batch.inputs, **batch.model_kwargs())
    bigger = RecallTask(n_pairs=10).sample(2, gen())
    with pytest.raises(ValueError, match="d_input"):
        HookedTransformer(task.model_config(d_model=16))(bigger.inputs, **bigger.model_kwargs())


class FixedLogits(torch.nn.Module):
    """Returns the logits it was given, whatever the inputs (evaluate's chunks slice them)."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits, self.seen = logits, 0

    def forward(self, inputs, **kwargs):
        out = self.logits[self.seen : self.seen + len(inputs)]
        self.seen += len(inputs)
        return out


def test_bce_loss_of_a_model_is_finite_and_evaluate_runs():
    task = RecallTask(n_pairs=5)
    batch = task.sample(16, gen(3))
    meta = batch.metadata
    queried = meta["values"][torch.arange(16), meta["query_index"]].float()  # [16, value_bits], the answer
    position = int(batch.answer_positions)
    # known logits: random at the answer position, huge (and ignored) elsewhere
    logits = torch.full((16, batch.inputs.shape[1], task.value_bits), 1e4)
    logits[:, position] = torch.randn(16, task.value_bits, generator=gen(4)) * 3
    expected = F.binary_cross_entropy_with_logits(logits[:, position], queried, reduction="none").mean(-1)
    torch.testing.assert_close(answer_loss(logits, batch, task.loss_kind), expected)
    # logits of 0 are a coin flip on every bit: ln 2 per example
    zero = answer_loss(torch.zeros_like(logits), batch, task.loss_kind)
    torch.testing.assert_close(zero, torch.full((16,), math.log(2)))
    # evaluate on the same logits: the loss is their mean, exact match the sign test by hand
    result = evaluate(FixedLogits(logits), task, batch, chunk_size=5)
    assert result.loss == pytest.approx(float(expected.mean()), rel=1e-6)
    by_hand = ((logits[:, position] > 0) == queried.bool()).all(-1).float().mean()
    assert result.exact_match == pytest.approx(float(by_hand)) and len(result.per_position) == 1
    # right signs on the first 12 examples only: exact match 12/16 exactly
    right = (2 * queried - 1) * 3
    right[12:] *= -1
    logits[:, position] = right
    assert evaluate(FixedLogits(logits), task, batch).exact_match == 0.75
    # and a real model's loss is the same formula on its own logits
    model = HookedTransformer(task.model_config(d_model=16), seed=1)
    with torch.no_grad():
        own = model(batch.inputs, **batch.model_kwargs())[:, position]
    torch.testing.assert_close(evaluate(model, task, batch).loss,
                               float(F.binary_cross_entropy_with_logits(own, queried).double()), rtol=1e-5, atol=1e-6)


def test_corrupt_queries_another_pair_with_a_different_value():
    task = RecallTask(n_pairs=6, value_bits=2)
    batch = task.sample(200, gen(4))
    pair = task.corrupt(batch, gen(5))
    clean, corrupted = pair.clean, pair.corrupted
    assert torch.equal(corrupted.inputs[:, :6], clean.inputs[:, :6])  # pairs untouched
    assert torch.equal(corrupted.seeds, clean.seeds)
    assert torch.equal(pair.changed, corrupted.metadata["query_index"])
    assert (pair.changed != clean.metadata["query_index"]).all()
    differs = (corrupted.answer_targets() != clean.answer_targets()).any(-1)[:, 0]
    # The answer changes wherever some other pair's value differs from the queried one.
    values, query = clean.metadata["values"], clean.metadata["query_index"]
    possible = (values != values[torch.arange(200), query][:, None]).any(-1).any(-1)
    assert torch.equal(differs, possible) and possible.float().mean() > 0.9


def test_corrupt_where_no_other_value_differs():
    # Every value equal: the answer cannot change, but another key is still queried.
    task = RecallTask(n_pairs=3, value_bits=2)
    batch = task.build(torch.tensor([[2, 0, 1]]), torch.ones(1, 3, 2), torch.tensor([1]))
    pair = task.corrupt(batch, gen())
    assert int(pair.changed) in (0, 2)
    assert torch.equal(pair.corrupted.answer_targets(), batch.answer_targets())


@pytest.mark.parametrize(
    "config, field",
    [({"n_pairs": 1}, "n_pairs"), ({"n_pairs": 65}, "n_pairs"), ({"value_bits": 0}, "value_bits"),
     ({"seed_bits": 0}, "seed_bits"), ({"n_pairs": 4.0}, "n_pairs")],
)
def test_bad_config_names_the_field(config, field):
    with pytest.raises(ValueError, match=f"RecallTask.{field}"):
        RecallTask(**config)


def test_build_validates_its_inputs():
    task = RecallTask(n_pairs=3, value_bits=1)
    good = (torch.tensor([[0, 1, 2]]), torch.zeros(1, 3, 1), torch.tensor([0]))
    task.build(*good)
    with pytest.raises(ValueError, match="distinct keys of 0..2"):
        task.build(torch.tensor([[0, 0, 2]]), *good[1:])
    with pytest.raises(ValueError, match="values"):
        task.build(good[0], torch.full((1, 3, 1), 2), good[2])
    with pytest.raises(ValueError, match="query_index"):
        task.build(*good[:2], torch.tensor([3]))
    with pytest.raises(ValueError, match="seeds"):
        task.build(*good, seeds=torch.zeros(1, 4))


def test_registry_protocol_and_scales():
    assert "recall" in task_names()
    task = make_task("recall", n_pairs=9)
    assert isinstance(task, RecallTask) and isinstance(task, RandomizedTask)
    assert task.seed_shape == (10,) and task.d_seed == 10
    paper = TrainConfig.from_scale(RECALL_PAPER)
    assert (paper.batch_size, paper.lr, paper.beta2, paper.adam_eps) == (512, 3e-3, 0.95, 1e-5)
    assert paper.lr * paper.min_lr_ratio == pytest.approx(3e-4)
    assert (RECALL_PAPER.m_seeds, RECALL_PAPER.q) == (30, 100)
    assert all(8 <= n <= 20 for n in RECALL_PAPER.n_pairs + RECALL_CPU.n_pairs)
    assert RECALL_CPU.steps < RECALL_PAPER.steps and TrainConfig.from_scale(RECALL_CPU, steps=7).steps == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        RECALL_CPU.steps = 1
