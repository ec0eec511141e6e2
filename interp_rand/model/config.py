"""The one frozen config behind every model of the toolkit.

TransformerLens vocabulary throughout (``d_model``, ``n_heads``, ``d_head``, ``attn_only``,
``normalization_type``). Construction validates; errors name the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from interp_rand.registry import Registry
from interp_rand.validation import bounded, check_bounds, check_int

#: The block's mixer kinds (``ModelConfig.attention``), each name to its
#: :class:`~interp_rand.model.mixer.Mixer` class: the one table of them. The classes register
#: where the block imports them (:mod:`~interp_rand.model.block`: a mixer's module imports this
#: config, so the config cannot import it); a test's own mixer with :meth:`Registry.temporarily`.
MIXERS: Registry = Registry("attention kind")
MASK_KINDS = ("causal", "full", "custom")
INPUT_KINDS = ("tokens", "vectors")
SEED_MODES = ("append", "add", "token")
POSITIONAL_KINDS = ("learned", "sinusoidal", "none", "alibi", "digit_index")
#: the positional kinds that are a table added to the residual stream (``W_pos``, hook
#: ``hook_pos_embed``); the others add nothing there (ALiBi moves the attention scores)
TABLE_POSITIONALS = ("learned", "sinusoidal", "digit_index")
NORMALIZATION_TYPES = ("LN", None)
ACT_FNS = ("gelu", "gelu_new", "relu")
INIT_KINDS = ("normal", "fan_in")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a :class:`~interp_rand.model.HookedTransformer`.

    Attributes:
        d_model: width of the residual stream.
        n_layers: number of transformer blocks.
        n_heads: attention heads per block.
        d_head: width of each head's queries, keys and values (``None``: ``d_model // n_heads``).
        n_ctx: the positions the model is built for, including a seed token
            (``seed_mode="token"``): the size of the positional table, the most positions a
            learned table (and a decoding cache) allows.
        d_vocab: number of input tokens (``input_kind="tokens"``).
        d_input: width of input vectors (``input_kind="vectors"``).
        d_vocab_out: number of output logits per position (classes, or bits for BCE tasks).
        input_kind: ``"tokens"`` (integer ids through ``W_E``) or ``"vectors"`` (feature vectors
            through a linear embedding).
        attention: the block's sequence mixer, a kind registered in :data:`MIXERS` (each with
            its description; ``"softmax"`` attention, ``"linear"`` attention and the gated
            ``"recurrent"`` mixer are the package's own). Each mixer checks the config it accepts
            (:meth:`~interp_rand.model.mixer.Mixer.check_config`: a recurrence is causal only).
        mask: ``"causal"``, ``"full"``, or ``"custom"`` (a per-example ``[batch, pos, pos]``
            boolean ``attention_mask`` is passed to ``forward``, e.g. cycle adjacency).
        d_seed: width of the randomness channel; 0 means the model has none.
        seed_mode: how the seed enters: ``"add"`` (``W_seed`` projection added to the residual
            stream), ``"append"`` (joined to the input features before the input MLP, as if
            concatenated to every token), or ``"token"`` (its own token at position 0).
        d_input_mlp: width of an input MLP applied to the embedding (0: none).
        input_mlp_w_in: the input MLP has its own first matrix ``W_in``. ``False``: the
            embedding *is* its first layer (``hook_pre = embed [+ seed] + b_in``, so
            ``d_input_mlp`` must equal ``d_model``): raw token -> linear -> GELU -> linear, the
            paper's recall model with no extra linear map in between.
        input_mlp_act: the input MLP's activation, one of the ``act_fn`` names: ``"gelu"`` (erf,
            the toolkit's own recall models) or ``"gelu_new"`` (the tanh approximation,
            ``jax.nn.gelu``'s default: the paper's public JAX port).
        attn_only: no MLP in the blocks.
        d_mlp: MLP width (``None``: ``4 * d_model``).
        act_fn: the MLPs' activation: ``"gelu"``, ``"gelu_new"`` (tanh approximation) or ``"relu"``.
        normalization_type: ``"LN"`` (pre-LayerNorm) or ``None``.
        positional: ``"learned"`` (a trained table: the model runs up to ``n_ctx`` positions),
            ``"sinusoidal"`` (a fixed table, extended to any length), ``"none"`` or ``"alibi"``
            (a per-head linear penalty on attention scores by distance,
            :mod:`interp_rand.model.alibi`; softmax attention only) or ``"digit_index"`` (each
            token's index within its run of digit tokens, through the fixed sinusoidal table:
            Abacus-style positions for numbers written units first, :mod:`interp_rand.model.digit_index`;
            needs ``digit_tokens``). All but ``"learned"`` run at lengths beyond ``n_ctx``: the
            length-generalisation study's schemes.
        digit_tokens: with ``positional="digit_index"``, the token ids ``0 .. digit_tokens - 1``
            that are digits (every other token ends a number); 0 otherwise.
        digit_offset: with ``positional="digit_index"``, in training mode every row's digit
            indices are shifted by an offset in ``0 .. digit_offset`` (Abacus's random offset:
            index rows past the trained lengths get trained), drawn from a hash of the row's
            tokens so that runs stay reproducible; 0 in evaluation mode.
        eps: the LayerNorms' epsilon, added to the variance before the square root.
        use_attn_result: compute the per-head output ``hook_result`` ``[batch, pos, head,
            d_model]`` (costs memory; circuits turn it on when they need it).
        use_attn_scale: divide attention scores by ``sqrt(d_head)`` (TransformerLens's
            ``use_attn_scale``); the paper's linear attention is unscaled.
        attn_bias: learned attention biases ``b_Q/b_K/b_V/b_O``. ``False`` keeps them as zero
            buffers under the same names (so the hook protocol and circuits read them as
            always), as in the paper's recall model, whose attention has no biases.
        init: ``"normal"`` (TransformerLens: every matrix ``N(0, init_range)``) or ``"fan_in"``
            (the paper's recall model: truncated normal with variance ``scale / fan_in``,
            matrices writing into the residual stream scaled down by the depth; see
            :mod:`interp_rand.model.init`). Biases start at 0, LayerNorm scales at 1.
        init_range: std of the ``"normal"`` initialisation (TL's default rule if ``None``:
            ``0.8 / sqrt(d_model)``).
    """

    d_model: int = bounded(128, minimum=1, counts="width")
    n_layers: int = bounded(2, minimum=1, counts="width")
    n_heads: int = bounded(4, minimum=1, counts="width")
    d_head: int | None = bounded(None, minimum=1, counts="width")
    n_ctx: int = bounded(64, minimum=1, counts="width")
    d_vocab: int = bounded(0, minimum=0, counts="width")
    d_input: int = bounded(0, minimum=0, counts="width")
    d_vocab_out: int = bounded(0, minimum=0, counts="width")
    input_kind: str = "tokens"
    attention: str = "softmax"
    mask: str = "causal"
    d_seed: int = bounded(0, minimum=0, counts="width")
    seed_mode: str = "add"
    d_input_mlp: int = bounded(0, minimum=0, counts="width")
    input_mlp_w_in: bool = True
    input_mlp_act: str = "gelu"
    attn_only: bool = False
    d_mlp: int | None = bounded(None, minimum=0, counts="width")
    act_fn: str = "gelu"
    normalization_type: str | None = "LN"
    positional: str = "learned"
    digit_tokens: int = bounded(0, minimum=0, counts="width")
    digit_offset: int = bounded(0, minimum=0, counts="width")
    eps: float = bounded(1e-5, above=0)
    use_attn_result: bool = False
    use_attn_scale: bool = True
    attn_bias: bool = True
    init: str = "normal"
    init_range: float | None = bounded(None, above=0)

    def __post_init__(self) -> None:
        check_bounds(self)  # before deriving from them
        # Derived defaults are written back once, so the stored config is explicit.
        if self.d_head is None and self.n_heads > 0 and self.d_model % self.n_heads == 0:
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        if self.d_mlp is None:
            object.__setattr__(self, "d_mlp", 4 * self.d_model)
        if self.d_vocab_out == 0 and self.input_kind == "tokens":
            object.__setattr__(self, "d_vocab_out", self.d_vocab)
        if self.init_range is None:
            object.__setattr__(self, "init_range", 0.8 / max(self.d_model, 1) ** 0.5)
        self._validate()

    def _validate(self) -> None:
        def choice(name: str, allowed: tuple) -> None:
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"ModelConfig.{name}={value!r} is not allowed; choose from {allowed}")

        def positive(name: str, minimum: int = 1) -> None:
            check_int("ModelConfig", name, getattr(self, name), minimum)

        for name, allowed in (
            ("attention", tuple(MIXERS.names())),
            ("mask", MASK_KINDS),
            ("input_kind", INPUT_KINDS),
            ("seed_mode", SEED_MODES),
            ("positional", POSITIONAL_KINDS),
            ("normalization_type", NORMALIZATION_TYPES),
            ("act_fn", ACT_FNS),
            ("input_mlp_act", ACT_FNS),
            ("init", INIT_KINDS),
        ):
            choice(name, allowed)
        positive("d_vocab_out")  # derived from d_vocab for tokens: >= 1 once derived
        if self.d_head is None:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "pick n_heads dividing d_model, or set d_head explicitly"
            )
        positive("d_head")
        if not self.attn_only:
            positive("d_mlp")
        if self.input_kind == "tokens":
            positive("d_vocab")
        else:
            positive("d_input")
        MIXERS.get(self.attention).check_config(self)  # the mixer's own rules (a mask it needs)
        if (self.positional == "digit_index") != (self.digit_tokens > 0):
            raise ValueError(
                f"ModelConfig.positional='digit_index' needs digit_tokens >= 1 (the token ids that are digits), "
                f"and digit_tokens only means something with it; got positional={self.positional!r}, "
                f"digit_tokens={self.digit_tokens}"
            )
        if self.digit_offset and self.positional != "digit_index":
            raise ValueError(f"ModelConfig.digit_offset={self.digit_offset} shifts digit-index positions; it needs "
                             f"positional='digit_index' (got {self.positional!r})")
        if self.positional == "digit_index" and (self.input_kind != "tokens" or self.digit_tokens > self.d_vocab):
            raise ValueError(
                f"ModelConfig.positional='digit_index' reads token ids: it needs input_kind='tokens' and "
                f"digit_tokens <= d_vocab={self.d_vocab}; got input_kind={self.input_kind!r}, "
                f"digit_tokens={self.digit_tokens}"
            )
        if self.positional == "alibi" and self.attention != "softmax":
            raise ValueError(
                f"ModelConfig.positional='alibi' penalises softmax attention scores by distance; "
                f"attention={self.attention!r} has no softmax. Use positional 'learned', "
                "'sinusoidal' or 'none' with it"
            )
        if self.seed_mode == "append" and self.d_seed > 0 and self.d_input_mlp == 0:
            raise ValueError(
                "ModelConfig.seed_mode='append' joins the seed to the input features before the "
                "input MLP, so it needs d_input_mlp > 0; use seed_mode='add' without an input MLP"
            )
        for name in ("input_mlp_w_in", "use_attn_scale", "attn_bias", "attn_only", "use_attn_result"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)!r} must be True or False")
        if not self.input_mlp_w_in and self.d_input_mlp not in (0, self.d_model):
            raise ValueError(
                f"ModelConfig.input_mlp_w_in=False makes the embedding the input MLP's first layer, "
                f"so d_input_mlp must equal d_model={self.d_model}; got d_input_mlp={self.d_input_mlp}"
            )

    @property
    def has_seed(self) -> bool:
        return self.d_seed > 0

    @property
    def has_pos_table(self) -> bool:
        """Is the positional scheme a table added to the residual stream (``W_pos``)?"""
        return self.positional in TABLE_POSITIONALS

    @property
    def max_positions(self) -> int | None:
        """The most positions (seed token included) the model can run: ``n_ctx`` for a learned
        table, ``None`` (any) for a fixed table, ALiBi or no positions."""
        return self.n_ctx if self.positional == "learned" else None

    @property
    def seed_offset(self) -> int:
        """Positions taken by the seed token before the task's own positions (0 or 1)."""
        return 1 if self.has_seed and self.seed_mode == "token" else 0

    # Read by ``transformer_lens.patching`` (``torch.zeros(..., device=model.cfg.device)``,
    # ``model.cfg.n_key_value_heads`` for k/v patching); not fields, so not serialised.
    @property
    def device(self) -> None:
        """``None``: TransformerLens's result tensors go on torch's default device."""
        return None

    @property
    def n_key_value_heads(self) -> None:
        """``None``: no grouped-query attention (keys/values have ``n_heads`` heads)."""
        return None

    def replace(self, **changes: Any) -> "ModelConfig":
        """A copy with fields changed (and validated again)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"ModelConfig has no field(s) {unknown}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"ModelConfig has no field(s) {unknown}; allowed: {sorted(allowed)}")
        return cls(**data)
