"""Tests of the seeded evaluation metrics on hand-made stand-in tasks and models whose right
and wrong (input, seed) pairs are chosen by hand, so every metric has a known answer."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from torch import nn

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.losses import output_judge
from interp_rand.seeded_evaluation import (
    SeedRun,
    average_success,
    draw_seed_groups,
    expand_over_seeds,
    las_vegas_exact,
    majority_success,
    per_input_success,
    predictive_variance,
    sampled_success,
    save_summary,
    success_histogram,
    success_matrix,
    summarize,
    worst_case_success,
)
from interp_rand.tasks.base import Batch
from interp_rand.tasks.coloring import VOTE_RULES, ColoringTask, valid_colorings
from interp_rand.tasks.recall import RecallTask

BIG = 10.0


@dataclass(frozen=True)
class StandIn:
    """The part of a task that seeded evaluation reads."""

    loss_kind: str = "ce"
    name: ClassVar[str] = "stand-in"


CE, BCE = StandIn("ce"), StandIn("bce")


@dataclass(frozen=True)
class StandInFor:
    """A stand-in task for one of our models: ``model_config`` is what the fit check reads."""

    cfg: ModelConfig
    loss_kind: str = "ce"
    name: ClassVar[str] = "stand-in"

    def model_config(self) -> ModelConfig:
        return self.cfg


def make_batch(n: int, n_answer: int = 1, targets: torch.Tensor | None = None, with_meta: bool = True) -> Batch:
    """Inputs ``[n, 1 + n_answer]``: position 0 holds the input's id, answers follow; class
    targets ``[n, 1 + n_answer]`` (``-1`` at position 0; class 0 unless given)."""
    pos = 1 + n_answer
    inputs = torch.zeros(n, pos, dtype=torch.long)
    inputs[:, 0] = torch.arange(n)
    if targets is None:
        targets = torch.zeros(n, n_answer, dtype=torch.long)
    full = torch.full((n, pos) + targets.shape[2:], -1, dtype=targets.dtype)
    full[:, 1:] = targets
    loss_mask = torch.zeros(n, pos, dtype=torch.bool)
    loss_mask[:, 1:] = True
    meta = {"id": torch.arange(n) * 10, "pair": torch.arange(2 * n).view(n, 2)} if with_meta else {}
    return Batch(inputs=inputs, targets=full, loss_mask=loss_mask,
                 answer_positions=torch.arange(1, pos), metadata=meta)


class Scripted(nn.Module):
    """``fn(input_ids [rows], seed_values [rows] | None) -> [rows, n_answer, K]`` answer logits;
    the seed value is the first seed unit (at the first position for per-position seeds)."""

    def __init__(self, fn: Callable, n_answer: int = 1):
        super().__init__()
        self.fn = fn
        self.n_answer = n_answer
        self.modes: list[bool] = []
        self.calls: list[dict] = []

    def forward(self, inputs, seeds=None, attention_mask=None):
        self.modes.append(self.training)
        self.calls.append({"rows": inputs.shape[0], "seeds": seeds is not None})
        value = None
        if seeds is not None:
            value = seeds[:, 0] if seeds.dim() == 2 else seeds[:, 0, 0]
        answers = self.fn(inputs[:, 0], value)
        pad = torch.zeros(inputs.shape[0], 1, answers.shape[-1])
        return torch.cat([pad, answers], 1)


def one_hot_logits(classes: torch.Tensor, k: int = 2) -> torch.Tensor:
    """``[rows]`` classes -> ``[rows, 1, k]`` logits with ``BIG`` on the class."""
    return (torch.nn.functional.one_hot(classes, k).float() * BIG)[:, None]


def seed_values(s: int) -> torch.Tensor:
    return torch.arange(s, dtype=torch.float)[:, None]  # [S, 1]: seed j carries value j


# --- a model that ignores its seed ----------------------------------------------------------
def ignorer():
    """Right (class 0) on inputs 0 and 2, wrong (class 1) on 1 and 3, whatever the seed."""
    return Scripted(lambda ids, seed: one_hot_logits((ids % 2 == 1).long()))


def test_seed_ignoring_model_is_deterministic():
    run = success_matrix(ignorer(), CE, make_batch(4), seed_values(7), keep_probs=True)
    assert run.success.shape == (4, 7) and run.outputs.shape == (4, 7, 1) and run.probs.shape == (4, 7, 1, 2)
    assert per_input_success(run).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert average_success(run) == 0.5
    assert worst_case_success(run) == 0.0
    assert torch.equal(predictive_variance(run), torch.zeros(4))
    counts, edges = success_histogram(run, bins=10)
    assert counts.tolist() == [2, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert torch.allclose(edges, torch.linspace(0, 1, 11))
    assert run.target_outputs.tolist() == [[0]] * 4
    assert run.outputs[:, :, 0].tolist() == [[0] * 7, [1] * 7, [0] * 7, [1] * 7]


# --- a model whose success depends on the seed ----------------------------------------------
def patterned(pattern: list[int]):
    """Input i under seed j is right iff ``pattern[(i + j) % 5]``: every run of 5 consecutive
    seeds holds ``sum(pattern)`` right ones, for every input."""
    pat = torch.tensor(pattern, dtype=torch.bool)

    def fn(ids, seed):
        right = pat[(ids + seed.long()) % 5]
        return one_hot_logits((~right).long())

    return Scripted(fn)


def test_sixty_percent_model_and_majority_three_of_five():
    run = success_matrix(patterned([1, 1, 1, 0, 0]), CE, make_batch(6), seed_values(10))
    assert torch.allclose(per_input_success(run), torch.full((6,), 0.6))
    assert worst_case_success(run) == pytest.approx(0.6)
    assert average_success(run) == pytest.approx(0.6)
    assert majority_success(run, 5, groups=consecutive(6, 10, 5)).tolist() == [1.0] * 6
    # groups of 1 are single seeds: majority-1 is per-input success
    assert torch.allclose(majority_success(run, 1, groups=consecutive(6, 10, 1)), per_input_success(run))


def test_majority_two_of_five_is_zero():
    run = success_matrix(patterned([0, 1, 0, 1, 0]), CE, make_batch(6), seed_values(10))
    assert torch.allclose(per_input_success(run), torch.full((6,), 0.4))
    assert majority_success(run, 5, groups=consecutive(6, 10, 5)).tolist() == [0.0] * 6


def test_majority_with_random_groups_uses_all_seeds_per_group():
    # 3 right of 5 in order; random groups of 5 out of 5 seeds hold the same seeds -> still 1.0
    run = success_matrix(patterned([1, 1, 1, 0, 0]), CE, make_batch(3), seed_values(5))
    gen = torch.Generator().manual_seed(1)
    assert majority_success(run, 5, generator=gen).tolist() == [1.0] * 3
    with pytest.raises(ValueError):
        majority_success(run, 6)


def test_predictive_variance_positive_and_exact_when_outputs_depend_on_seed():
    run = success_matrix(patterned([1, 1, 1, 0, 0]), CE, make_batch(4), seed_values(10))
    s = torch.softmax(torch.tensor([BIG, 0.0]), 0)[0].item()
    # P(class 0) is s on 60% of seeds and 1 - s on 40%: variance 0.6 * 0.4 * (2s - 1)^2
    expected = 0.24 * (2 * s - 1) ** 2
    var = predictive_variance(run)
    assert (var > 0.2).all()
    assert torch.allclose(var, torch.full((4,), expected), atol=1e-6)


def consecutive(n: int, n_seeds: int, k: int) -> torch.Tensor:
    """``[n, S // k, k]``: the disjoint groups of consecutive seeds, the same for every input."""
    groups = n_seeds // k
    return torch.arange(groups * k).view(1, groups, k).expand(n, groups, k)


def worst_of(values: torch.Tensor) -> float:
    return torch.quantile(values, 0.05, interpolation="lower").item()


def _run(success, outputs, loss_kind="colouring", targets=None) -> SeedRun:
    success = torch.tensor(success, dtype=torch.bool)
    outputs = torch.tensor(outputs, dtype=torch.long)
    if outputs.dim() == 2:
        outputs = outputs[..., None]
    return SeedRun(success=success, outputs=outputs, probs=None, loss_kind=loss_kind,
                   target_outputs=targets)


def test_majority_ties_go_to_smallest_tuple_and_correctness_comes_from_success():
    # input 0: outputs 2,2,1,1,0 -> tie 1 vs 2 -> 1, whose seeds are right -> 1.0
    # input 1: same outputs, but only the seeds that gave 2 are right -> 0.0
    # input 2: outputs 7,3,7,3,7 -> 7 (3 votes); the 7-seeds are right -> 1.0
    run = _run(
        [[0, 0, 1, 1, 0], [1, 1, 0, 0, 0], [1, 0, 1, 0, 1]],
        [[2, 2, 1, 1, 0], [2, 2, 1, 1, 0], [7, 3, 7, 3, 7]],
    )
    assert majority_success(run, 5).tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("low, span", [(0, 3), (-2, 2), (5, 8), (0, 9), (-40, 1000)])
def test_mode_counted_and_sorted_agree(low, span):
    # narrow ranges are counted per value, wide ones sorted; both must give the most frequent
    # value with ties to the smallest, along any axis: checked against a plain count per row
    from interp_rand.seeded_evaluation import amplification

    values = torch.randint(low, low + span, (40, 6, 7), generator=torch.Generator().manual_seed(span))
    for dim in (-1, 1):
        rows = values.movedim(dim, -1).reshape(-1, values.shape[dim])
        expected = torch.tensor([min(set(r), key=lambda v: (-r.count(v), v)) for r in rows.tolist()])
        got = amplification._mode(values, dim=dim)
        assert got.shape == values.movedim(dim, -1).shape[:-1]
        assert torch.equal(got.flatten(), expected)
    assert (span <= amplification.COUNTED_VALUES) == (span in (3, 2, 8))


def test_majority_votes_over_whole_output_tuples():
    # two answer positions: the first position alone would vote 0 (3 of 5), but the full tuples
    # are (0,1),(0,2),(0,3),(1,5),(1,5): the most frequent tuple is (1,5) with 2 votes
    outputs = [[[0, 1], [0, 2], [0, 3], [1, 5], [1, 5]]]
    run = _run([[0, 0, 0, 1, 1]], outputs)
    assert majority_success(run, 5).tolist() == [1.0]
    # tuples tie lexicographically: (0, 9) twice vs (1, 0) twice -> (0, 9)
    run = _run([[1, 1, 0, 0, 0]], [[[0, 9], [0, 9], [1, 0], [1, 0], [2, 2]]])
    assert majority_success(run, 5).tolist() == [1.0]
    # several groups per input, the leftover seed unused: groups (0,1), (2,3); seed 4 ignored
    run = _run([[1, 1, 0, 0, 1]], [[4, 4, 6, 6, 4]])
    assert majority_success(run, 2, groups=consecutive(1, 5, 2)).tolist() == [0.5]


def test_majority_with_outputs_too_wide_for_one_integer():
    # 20 answer positions with values up to 1000: not packable into int64, ranked instead
    base = torch.randint(0, 1000, (20,), generator=torch.Generator().manual_seed(0))
    other = base.clone()
    other[19] += 1
    outputs = torch.stack([base, other, other, base, base])[None]  # base x3
    run = SeedRun(success=torch.tensor([[1, 0, 0, 1, 1]], dtype=torch.bool), outputs=outputs,
                  probs=None, loss_kind="colouring")
    assert majority_success(run, 5).tolist() == [1.0]


def test_worst_case_is_lower_quantile():
    gen = torch.Generator().manual_seed(3)
    success = torch.rand(40, 9, generator=gen) < torch.rand(40, 1, generator=gen)
    run = SeedRun(success=success, outputs=torch.zeros(40, 9, 1, dtype=torch.long), probs=None, loss_kind="ce")
    per = per_input_success(run)
    for fraction in (0.0, 0.05, 0.3, 1.0):
        assert worst_case_success(run, fraction) == torch.quantile(per, fraction, interpolation="lower").item()
    # input i is right on its first i + 1 of 20 seeds: success 0.05, 0.10, ..., 1.0
    success = torch.arange(20)[None] <= torch.arange(20)[:, None]
    run = SeedRun(success=success, outputs=torch.zeros(20, 20, 1, dtype=torch.long), probs=None, loss_kind="ce")
    assert per_input_success(run)[:2].tolist() == pytest.approx([0.05, 0.10])
    assert worst_case_success(run) == pytest.approx(0.05)  # floor(0.05 * 19) = 0: the smallest
    assert worst_case_success(run, 0.5) == pytest.approx(0.5)  # floor(0.5 * 19) = 9: the 10th
    assert worst_case_success(run, 0.11) == pytest.approx(0.15)  # floor(2.09) = 2: the 3rd


# --- the sampled baseline ---------------------------------------------------------------------
def test_sampled_baseline_of_a_deterministic_model():
    """Answer position 1 is certain; position 2 puts 0.7 on the right class (0): argmax is
    always right, samples are right about 70% of the time."""

    def fn(ids, seed):
        assert seed is None
        rows = ids.shape[0]
        certain = torch.tensor([40.0, -40.0, -40.0]).expand(rows, 3)
        unsure = torch.tensor([0.7, 0.2, 0.1]).log().expand(rows, 3)
        return torch.stack([certain, unsure], 1)

    run = success_matrix(Scripted(fn, 2), CE, make_batch(4, n_answer=2), None, keep_probs=True)
    assert run.n_seeds == 1
    assert per_input_success(run).tolist() == [1.0] * 4
    assert torch.allclose(run.probs[0, 0, 1], torch.tensor([0.7, 0.2, 0.1]))
    gen = torch.Generator().manual_seed(0)
    sampled = sampled_success(run, gen, n_samples=5000)
    assert sampled.shape == (4,)
    # 20,000 Bernoulli(0.7) draws: standard error 0.0032
    assert sampled.mean().item() == pytest.approx(0.7, abs=0.015)
    assert (sampled - 0.7).abs().max() < 0.04
    # a custom judge: anything but class 2 at position 2 counts as right -> about 0.9
    judge = lambda s: s[..., 1] != 2
    assert sampled_success(run, gen, 5000, judge).mean().item() == pytest.approx(0.9, abs=0.015)
    # same generator state -> same draws
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(sampled_success(run, g1, 50), sampled_success(run, g2, 50))


def test_sampled_baseline_uses_each_seeds_distribution():
    # seeds 0,1 certain-right, seeds 2,3 certain-wrong: samples follow the seeds -> 0.5
    run = success_matrix(Scripted(lambda ids, seed: one_hot_logits((seed >= 2).long()) * 5), CE,
                         make_batch(3), seed_values(4), keep_probs=True)
    sampled = sampled_success(run, torch.Generator().manual_seed(0), n_samples=400)
    assert sampled.tolist() == [0.5] * 3


def test_sampled_needs_a_judge_without_targets():
    run = _run([[1]], [[0]])
    run = SeedRun(run.success, run.outputs, torch.ones(1, 1, 1, 1), "colouring")
    with pytest.raises(ValueError, match="correct_fn"):
        sampled_success(run, torch.Generator())
    # a run that carries its kind's judge (success_matrix attaches it) needs no correct_fn
    judged = dataclasses.replace(run, judge=lambda sampled: sampled[..., 0] == 0)
    assert sampled_success(judged, torch.Generator(), n_samples=3).tolist() == [1.0]
    assert summarize(judged, majority_ks=())["sampled"] == {"average": 1.0, "worst": 1.0}


# --- bce: packed bits --------------------------------------------------------------------------
def test_bce_outputs_are_packed_bits():
    # most significant bit first (the toolkit's one bit order, interp_rand.losses.pack_bits):
    # input 0 logits (+,-,+,+,-) -> bits 1,0,1,1,0 -> 16 + 4 + 2 = 22; input 1 (-,-,-,-,+) -> 1
    signs = torch.tensor([[1, -1, 1, 1, -1], [-1, -1, -1, -1, 1]], dtype=torch.float)
    targets = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0]], dtype=torch.float)[:, None]
    batch = make_batch(2, targets=targets)
    model = Scripted(lambda ids, seed: (signs[ids] * 3.0)[:, None])
    run = success_matrix(model, BCE, batch, seed_values(3), keep_probs=True)
    assert run.outputs[:, :, 0].tolist() == [[22] * 3, [1] * 3]
    assert run.target_outputs.tolist() == [[22], [0]]
    assert run.success.tolist() == [[True] * 3, [False] * 3]
    assert run.probs.shape == (2, 3, 1, 5)
    assert torch.allclose(run.probs[1, 0, 0], torch.sigmoid(signs[1] * 3.0))
    # near-certain bits: sampled outputs are the argmax outputs
    sure = success_matrix(Scripted(lambda ids, seed: (signs[ids] * 40.0)[:, None]), BCE, batch, seed_values(3),
                          keep_probs=True)
    assert sampled_success(sure, torch.Generator().manual_seed(0)).tolist() == [1.0, 0.0]


