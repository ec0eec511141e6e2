"""The toolkit's model: a small transformer on TransformerLens's ``HookedRootModule``.

Every activation passes a ``HookPoint`` with TransformerLens's name, so ``run_with_cache``,
``run_with_hooks``, ``hooks()`` and ``transformer_lens.patching`` work unchanged. The
randomness channel has hook points of its own: ``hook_seed`` (the raw seed, ``[batch, pos,
d_seed]``) and ``hook_seed_embed`` (its projection, ``[batch, pos, d_model]``).

    >>> cfg = ModelConfig(d_model=32, n_heads=2, n_ctx=8, d_vocab=5)
    >>> model = HookedTransformer(cfg, seed=0)
    >>> logits, cache = model.run_with_cache(torch.zeros(3, 8, dtype=torch.long))
    >>> cache["blocks.0.attn.hook_pattern"].shape
    torch.Size([3, 2, 8, 8])
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp_rand.model.block import TransformerBlock
from interp_rand.model.config import ModelConfig
from interp_rand.model.embedding import Embed, PosEmbed, SeedEmbed, Unembed
from interp_rand.model.layer_norm import make_norm
from interp_rand.model.mlp import MLP


class HookedTransformer(HookedRootModule):
    """A transformer built from a :class:`ModelConfig`, initialised from ``seed``.

    Initialisation follows TransformerLens: weights ``N(0, init_range)``, biases 0, LayerNorm
    scales 1. It draws from its own generator, so building a model never touches global RNG.
    """

    def __init__(self, cfg: ModelConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.d_input_mlp > 0:
            self.input_mlp = MLP(cfg.d_model, cfg.d_input_mlp, "gelu")
        if cfg.has_seed:
            self.seed_embed = SeedEmbed(cfg)
            self.hook_seed = HookPoint()  # [batch, pos, d_seed]
            self.hook_seed_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.positional != "none":
            self.pos_embed = PosEmbed(cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model], as in TransformerLens
        self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = make_norm(cfg)
        self.unembed = Unembed(cfg)
        self.init_weights(seed)
        self.setup()

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        for name, param in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf.startswith("W_"):
                param.normal_(0.0, self.cfg.init_range, generator=generator)
            elif leaf == "w":
                param.fill_(1.0)
            else:
                param.zero_()

    # ----------------------------------------------------------------------------------
    def forward(
        self,
        inputs: Tensor,
        seeds: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Logits for every task position.

        Args:
            inputs: ``[batch, pos]`` token ids, or ``[batch, pos, d_input]`` vectors.
            seeds: ``[batch, d_seed]`` (the same seed at every position) or
                ``[batch, pos, d_seed]`` (per position); required iff ``d_seed > 0``. With
                ``seed_mode="token"`` only ``[batch, d_seed]``.
            attention_mask: ``[batch, pos, pos]`` bool, true where a query may attend a key;
                required iff ``mask="custom"``.

        Returns:
            ``[batch, pos, d_vocab_out]``. A seed token's own position is not returned, so
            logits line up with the task's targets.
        """
        cfg = self.cfg
        batch, n_pos = self._check_inputs(inputs)
        x = self.hook_embed(self.embed(inputs))
        seed_embed = self._seed_embed(seeds, batch, n_pos)
        if cfg.has_seed and cfg.seed_mode == "append":
            x = x + seed_embed
        if cfg.d_input_mlp > 0:
            x = self.input_mlp(x)
        if cfg.has_seed and cfg.seed_mode == "add":
            x = x + seed_embed
        if cfg.seed_offset:
            x = torch.cat([seed_embed, x], dim=1)  # the seed token sits at position 0
        if cfg.positional != "none":
            # Repeated over the batch (a copy, not an expand view), as TransformerLens does:
            # decompose_resid stacks it with hook_embed, and patch hooks write into it.
            pos = self.pos_embed(x.shape[1]).repeat(x.shape[0], 1, 1)
            x = x + self.hook_pos_embed(pos)
        allowed = self._allowed(attention_mask, batch, n_pos)
        for block in self.blocks:
            x = block(x, allowed)
        logits = self.unembed(self.ln_final(x))
        return logits[:, cfg.seed_offset :]

    # ----------------------------------------------------------------------------------
    def _check_inputs(self, inputs: Tensor) -> tuple[int, int]:
        cfg = self.cfg
        if cfg.input_kind == "tokens":
            if inputs.dim() != 2 or inputs.dtype not in (torch.long, torch.int32, torch.int64):
                raise ValueError(
                    f"token inputs must be integer [batch, pos]; got {inputs.dtype} {tuple(inputs.shape)}"
                )
            if inputs.numel() and (inputs.min() < 0 or inputs.max() >= cfg.d_vocab):
                raise ValueError(
                    f"token ids must lie in [0, {cfg.d_vocab}); got range "
                    f"[{int(inputs.min())}, {int(inputs.max())}]"
                )
        elif inputs.dim() != 3 or inputs.shape[-1] != cfg.d_input:
            raise ValueError(
                f"vector inputs must be [batch, pos, d_input={cfg.d_input}]; got {tuple(inputs.shape)}"
            )
        batch, n_pos = inputs.shape[:2]
        if n_pos + cfg.seed_offset > cfg.n_ctx:
            raise ValueError(
                f"input length {n_pos}{' + 1 seed token' if cfg.seed_offset else ''} exceeds "
                f"n_ctx={cfg.n_ctx}"
            )
        return batch, n_pos

    def _seed_embed(self, seeds: Tensor | None, batch: int, n_pos: int) -> Tensor | None:
        cfg = self.cfg
        if not cfg.has_seed:
            if seeds is not None:
                raise ValueError("seeds were given but this model has no seed channel (d_seed=0)")
            return None
        if seeds is None:
            raise ValueError(f"this model has a seed channel (d_seed={cfg.d_seed}); pass seeds=")
        if seeds.shape[0] != batch or seeds.shape[-1] != cfg.d_seed or seeds.dim() not in (2, 3):
            raise ValueError(
                f"seeds must be [batch={batch}, d_seed={cfg.d_seed}] or [batch, pos, d_seed]; "
                f"got {tuple(seeds.shape)}"
            )
        if seeds.dim() == 3 and (cfg.seed_offset or seeds.shape[1] != n_pos):
            raise ValueError(
                f"per-position seeds must be [batch, pos={n_pos}, d_seed] and need seed_mode "
                f"'add' or 'append' (seed_mode={cfg.seed_mode!r}); got {tuple(seeds.shape)}"
            )
        seeds = seeds.to(self.seed_embed.W_seed.dtype)
        if seeds.dim() == 2:
            # [batch, d_seed] -> [batch, pos, d_seed]: one seed seen at every position
            # (or a single seed token).
            seeds = seeds[:, None].expand(-1, 1 if cfg.seed_offset else n_pos, -1)
        return self.hook_seed_embed(self.seed_embed(self.hook_seed(seeds)))

    def _allowed(self, attention_mask: Tensor | None, batch: int, n_pos: int) -> Tensor | None:
        """Bool ``[pos, pos]`` or ``[batch, pos, pos]`` (seed token included), or None."""
        cfg = self.cfg
        total = n_pos + cfg.seed_offset
        if cfg.mask != "custom":
            if attention_mask is not None:
                raise ValueError(
                    f"attention_mask is only used with mask='custom'; this model has mask={cfg.mask!r}"
                )
            if cfg.mask == "full":
                return None
            return torch.ones(total, total, dtype=torch.bool, device=self.unembed.W_U.device).tril()
        if attention_mask is None:
            raise ValueError("this model has mask='custom'; pass attention_mask=[batch, pos, pos]")
        if attention_mask.shape != (batch, n_pos, n_pos) or attention_mask.dtype != torch.bool:
            raise ValueError(
                f"attention_mask must be bool [batch={batch}, pos={n_pos}, pos={n_pos}]; got "
                f"{attention_mask.dtype} {tuple(attention_mask.shape)}"
            )
        if cfg.seed_offset:
            # Every token may read the seed token; the seed token reads only itself.
            full = torch.ones(batch, total, total, dtype=torch.bool, device=attention_mask.device)
            full[:, 0, 1:] = False
            full[:, 1:, 1:] = attention_mask
            return full
        return attention_mask

    def run_with_cache(self, *model_args, **kwargs) -> tuple[Tensor, ActivationCache]:
        """As ``HookedRootModule.run_with_cache``, with the cache as an ``ActivationCache``
        (``accumulated_resid``, ``decompose_resid``, ``stack_head_results`` ...)."""
        out, cache_dict = super().run_with_cache(*model_args, **kwargs)
        return out, ActivationCache(
            cache_dict, self, has_batch_dim=not kwargs.get("remove_batch_dim", False)
        )

    # ----------------------------------------------------------------------------------
    @property
    def W_E(self) -> Tensor:
        return self.embed.W_E

    @property
    def W_U(self) -> Tensor:
        return self.unembed.W_U

    def set_use_attn_result(self, use: bool) -> None:
        """Turn ``hook_result`` (per-head outputs) on or off, as in TransformerLens."""
        self.cfg = self.cfg.replace(use_attn_result=use)
        for block in self.blocks:
            block.cfg = self.cfg
            block.attn.cfg = self.cfg
