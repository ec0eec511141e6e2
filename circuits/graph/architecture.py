"""How circuits read a model: the TransformerLens hook-name protocol plus TL weight names.

Works on our :class:`~interp_rand.model.HookedTransformer` and on a TransformerLens
``TransformerBridge`` alike. Writers are read at ``hook_embed``, ``hook_seed_embed``,
``input_mlp.hook_post`` (times the input MLP's ``W_out``, plus ``b_out``),
``blocks.{l}.attn.hook_z`` (times ``W_O``, one residual write per head) and
``blocks.{l}.hook_mlp_out``; readers are rebuilt from ``hook_resid_pre``/``hook_resid_mid``
through the block's own LayerNorm and ``W_Q/W_K/W_V``/``W_in``, and written back at
``hook_q/k/v``/``mlp.hook_pre`` (the final ``hook_resid_post`` for the logits). So a model
needs no split-input hooks (ours has none; the bridge gates them behind flags).

**The input MLP** (``d_input_mlp > 0``, e.g. the recall task's model) sits between the
embedding and the residual stream: ``resid = input_mlp(embed [+ seed]) [+ seed] + pos``. It is a
node of its own, ``input_mlp``: a *writer* into the residual stream like a head or an MLP, and
a *reader* whose one input (``mlp``) is the sum of what feeds it: the token embedding, and the
seed channel when ``seed_mode="append"`` joins the seed to the input features. Those upstream
writers then have edges into the input MLP only, never straight into a head, an MLP or the
logits (they do not reach the residual stream but through it); with ``seed_mode="add"`` the seed
is added after the input MLP and keeps its direct edges. So every edge is a real path of the
forward pass, and ablating ``embed -> input_mlp`` or ``seed -> input_mlp`` edges asks what the
input MLP does without that input. The input MLP reads its input with no LayerNorm, so its
``hook_pre`` is rebuilt as ``x @ W_in + b_in``, or ``x + b_in`` when the embedding is its first
layer (:func:`input_mlp_input`). Its write is
``hook_post @ W_out + b_out``; like a head's ``b_O``, the bias stays when the node is
zero-ablated (``hook_post`` is what gets replaced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from interp_rand.model.hook_names import hook_name, seed_offset
from interp_rand.model.mixer import Mixer


@dataclass(frozen=True)
class Architecture:
    """What a circuit depends on: graphs and circuits from different architectures differ.

    Attributes:
        n_layers, n_heads, attn_only: as in the model config.
        has_seed: the model has a seed channel (``hook_seed_embed``).
        seed_offset: positions taken by a seed token (``seed_mode="token"``: 1, else 0).
        has_input_mlp: an input MLP between the embedding and the residual stream (module
            docstring); the defaults keep circuit files written before it loadable.
        seed_append: the seed joins the input MLP's input (``seed_mode="append"``).
    """

    n_layers: int
    n_heads: int
    attn_only: bool
    has_seed: bool
    seed_offset: int
    has_input_mlp: bool = False
    seed_append: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def mismatch(self, other: Architecture) -> list[str]:
        """``field: mine vs theirs`` for every field that differs."""
        return [
            f"{k}={v!r} vs {getattr(other, k)!r}"
            for k, v in self.__dict__.items()
            if getattr(other, k) != v
        ]


def architecture(model: Any) -> Architecture:
    """Read the architecture from a TL-protocol model and refuse what circuits cannot decompose."""
    cfg = model.cfg
    hooks = model.hook_dict
    if "hook_embed" not in hooks or hook_name(0, "attn.hook_z") not in hooks:
        raise ValueError(
            "model does not speak the TransformerLens hook-name protocol: it has no "
            "'hook_embed' / 'blocks.0.attn.hook_z' hook points"
        )
    if getattr(cfg, "parallel_attn_mlp", False):
        raise ValueError("circuits need sequential blocks; parallel_attn_mlp is not supported")
    has_seed = "hook_seed_embed" in hooks
    has_input_mlp = "input_mlp.hook_post" in hooks
    return Architecture(
        n_layers=int(cfg.n_layers),
        n_heads=int(cfg.n_heads),
        attn_only=bool(cfg.attn_only),
        has_seed=has_seed,
        seed_offset=seed_offset(model),
        has_input_mlp=has_input_mlp,
        seed_append=has_seed and getattr(cfg, "seed_mode", "add") == "append",
    )


def check_hook_names(model: Any, names: list[str]) -> None:
    """Raise naming every hook point in ``names`` that ``model`` does not have."""
    missing = [n for n in names if n not in model.hook_dict]
    if missing:
        raise ValueError(f"model has no hook point(s) {missing}")


def head_results(model: Any, layer: int, z: Tensor) -> Tensor:
    """``z: [batch, pos, head, d_head]`` → each head's residual write ``[batch, pos, head, d_model]``:
    the mixer's own write step (:meth:`~interp_rand.model.mixer.Mixer.head_writes`; a
    ``TransformerBridge``'s attention has the same TL weights, so the same maths reads them)."""
    return Mixer.head_writes(model.blocks[layer].attn, z)


def attention_input(model: Any, layer: int, which: str, x: Tensor) -> Tensor:
    """``hook_q/k/v`` rebuilt from per-head residual inputs ``x: [batch, pos, head, d_model]``:
    the block's own LayerNorm (it normalises each head's copy separately: it acts on the last
    axis), then the mixer's own projection (:meth:`~interp_rand.model.mixer.Mixer.project_heads`,
    read off a bridge's TL weights alike)."""
    block = model.blocks[layer]
    return Mixer.project_heads(block.attn, block.ln1(x), which)


def input_mlp_input(model: Any, x: Tensor) -> Tensor:
    """``input_mlp.hook_pre`` rebuilt from the input MLP's input ``x: [..., d_model]`` (no
    LayerNorm: the sum of the embedding and an appended seed's projection; the MLP knows whether
    it has a ``W_in`` of its own)."""
    return model.input_mlp.pre_activation(x)


def input_mlp_output(model: Any, post: Tensor) -> Tensor:
    """``input_mlp.hook_post [..., d_input_mlp]`` → the input MLP's residual write ``[..., d_model]``."""
    return post @ model.input_mlp.W_out + model.input_mlp.b_out


def mlp_input(model: Any, layer: int, x: Tensor) -> Tensor:
    """``mlp.hook_pre`` rebuilt from the MLP's residual input ``x: [..., d_model]`` (our MLP's
    own :meth:`~interp_rand.model.mlp.MLP.pre_activation`; a bridge's MLP by its weights)."""
    block = model.blocks[layer]
    if hasattr(block.mlp, "pre_activation"):
        return block.mlp.pre_activation(block.ln2(x))
    return block.ln2(x) @ block.mlp.W_in + block.mlp.b_in


def run_model(model: Any, batch: Any) -> Tensor:
    """Logits for a :class:`~interp_rand.tasks.Batch` (seeds and masks passed when present),
    or for a plain token tensor."""
    if isinstance(batch, Tensor):
        return model(batch)
    kwargs = batch.model_kwargs()
    if kwargs:
        return model(batch.inputs, **kwargs)
    return model(batch.inputs)


__all__ = [
    "Architecture",
    "architecture",
    "attention_input",
    "check_hook_names",
    "head_results",
    "input_mlp_input",
    "input_mlp_output",
    "mlp_input",
    "run_model",
]