# --- expanding a batch over seeds --------------------------------------------------------------
def test_expand_over_shared_seeds_row_order_and_metadata():
    batch = make_batch(3)
    mask = torch.rand(3, 2, 2, generator=torch.Generator().manual_seed(0)) > 0.5
    batch = Batch(batch.inputs, batch.targets, batch.loss_mask, batch.answer_positions,
                  seeds=torch.full((3, 1), 99.0), attention_mask=mask, metadata=batch.metadata)
    seeds = torch.tensor([[0.0, 1.0], [2.0, 3.0]])  # S = 2, d_seed = 2
    big = expand_over_seeds(batch, seeds)
    assert len(big) == 6
    for i in range(3):
        for j in range(2):
            r = i * 2 + j
            assert torch.equal(big.inputs[r], batch.inputs[i])
            assert torch.equal(big.targets[r], batch.targets[i])
            assert torch.equal(big.attention_mask[r], mask[i])
            assert torch.equal(big.seeds[r], seeds[j])  # the batch's own seeds are replaced
            assert big.metadata["id"][r] == 10 * i
            assert big.metadata["pair"][r].tolist() == [2 * i, 2 * i + 1]
    assert torch.equal(big.answer_positions, batch.answer_positions)


def test_expand_over_per_position_seeds():
    batch = make_batch(2)
    seeds = torch.arange(3 * 2 * 1, dtype=torch.float).view(3, 2, 1)  # S = 3, pos = 2
    big = expand_over_seeds(batch, seeds)
    assert big.seeds.shape == (6, 2, 1)
    for r in range(6):
        assert torch.equal(big.seeds[r], seeds[r % 3])
        assert big.inputs[r, 0] == r // 3
    with pytest.raises(ValueError, match="per-position"):
        expand_over_seeds(batch, torch.zeros(3, 5, 1))
    none = expand_over_seeds(batch, None)
    assert none.seeds is None and len(none) == 2


