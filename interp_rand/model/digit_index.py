"""Digit-index positions (``ModelConfig.positional="digit_index"``): each token's position is
its index within its run of digit tokens (1 for a number's first digit written, 2 for its
second, ...; 0 for every other token), embedded by the fixed sinusoidal table.

Why: with numbers written units first (``AdditionTask(operand_order="lsb", answer_order="lsb")``)
a digit's index is its place value plus one, whatever the numbers' length, so "the operand
digits of my place" is the same relation at 5 digits and at 50. This is the idea of Abacus
embeddings (McLeish et al. 2024, "Transformers can do arithmetic with the right embeddings").

Departure from Abacus, named: Abacus learns its table and shifts the indices by a random offset
during training so that the rows used at test lengths are trained; here the table is the fixed
sinusoidal one (:func:`~interp_rand.model.embedding.sinusoidal_table`), whose rows exist at
every index and whose dot products depend on index differences only, so no offset (and no
training-time randomness inside the model) is needed. What the change costs is measured in
docs/generalization.md against the learned table and ALiBi.
"""

from __future__ import annotations

import torch
from torch import Tensor


def digit_indices(tokens: Tensor, digit_tokens: int) -> Tensor:
    """``tokens [batch, pos]`` -> ``[batch, pos]`` long: the 1-based index of each digit token
    within its run of consecutive digit tokens (ids below ``digit_tokens``), 0 elsewhere.

        >>> digit_indices(torch.tensor([[5, 8, 4, 10, 6, 1, 11, 1]]), 10)
        tensor([[1, 2, 3, 0, 1, 2, 0, 1]])
    """
    is_digit = tokens < digit_tokens
    count = is_digit.long().cumsum(1)
    # the digit count at the last non-digit token so far: the run restarts after it
    restart = torch.where(is_digit, torch.zeros_like(count), count).cummax(1).values
    return (count - restart) * is_digit


__all__ = ["digit_indices"]
