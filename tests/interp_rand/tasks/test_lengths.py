"""A task at another length (interp_rand.tasks.lengths): which tasks have one, training on a
range (one length per batch, a curriculum), and a TaskSpec's range of lengths."""

from __future__ import annotations

import pytest
import torch

from interp_rand import make_task
from interp_rand.tasks.base import Batch
from interp_rand.tasks.lengths import (at_length, check_training_lengths, length_of, parse_lengths,
                                       tasks_with_lengths, training_task)
from interp_rand.tasks.spec import TaskSpec


def test_sort_and_addition_change_length_and_keep_their_tokens():
    sort = make_task("sort", length=8, vocab=10)
    longer = at_length(sort, 20)
    assert (longer.length, longer.vocab, longer.n_ctx) == (20, 10, 40)
    assert longer.model_config().d_vocab == sort.model_config().d_vocab  # the same tokens
    addition = at_length(make_task("addition", n_digits=3), 7)
    assert length_of(addition) == 7 and addition.sample(4, torch.Generator()).inputs.shape[1] > 3 * 7
    assert sorted(tasks_with_lengths()) == ["addition", "coloring", "recall", "sort"]


def test_a_task_without_a_length_field_is_refused_naming_those_with_one():
    from interp_rand.tasks.spec import TaskSpec

    spec = TaskSpec("fixed", sample_fn=lambda n, g: None, positions=("x0",))
    with pytest.raises(ValueError, match="'fixed' has no length.*addition, coloring, recall, sort"):
        at_length(spec, 4)
    with pytest.raises(ValueError, match="length=1"):
        at_length(make_task("sort", length=4, vocab=5), 1)  # sort needs >= 2


def test_training_draws_every_length_of_the_range_and_a_curriculum_grows_it():
    sort = make_task("sort", length=8, vocab=5)
    g = torch.Generator().manual_seed(0)
    assert training_task(sort, None, 0, 0, g) is sort
    drawn = {training_task(sort, 3, 0, step, g).length for step in range(200)}
    assert drawn == set(range(3, 9))
    early = {training_task(sort, 3, 100, step, g).length for step in range(10)}  # the top grows from 3
    assert max(early) == 3
    middle = {training_task(sort, 3, 100, 49, g).length for _ in range(200)}
    assert max(middle) == 5  # 3 + (8 - 3) * 50 // 100
    late = {training_task(sort, 3, 100, 150, g).length for _ in range(300)}
    assert late == set(range(3, 9))
    with pytest.raises(ValueError, match="min_length=9 exceeds the task's length=8"):
        check_training_lengths(sort, 9)


def test_parse_lengths():
    assert parse_lengths("3-9") == range(3, 10) and parse_lengths("5") == range(5, 6)
    for bad in ("9-3", "0-4", "a-b", "1-2-3"):
        with pytest.raises(ValueError, match="A-B"):
            parse_lengths(bad)


def _copy_spec(**options):
    def sample(n, generator, length):
        x = torch.randint(0, 5, (n, length), generator=generator)
        return Batch(x, x, torch.ones_like(x, dtype=torch.bool), torch.arange(length))

    return TaskSpec("copy", sample_fn=sample, **{"positions": lambda n: [f"x{i}" for i in range(n)],
                                                  "lengths": (2, 6), **options})


def test_a_task_spec_samples_at_any_length_of_its_range_and_beyond():
    spec = _copy_spec()
    assert spec.length == 6 and len(spec.positions) == 6
    longer = at_length(spec, 11)
    assert longer.positions[-1] == "x10" and longer.sample(3, torch.Generator()).inputs.shape == (3, 11)
    assert longer.config_dict()["length"] == 11
    fixed = _copy_spec(positions=tuple(f"x{i}" for i in range(6)))
    with pytest.raises(ValueError, match="positions as fn"):
        fixed.at_length(7)
    with pytest.raises(ValueError, match="shortest <= longest"):
        _copy_spec(lengths=(5, 2))


def test_recall_keeps_its_key_alphabet_at_another_number_of_pairs():
    """Recall's length is its number of pairs over a kept key alphabet: the same model reads
    fewer pairs, and more pairs up to n_keys; more pairs than keys is refused. n_keys = N is the
    paper's task, draw for draw."""
    plain = make_task("recall", n_pairs=6)
    fewer = at_length(plain, 4)
    assert (fewer.n_pairs, fewer.key_space, fewer.d_input) == (4, 6, plain.d_input)
    with pytest.raises(ValueError, match="n_keys=6 must be an integer in n_pairs=8"):
        at_length(plain, 8)
    wide = make_task("recall", n_pairs=4, n_keys=10)
    assert at_length(wide, 10).config_dict()["n_pairs"] == 10 and "n_keys" not in at_length(wide, 10).config_dict()
    batch = wide.sample(64, torch.Generator().manual_seed(0))
    keys = batch.metadata["key_order"]
    assert batch.inputs.shape == (64, 5, 10 + wide.value_bits) and int(keys.max()) >= 4  # keys beyond N are drawn
    assert all(len(set(row.tolist())) == 4 for row in keys)
    same = make_task("recall", n_pairs=6, n_keys=6).sample(8, torch.Generator().manual_seed(1))
    old = plain.sample(8, torch.Generator().manual_seed(1))
    assert torch.equal(same.inputs, old.inputs)


def test_coloring_keeps_its_vertex_ids_on_another_cycle():
    """A cycle of another length over the same ids: the zoo's 10-vertex model reads shorter
    cycles (the ids it never saw in a 6-cycle are simply absent); longer ones need n_ids."""
    ten = make_task("coloring")
    six = at_length(ten, 6)
    assert (six.n_vertices, six.id_space, six.model_config().d_input) == (6, 10, ten.model_config().d_input)
    batch = six.sample(4, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == (4, 6, 10) and torch.equal(batch.inputs[0, :, :6], torch.eye(6))
    assert batch.attention_mask.sum(-1).eq(2).all()  # each vertex sees its two neighbours
    with pytest.raises(ValueError, match="n_ids=10 must be an integer >= n_vertices=12"):
        at_length(ten, 12)
    assert "n_ids" not in ten.config_dict() and at_length(six, 10).config_dict() == ten.config_dict()
