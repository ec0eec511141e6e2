"""Loss kinds own decoding their outputs: answer ids, the output distribution over them, the
right answer's id, with one bit order (most significant first) shared by every module."""

from __future__ import annotations

import pytest
import torch

from circuits.analyses.randomness import answer_distribution, answers
from circuits.interventions.metrics import logit_diff, logprob, prob
from interp_rand import losses
from interp_rand.losses import (
    BITS,
    CLASSES,
    MAX_ENUMERATED_BITS,
    bit_patterns,
    decoding_for_targets,
    get_loss_kind,
    pack_bits,
    unpack_bits,
)
from interp_rand.seeded_evaluation import run as seed_run
from interp_rand.tasks import RecallTask
from interp_rand.tasks.base import Batch


def _bit_batch(targets: torch.Tensor) -> Batch:
    n, pos = targets.shape[:2]
    return Batch(inputs=torch.zeros(n, pos, 3), targets=targets, loss_mask=torch.ones(n, pos, dtype=torch.bool),
                 answer_positions=torch.arange(pos))


# ---------------------------------------------------------------------- the one bit order


def test_pack_is_most_significant_first_and_unpack_inverts_it():
    assert pack_bits(torch.tensor([1, 0, 0])).item() == 4
    assert pack_bits(torch.tensor([0, 0, 1])).item() == 1
    ids = torch.arange(2**6)
    assert torch.equal(pack_bits(unpack_bits(ids, 6)), ids)
    bits = torch.randint(0, 2, (7, 3, 9), generator=torch.Generator().manual_seed(0))
    assert torch.equal(unpack_bits(pack_bits(bits), 9), bits)
    with pytest.raises(ValueError, match="int64"):
        pack_bits(torch.zeros(63))


def test_bit_patterns_ascend_lexicographically():
    rows = bit_patterns(4)
    assert rows.shape == (16, 4)
    assert rows[1].tolist() == [0, 0, 0, 1] and rows[8].tolist() == [1, 0, 0, 0]
    assert sorted(map(tuple, rows.tolist())) == list(map(tuple, rows.tolist()))


def test_modules_agree_on_the_bit_order():
    """recall's enumerated seeds, the bit kind's answer ids and its distribution's outcome
    axis all use losses' order: packing the patterns gives their row numbers back."""
    seeds = RecallTask(seed_bits=5).all_seeds()
    assert torch.equal(seeds, bit_patterns(5).float())
    assert torch.equal(pack_bits(seeds > 0.5), torch.arange(32))
    # answer ids: logits whose signs spell each pattern decode to that pattern's row number
    logits = (2 * bit_patterns(5).float() - 1)[:, None]  # [32, pos=1, 5]
    assert torch.equal(answers(logits, torch.tensor([0]), "bce")[:, 0], torch.arange(32))
    assert torch.equal(get_loss_kind("bce").predict(logits)[:, 0], torch.arange(32))
    # the distribution over ids puts its mode at the predicted id
    p = answer_distribution(10 * logits, torch.tensor([0]), "bce")[:, 0]
    assert torch.equal(p.argmax(-1), torch.arange(32))
    # target ids use the same order as predictions
    batch = _bit_batch(bit_patterns(5).float()[:, None])
    assert torch.equal(get_loss_kind("bce").target_ids(batch)[:, 0], torch.arange(32))


def test_seed_run_ids_are_the_loss_kind_ids():
    """SeedRun's outputs and targets are the loss kind's ids (losses.pack_bits, most significant
    bit first): the one bit order."""
    bits = bit_patterns(5)
    kind = get_loss_kind("bce")
    logits = (2 * bits.float() - 1)[:, None]
    # what success_matrix keeps: the kind's ids in the smallest type that holds 5 bits packed
    out, probs = kind.predict(logits).to(seed_run.output_dtype(kind, 5)), kind.marginals(logits)
    assert out.dtype == torch.uint8
    assert torch.equal(out[:, 0].long(), pack_bits(bits)) and torch.equal(out[:, 0].long(), torch.arange(32))
    assert torch.equal(probs, torch.sigmoid(logits))
    assert torch.equal(kind.target_ids(_bit_batch(bits.float()[:, None]))[:, 0], pack_bits(bits))


# ---------------------------------------------------------------------- decodings


def test_the_registered_kinds_decode_as_before():
    assert get_loss_kind("ce").decoding is CLASSES and not get_loss_kind("ce").bits
    assert get_loss_kind("bce").decoding is BITS and get_loss_kind("bce").bits
    with pytest.raises(ValueError, match="nope"):
        get_loss_kind("nope")
    from interp_rand.tasks import ColoringTask

    ColoringTask()  # registers its kind: class outputs, judged without one target
    coloring = get_loss_kind("coloring")
    assert coloring.decoding is CLASSES
    assert coloring.target_ids(_bit_batch(torch.zeros(2, 3).long())) is None


def test_class_decoding_numbers():
    logits = torch.randn(4, 3, 7, generator=torch.Generator().manual_seed(1))
    kind = get_loss_kind("ce")
    assert torch.equal(kind.predict(logits), logits.argmax(-1))
    # the outer-axis softmax of a few classes: torch's softmax within float rounding
    assert torch.allclose(kind.distribution(logits), torch.softmax(logits.float(), -1), rtol=0, atol=1e-6)
    assert kind.distribution(logits).is_contiguous()
    assert torch.equal(kind.marginals(logits), kind.distribution(logits))
    targets = torch.randint(0, 7, (4, 3), generator=torch.Generator().manual_seed(2))
    assert torch.equal(CLASSES.correct(logits, targets), logits.argmax(-1) == targets)


