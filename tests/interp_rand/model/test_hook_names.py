"""The TL hook-name protocol written down once: every name it builds is a hook point (or
weight) of our model and of its TransformerBridge, and the residual-hook list and seed offset
that probes and circuits read are this one."""

from interp_rand.model.bridge import to_bridge
from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_names import hook_name, residual_hooks, residual_stream, seed_offset
from interp_rand.model.transformer import HookedTransformer


def _model(**overrides):
    cfg = {"d_model": 16, "n_layers": 2, "n_heads": 2, "n_ctx": 6, "d_vocab": 5, **overrides}
    return HookedTransformer(ModelConfig(**cfg), seed=1).eval()


def test_hook_names_are_the_models_hook_points_and_weights():
    model = _model()
    bridge = to_bridge(model)
    assert hook_name(1, "attn.hook_z") == "blocks.1.attn.hook_z"
    for m in (model, bridge):
        for layer in range(2):
            for name in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "attn.hook_q", "attn.hook_z",
                         "mlp.hook_pre", "hook_mlp_out", "attn.hook_pattern"):
                assert hook_name(layer, name) in m.hook_dict, (type(m).__name__, layer, name)
    params = dict(model.named_parameters())
    assert params[hook_name(1, "attn.W_Q")].shape == model.blocks[1].attn.W_Q.shape
    assert residual_hooks(model) == residual_hooks(bridge) == residual_stream(2)
    assert len(residual_stream(2)) == 5


def test_residual_hooks_and_seed_offset_have_one_owner():
    import probes
    from circuits.analyses import randomness

    attn_only = _model(attn_only=True)
    assert residual_hooks(attn_only) == ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post",
                                         "blocks.1.hook_resid_post"]
    assert probes.residual_hooks is residual_hooks and randomness.residual_stream_hooks is residual_hooks
    from probes.activations import seed_offset as probes_seed_offset

    assert probes_seed_offset is seed_offset
    token = _model(d_seed=3, seed_mode="token", n_ctx=7)
    assert seed_offset(token) == 1 and seed_offset(_model(d_seed=3, seed_mode="add")) == 0
    assert seed_offset(to_bridge(_model())) == 0