# --- running: chunking, mode, no seed channel, a real model ----------------------------------
def test_chunking_gives_identical_results_and_restores_mode():
    model = patterned([1, 0, 1, 1, 0])
    model.train()
    batch = make_batch(5)
    whole = success_matrix(model, CE, batch, seed_values(7), keep_probs=True)
    assert len(model.calls) == 1
    model.calls.clear()
    # 35 rows -> 9 chunks (without per-input statistics a chunk need not hold whole inputs)
    chunked = success_matrix(model, CE, batch, seed_values(7), chunk_size=4, keep_probs=True, variance=False)
    assert [c["rows"] for c in model.calls] == [4] * 8 + [3]
    assert model.training and set(model.modes) == {False}
    for field in ("success", "outputs", "probs", "target_outputs"):
        assert torch.equal(getattr(whole, field), getattr(chunked, field))
    assert chunked.variance is None
    # the variance (the default) is per input: chunks of whole inputs, multiples of lcm(S, 16) rows
    batch = make_batch(40)
    whole = success_matrix(model, CE, batch, seed_values(7), keep_probs=True, variance=False)
    model.calls.clear()
    inputs = success_matrix(model, CE, batch, seed_values(7), chunk_size=4)
    assert [c["rows"] for c in model.calls] == [112, 112, 56]
    assert torch.equal(inputs.variance, predictive_variance(whole)) and inputs.probs is None


