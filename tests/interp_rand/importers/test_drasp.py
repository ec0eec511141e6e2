"""D-RASP's benchmark tasks and models: the task layouts (``BOS x SEP y``, the answers where
their data puts them), the content-copying primitives and edits that tell an induction from a
positional copy, and a model folder of theirs read by its name (a tiny GPT-2 saved here in their
format: the benchmark models themselves are not in the repository and are never downloaded)."""

import pytest
import torch

from circuits.explain import PRIMITIVES, Frame
from circuits.explain.candidates import source_edits
from interp_rand.importers.drasp import KINDS, drasp_task, kind_of, read_drasp

G = torch.Generator().manual_seed(0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_task_puts_bos_source_sep_and_answers_where_their_data_does(kind):
    vocab_size = 6 if kind == "bin_majority" else 34
    task = drasp_task(kind, vocab_size, length=6)
    batch = task.sample(200, G)
    V = vocab_size - 4
    n_source = 2 if kind == "count" else 6
    assert (batch.inputs[:, 0] == V).all() and (batch.inputs[:, n_source + 1] == V + 1).all()  # BOS, SEP
    skip = 1 if kind == "count" else 0  # count's start, predicted at SEP (a copy), is not scored
    assert batch.answer_positions[0] == n_source + 1 + skip and len(batch.inputs[0]) == len(task.positions)
    x, y = batch.inputs[:, 1:n_source + 1], batch.targets[:, batch.answer_positions]
    expected = {"sort": lambda: x.sort(1).values, "unique_copy": lambda: x, "unique_reverse": lambda: x.flip(1),
                "count": lambda: x[:, :1] + torch.arange(1, 6),
                "majority": lambda: torch.nn.functional.one_hot(x, V).sum(1).argmax(1, keepdim=True),
                "bin_majority": lambda: torch.nn.functional.one_hot(x, V).sum(1).argmax(1, keepdim=True)}[kind]()
    assert torch.equal(y, expected)
    if kind in ("majority", "bin_majority"):  # one most frequent token, as their sampler redraws ties
        top = torch.nn.functional.one_hot(x, V).sum(1).topk(2, dim=1).values
        assert (top[:, 0] > top[:, 1]).all()
    frame = Frame(batch, task)
    assert frame.start == 1 and torch.equal(frame.source[:, :n_source], x)  # BOS is not part of the source
    if kind == "count":  # two rival programs give every answer: count on from the token written, or up by position
        for name in ("successor", "count_by_position"):
            got = torch.stack([PRIMITIVES.get(name).compute(frame, k) for k in range(5)], 1)
            assert torch.equal(got, y)


def test_copy_primitives_behind_a_bos_and_the_induction_that_copies_by_content():
    task = drasp_task("unique_copy", 14, length=4)  # tokens 0..9
    inputs = torch.tensor([[10, 5, 2, 7, 3, 11, 5, 2, 7]])  # BOS 5 2 7 3 SEP 5 2 7
    batch = task.sample(1, G)
    batch = type(batch)(inputs, batch.targets[:1], batch.loss_mask[:1], batch.answer_positions)
    frame = Frame(batch, task)
    copy, nxt, prev, first = (PRIMITIVES.get(n) for n in ("copy_source", "induction_next", "induction_previous",
                                                          "count_by_position"))
    assert [int(copy.compute(frame, k)) for k in range(4)] == [5, 2, 7, 3]
    assert [int(nxt.compute(frame, k)) for k in range(4)] == [5, 2, 7, 3]  # unique tokens: the same answers
    assert [int(prev.compute(frame, k)) for k in range(4)] == [3, 5, 5, 2]  # SEP absent: the last token first
    assert [int(first.compute(frame, k)) for k in range(4)] == [12, 13, 14, 15]  # SEP (11) + k + 1: no count here
    edited = batch.inputs.clone()
    edited[0, 7] = 3  # write 3 where 2 was: content copying now gives what follows 3 (the end), position 7
    frame = Frame(type(batch)(edited, batch.targets, batch.loss_mask, batch.answer_positions), task)
    assert int(copy.compute(frame, 2)) == 7 and int(nxt.compute(frame, 2)) == 3  # clamped at the last token


def test_source_edits_write_each_other_token_of_the_inputs_own_source():
    task = drasp_task("unique_copy", 34, length=5)
    batch = task.sample(30, G)
    edits = source_edits(task, batch)
    assert len(edits) == 4  # the written answers y_1 .. y_4 (inputs stop before y_5)
    name, edit = next(iter(edits.items()))
    p = int(name.split("@")[1].split()[0])
    edited = edit(batch)
    rows = edited.metadata["edited_from"]
    assert len(edited) == 30 * 4  # each row: its 5 source tokens but the one already there
    source = batch.inputs[rows, 1:6]
    assert ((edited.inputs[:, p, None] == source).any(1)).all()
    assert (edited.inputs[:, p] != batch.inputs[rows, p]).all()


def test_a_benchmark_folder_is_read_by_its_name(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    folder = tmp_path / "unique_reverse-@1l1h16d3lr01drop"
    GPT2LMHeadModel(GPT2Config(vocab_size=24, n_positions=30, n_embd=16, n_layer=1, n_head=1)).eval() \
        .save_pretrained(folder)
    model, task = read_drasp(folder, length=5)
    assert task.name == "drasp-unique_reverse" and task.families == ("copy", "position")
    batch = task.sample(8, G)
    assert model(batch.inputs).shape == (8, 11, 24) and int(batch.inputs[:, 0].max()) == 20  # BOS = 24 - 4
    with pytest.raises(ValueError, match="D-RASP task 'parity' is not read here; known: sort"):
        kind_of(tmp_path / "parity-@4l4h256d4lr00drop")


def test_a_long_answer_is_edited_at_ten_evenly_spaced_written_positions():
    from circuits.mechanisms.decisive import MAX_EDIT_POSITIONS, edited_positions, written_positions

    batch = drasp_task("unique_copy", 44, length=30).sample(4, G)
    written = written_positions(batch)
    picked = edited_positions(batch)
    assert len(written) == 29 and len(picked) == MAX_EDIT_POSITIONS == 10
    assert picked[0] == written[0] and picked[-1] == written[-1] and picked == sorted(set(picked))
    short = drasp_task("unique_copy", 44, length=6).sample(4, G)
    assert edited_positions(short) == written_positions(short)  # a short answer: every written position
    assert len(source_edits(drasp_task("unique_copy", 44, length=30), batch)) == 10
