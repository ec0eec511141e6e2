"""Receptive fields: the fields found equal an independent count (nested tuples), and the
evaluation that copies each field's logits from its first occurrence gives the numbers of the
fast path run on every row, bitwise; fields one block too shallow would not."""

from __future__ import annotations

import dataclasses

import torch

from interp_rand import zoo
from interp_rand.model.fast import FastForward
from interp_rand.model.receptive_field import ReceptiveFields
from interp_rand.seeded_evaluation import run as seeded_run
from interp_rand.seeded_evaluation import predictive_variance, sampled_success, success_matrix
from interp_rand.tasks import make_task


def _nested_fields(key_index: torch.Tensor, depth: int) -> list[list[tuple]]:
    """Every (input, position)'s field as a nested tuple, by the definition, in plain Python."""
    fields = []
    for keys in key_index.tolist():
        level = [(i,) for i in range(len(keys))]
        for _ in range(depth):
            level = [(level[i], *(level[k] for k in keys[i])) for i in range(len(keys))]
        fields.append(level)
    return fields


def test_fields_number_the_distinct_nested_fields_and_point_at_an_occurrence():
    task = make_task("coloring")
    batch = task.exhaustive()[:3000]
    key_index = FastForward(zoo.load("coloring-Aq_R").model()).key_index(batch.attention_mask)
    for depth in (1, 2):
        fields = ReceptiveFields.find(batch.inputs, key_index, depth)
        nested = _nested_fields(key_index, depth)
        flat = [f for row in nested for f in row]
        ids = fields.field.flatten().tolist()
        assert fields.n_fields == len(set(flat)) == max(ids) + 1
        # the same number exactly where the nested fields are equal
        number_of = {}
        for f, i in zip(flat, ids):
            assert number_of.setdefault(f, i) == i
        assert len(set(number_of.values())) == len(number_of)
        # each field's recorded first occurrence holds that field, in a representative input
        n_pos = batch.inputs.shape[1]
        for f, where in enumerate(fields.where.tolist()):
            row, position = fields.inputs[where // n_pos].item(), where % n_pos
            assert fields.field[row, position].item() == f
        found = fields.where[fields.field]
        assert torch.equal(fields.offset, found // n_pos * n_pos + found % n_pos)  # one seed
    # a depth-2 field on a cycle is a vertex with its two arms of two further vertices: on all
    # 181,440 cycles of 10 vertices, 10 * (9 * 8 * 7 * 6) / 2 of them
    everything = task.exhaustive()
    fields = ReceptiveFields.find(everything.inputs, FastForward(zoo.load("coloring-Aq_R").model()).key_index(
        everything.attention_mask), 2)
    assert fields.n_fields == 10 * 9 * 8 * 7 * 6 // 2


def test_fields_apply_only_to_one_broadcast_input_with_gathered_keys():
    task = make_task("coloring")
    batch = task.exhaustive()[:50]
    key_index = FastForward(zoo.load("coloring-Aq_R").model()).key_index(batch.attention_mask)
    assert ReceptiveFields.find(batch.inputs, key_index, 2) is not None
    assert ReceptiveFields.find(batch.inputs.contiguous(), key_index, 2) is None  # inputs that may differ
    assert ReceptiveFields.find(batch.inputs, None, 2) is None  # a dense mask
    assert ReceptiveFields.find(batch.inputs[:1], key_index[:1], 2) is None


def test_evaluation_by_fields_is_bitwise_the_rows_one_by_one(monkeypatch):
    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    batch = task.exhaustive()[:20000]  # 4,256 representatives: the fields apply
    seeds = task.sample_seeds(3, torch.Generator().manual_seed(2))
    used = []
    find = ReceptiveFields.find

    def recording(inputs, key_index, depth, n_seeds):
        used.append(find(inputs, key_index, depth, n_seeds))
        return used[-1]

    monkeypatch.setattr(seeded_run.ReceptiveFields, "find", recording)
    by_fields = success_matrix(model, task, batch, seeds, keep_probs=True, sample=torch.Generator().manual_seed(3))
    assert used[-1] is not None and used[-1].pays_off and 4 * len(used[-1].inputs) <= len(batch)
    # every row through the fast path (no fields found)
    monkeypatch.setattr(seeded_run.ReceptiveFields, "find", lambda inputs, key_index, depth, n_seeds: None)
    one_by_one = success_matrix(model, task, batch, seeds, keep_probs=True, sample=torch.Generator().manual_seed(3))
    assert 0 < by_fields.success.float().mean() < 1
    assert torch.equal(by_fields.success, one_by_one.success) and torch.equal(by_fields.outputs, one_by_one.outputs)
    assert torch.equal(by_fields.probs, one_by_one.probs)
    # the statistics computed chunk by chunk (looked-up rows alike): those of the probabilities
    assert torch.equal(by_fields.variance, one_by_one.variance)
    assert torch.equal(by_fields.variance, predictive_variance(dataclasses.replace(one_by_one, variance=None)))
    assert torch.equal(by_fields.sampled, one_by_one.sampled)
    assert torch.equal(by_fields.sampled, sampled_success(by_fields, torch.Generator().manual_seed(3)))

    # the control: fields one block too shallow copy logits between positions that differ
    monkeypatch.setattr(seeded_run.ReceptiveFields, "find",
                        lambda inputs, key_index, depth, n_seeds: find(inputs, key_index, depth - 1, n_seeds))
    shallow = success_matrix(model, task, batch, seeds, keep_probs=True)
    assert not torch.equal(shallow.probs, one_by_one.probs)