def test_model_without_seed_channel():
    model = Scripted(lambda ids, seed: one_hot_logits((ids == 1).long()))
    run = success_matrix(model, CE, make_batch(3), None, chunk_size=2)
    assert all(not c["seeds"] for c in model.calls)
    assert run.success.tolist() == [[True], [False], [True]]
    assert run.n_seeds == 1
    assert predictive_variance(run).tolist() == [0.0] * 3


def test_real_hooked_transformer_with_per_position_seeds():
    pos, d_input, colours = 4, 4, 3
    cfg = ModelConfig(d_model=8, n_layers=1, n_heads=1, n_ctx=pos, input_kind="vectors", d_input=d_input,
                      d_vocab_out=colours, mask="custom", d_seed=1)
    model = HookedTransformer(cfg, seed=0)
    n = 3
    inputs = torch.eye(d_input)[torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]])]
    ring = torch.eye(pos, dtype=torch.bool) | torch.eye(pos, dtype=torch.bool).roll(1, 1) | \
        torch.eye(pos, dtype=torch.bool).roll(-1, 1)
    batch = Batch(inputs=inputs, targets=torch.zeros(n, pos, dtype=torch.long),
                  loss_mask=torch.ones(n, pos, dtype=torch.bool), answer_positions=torch.arange(pos),
                  attention_mask=ring.expand(n, pos, pos).clone())
    seeds = torch.rand(5, pos, 1, generator=torch.Generator().manual_seed(0))
    run = success_matrix(model, StandInFor(cfg), batch, seeds, chunk_size=4, keep_probs=True)
    logits = model(expand_over_seeds(batch, seeds).inputs, seeds=seeds.repeat(n, 1, 1),
                   attention_mask=ring.expand(n * 5, pos, pos))
    assert torch.equal(run.outputs.view(-1, pos), logits.argmax(-1))
    assert torch.allclose(run.probs.view(-1, pos, colours), logits.softmax(-1), atol=1e-6)
    assert (predictive_variance(run) > 0).all()
    # chunks run side by side in threads: the same numbers, and the thread count restored
    threads = torch.get_num_threads()
    parallel = success_matrix(model, StandInFor(cfg), batch, seeds, chunk_size=4, workers=3, keep_probs=True)
    assert torch.get_num_threads() == threads
    for field in ("success", "outputs", "probs"):
        assert torch.equal(getattr(parallel, field), getattr(run, field))
    assert not parallel.probs.requires_grad
    with pytest.raises(ValueError, match="workers=0"):
        success_matrix(model, StandInFor(cfg), batch, seeds, workers=0)


