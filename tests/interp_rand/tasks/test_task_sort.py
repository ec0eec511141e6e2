"""SortTask: layout, sortedness, metadata against a Python reference, corruption, registry."""

import pytest
import torch

from interp_rand.tasks import Batch, SortTask, make_task, task_names


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def reference_metadata(values: list[int]) -> dict:
    """Brute force: stable ranks, duplicate flags and distinct count of one list."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    rank = [0] * len(values)
    for position, i in enumerate(order):
        rank[i] = position
    answer = sorted(values)
    return {
        "rank": rank,
        "is_duplicate": [values.count(v) > 1 for v in values],
        "answer_is_duplicate": [values.count(v) > 1 for v in answer],
        "n_distinct": len(set(values)),
    }


def test_shapes_dtypes_and_layout():
    task = SortTask(length=6, vocab=8)
    batch = task.sample(32, gen())
    assert batch.inputs.shape == batch.targets.shape == batch.loss_mask.shape == (32, 12)
    assert batch.inputs.dtype == batch.targets.dtype == torch.long
    assert batch.loss_mask.dtype == torch.bool
    assert torch.equal(batch.answer_positions, torch.arange(6, 12))
    assert torch.equal(batch.loss_mask, (torch.arange(12) >= 6).expand(32, 12))
    assert (batch.inputs[:, 6] == task.sep).all()
    assert (batch.targets[~batch.loss_mask] == -1).all()
    assert batch.metadata["rank"].shape == (32, 6)
    assert batch.metadata["is_duplicate"].dtype == torch.bool
    assert batch.metadata["n_distinct"].shape == (32,)


def test_answers_are_the_sorted_inputs():
    task = SortTask(length=7, vocab=5)
    batch = task.sample(64, gen(1))
    for row in range(64):
        values = batch.inputs[row, :7].tolist()
        assert batch.answer_targets()[row].tolist() == sorted(values)
        # The inputs after SEP are the answer shifted by one (teacher forcing).
        assert batch.inputs[row, 8:].tolist() == sorted(values)[:-1]


def test_metadata_matches_reference_random_and_hand_made():
    task = SortTask(length=5, vocab=4)
    random = task.sample(100, gen(2))
    hand = task.build(torch.tensor([[3, 1, 3, 0, 1], [0, 1, 2, 3, 0], [2, 2, 2, 2, 2]]))
    for batch in (random, hand):
        for row in range(len(batch)):
            ref = reference_metadata(batch.inputs[row, :5].tolist())
            for key, value in ref.items():
                assert batch.metadata[key][row].tolist() == value, key
    assert hand.metadata["rank"][0].tolist() == [3, 1, 4, 0, 2]
    assert hand.metadata["n_distinct"].tolist() == [3, 4, 1]


def test_same_seed_same_batch_and_different_seed_differs():
    task = SortTask(length=5, vocab=10)
    one, two, other = task.sample(16, gen(3)), task.sample(16, gen(3)), task.sample(16, gen(4))
    assert torch.equal(one.inputs, two.inputs)
    assert not torch.equal(one.inputs, other.inputs)


def test_corrupt_changes_one_element_and_the_answer():
    task = SortTask(length=6, vocab=3)
    batch = task.sample(200, gen(5))
    pair = task.corrupt(batch, gen(6))
    clean, corrupted = task.lists(pair.clean), task.lists(pair.corrupted)
    diff = clean != corrupted
    assert (diff.sum(1) == 1).all()
    assert torch.equal(diff.float().argmax(1), pair.changed)
    assert (pair.corrupted.answer_targets() != batch.answer_targets()).any(1).all()
    assert ((corrupted >= 0) & (corrupted < 3)).all()
    for row in range(0, 200, 17):
        ref = reference_metadata(corrupted[row].tolist())
        assert pair.corrupted.metadata["rank"][row].tolist() == ref["rank"]


def test_concat_and_getitem_keep_metadata_aligned():
    task = SortTask(length=4, vocab=6)
    first, second = task.sample(5, gen(7)), task.sample(3, gen(8))
    joined = Batch.concat([first, second])
    assert len(joined) == 8
    picked = joined[torch.tensor([6, 0])]
    for out_row, src_row in ((0, 6), (1, 0)):
        ref = reference_metadata(joined.inputs[src_row, :4].tolist())
        assert picked.metadata["rank"][out_row].tolist() == ref["rank"]
        assert picked.metadata["n_distinct"][out_row].item() == ref["n_distinct"]
    assert torch.equal(picked.inputs[0], second.inputs[1])


@pytest.mark.parametrize(("config", "field"), [({"length": 1}, "length"), ({"vocab": 1}, "vocab")])
def test_bad_config_names_the_field(config, field):
    with pytest.raises(ValueError, match=field):
        make_task("sort", **config)


def test_build_rejects_out_of_range_values():
    with pytest.raises(ValueError, match="vocab"):
        SortTask(length=3, vocab=4).build(torch.tensor([[0, 4, 1]]))


def test_registry_and_model_config():
    task = make_task("sort", length=5)
    assert isinstance(task, SortTask) and task.length == 5
    assert task.config_dict() == {"length": 5, "vocab": 64}
    with pytest.raises(ValueError, match="sort"):
        make_task("nope")
    assert {"sort", "addition"} <= set(task_names())
    config = task.model_config(d_model=64)
    assert (config.d_vocab, config.d_vocab_out, config.n_ctx) == (65, 65, 10)
    assert (config.d_model, config.d_head, config.mask) == (64, 16, "causal")
    with pytest.raises(ValueError, match="not_a_field"):
        task.model_config(not_a_field=1)
