"""A GPT-2-style Hugging Face checkpoint already on disk (``config.json`` + ``model.safetensors``
or ``pytorch_model.bin``), read as our model: D-RASP's benchmark models and any small GPT-2
trained with ``transformers``. Nothing is downloaded.

GPT-2 is a pre-LayerNorm transformer with learned positions, ``gelu_new`` MLPs, biases
everywhere, a final LayerNorm and the unembedding tied to the embedding; our
:class:`~interp_rand.model.transformer.HookedTransformer` with ``normalization_type="LN"`` and
``act_fn="gelu_new"`` is the same network. The fused ``c_attn`` ``[d, 3d]`` splits into the
TransformerLens per-head ``W_Q/W_K/W_V`` ``[h, d, e]``; ``c_proj`` becomes ``W_O`` ``[h, e, d]``;
the unembedding is ``wte^T`` with a zero bias. The proof is the logits:
:func:`read_gpt2` boots the same folder as TransformerLens's own bridge
(``TransformerBridge.boot_transformers``, offline, with a word-level tokenizer of the model's
vocabulary built in memory) and refuses a conversion whose logits differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import einops
import torch
from torch import Tensor

from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer

# the config keys our model reproduces exactly, with the values it needs
_NEEDED = {"model_type": "gpt2", "activation_function": "gelu_new", "add_cross_attention": False,
           "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False}
LOGIT_TOLERANCE = 1e-4


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise ValueError(f"hf: {folder} has no config.json (a Hugging Face model folder has config.json and "
                         "model.safetensors)")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"hf: {path} is not JSON: {err}") from None
    if not isinstance(config, dict):
        raise ValueError(f"hf: {path} must hold a JSON object")
    bad = [f"{k}={config.get(k, v)!r} (needs {v!r})" for k, v in _NEEDED.items() if config.get(k, v) != v]
    if bad:
        raise ValueError("hf: only GPT-2-style checkpoints are read; " + "; ".join(bad))
    for key in ("n_embd", "n_layer", "n_head", "n_positions", "vocab_size"):
        if not isinstance(config.get(key), int) or isinstance(config.get(key), bool) or config[key] < 1:
            raise ValueError(f"hf: {path}: {key} must be a positive integer, got {config.get(key)!r}")
    if config["n_embd"] % config["n_head"]:
        raise ValueError(f"hf: {path}: n_embd={config['n_embd']} is not a multiple of n_head={config['n_head']}")
    inner = config.get("n_inner")
    if inner is not None and (not isinstance(inner, int) or isinstance(inner, bool) or inner < 1):
        raise ValueError(f"hf: {path}: n_inner must be a positive integer or null, got {inner!r}")
    eps = config.get("layer_norm_epsilon", 1e-5)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        raise ValueError(f"hf: {path}: layer_norm_epsilon must be a number in (0, 1), got {eps!r}")
    check_size(path, config)
    return config


MAX_PARAMETERS = 2 * 10**9  # 8 GB of float32: beyond any checkpoint this toolkit is for


def parameter_count(config: dict[str, Any]) -> int:
    """GPT-2's parameter count from its config (embeddings, blocks, final LayerNorm)."""
    d, layers, ctx, vocab = config["n_embd"], config["n_layer"], config["n_positions"], config["vocab_size"]
    inner = config.get("n_inner") or 4 * d
    block = 4 * d * d + 4 * d + 2 * d * inner + inner + d + 4 * d
    return vocab * d + ctx * d + layers * block + 2 * d


def check_size(path: Path, config: dict[str, Any]) -> None:
    """Refuse a config whose model would not fit in memory (twice over: ours and the bridge that
    checks it), before anything is allocated."""
    from interp_rand.host_memory import available_bytes, human

    n = parameter_count(config)
    need = 2 * 4 * n
    available = available_bytes()
    if n > MAX_PARAMETERS or (available is not None and need > available):
        raise ValueError(f"hf: {path} declares a model of {n:,} parameters ({human(need)} to read and check it"
                         + (f", {human(available)} available" if available is not None else "")
                         + "): refused before allocating")


def model_config(config: dict[str, Any]) -> ModelConfig:
    d, h = config["n_embd"], config["n_head"]
    return ModelConfig(d_model=d, n_layers=config["n_layer"], n_heads=h, d_head=d // h, n_ctx=config["n_positions"],
                       d_vocab=config["vocab_size"], d_vocab_out=config["vocab_size"],
                       d_mlp=config.get("n_inner") or 4 * d, act_fn="gelu_new", normalization_type="LN",
                       eps=float(config.get("layer_norm_epsilon", 1e-5)))