# --- summary ---------------------------------------------------------------------------------
def test_summary_is_json_and_matches_the_functions(tmp_path):
    run = success_matrix(patterned([1, 1, 1, 0, 0]), CE, make_batch(6), seed_values(10), keep_probs=True)
    summary = summarize(run, majority_ks=(5, 30), generator=torch.Generator().manual_seed(0))
    again = json.loads(json.dumps(summary))
    assert again == summary
    assert summary["n_inputs"] == 6 and summary["n_seeds"] == 10
    assert summary["average"] == pytest.approx(average_success(run))
    assert summary["worst_5pct"] == pytest.approx(worst_case_success(run))
    # random groups of 5 of the 10 seeds (not consecutive ones): the same numbers as the function
    gen = torch.Generator().manual_seed(0)
    sampled_success(run, gen)  # the summary draws the sampled baseline first, then the groups
    groups = draw_seed_groups(6, 10, 5, 100, gen)
    expected = majority_success(run, 5, groups=groups)
    assert summary["majority_5"]["average"] == pytest.approx(expected.mean().item())
    assert summary["majority_5"]["worst"] == pytest.approx(worst_of(expected))
    assert summary["majority_5"]["rule"] == "majority_whole" and summary["majority_5"]["n_groups"] == 100
    assert summary["majority_rules"] == ["majority_whole"] and summary["majority_n_groups"] == 100
    assert summary["majority_30"] is None  # k > S
    assert "las_vegas_5" not in summary  # a "ce" task has no verifier
    # the sampled baseline draws first: the generator's first draws, whatever the majority settings
    expected = sampled_success(run, torch.Generator().manual_seed(0))
    assert summary["sampled"]["average"] == pytest.approx(expected.mean().item())
    assert summary["predictive_variance"] == pytest.approx(predictive_variance(run).mean().item())
    counts, edges = success_histogram(run)
    assert summary["histogram"] == {"counts": counts.tolist(), "edges": edges.tolist()}
    assert sum(summary["histogram"]["counts"]) == 6
    assert math.isclose(summary["histogram"]["edges"][-1], 1.0)

    path = tmp_path / "out" / "summary.json"
    save_summary(summary, path)
    assert json.loads(path.read_text()) == summary
    assert [p.name for p in path.parent.iterdir()] == ["summary.json"]


