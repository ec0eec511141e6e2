"""Convert a model to TransformerLens's own ``TransformerBridge`` (``boot_native``), and a
bridge back to our model (:func:`from_bridge`: a model built and trained elsewhere with
TransformerLens, brought into the toolkit).

Our parameter names and shapes are TransformerLens's legacy ones (``blocks.0.attn.W_Q:
[n_heads, d_model, d_head]`` ...), so our ``state_dict`` *is* a TL-property checkpoint:
``convert_tl_checkpoint`` maps it onto the bridge. Equal logits are the proof that our forward
pass computes what TransformerLens computes (tested to 1e-5).
"""

from __future__ import annotations

from transformer_lens import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.sources import native as _native  # noqa: F401  (attaches boot_native)
from transformer_lens.utilities.tl_checkpoint_conversion import _convert_key_and_tensor, convert_tl_checkpoint

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
    if cfg.positional not in ("learned", "sinusoidal"):  # a table indexed by position, TransformerLens's W_pos
        problems.append(f"positional={cfg.positional!r} (needs 'learned' or 'sinusoidal': TransformerLens's native "
                        "bridge has absolute and rotary positions, not ALiBi, digit indices or none)")
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


# The bridge's flat ``nn.Linear`` tensors back to our per-head ones, by our name's suffix (the
# inverse of each of ``convert_tl_checkpoint``'s conversions).
_INVERSE = {
    ".W_Q": "(h e) d -> h d e", ".W_K": "(h e) d -> h d e", ".W_V": "(h e) d -> h d e",
    ".W_O": "d (h e) -> h e d", ".b_Q": "(h e) -> h e", ".b_K": "(h e) -> h e", ".b_V": "(h e) -> h e",
}
_TRANSPOSED = (".W_in", ".W_out", ".W_U")


def model_config_of(bridge: TransformerBridge) -> ModelConfig:
    """Our config of a ``boot_native`` bridge: softmax, causal, tokens, learned positions."""
    cfg = bridge.cfg
    if getattr(cfg, "positional_embedding_type", "standard") != "standard":
        raise ValueError(f"from_bridge: positional_embedding_type={cfg.positional_embedding_type!r} is not "
                         "supported (needs 'standard')")
    return ModelConfig(d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_head=cfg.d_head,
                       n_ctx=cfg.n_ctx, d_vocab=cfg.d_vocab, d_vocab_out=cfg.d_vocab_out, d_mlp=cfg.d_mlp,
                       act_fn=cfg.act_fn, attn_only=bool(cfg.attn_only), normalization_type=cfg.normalization_type,
                       eps=cfg.eps)


def from_bridge(bridge: TransformerBridge) -> HookedTransformer:
    """Our model with a ``boot_native`` bridge's weights (the inverse of :func:`to_bridge`):
    each of our parameters is read from the bridge key ``convert_tl_checkpoint`` maps it to."""
    import einops

    model = HookedTransformer(model_config_of(bridge))
    theirs = bridge.state_dict()
    bcfg = bridge.cfg
    state = {}
    for key, ours in model.state_dict().items():
        new_key, _ = _convert_key_and_tensor(key, ours, bcfg)
        if new_key not in theirs:
            raise ValueError(f"from_bridge: the bridge has no {new_key!r} for our {key!r}")
        tensor = theirs[new_key].detach().to(ours.dtype).cpu()
        suffix = "." + key.rsplit(".", 1)[-1]
        if suffix in _INVERSE:
            tensor = einops.rearrange(tensor, _INVERSE[suffix], h=bcfg.n_heads)
        elif suffix in _TRANSPOSED:
            tensor = tensor.T
        if tensor.shape != ours.shape:
            raise ValueError(f"from_bridge: {new_key} has shape {tuple(tensor.shape)}, our {key} needs {tuple(ours.shape)}")
        state[key] = tensor.contiguous()
    model.load_state_dict(state, strict=True)
    return model.eval()


__all__ = ["bridge_config", "bridge_incompatibilities", "from_bridge", "model_config_of", "to_bridge"]
