"""Digit-index positions (``ModelConfig.positional="digit_index"``): each token's position is
its index within its run of digit tokens (1 for a number's first digit written, 2 for its
second, ...; 0 for every other token), embedded by the fixed sinusoidal table.

Why: with numbers written units first (``AdditionTask(operand_order="lsb", answer_order="lsb")``)
a digit's index is its place value plus one, whatever the numbers' length, so "the operand
digits of my place" is the same relation at 5 digits and at 50. This is the idea of Abacus
embeddings (McLeish et al. 2024, "Transformers can do arithmetic with the right embeddings").

As in Abacus, training can shift every row's digit indices by an offset in ``0 ..
digit_offset`` (``ModelConfig.digit_offset``; none in evaluation mode), so that the index rows
used at test lengths are trained: without it a model trained on 5 digits has never read index
6, and the length study (docs/generalization.md) measures it failing exactly there.

Departures from Abacus, named: the table is the fixed sinusoidal one
(:func:`~interp_rand.model.embedding.sinusoidal_table`), not learned; and the offset is not drawn
from a random generator inside the model but from a hash of the row's tokens
(:func:`row_offsets`), so that a run stays bitwise reproducible and resumable (the trainer's
generator, which draws the data, is the only source of randomness).
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


def row_offsets(tokens: Tensor, most: int) -> Tensor:
    """``[batch]`` long in ``0 .. most``: each row's index offset, a hash of its tokens (a
    different multiplier per position, so that reordered digits move it), uniform enough over
    the rows of a batch and the same for the same row on every run."""
    weights = torch.arange(tokens.shape[1], device=tokens.device, dtype=torch.long) * 2654435761 + 40503
    mixed = (tokens.long() * weights).sum(1)
    mixed = (mixed ^ (mixed >> 13)) * 1274126177
    return (mixed ^ (mixed >> 16)).remainder(most + 1)


__all__ = ["digit_indices", "row_offsets"]