def test_fit_check_and_bad_seeds_are_refused():
    cfg = ModelConfig(d_model=8, n_layers=1, n_heads=1, n_ctx=2, d_vocab=4, d_seed=1)
    model = HookedTransformer(cfg, seed=0)
    with pytest.raises(ValueError, match="d_seed"):
        success_matrix(model, StandInFor(cfg.replace(d_seed=2)), make_batch(2), seed_values(3))
    with pytest.raises(ValueError, match="seeds must be"):
        success_matrix(ignorer(), CE, make_batch(2), torch.zeros(3))


def test_summary_of_a_task_without_targets():
    # colouring-like: no target outputs and no judge -> no sampled baseline; the rest is there
    run = SeedRun(success=torch.tensor([[1, 0, 1, 1, 1]], dtype=torch.bool),
                  outputs=torch.tensor([[[0], [1], [2], [0], [0]]]), probs=torch.full((1, 5, 1, 3), 1 / 3),
                  loss_kind="colouring")
    summary = summarize(run, majority_ks=(5,))
    assert summary["sampled"] is None
    assert summary["average"] == pytest.approx(0.8) and summary["majority_5"]["average"] == 1.0
    judged = summarize(run, majority_ks=(5,), correct_fn=lambda s: s[..., 0] != 1)
    assert 0.0 <= judged["sampled"]["average"] <= 1.0


# --- majority-k over many random groups of k seeds -------------------------------------------
def _hypergeometric_at_least(n_seeds: int, right: int, k: int, at_least: int) -> float:
    """P(at least ``at_least`` right seeds among ``k`` drawn without replacement)."""
    total = math.comb(n_seeds, k)
    return sum(math.comb(right, x) * math.comb(n_seeds - right, k - x) for x in range(at_least, k + 1)) / total


def test_majority_thirty_amplifies_sixty_percent_and_suppresses_forty():
    # 100 seeds, two outputs (0 and 1). Input 0: output 0 (right) under 60 seeds. Input 1: output 1
    # (right) under 40 seeds, so a 15-15 tie goes to output 0 and is wrong.
    outputs = torch.ones(2, 100, 1, dtype=torch.long)
    outputs[0, :60] = 0
    outputs[1, 40:] = 0
    success = torch.stack([outputs[0, :, 0] == 0, outputs[1, :, 0] == 1])
    run = SeedRun(success=success, outputs=outputs, probs=None, loss_kind="ce")
    assert per_input_success(run).tolist() == pytest.approx([0.6, 0.4])
    got = majority_success(run, 30, torch.Generator().manual_seed(0), n_groups=4000)
    expected = [_hypergeometric_at_least(100, 60, 30, 15), _hypergeometric_at_least(100, 40, 30, 16)]
    assert expected[0] > 0.9 and expected[1] < 0.1
    assert got.tolist() == pytest.approx(expected, abs=0.02)  # 4,000 groups: standard error <= 0.005
    # three disjoint groups of consecutive seeds (the old estimate) can only say 0, 1/3, 2/3 or 1,
    # here far from the truth because the right seeds are not spread evenly
    assert majority_success(run, 30, groups=consecutive(2, 100, 30)).tolist() == pytest.approx([2 / 3, 1 / 3])


