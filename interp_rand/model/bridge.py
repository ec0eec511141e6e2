"""Convert a model to TransformerLens's own ``TransformerBridge`` (``boot_native``).

Our parameter names and shapes are TransformerLens's legacy ones (``blocks.0.attn.W_Q:
[n_heads, d_model, d_head]`` ...), so our ``state_dict`` *is* a TL-property checkpoint:
``convert_tl_checkpoint`` maps it onto the bridge. Equal logits are the proof that our forward
pass computes what TransformerLens computes (tested to 1e-5).
"""

from __future__ import annotations

from transformer_lens import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.sources import native as _native  # noqa: F401  (attaches boot_native)
from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer

# What boot_native's TL-native architecture can express.
_BRIDGEABLE = {
    "attention": "softmax",
    "mask": "causal",
    "input_kind": "tokens",
    "d_seed": 0,
    "d_input_mlp": 0,
    "use_attn_scale": True,
    "attn_bias": True,
}


def bridge_incompatibilities(cfg: ModelConfig) -> list[str]:
    """Why ``cfg`` cannot become a bridge (empty when it can)."""
    problems = [
        f"{field}={getattr(cfg, field)!r} (needs {needed!r})"
        for field, needed in _BRIDGEABLE.items()
        if getattr(cfg, field) != needed
    ]
    if cfg.positional == "none":
        problems.append("positional='none' (needs 'learned' or 'sinusoidal')")
    return problems


def bridge_config(cfg: ModelConfig) -> TransformerBridgeConfig:
    problems = bridge_incompatibilities(cfg)
    if problems:
        raise ValueError(
            "this model cannot be converted to a TransformerBridge: " + "; ".join(problems)
        )
    return TransformerBridgeConfig(
        d_model=cfg.d_model,
        d_head=cfg.d_head,
        n_heads=cfg.n_heads,
        n_layers=cfg.n_layers,
        n_ctx=cfg.n_ctx,
        d_vocab=cfg.d_vocab,
        d_vocab_out=cfg.d_vocab_out,
        d_mlp=cfg.d_mlp,
        act_fn=cfg.act_fn,
        attn_only=cfg.attn_only,
        normalization_type=cfg.normalization_type,
        eps=cfg.eps,
        positional_embedding_type="standard",  # a sinusoidal table loads as fixed W_pos
        seed=0,
    )


def to_bridge(model: HookedTransformer) -> TransformerBridge:
    """A ``TransformerBridge`` with this model's weights (softmax, causal, token configs)."""
    bridge = TransformerBridge.boot_native(bridge_config(model.cfg))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    bridge.load_state_dict(convert_tl_checkpoint(state, bridge.cfg), strict=True)
    return bridge.to(next(model.parameters()).device).eval()


__all__ = ["bridge_config", "bridge_incompatibilities", "to_bridge"]
