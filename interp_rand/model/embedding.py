"""Input and output maps: token/vector embedding, positional embedding, the seed channel's
projection and the unembedding. Names follow TransformerLens (``W_E``, ``W_pos``, ``W_U``)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from interp_rand.model.config import ModelConfig
from interp_rand.model.digit_index import digit_indices, row_offsets
from interp_rand.model.linear import linear


class Embed(nn.Module):
    """Token ids ``[batch, pos]`` (``W_E: [d_vocab, d_model]``) or real vectors
    ``[batch, pos, d_input]`` (``W_E: [d_input, d_model]``) to ``[batch, pos, d_model]``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.tokens = cfg.input_kind == "tokens"
        rows = cfg.d_vocab if self.tokens else cfg.d_input
        self.W_E = nn.Parameter(torch.empty(rows, cfg.d_model))

    def forward(self, inputs: Tensor) -> Tensor:
        if self.tokens:
            return self.W_E[inputs]
        return linear(inputs, self.W_E)


def sinusoidal_table(n_ctx: int, d_model: int) -> Tensor:
    """``[n_ctx, d_model]`` the fixed sin/cos table of Vaswani et al. (2017)."""
    position = torch.arange(n_ctx, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_ctx, d_model)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : d_model // 2]
    return table


class PosEmbed(nn.Module):
    """``W_pos: [n_ctx, d_model]``, a parameter (learned) or a saved buffer (sinusoidal and
    digit-index, computed afresh for a longer input: the same function at every row). Learned
    and sinusoidal rows are indexed by position; digit-index rows by each token's index within
    its number (:mod:`interp_rand.model.digit_index`), so they need the tokens."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.digit_tokens = cfg.digit_tokens if cfg.positional == "digit_index" else 0
        self.digit_offset = cfg.digit_offset
        if cfg.positional == "learned":
            self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))
        else:
            self.register_buffer("W_pos", sinusoidal_table(cfg.n_ctx, cfg.d_model))

    def forward(self, n_pos: int, tokens: Tensor | None = None) -> Tensor:
        """``[1, n_pos, d_model]`` (broadcast over the batch); digit-index positions ``[batch,
        n_pos, d_model]`` from ``tokens [batch, pos]`` (positions before them, a seed token,
        have index 0)."""
        if self.digit_tokens:
            if tokens is None:
                raise ValueError("digit-index positions are read from the tokens; pass them")
            index = digit_indices(tokens, self.digit_tokens)
            if self.training and self.digit_offset:
                index = index + row_offsets(tokens, self.digit_offset)[:, None] * (index > 0)
            index = torch.nn.functional.pad(index, (n_pos - tokens.shape[1], 0))
            return self._rows(int(index.max()) + 1 if index.numel() else 1)[index]
        return self._rows(n_pos)[None]

    def _rows(self, n: int) -> Tensor:
        """The table's first ``n`` rows (a fixed table computed afresh past its stored rows)."""
        if n > len(self.W_pos) and not isinstance(self.W_pos, nn.Parameter):
            return sinusoidal_table(n, self.W_pos.shape[1]).to(self.W_pos)
        return self.W_pos[:n]


class SeedEmbed(nn.Module):
    """The randomness channel's projection ``W_seed: [d_seed, d_model]``: seed bits or noise
    ``[batch, pos, d_seed]`` to ``[batch, pos, d_model]``. A module of its own so that the seed
    never hides in a slice of ``W_E``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_seed = nn.Parameter(torch.empty(cfg.d_seed, cfg.d_model))

    def forward(self, seeds: Tensor) -> Tensor:
        return linear(seeds, self.W_seed)


class Unembed(nn.Module):
    """``W_U: [d_model, d_vocab_out]``, ``b_U: [d_vocab_out]``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out))

    def forward(self, resid: Tensor) -> Tensor:
        return linear(resid, self.W_U, self.b_U)