def test_bit_distribution_is_the_product_of_bernoullis():
    logits = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(3))
    p = BITS.distribution(logits)  # [3, 2, 16]
    assert p.shape == (3, 2, 16)
    assert torch.allclose(p.sum(-1), torch.ones(3, 2))
    on = torch.sigmoid(logits)
    for i, pattern in enumerate(bit_patterns(4).bool()):
        expected = torch.where(pattern, on, 1 - on).prod(-1)
        assert torch.allclose(p[..., i], expected, atol=1e-6)
    # the marginals are the per-bit probabilities the distribution multiplies
    assert torch.equal(BITS.marginals(logits), on)
    with pytest.raises(ValueError, match="outcomes"):
        BITS.distribution(torch.zeros(1, 1, MAX_ENUMERATED_BITS + 1))


def test_decoding_for_targets_reads_the_dtype():
    assert decoding_for_targets(torch.zeros(2, 3, dtype=torch.long)) is CLASSES
    assert decoding_for_targets(torch.zeros(2, 3, 4)) is BITS


def test_circuit_metrics_decode_through_the_targets():
    """The metrics' arithmetic moved into the decodings; these pin it."""
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(5, 2, 3, generator=g)
    bits = torch.randint(0, 2, (5, 2, 3), generator=g).float()
    batch = _bit_batch(bits)
    logp = (bits * torch.nn.functional.logsigmoid(logits) + (1 - bits) * torch.nn.functional.logsigmoid(-logits)).sum(-1)
    assert torch.allclose(logprob(logits, batch), logp.mean())
    assert torch.allclose(prob(logits, batch), logp.exp().mean())
    assert torch.allclose(logit_diff(logits, batch), ((2 * bits - 1) * logits).mean())
    classes = torch.randint(0, 3, (5, 2), generator=g)
    cbatch = _bit_batch(classes)
    lsm = logits.log_softmax(-1).gather(-1, classes[..., None])[..., 0]
    assert torch.allclose(logprob(logits, cbatch), lsm.mean())
    assert torch.allclose(prob(logits, cbatch), lsm.exp().mean())
    correct = logits.gather(-1, classes[..., None])[..., 0]
    assert torch.allclose(logit_diff(logits, cbatch), (correct - (logits.sum(-1) - correct) / 2).mean())


def test_bce_correct_agrees_with_its_ids():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(50, 1, 3, generator=g)
    targets = torch.randint(0, 2, (50, 1, 3), generator=g).float()
    batch = _bit_batch(targets)
    kind = get_loss_kind("bce")
    assert torch.equal(losses.answer_correct(logits, batch, "bce"), kind.predict(logits) == kind.target_ids(batch))



# ---------------------------------------------------------------------- the fast decoding
def _tied_logits(shape, generator) -> torch.Tensor:
    """Logits drawn from 3 values: most answer positions have a tie for the maximum."""
    return torch.randint(0, 3, shape, generator=generator).float()


@pytest.mark.parametrize("n_classes", [2, 3, 7, 16, 17, 40])
def test_class_decoding_agrees_with_the_former_argmax_and_softmax_on_ties_nans_and_layouts(n_classes):
    """Answer ids, correctness and probabilities as the former decoding gave them (``argmax(-1)``:
    the first maximal class; ``torch.softmax(-1)``), with ties on most positions, NaNs, and the
    fast path's layout (classes outermost in memory, a transposed view)."""
    g = torch.Generator().manual_seed(n_classes)
    logits = _tied_logits((64, 10, n_classes), g)
    logits[::7, 3, 1] = float("nan")
    logits[::11, 5] = float("nan")
    transposed = logits.permute(2, 0, 1).contiguous().permute(1, 2, 0)  # same values, class axis outermost
    assert transposed.stride(-1) != 1 and torch.equal(transposed.nan_to_num(), logits.nan_to_num())
    targets = torch.randint(0, n_classes, (64, 10), generator=g)
    ties = (logits == logits.nan_to_num(float("-inf")).amax(-1, keepdim=True)).sum(-1) > 1
    assert ties.float().mean() > 0.3  # the case the first-index rule decides
    for picked in (logits, transposed):
        assert torch.equal(losses.argmax_class(picked), logits.argmax(-1))
        assert torch.equal(CLASSES.predict(picked), logits.argmax(-1))
        assert torch.equal(CLASSES.correct(picked, targets), logits.argmax(-1) == targets)
        finite = picked.nan_to_num(0.0)
        probs = CLASSES.marginals(finite)
        assert probs.is_contiguous() and probs.shape == finite.shape
        assert torch.allclose(probs, torch.softmax(finite.contiguous(), -1), rtol=0, atol=1e-6)
        # the answer ids are those the former softmax-then-argmax picks wherever its
        # probabilities keep the logits' order (exact ties stay ties after the softmax)
        assert torch.equal(CLASSES.predict(finite), torch.softmax(finite, -1).argmax(-1))


def test_answer_logits_is_the_logits_where_every_position_answers():
    logits = torch.randn(4, 5, 3)
    every = Batch(inputs=torch.zeros(4, 5, 2), targets=torch.zeros(4, 5, dtype=torch.long),
                  loss_mask=torch.ones(4, 5, dtype=torch.bool), answer_positions=torch.arange(5))
    assert losses.answer_logits(logits, every) is logits
    for positions in (torch.tensor([1, 3]), torch.tensor([4, 3, 2, 1, 0]), torch.arange(4)):
        some = Batch(inputs=every.inputs, targets=every.targets, loss_mask=every.loss_mask,
                     answer_positions=positions)
        assert torch.equal(losses.answer_logits(logits, some), logits[:, positions])
    assert losses.answers_every_position(torch.arange(5), 5)
    assert not losses.answers_every_position(torch.arange(4), 5)
    assert not losses.answers_every_position(torch.tensor([0, 1, 2, 4, 3]), 5)
