"""Incremental decoding of a whole population of agents with stacked weights and a key/value
cache: the fast path of population evaluation.

The agent model (``HookedTransformer`` with vector inputs, a seed token, learned positions,
pre-LayerNorm or none, softmax causal attention, optional block MLP) is evaluated here one new
token at a time for ``P`` members x ``R`` runs at once: every weight carries a leading member
dimension and each matmul is one batched matmul over members. Its logits equal the hooked
model's (``tests/interp_rand/test_gridworld_population.py`` checks them), which stays the one
model for analysis: rollouts are replayed through ``run_with_cache``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp_rand.model.config import ModelConfig
from interp_rand.model.hook_names import hook_name
from interp_rand.model.layer_norm import layer_norm
from interp_rand.model.mlp import ACTIVATIONS


def check_supported(cfg: ModelConfig) -> None:
    """``ValueError`` unless :class:`StackedAgents` implements ``cfg`` exactly.

    It implements the agent model's fixed choices (below) with any depth, width and head
    count, pre-LayerNorm or none (``normalization_type``), attention-only or with an MLP of
    any ``act_fn``, and any ``eps``; ``tests/interp_rand/test_gridworld_population.py`` checks
    each against the hooked model. Unscaled scores (``use_attn_scale=False``) and bias-free
    attention (``attn_bias=False``, zero buffers that PGPE's flat parameters do not hold) are
    refused, not approximated."""
    wanted = {"input_kind": "vectors", "seed_mode": "token", "attention": "softmax", "mask": "causal",
              "positional": "learned", "d_input_mlp": 0, "use_attn_scale": True, "attn_bias": True}
    wrong = {k: getattr(cfg, k) for k, v in wanted.items() if getattr(cfg, k) != v}
    if wrong or not cfg.has_seed:
        raise ValueError(f"stacked decoding supports the agent model {wanted} with a seed; got {wrong or 'd_seed=0'}")


class StackedAgents:
    """``P`` agents decoding ``R`` runs each, member-major rows (row ``i * R + r`` is run ``r``
    of member ``i``), as a :class:`~interp_rand.gridworld.agent.Policy`.

    Args:
        cfg: the agents' model config.
        params: ``{name: [P, *shape]}`` stacked weights (``ParameterLayout.unflatten``).
        seeds: ``[P * R, d_seed]`` each run's seed (the token at position 0).
    """

    def __init__(self, cfg: ModelConfig, params: dict[str, Tensor], seeds: Tensor):
        check_supported(cfg)
        self.cfg = cfg
        self.p = params
        self.n_members = params["embed.W_E"].shape[0]
        self.n_runs = seeds.shape[0] // self.n_members
        h, e = cfg.n_heads, cfg.d_head
        # [P, d_model, 3 * h * e]: one batched matmul for q, k and v per layer
        self.w_qkv = [torch.cat([params[hook_name(l, f"attn.W_{n}")].permute(0, 2, 1, 3).flatten(2) for n in "QKV"], -1)
                      for l in range(cfg.n_layers)]
        self.b_qkv = [torch.cat([params[hook_name(l, f"attn.b_{n}")].flatten(1) for n in "QKV"], -1)[:, None]
                      for l in range(cfg.n_layers)]
        # [layer, P, R, head, pos, d_head]: a step's slice [..., : t + 1, :] stays contiguous
        # per (member, run, head), so attention needs no copy of the cache
        shape = (cfg.n_layers, self.n_members, self.n_runs, h, cfg.n_ctx, e)
        device = params["embed.W_E"].device
        self.keys = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)
        self.pos = 0
        # [P * R, d_seed] -> [P, R, d_seed] @ [P, d_seed, d_model]
        self._forward(seeds.view(self.n_members, self.n_runs, -1) @ params["seed_embed.W_seed"])

    def __call__(self, obs: Tensor) -> Tensor:
        """``obs: [P * R, d_obs]`` the newest observation -> ``[P * R, 4]`` logits at it."""
        x = obs.view(self.n_members, self.n_runs, -1) @ self.p["embed.W_E"]  # [P, R, d_model]
        return self._forward(x).flatten(0, 1)

    def _norm(self, x: Tensor, name: str) -> Tensor:
        if self.cfg.normalization_type != "LN":
            return x
        return layer_norm(x, self.p[f"{name}.w"][:, None], self.p[f"{name}.b"][:, None], self.cfg.eps)

    def _forward(self, x: Tensor) -> Tensor:
        """``x: [P, R, d_model]`` the embedding of the token at ``self.pos`` -> ``[P, R, 4]``."""
        cfg, p, t = self.cfg, self.p, self.pos
        if t >= cfg.n_ctx:
            raise ValueError(f"more than n_ctx={cfg.n_ctx} tokens")
        x = x + p["pos_embed.W_pos"][:, t][:, None]
        n_members, n_runs, h, e = self.n_members, self.n_runs, cfg.n_heads, cfg.d_head
        for l in range(cfg.n_layers):
            qkv = (self._norm(x, hook_name(l, "ln1")) @ self.w_qkv[l] + self.b_qkv[l]).view(n_members, n_runs, 3, h, e)
            self.keys[l, :, :, :, t] = qkv[:, :, 1]
            self.values[l, :, :, :, t] = qkv[:, :, 2]
            keys, values = self.keys[l, ..., : t + 1, :], self.values[l, ..., : t + 1, :]  # [P, R, h, t+1, e]
            # [P, R, h, 1, e] * [P, R, h, t+1, e] summed over e -> [P, R, h, t+1]: the newest
            # query reads every earlier key (causal mask: no later keys exist yet)
            scores = (qkv[:, :, 0, :, None] * keys).sum(-1) / e**0.5
            pattern = torch.softmax(scores, dim=-1)
            z = (pattern[..., None] * values).sum(-2).flatten(2)  # [P, R, h, e] -> [P, R, h * e]
            w_o = p[hook_name(l, "attn.W_O")].flatten(1, 2)  # [P, h * e, d_model]
            x = x + z @ w_o + p[hook_name(l, "attn.b_O")][:, None]
            if not cfg.attn_only:
                pre = self._norm(x, hook_name(l, "ln2")) @ p[hook_name(l, "mlp.W_in")] + p[hook_name(l, "mlp.b_in")][:, None]
                x = x + ACTIVATIONS[cfg.act_fn](pre) @ p[hook_name(l, "mlp.W_out")] + p[hook_name(l, "mlp.b_out")][:, None]
        self.pos += 1
        return self._norm(x, "ln_final") @ p["unembed.W_U"] + p["unembed.b_U"][:, None]


__all__ = ["StackedAgents", "check_supported"]
