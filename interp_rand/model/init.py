"""Weight initialisation schemes of :class:`~interp_rand.model.HookedTransformer`
(``ModelConfig.init``); each draws from the generator it is given, never from global RNG.

``"normal"`` (TransformerLens): every matrix ``N(0, init_range)``.

``"fan_in"`` (the paper's recall model, as its public JAX port builds it with Haiku's
``VarianceScaling(scale, "fan_in", "truncated_normal")``): each matrix is drawn from a normal
truncated at two standard deviations and rescaled so that its variance is ``scale / fan_in``,
where ``fan_in`` is the width of the input the matrix reads (its second-to-last axis:
``d_model`` for ``W_Q: [head, d_model, d_head]``, ``d_head`` for ``W_O``). ``scale`` is 1 except
for the matrices that write into the residual stream from a block: ``W_O`` has
``1 / (n_layers * n_heads)`` and a block MLP's ``W_out`` ``1 / n_layers`` (so the residual
stream's variance does not grow with depth), and a block MLP's ``W_in`` 2 (GELU halves the
variance). The token embedding and the seed's projection, where they are summed before any non-linearity,
are one linear map of the concatenated ``[token, seed]`` in the paper, so both use that joint
fan-in. Learned positional
embeddings: truncated normal with standard deviation 0.02.

In both schemes biases start at 0 and LayerNorm scales at 1.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from interp_rand.model.config import ModelConfig

# A standard normal truncated to [-2, 2] has this standard deviation (Haiku's constant).
_TRUNCATED_STD = 0.87962566103423978
POSITIONAL_STD = 0.02


def fan_in_scale(name: str, cfg: ModelConfig) -> float:
    """The variance scale of matrix ``name`` under ``init="fan_in"`` (module docstring)."""
    if name.endswith("attn.W_O"):
        return 1.0 / (cfg.n_layers * cfg.n_heads)
    if name.startswith("blocks.") and name.endswith("mlp.W_out"):
        return 1.0 / cfg.n_layers
    if name.startswith("blocks.") and name.endswith("mlp.W_in"):
        return 2.0
    return 1.0


def _seed_joins_the_token(cfg: ModelConfig) -> bool:
    """Is ``embed + seed_embed`` one linear map of the concatenated ``[token, seed]``? (The
    seed is appended before the input MLP, or added with no input MLP in between.)"""
    return cfg.has_seed and (cfg.seed_mode == "append" or (cfg.seed_mode == "add" and cfg.d_input_mlp == 0))


def fan_in(name: str, param: Tensor, cfg: ModelConfig) -> int:
    """The input width matrix ``name`` reads: its second-to-last axis, or for the embedding and
    an appended seed's projection the width of the concatenated ``[token, seed]``."""
    if _seed_joins_the_token(cfg) and name in ("embed.W_E", "seed_embed.W_seed"):
        return int(cfg.d_input or cfg.d_vocab) + cfg.d_seed
    return int(param.shape[-2])


def truncated_normal_(param: Tensor, std: float, generator: torch.Generator) -> None:
    """Fill ``param`` with a normal truncated at two standard deviations, rescaled to ``std``."""
    raw = std / _TRUNCATED_STD
    nn.init.trunc_normal_(param, 0.0, raw, -2 * raw, 2 * raw, generator=generator)


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, seed: int) -> None:
    """Initialise every parameter of ``model`` by ``cfg.init``, drawing from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "w":
            param.fill_(1.0)
        elif not leaf.startswith("W_"):
            param.zero_()
        elif cfg.init == "normal":
            param.normal_(0.0, cfg.init_range, generator=generator)
        elif leaf == "W_pos":
            truncated_normal_(param, POSITIONAL_STD, generator)
        else:
            std = (fan_in_scale(name, cfg) / fan_in(name, param, cfg)) ** 0.5
            truncated_normal_(param, std, generator)


__all__ = ["fan_in", "fan_in_scale", "init_weights", "truncated_normal_"]
