"""ALiBi (Press et al. 2022, "Train short, test long"): positions as a fixed linear penalty on
attention scores, ``score[h, i, j] -= m_h * |i - j|``, instead of a positional table.

The scheme adds nothing to the residual stream, so the hook protocol's reader sites
(``hook_q/k/v``) and every circuit over them are unchanged; only the scores move, and
``hook_attn_scores`` sees them with the penalty added (as TransformerLens's own ALiBi
attention does). A model with it has no positional table, so it runs at any length: what the
length-generalisation study (:mod:`circuits.analyses.length_generalization`) measures.

The head slopes ``m_h`` are TransformerLens's (``build_alibi_slopes``, the HuggingFace rule:
``2^(-8/n), 2^(-16/n), ...`` for ``n`` heads, interleaved for a head count that is not a
power of 2). A seed token (``seed_mode="token"``) counts as position 0.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from transformer_lens.model_bridge.generalized_components.alibi_utils import build_alibi_slopes

from interp_rand.model.config import ModelConfig


@functools.lru_cache(maxsize=None)
def alibi_slopes(n_heads: int) -> Tensor:
    """``[n_heads]`` the per-head slopes ``m_h`` (TransformerLens's rule), computed once per head
    count (every block of every forward asks; callers never write into it)."""
    return build_alibi_slopes(n_heads, torch.device("cpu"))


def alibi_bias(cfg: ModelConfig, n_query: int, n_key: int, *, queries: Tensor | None = None,
               heads: Tensor | None = None, device: torch.device | str | None = None) -> Tensor | None:
    """``[head, n_query, n_key]`` the penalty ``-m_h |i - j|`` of ``cfg``'s ALiBi, or ``None``
    for any other positional scheme.

    The queries are the last ``n_query`` of the ``n_key`` positions (a whole forward, or a
    decoding cache's new positions), or the positions ``queries`` (incremental patching's
    *these queries*); ``heads``: only these heads (``None``: all)."""
    if cfg.positional != "alibi":
        return None
    key_pos = torch.arange(n_key, device=device)
    query_pos = torch.arange(n_key - n_query, n_key, device=device) if queries is None else queries.to(device)
    slopes = alibi_slopes(cfg.n_heads).to(device)
    if heads is not None:
        slopes = slopes[heads.to(slopes.device)]
    distance = (query_pos[:, None] - key_pos[None]).abs().to(slopes.dtype)  # [q, k]
    return -slopes[:, None, None] * distance


__all__ = ["alibi_bias", "alibi_slopes"]