def test_seed_groups_are_independent_uniform_and_reproducible():
    groups = draw_seed_groups(3, 100, 30, 20, torch.Generator().manual_seed(1))
    assert groups.shape == (3, 20, 30) and groups.dtype == torch.long
    assert torch.equal(groups, draw_seed_groups(3, 100, 30, 20, torch.Generator().manual_seed(1)))
    assert not torch.equal(groups, draw_seed_groups(3, 100, 30, 20, torch.Generator().manual_seed(2)))
    sets = groups.sort(-1).values
    assert (sets[..., 1:] != sets[..., :-1]).all()  # k distinct seeds per group
    for i in range(3):  # every group of an input is a different set, and inputs differ
        assert len({tuple(g) for g in sets[i].tolist()}) == 20
    assert not torch.equal(sets[0], sets[1])
    # each seed is in a group with probability k / S = 0.3: 6,000 groups per seed
    many = draw_seed_groups(3, 100, 30, 2000, torch.Generator().manual_seed(3))
    freq = torch.bincount(many.flatten(), minlength=100).float() / (3 * 2000)
    assert (freq - 0.3).abs().max() < 0.025
    with pytest.raises(ValueError, match="k=31"):
        draw_seed_groups(3, 30, 31)
    with pytest.raises(ValueError, match="n_groups"):
        draw_seed_groups(3, 30, 5, 0)


def test_rules_a_kind_does_not_declare_are_refused():
    run = _run([[1, 0, 1]], [[0, 1, 0]], loss_kind="ce")
    with pytest.raises(ValueError, match="las_vegas"):
        majority_success(run, 2, rule="las_vegas")
    with pytest.raises(ValueError, match="las_vegas"):
        las_vegas_exact(run, 2)
    with pytest.raises(ValueError, match="rule='mode'"):
        majority_success(run, 2, rule="mode")


# --- colouring: whole-output majority, per-vertex vote, Las Vegas ------------------------------
def colouring_run(per_input: list[list[tuple[int, ...]]]) -> SeedRun:
    """Outputs of a 4-cycle (ring 0-1-2-3-0, vertex ids = ring positions) given by hand, one
    colouring per seed; success and the judge are the colouring task's own."""
    task = ColoringTask(n_vertices=4)
    n = len(per_input)
    batch = task.build(torch.arange(4).expand(n, 4))
    outputs = torch.tensor(per_input, dtype=torch.long)  # [n, S, 4]
    success = valid_colorings(outputs, batch.attention_mask)
    return SeedRun(success=success, outputs=outputs, probs=None, loss_kind=task.loss_kind,
                   judge=output_judge(task.loss_kind, batch), vote_rules=VOTE_RULES)


def test_colouring_whole_majority_fails_where_vertex_vote_and_las_vegas_succeed():
    run = colouring_run([
        # three different valid colourings once each, one invalid colouring twice: the whole-output
        # majority is the invalid one; per vertex the votes are 0 | 1 | 0 (tie 0-1 -> 0) | 1 -> valid
        [(0, 1, 0, 1), (0, 1, 0, 2), (0, 1, 2, 1), (1, 1, 1, 1), (1, 1, 1, 1)],
        # two shifted colourings twice each and a third once: the whole-output majority ties
        # (0,1,0,1) vs (1,0,1,0) -> (0,1,0,1), valid; per vertex 0 (tie) | 0 | ... -> invalid
        [(0, 1, 0, 1), (0, 1, 0, 1), (1, 0, 1, 0), (1, 0, 1, 0), (2, 0, 1, 0)],
        # never valid: no rule helps
        [(0, 0, 1, 2)] * 5,
    ])
    assert per_input_success(run).tolist() == pytest.approx([0.6, 1.0, 0.0])
    gen = torch.Generator().manual_seed(0)
    # k = S = 5: every group holds all five seeds, so every rule's answer is exact
    assert majority_success(run, 5, gen, rule="majority_whole").tolist() == [0.0, 1.0, 0.0]
    assert majority_success(run, 5, gen, rule="majority_per_vertex").tolist() == [1.0, 0.0, 0.0]
    assert majority_success(run, 5, gen, rule="las_vegas").tolist() == [1.0, 1.0, 0.0]
    assert las_vegas_exact(run, 5).tolist() == [1.0, 1.0, 0.0]
    # k = 2 of 5, input 0 has 3 right seeds: 1 - C(2, 2) / C(5, 2) = 0.9
    assert las_vegas_exact(run, 2).tolist() == pytest.approx([0.9, 1.0, 0.0])
    estimate = majority_success(run, 2, gen, rule="las_vegas", n_groups=4000)
    assert estimate.tolist() == pytest.approx([0.9, 1.0, 0.0], abs=0.02)

    summary = summarize(run, majority_ks=(5, 30))
    assert summary["majority_rules"] == list(VOTE_RULES)
    assert summary["majority_5"] == {"average": pytest.approx(1 / 3), "worst": 0.0, "rule": "majority_whole", "k": 5,
                                     "n_groups": 100}
    assert summary["majority_per_vertex_5"]["average"] == pytest.approx(1 / 3)
    assert summary["majority_per_vertex_5"]["rule"] == "majority_per_vertex"
    assert summary["las_vegas_5"]["average"] == pytest.approx(2 / 3)
    assert summary["las_vegas_5"]["exact"] == {"average": pytest.approx(2 / 3), "worst": 0.0}
    assert summary["majority_30"] is None and summary["las_vegas_30"] is None
    assert json.loads(json.dumps(summary)) == summary