def read_weights(folder: Path) -> dict[str, Tensor]:
    """The checkpoint's tensors, names without a ``transformer.`` prefix (safetensors, or a
    weights-only ``pytorch_model.bin``)."""
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        file, read = folder / "model.safetensors", load_file
    elif (folder / "pytorch_model.bin").is_file():
        file = folder / "pytorch_model.bin"
        read = lambda f: torch.load(f, map_location="cpu", weights_only=True)  # noqa: E731
    else:
        raise ValueError(f"hf: {folder} has neither model.safetensors nor pytorch_model.bin")
    try:
        raw = read(file)
    except MemoryError:
        raise ValueError(f"hf: {file} declares tensors too large to hold in memory") from None
    except Exception as err:  # a damaged file, in whatever way safetensors or torch reports it
        raise ValueError(f"hf: {file} is not a readable weights file: {type(err).__name__}: "
                         f"{' '.join(str(err).split())[:200]}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, Tensor) for v in raw.values()):
        raise ValueError(f"hf: {file} must hold a name -> tensor mapping")
    if any(not v.is_floating_point() for v in raw.values()):
        bad = sorted(k for k, v in raw.items() if not v.is_floating_point())
        raise ValueError(f"hf: {file}: tensors {bad[:3]} are not floating point")
    return {k.removeprefix("transformer."): v.float() for k, v in raw.items()}


def expected_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """GPT-2's tensor shapes for ``config`` (names without the ``transformer.`` prefix)."""
    d, vocab, ctx = config["n_embd"], config["vocab_size"], config["n_positions"]
    inner = config.get("n_inner") or 4 * d
    shapes = {"wte.weight": (vocab, d), "wpe.weight": (ctx, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for layer in range(config["n_layer"]):
        p = f"h.{layer}."
        shapes.update({p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
                       p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
                       p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
                       p + "mlp.c_fc.weight": (d, inner), p + "mlp.c_fc.bias": (inner,),
                       p + "mlp.c_proj.weight": (inner, d), p + "mlp.c_proj.bias": (d,)})
    return shapes


def state_dict(config: dict[str, Any], weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our parameters from GPT-2's (module docstring)."""
    h = config["n_head"]

    shapes = expected_shapes(config)
    if "lm_head.weight" in weights:
        shapes["lm_head.weight"] = shapes["wte.weight"]

    def get(name: str) -> Tensor:
        if name not in weights:
            raise ValueError(f"hf: the checkpoint has no {name!r}")
        if tuple(weights[name].shape) != shapes[name]:
            raise ValueError(f"hf: the checkpoint's {name} has shape {tuple(weights[name].shape)}, its config.json "
                             f"needs {shapes[name]}")
        return weights[name]

    out = {"embed.W_E": get("wte.weight"), "pos_embed.W_pos": get("wpe.weight"),
           "ln_final.w": get("ln_f.weight"), "ln_final.b": get("ln_f.bias"),
           "unembed.W_U": (get("lm_head.weight") if "lm_head.weight" in weights else get("wte.weight")).T.contiguous(),
           "unembed.b_U": torch.zeros(config["vocab_size"])}
    for layer in range(config["n_layer"]):
        p, b = f"h.{layer}.", f"blocks.{layer}."
        out[b + "ln1.w"], out[b + "ln1.b"] = get(p + "ln_1.weight"), get(p + "ln_1.bias")
        out[b + "ln2.w"], out[b + "ln2.b"] = get(p + "ln_2.weight"), get(p + "ln_2.bias")
        for name, w, bias in zip("QKV", get(p + "attn.c_attn.weight").chunk(3, 1), get(p + "attn.c_attn.bias").chunk(3)):
            out[b + f"attn.W_{name}"] = einops.rearrange(w, "d (h e) -> h d e", h=h)
            out[b + f"attn.b_{name}"] = einops.rearrange(bias, "(h e) -> h e", h=h)
        out[b + "attn.W_O"] = einops.rearrange(get(p + "attn.c_proj.weight"), "(h e) d -> h e d", h=h)
        out[b + "attn.b_O"] = get(p + "attn.c_proj.bias")
        out[b + "mlp.W_in"], out[b + "mlp.b_in"] = get(p + "mlp.c_fc.weight"), get(p + "mlp.c_fc.bias")
        out[b + "mlp.W_out"], out[b + "mlp.b_out"] = get(p + "mlp.c_proj.weight"), get(p + "mlp.c_proj.bias")
    return {k: v.contiguous() for k, v in out.items()}


def boot_bridge(folder: Path, vocab_size: int) -> Any:
    """TransformerLens's own bridge of the folder, offline: ``boot_transformers`` with a word-level
    tokenizer of ``vocab_size`` ids (token ``i`` is the string ``"i"``), built in memory, since
    algorithmic checkpoints ship none."""
    import os

    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.sources import transformers as _source  # noqa: F401  (attaches boot_transformers)
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel({str(i): i for i in range(vocab_size)}, unk_token="0")), unk_token="0")
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # a local folder: never the network
    try:
        return TransformerBridge.boot_transformers(str(folder), tokenizer=tokenizer).eval()
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous


@torch.no_grad()
def read_gpt2(folder: str | Path, check_tokens: Tensor | None = None) -> HookedTransformer:
    """Our model of the GPT-2 folder, its logits checked against TransformerLens's bridge of the
    same folder on ``check_tokens`` (default: 8 random sequences of the full context)."""
    folder = Path(folder)
    config = read_config(folder)
    mapped = state_dict(config, read_weights(folder))  # every tensor's shape checked before the model is built
    model = HookedTransformer(model_config(config))
    ours = model.state_dict()
    for key, value in mapped.items():
        if key not in ours or ours[key].shape != value.shape:
            raise ValueError(f"hf: {key} {tuple(value.shape)} does not fit the model "
                             f"({tuple(ours[key].shape) if key in ours else 'no such parameter'})")
    model.load_state_dict(mapped, strict=True)
    model.eval()
    if check_tokens is None:
        check_tokens = torch.randint(0, config["vocab_size"], (8, config["n_positions"]),
                                     generator=torch.Generator().manual_seed(0))
    bridge = boot_bridge(folder, config["vocab_size"])
    theirs = bridge(check_tokens)
    theirs = theirs.logits if hasattr(theirs, "logits") else theirs
    gap = float((model(check_tokens) - theirs).abs().max())
    scale = float(theirs.abs().max()) or 1.0
    if gap > LOGIT_TOLERANCE * max(scale, 1.0):
        raise ValueError(f"hf: our reading of {folder} differs from TransformerLens's bridge by {gap:.2e} in the logits")
    return model


__all__ = ["LOGIT_TOLERANCE", "MAX_PARAMETERS", "boot_bridge", "check_size", "expected_shapes", "model_config",
           "parameter_count", "read_config", "read_gpt2", "read_weights", "state_dict"]
