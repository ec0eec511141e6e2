"""Mechanism checks on a task whose answers are bits: the engine reads the bit logits as the
log-probabilities of the 2**V bit patterns (circuits.mechanisms.patching.bit_pattern_logprobs)."""

import torch

from circuits.mechanisms.patching import bit_pattern_logprobs
from interp_rand.losses import BITS, pack_bits


def test_bit_pattern_logprobs_argmax_is_the_thresholded_bits_and_they_normalise():
    logits = torch.randn(64, 1, 5, generator=torch.Generator().manual_seed(0)) * 3
    scores = bit_pattern_logprobs(logits)
    assert scores.shape == (64, 1, 32)
    assert torch.equal(scores.argmax(-1), pack_bits(logits > 0))
    assert torch.allclose(scores.logsumexp(-1), torch.zeros(64, 1), atol=1e-5)
    assert torch.allclose(scores.exp(), BITS.distribution(logits), atol=1e-6)