# --- every seed, where the task can enumerate them ---------------------------------------------
def test_all_seeds_equals_the_explicit_enumeration_on_a_tiny_recall_model():
    task = RecallTask(n_pairs=3, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=8, n_layers=1, d_input_mlp=8), seed=0)
    batch = task.sample(20, torch.Generator().manual_seed(0))
    every = success_matrix(model, task, batch, "all", chunk_size=16, keep_probs=True)
    explicit = success_matrix(model, task, batch, task.all_seeds(), keep_probs=True)
    assert every.n_seeds == 8
    for field in ("success", "outputs", "probs", "target_outputs"):
        assert torch.equal(getattr(every, field), getattr(explicit, field))
    assert every.vote_rules == ("majority_whole", "majority_per_bit")
    a = summarize(every, majority_ks=(5,), generator=torch.Generator().manual_seed(4))
    b = summarize(explicit, majority_ks=(5,), generator=torch.Generator().manual_seed(4))
    assert a == b and a["majority_5"]["n_groups"] == 100
    with pytest.raises(ValueError, match="enumerated"):
        coloring = ColoringTask(n_vertices=4)
        cfg = coloring.model_config(d_model=8, n_layers=1, d_head=8)
        success_matrix(HookedTransformer(cfg, seed=0), coloring, coloring.sample(2, torch.Generator()), "all")
    with pytest.raises(ValueError, match="'every'"):
        success_matrix(model, task, batch, "every")


def test_majority_per_bit_votes_each_bit():
    # 3 bits, target 0b101; seeds give 0b100, 0b001, 0b101, 0b111, 0b101: whole-output majority
    # is 0b101 (2 of 5) and per bit 1,0,1 -> right; a second input whose outputs are all wrong
    # but each bit is right in most of them: per-bit vote rescues it, the whole majority does not
    from interp_rand.seeded_evaluation import SeedRun
    from interp_rand.seeded_evaluation.amplification import group_success

    outputs = torch.tensor([[[0b100], [0b001], [0b101], [0b111], [0b101]],
                            [[0b100], [0b001], [0b111], [0b100], [0b001]]])
    targets = torch.tensor([[0b101], [0b101]])
    success = (outputs == targets[:, None]).all(-1)
    run = SeedRun(success=success, outputs=outputs, probs=None, loss_kind="bce",
                  target_outputs=targets, vote_rules=("majority_whole", "majority_per_bit"))
    groups = torch.arange(5).expand(2, 1, 5)
    # input 1: bits 0 and 2 are 1 in 3 of 5 outputs, bit 1 in 1 of 5 -> 0b101, right; its whole
    # outputs tie 0b100 / 0b001 (2 each) and the tie goes to 0b001, wrong
    assert group_success(run, groups, "majority_per_bit")[:, 0].tolist() == [True, True]
    assert group_success(run, groups, "majority_whole")[:, 0].tolist() == [True, False]
    three = torch.tensor([[[1, 2, 4]], [[1, 2, 2]]])
    # input 1, seeds 1, 2, 2 -> 0b001, 0b111, 0b111: bits 1,1,1 -> 0b111 wrong; input 0 seeds
    # 1, 2, 4 -> 0b001, 0b101, 0b101 -> 0b101 right
    assert group_success(run, three, "majority_per_bit")[:, 0].tolist() == [True, False]
    with pytest.raises(ValueError, match="does not apply"):
        group_success(dataclasses.replace(run, vote_rules=("majority_whole",)), groups, "majority_per_bit")
