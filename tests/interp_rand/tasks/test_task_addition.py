"""AdditionTask: layout, sums, carry/cascade metadata against a Python reference, enrichment,
exhaustive enumeration, carry-flip corruption, config validation."""

import pytest
import torch

from interp_rand.tasks import AdditionTask, Batch, make_task


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def reference(a: int, b: int, n: int) -> dict:
    """Brute force, place-ordered (index 0 = units), cascades as in the module docstring."""
    a_d = [(a // 10**i) % 10 for i in range(n)]
    b_d = [(b // 10**i) % 10 for i in range(n)]
    carry_in, carry = [], 0
    for i in range(n):
        carry_in.append(carry)
        carry = (a_d[i] + b_d[i] + carry) // 10
    carry_in.append(carry)
    carry_out = carry_in[1:] + [0]
    cascade = [0] * (n + 1)
    i = 0
    while i < n:
        if a_d[i] + b_d[i] == 9:
            j = i
            while j < n and a_d[j] + b_d[j] == 9:
                j += 1
            if carry_in[i] == 1:  # run i..j-1 fed a carry: label it and its receiver j
                for p in range(i, j + 1):
                    cascade[p] = j - i
            i = j
        else:
            i += 1
    digits = [((a + b) // 10**i) % 10 for i in range(n + 1)]
    return {"carry_in": carry_in, "carry_out": carry_out, "cascade_len": cascade, "digits": digits}


def check_against_reference(task: AdditionTask, batch: Batch) -> None:
    n = task.n_digits
    written = list(range(n, -1, -1)) if task.answer_order == "msb" else list(range(n + 1))
    for row in range(len(batch)):
        tokens = batch.inputs[row].tolist()
        a = int("".join(map(str, tokens[:n])))
        b = int("".join(map(str, tokens[n + 1 : 2 * n + 1])))
        assert (batch.metadata["a"][row].item(), batch.metadata["b"][row].item()) == (a, b)
        ref = reference(a, b, n)
        answer = batch.answer_targets()[row].tolist()
        assert answer == [ref["digits"][p] for p in written]
        value = int("".join(map(str, answer if task.answer_order == "msb" else answer[::-1])))
        assert value == a + b
        assert batch.metadata["place"][row].tolist() == written
        for key in ("carry_in", "carry_out", "cascade_len"):
            assert batch.metadata[key][row].tolist() == [ref[key][p] for p in written], key
        assert batch.metadata["max_cascade"][row].item() == max(ref["cascade_len"])


def test_shapes_dtypes_and_layout():
    task = AdditionTask(n_digits=4)
    batch = task.sample(16, gen())
    assert batch.inputs.shape == batch.targets.shape == batch.loss_mask.shape == (16, 14)
    assert batch.inputs.dtype == torch.long and batch.loss_mask.dtype == torch.bool
    assert torch.equal(batch.answer_positions, torch.arange(9, 14))
    assert torch.equal(batch.loss_mask, (torch.arange(14) >= 9).expand(16, 14))
    assert (batch.inputs[:, 4] == 10).all() and (batch.inputs[:, 9] == 11).all()
    assert (batch.targets[~batch.loss_mask] == -1).all()
    for key in ("place", "carry_in", "carry_out", "cascade_len"):
        assert batch.metadata[key].shape == (16, 5)
    assert batch.metadata["a_digits"].shape == (16, 4)
    assert batch.metadata["max_cascade"].shape == batch.metadata["a"].shape == (16,)


@pytest.mark.parametrize("order", ["msb", "lsb"])
def test_random_batches_match_reference(order):
    task = AdditionTask(n_digits=4, answer_order=order)
    check_against_reference(task, task.sample(150, gen(1)))


def test_hand_made_cases():
    task = AdditionTask(n_digits=3)
    digits = lambda v: torch.tensor([[(v // 10**i) % 10 for i in range(3)]])  # noqa: E731
    cases = [(445, 555), (999, 1), (0, 0), (999, 999), (50, 50), (91, 9)]
    batch = Batch.concat([task.build(digits(a), digits(b)) for a, b in cases])
    check_against_reference(task, batch)
    # 445 + 555 = 1000: place 0 generates, places 1-2 ripple, place 3 receives (msb order).
    assert batch.metadata["carry_in"][0].tolist() == [1, 1, 1, 0]
    assert batch.metadata["carry_out"][0].tolist() == [0, 1, 1, 1]
    assert batch.metadata["cascade_len"][0].tolist() == [2, 2, 2, 0]
    assert batch.metadata["cascade_len"][1].tolist() == [2, 2, 2, 0]  # 999 + 001
    assert batch.metadata["cascade_len"][2].tolist() == [0, 0, 0, 0]  # 0 + 0
    assert batch.metadata["cascade_len"][3].tolist() == [0, 0, 0, 0]  # 9+9 generates, no 9-pair
    assert batch.metadata["cascade_len"][5].tolist() == [0, 1, 1, 0]  # 91 + 9: run = place 1
    assert batch.answer_targets()[0].tolist() == [1, 0, 0, 0]


def test_enriched_sampling_has_more_long_cascades():
    task = AdditionTask(n_digits=5, cascade_fraction=0.5)
    enriched = (task.sample(2000, gen(2)).metadata["max_cascade"] >= 3).float().mean()
    uniform = (task.sample_uniform(2000, gen(2)).metadata["max_cascade"] >= 3).float().mean()
    assert enriched >= 0.10 and uniform <= 0.01


def test_sample_with_cascade_guarantees_min_len():
    task = AdditionTask(n_digits=5)
    batch = task.sample_with_cascade(300, gen(3), min_len=3)
    assert (batch.metadata["max_cascade"] >= 3).all()
    check_against_reference(task, batch[torch.arange(0, 300, 10)])
    with pytest.raises(ValueError, match="min_len"):
        task.sample_with_cascade(4, gen(), min_len=5)


def test_single_digit_sampling_and_fraction_zero():
    one = AdditionTask(n_digits=1, cascade_fraction=1.0).sample(50, gen(4))
    assert (one.metadata["max_cascade"] == 0).all()
    plain = AdditionTask(n_digits=5, cascade_fraction=0.0)
    assert torch.equal(plain.sample(40, gen(5)).inputs, plain.sample_uniform(40, gen(5)).inputs)


def test_exhaustive_covers_every_pair_once():
    task = AdditionTask(n_digits=2)
    batch = task.exhaustive()
    assert len(batch) == 10_000
    pairs = batch.metadata["a"] * 100 + batch.metadata["b"]
    assert torch.equal(pairs.sort().values, torch.arange(10_000))
    check_against_reference(task, batch[torch.arange(0, 10_000, 97)])
    with pytest.raises(ValueError, match="n_digits"):
        AdditionTask(n_digits=4).exhaustive()


@pytest.mark.parametrize("order", ["msb", "lsb"])
def test_corrupt_flips_the_carry_of_one_digit(order):
    task = AdditionTask(n_digits=3, answer_order=order)
    batch = Batch.concat(
        [task.sample_uniform(300, gen(6)), task.sample_with_cascade(100, gen(11), min_len=1)]
    )
    pair = task.corrupt(batch, gen(7))
    clean_a, clean_b = task.operand_digits(pair.clean)
    new_a, new_b = task.operand_digits(pair.corrupted)
    changed_digits = torch.cat([clean_a != new_a, clean_b != new_b], 1)
    assert (changed_digits.sum(1) == 1).all()
    assert torch.equal(changed_digits.float().argmax(1) % 3, pair.changed)
    assert (pair.corrupted.answer_targets() != batch.answer_targets()).any(1).all()
    # carry_out in place order: index p of the place-ordered carries.
    rows = torch.arange(len(batch))
    place_col = (pair.changed if order == "lsb" else 3 - pair.changed)
    clean_carry = pair.clean.metadata["carry_out"][rows, place_col]
    new_carry = pair.corrupted.metadata["carry_out"][rows, place_col]
    assert (clean_carry != new_carry).all()
    check_against_reference(task, pair.corrupted[torch.arange(0, 400, 23)])


def test_corrupt_zero_plus_zero_still_changes_the_answer():
    task = AdditionTask(n_digits=2)
    zero = torch.zeros(3, 2, dtype=torch.long)
    pair = task.corrupt(task.build(zero, zero), gen(8))
    assert (pair.changed == 0).all()
    assert (pair.corrupted.metadata["a"] >= 1).all() and (pair.corrupted.metadata["a"] <= 9).all()


def test_same_seed_same_batch():
    task = AdditionTask(n_digits=5)
    assert torch.equal(task.sample(64, gen(9)).inputs, task.sample(64, gen(9)).inputs)
    assert not torch.equal(task.sample(64, gen(9)).inputs, task.sample(64, gen(10)).inputs)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"n_digits": 0}, "n_digits"),
        ({"cascade_fraction": 1.5}, "cascade_fraction"),
        ({"answer_order": "x"}, "answer_order"),
    ],
)
def test_bad_config_names_the_field(config, field):
    with pytest.raises(ValueError, match=field):
        make_task("addition", **config)


def test_registry_and_model_config():
    task = make_task("addition", n_digits=3, answer_order="lsb")
    assert task.config_dict() == {"n_digits": 3, "cascade_fraction": 0.5, "answer_order": "lsb"}
    config = task.model_config(n_layers=3)
    assert (config.d_vocab, config.d_vocab_out, config.n_ctx, config.n_layers) == (12, 12, 11, 3)
