"""One pre-norm transformer block with TransformerLens residual-stream hooks (fired through
:func:`~interp_rand.model.hook_dispatch.fire`: called only when a hook listens)."""

from __future__ import annotations

from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp_rand.model.attention import Attention
from interp_rand.model.config import MIXERS, ModelConfig
from interp_rand.model.hook_dispatch import fire
from interp_rand.model.layer_norm import make_norm
from interp_rand.model.mlp import MLP
from interp_rand.model.recurrence import GatedRecurrence

# The mixer class of each ``ModelConfig.attention`` kind (:mod:`~interp_rand.model.mixer`): a new
# kind is its module, its import and one registration here.
MIXERS.register("softmax", Attention, description="softmax attention")
MIXERS.register("linear", Attention, description="linear attention: the pattern is the masked, scaled scores "
                "with no softmax (a fixed-size state, the capacity limit of the paper's recall task)")
MIXERS.register("recurrent", GatedRecurrence, description="not attention: a gated linear recurrence with a "
                "diagonal, data-dependent decay (interp_rand.model.recurrence); causal only")


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.ln1 = make_norm(cfg)
        self.attn = MIXERS.get(cfg.attention)(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()
        if not cfg.attn_only:
            self.ln2 = make_norm(cfg)
            self.mlp = MLP(cfg.d_model, cfg.d_mlp, cfg.act_fn)
            self.hook_resid_mid = HookPoint()
            self.hook_mlp_out = HookPoint()

    def forward(self, resid: Tensor, allowed: Tensor | None) -> Tensor:
        """``[batch, pos, d_model] -> [batch, pos, d_model]``."""
        resid = fire(self.hook_resid_pre, resid)
        resid = resid + fire(self.hook_attn_out, self.attn(self.ln1(resid), allowed))
        if not self.cfg.attn_only:
            resid = fire(self.hook_resid_mid, resid)
            resid = resid + fire(self.hook_mlp_out, self.mlp(self.ln2(resid)))
        return fire(self.hook_resid_post, resid)
