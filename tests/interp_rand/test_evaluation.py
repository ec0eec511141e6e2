"""Tests of ``evaluate``: exact match, per-position accuracy and per-metadata breakdowns on an
oracle model whose mistakes are chosen by hand; mode restoration; non-finite logits."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from interp_rand.evaluation import evaluate
from interp_rand.tasks import SortTask

L, V = 4, 8
TASK = SortTask(length=L, vocab=V)

# Six distinct lists; n_distinct: 4, 4, 1, 2, 4, 2
LISTS = torch.tensor([
    [3, 1, 2, 0],
    [7, 6, 5, 4],
    [2, 2, 2, 2],
    [1, 5, 1, 5],
    [0, 7, 3, 4],
    [6, 6, 6, 0],
])
# (example, answer index) pairs the oracle gets wrong
WRONG = {(1, 0), (3, 2), (3, 3), (5, 3)}




class Oracle(nn.Module):
    """Reads a sort batch's inputs and returns logits that are right except at ``wrong``
    (keyed by the input list, so chunking cannot shuffle them)."""

    def __init__(self, wrong: set[tuple[int, int]], fill: float = 0.0):
        super().__init__()
        self.wrong = {(tuple(LISTS[i].tolist()), j) for i, j in wrong}
        self.fill = fill
        self.modes: list[bool] = []
        self.calls = 0

    def forward(self, inputs, **kwargs):
        assert not kwargs
        self.modes.append(self.training)
        self.calls += 1
        batch = inputs.shape[0]
        logits = torch.full((batch, 2 * L, V + 1), self.fill)
        answers = torch.sort(inputs[:, :L], dim=1).values
        for b in range(batch):
            key = tuple(inputs[b, :L].tolist())
            for j in range(L):
                target = int(answers[b, j])
                guess = (target + 1) % V if (key, j) in self.wrong else target
                logits[b, L + j, guess] = 5.0
        return logits


def test_exact_match_and_per_position():
    batch = TASK.build(LISTS)
    result = evaluate(Oracle(WRONG), TASK, batch)
    assert result.n_examples == 6
    # rows 1, 3, 5 have a mistake
    assert result.exact_match == pytest.approx(3 / 6)
    # per answer index: wrong at 0 once, at 2 once, at 3 twice
    assert result.per_position == pytest.approx([5 / 6, 1.0, 5 / 6, 4 / 6])
    expected_correct = torch.ones(6, L, dtype=torch.bool)
    for i, j in WRONG:
        expected_correct[i, j] = False
    assert torch.equal(result.correct, expected_correct)
    assert result.loss > 0 and torch.isfinite(torch.tensor(result.loss))
    assert set(result.to_dict()) == {"n_examples", "loss", "exact_match", "per_position", "breakdown"}


def test_all_right_and_all_wrong():
    batch = TASK.build(LISTS)
    perfect = evaluate(Oracle(set()), TASK, batch)
    assert perfect.exact_match == 1.0 and perfect.per_position == [1.0] * L
    everything = {(i, j) for i in range(6) for j in range(L)}
    hopeless = evaluate(Oracle(everything), TASK, batch)
    assert hopeless.exact_match == 0.0 and hopeless.per_position == [0.0] * L
    assert hopeless.loss > perfect.loss


def test_chunking_does_not_change_the_result():
    batch = TASK.build(LISTS)
    oracle = Oracle(WRONG)
    whole = evaluate(oracle, TASK, batch)
    oracle.calls = 0
    chunked = evaluate(oracle, TASK, batch, chunk_size=4)
    assert oracle.calls == 2
    assert chunked.exact_match == whole.exact_match
    assert chunked.per_position == whole.per_position
    assert chunked.loss == pytest.approx(whole.loss)
    assert torch.equal(chunked.correct, whole.correct)
    assert chunked.breakdown == whole.breakdown


def test_breakdown_by_metadata_value():
    batch = TASK.build(LISTS)
    assert batch.metadata["n_distinct"].tolist() == [4, 4, 1, 2, 4, 2]
    result = evaluate(Oracle(WRONG), TASK, batch)
    # only 1-D integer metadata gets a breakdown (rank etc. are [batch, L])
    assert set(result.breakdown) == {"n_distinct"}
    by_value = result.breakdown["n_distinct"]
    assert set(by_value) == {"1", "2", "4"}
    assert by_value["4"]["n"] == 3 and by_value["4"]["exact_match"] == pytest.approx(2 / 3)  # rows 0, 1, 4
    assert by_value["1"]["n"] == 1 and by_value["1"]["exact_match"] == pytest.approx(1.0)  # row 2
    assert by_value["2"]["n"] == 2 and by_value["2"]["exact_match"] == pytest.approx(0.0)  # rows 3, 5


def test_breakdown_skips_float_and_many_valued_metadata():
    batch = TASK.build(LISTS)
    batch.metadata["weight"] = torch.arange(6, dtype=torch.float32)
    batch.metadata["row_id"] = torch.arange(6)  # 6 distinct values: still few enough
    result = evaluate(Oracle(WRONG), TASK, batch)
    assert "weight" not in result.breakdown
    assert result.breakdown["row_id"]["3"] == {"n": 1, "exact_match": 0.0}
    assert result.breakdown["row_id"]["4"] == {"n": 1, "exact_match": 1.0}

    many = TASK.sample(40, torch.Generator().manual_seed(0))
    many.metadata["row_id"] = torch.arange(40)  # more than 32 distinct values
    assert "row_id" not in evaluate(Oracle(set()), TASK, many).breakdown


@pytest.mark.parametrize("training", [True, False])
def test_evaluation_runs_in_eval_mode_and_restores_mode(training):
    oracle = Oracle(WRONG)
    oracle.train(training)
    evaluate(oracle, TASK, TASK.build(LISTS))
    assert oracle.modes == [False]
    assert oracle.training is training


def test_evaluation_does_not_track_gradients():
    class Grad(Oracle):
        def forward(self, inputs, **kwargs):
            self.grad_enabled = torch.is_grad_enabled()
            return super().forward(inputs, **kwargs)

    model = Grad(WRONG)
    evaluate(model, TASK, TASK.build(LISTS))
    assert model.grad_enabled is False


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_raise_and_restore_mode(bad):
    oracle = Oracle(WRONG, fill=bad)
    oracle.train()
    with pytest.raises(FloatingPointError, match="non-finite"):
        evaluate(oracle, TASK, TASK.build(LISTS))
    assert oracle.training
