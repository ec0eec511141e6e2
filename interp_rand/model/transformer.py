"""The toolkit's model: a small transformer on TransformerLens's ``HookedRootModule``.

Every activation passes a ``HookPoint`` with TransformerLens's name, so ``run_with_cache``,
``run_with_hooks``, ``hooks()`` and ``transformer_lens.patching`` work unchanged. A hook point
is called only while something listens to it (:mod:`~interp_rand.model.hook_dispatch`), and
with no hook on the scores/pattern or a LayerNorm's scale the attention and LayerNorm take
fused kernels: the hook-free forward is the same function, within 1e-6
(``tests/interp_rand/model/test_fast_paths.py``). The randomness channel has hook points of its own: ``hook_seed`` (the raw seed, ``[batch, pos,
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
from interp_rand.model.hook_dispatch import fire, listening
from interp_rand.model.init import init_weights
from interp_rand.model.layer_norm import make_norm
from interp_rand.model.mlp import MLP


def _distinct_tokens(flat: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct rows of ``flat`` (``[rows]`` token ids or ``[rows, d_input]`` vectors) and
    each row's index among them, so that ``distinct[index]`` equals ``flat``.

    Vectors are told apart by a fixed random projection (``torch.unique(dim=0)`` is two orders
    of magnitude slower); the result is checked, and rows that the projection would merge fall
    back to ``torch.unique(dim=0)``, so it is exact either way.
    """
    if flat.dim() == 1:
        return torch.unique(flat, return_inverse=True)
    direction = torch.randn(flat.shape[-1], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    _, first, index = _unique_keys(flat.double() @ direction.to(flat.device))
    distinct = flat[first]
    if not torch.equal(distinct[index], flat):
        return torch.unique(flat, dim=0, return_inverse=True)
    return distinct, index


def _unique_keys(keys: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Distinct ``keys [rows]``, the row of each one's first occurrence, and each row's index."""
    distinct, index = torch.unique(keys, return_inverse=True)
    first = torch.full((len(distinct),), len(keys), dtype=torch.long, device=keys.device)
    first.scatter_reduce_(0, index, torch.arange(len(keys), device=keys.device), reduce="amin")
    return distinct, first, index


class HookedTransformer(HookedRootModule):
    """A transformer built from a :class:`ModelConfig`, initialised from ``seed``.

    Initialisation follows ``cfg.init`` (TransformerLens's ``N(0, init_range)`` by default, or
    the paper's fan-in rule; :mod:`interp_rand.model.init`). It draws from its own generator, so
    building a model never touches global RNG.
    """

    def __init__(self, cfg: ModelConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.d_input_mlp > 0:
            self.input_mlp = MLP(cfg.d_model, cfg.d_input_mlp, cfg.input_mlp_act, w_in=cfg.input_mlp_w_in)
        if cfg.has_seed:
            self.seed_embed = SeedEmbed(cfg)
            self.hook_seed = HookPoint()  # [batch, pos, d_seed]
            self.hook_seed_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.has_pos_table:
            self.pos_embed = PosEmbed(cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model], as in TransformerLens
        self.blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = make_norm(cfg)
        self.unembed = Unembed(cfg)
        self.init_weights(seed)
        self.setup()

    def init_weights(self, seed: int) -> None:
        """Re-initialise every parameter by ``cfg.init`` (see :mod:`interp_rand.model.init`)."""
        init_weights(self, self.cfg, seed)

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
        x = fire(self.hook_embed, self.embed(inputs))
        seed_embed = self._seed_embed(seeds, batch, n_pos)
        if cfg.has_seed and cfg.seed_mode == "append":
            x = x + seed_embed
        if cfg.d_input_mlp > 0:
            x = self.input_mlp(x)
        if cfg.has_seed and cfg.seed_mode == "add":
            x = x + seed_embed
        if cfg.seed_offset:
            x = torch.cat([seed_embed, x], dim=1)  # the seed token sits at position 0
        return self._residual_stream(x, self.allowed_keys(attention_mask, batch, n_pos), inputs)

    def _residual_stream(self, x: Tensor, allowed: Tensor | None, inputs: Tensor) -> Tensor:
        """Positions, the blocks and the unembedding: ``x [batch, pos, d_model]`` (the input
        stage's output, seed token included) to the task positions' logits; ``inputs`` the
        rows' tokens (digit-index positions read them)."""
        cfg = self.cfg
        if cfg.has_pos_table:
            pos = self.pos_embed(x.shape[1], inputs)  # (only digit-index positions read the tokens)
            if listening(self.hook_pos_embed):
                # Repeated over the batch (a copy, not an expand view), as TransformerLens does:
                # decompose_resid stacks it with hook_embed, and patch hooks write into it.
                pos = pos.expand(x.shape[0], -1, -1).clone()
                x = x + self.hook_pos_embed(pos)
            else:  # nobody reads it: broadcast over the batch, no copy (the same sum)
                x = x + pos
        return self._from_block(x, 0, allowed)

    def run_from_block(self, x: Tensor, layer: int, attention_mask: Tensor | None = None) -> Tensor:
        """The task positions' logits from ``x [batch, pos, d_model]``, the residual stream
        entering block ``layer`` (seed token included; ``layer = n_layers``: the final residual,
        which passes the last block's ``hook_resid_post``). The blocks' hooks fire, so a patch
        hook at or after ``layer`` acts as in :meth:`forward` (circuits' batched patching starts
        its forwards here from a cached clean run)."""
        allowed = self.allowed_keys(attention_mask, x.shape[0], x.shape[1] - self.cfg.seed_offset)
        return self._from_block(x, layer, allowed)

    def _from_block(self, x: Tensor, layer: int, allowed: Tensor | None) -> Tensor:
        if layer >= len(self.blocks):
            x = self.blocks[-1].hook_resid_post(x)
        for block in list(self.blocks)[layer:]:
            x = block(x, allowed)
        return self.unembed(self.ln_final(x))[:, self.cfg.seed_offset :]

    # ----------------------------------------------------------------------------------
    def forward_over_seeds(self, inputs: Tensor, seeds: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Logits of every input under every one of ``m`` shared seeds (the q-norm's m seeds).

        Args:
            inputs: ``[n, pos]`` token ids or ``[n, pos, d_input]`` vectors.
            seeds: ``[m, d_seed]`` (one seed for every position) or ``[m, pos, d_seed]``.
            attention_mask: ``[n, pos, pos]`` bool (``mask="custom"``), shared by an input's
                seeds.

        Returns:
            ``[n, m, pos, d_vocab_out]``: equal to :meth:`forward` on the ``n*m``-row batch
            pairing input ``i`` with seed ``j`` at row ``i*m + j``. With no hook attached it is
            computed in a cheaper order: the token embedding once per input, the seed projection
            once per seed, and an input MLP that reads an appended seed once per *distinct*
            (token, seed) pair (recall has ``33 N`` distinct tokens in a batch of any size). With
            a hook attached, or a seed token, it runs :meth:`forward` on the expanded rows, so
            every hook sees the same tensors as there.
        """
        cfg = self.cfg
        n, m = len(inputs), len(seeds)
        if not cfg.has_seed:
            raise ValueError("forward_over_seeds needs a model with a seed channel (d_seed > 0)")
        if cfg.seed_offset or self._hooks_attached():
            rows = seeds.repeat(n, *([1] * (seeds.dim() - 1)))  # row i*m + j holds seed j
            mask = None if attention_mask is None else attention_mask.repeat_interleave(m, 0)
            return self(inputs.repeat_interleave(m, 0), rows, mask).unflatten(0, (n, m))
        _, n_pos = self._check_inputs(inputs)
        if seeds.dim() not in (2, 3) or seeds.shape[-1] != cfg.d_seed or (seeds.dim() == 3 and seeds.shape[1] != n_pos):
            raise ValueError(
                f"seeds must be [m, d_seed={cfg.d_seed}] or [m, pos={n_pos}, d_seed]; got {tuple(seeds.shape)}"
            )
        seed_embed = self.seed_embed(seeds.to(self.seed_embed.W_seed.dtype))
        seed_embed = seed_embed[:, None] if seeds.dim() == 2 else seed_embed  # [m, pos or 1, d_model]
        if cfg.seed_mode == "append" and cfg.d_input_mlp > 0 and seeds.dim() == 2:
            distinct, index = _distinct_tokens(inputs.reshape(n * n_pos, *inputs.shape[2:]))
            hidden = self.input_mlp(self.embed(distinct)[:, None] + seed_embed[:, 0])  # [distinct, m, d_model]
            # row (i, j, p) of the result is hidden[token (i, p), seed j]: one gather, no transpose
            rows = index.view(n, 1, n_pos) * m + torch.arange(m, device=index.device).view(1, m, 1)
            x = hidden.reshape(-1, hidden.shape[-1])[rows]  # [n, m, pos, d_model]
        elif cfg.seed_mode == "append":
            x = self.embed(inputs)[:, None] + seed_embed  # [n, m, pos, d_model]
            x = self.input_mlp(x) if cfg.d_input_mlp > 0 else x
        else:
            x = self.embed(inputs)
            x = self.input_mlp(x) if cfg.d_input_mlp > 0 else x
            x = x[:, None] + seed_embed  # [n, m, pos, d_model]
        x = x.reshape(n * m, n_pos, -1)
        mask = None if attention_mask is None else attention_mask.repeat_interleave(m, 0)
        allowed = self.allowed_keys(mask, n * m, n_pos)
        return self._residual_stream(x, allowed, inputs.repeat_interleave(m, 0)).unflatten(0, (n, m))

    def _hooks_attached(self) -> bool:
        """Is any hook point listened to right now (:func:`~interp_rand.model.hook_dispatch.listening`)?"""
        return any(listening(hp) for hp in self.hook_dict.values())

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
        if cfg.max_positions is not None and n_pos + cfg.seed_offset > cfg.max_positions:
            raise ValueError(
                f"input length {n_pos}{' + 1 seed token' if cfg.seed_offset else ''} exceeds "
                f"n_ctx={cfg.n_ctx}, the rows of this model's learned positional table (a model "
                "with positional 'sinusoidal', 'alibi' or 'none' runs at any length)"
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
        return fire(self.hook_seed_embed, self.seed_embed(fire(self.hook_seed, seeds)))

    def allowed_keys(self, attention_mask: Tensor | None, batch: int, n_pos: int) -> Tensor | None:
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
