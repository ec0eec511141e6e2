"""The residual parts entering a head's block (the upstream writes whose sum is its input) and
the names of parts and contributors (see the package's doc)."""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp_rand.model.hook_names import hook_name, seed_offset
from interp_rand.model.mixer import Mixer, capability_hook
from interp_rand.tasks.base import Batch
from probes.activations import model_args


TOLERANCE = 1e-4  # the decomposition's sum against the model's scores
#: ``alibi``: an ALiBi model's distance penalty (:mod:`interp_rand.model.alibi`), a score term
#: of its own that reads no upstream node (on the diagonal ``C[b, k, alibi, alibi]``)
PART_KINDS = ("embed", "pos", "seed", "input_mlp", "head", "mlp", "b_O", "bias", "alibi")


def _forward_args(model: nn.Module, batch: Batch | Tensor) -> tuple[tuple, dict]:
    return ((batch,), {}) if isinstance(batch, Tensor) else model_args(model, batch)


def _attention(model: nn.Module, layer: int) -> nn.Module:
    return model.blocks[layer].attn


def _attn_scale(model: nn.Module, layer: int) -> float:
    attn = _attention(model, layer)
    scale = getattr(attn, "scale", None)
    if scale is None:
        scale = getattr(attn, "attn_scale", None)
    return float(scale if scale is not None else 1.0)


def _ln(model: nn.Module, layer: int) -> nn.Module | None:
    """The block's attention LayerNorm, or ``None`` without one."""
    ln = model.blocks[layer].ln1
    return ln if hasattr(ln, "w") else None


def _allowed(model: nn.Module, batch: Batch | Tensor, n_stream: int, n_batch: int) -> Tensor:
    """``[batch, P, P]`` bool, where a query may attend a key (the model's own rule)."""
    mask = None if isinstance(batch, Tensor) else batch.attention_mask
    allowed = None
    if hasattr(model, "allowed_keys"):
        # HookedTransformer owns its masking rule (seed token included)
        allowed = model.allowed_keys(mask, n_batch, n_stream - seed_offset(model))
    elif getattr(model.cfg, "attention_dir", "causal") == "causal":
        allowed = torch.ones(n_stream, n_stream, dtype=torch.bool).tril()
    if allowed is None:
        return torch.ones(n_batch, n_stream, n_stream, dtype=torch.bool)
    return (allowed if allowed.dim() == 3 else allowed[None]).expand(n_batch, -1, -1).cpu()


def _score_hooks(model: nn.Module, layer: int) -> tuple[str, str]:
    """The full hook names of block ``layer``'s scores and pattern (its mixer's capabilities,
    :func:`~interp_rand.model.mixer.capability_hook`); a mixer without them is refused."""
    scores, pattern = (capability_hook(model, layer, c) for c in ("scores", "pattern"))
    if scores is None or pattern is None:
        raise ValueError(f"query/key attribution splits attention scores; blocks.{layer}.attn "
                         f"({type(_attention(model, layer)).__name__}) has none (no 'scores' and 'pattern' capability)")
    return scores, pattern


def _softmax(model: nn.Module) -> bool:
    return getattr(model.cfg, "attention", "softmax") == "softmax"


class Part(str):
    """One upstream part of a head's input, named as :class:`circuits.graph.nodes.Node` names
    nodes (``embed``, ``pos``, ``seed``, ``input_mlp``, ``a0.1``, ``m0``, ``b_O``, ``bias``) and
    carrying its identity (``kind``, ``layer``, ``head``), so that a reader (the circuit
    drawing's overlay) takes the node from these attributes, never by parsing the name."""

    kind: str
    layer: int | None
    head: int | None

    def __new__(cls, kind: str, layer: int | None = None, head: int | None = None) -> "Part":
        if kind not in PART_KINDS:
            raise ValueError(f"Part kind {kind!r} is not one of {PART_KINDS}")
        self = super().__new__(cls, {"head": f"a{layer}.{head}", "mlp": f"m{layer}"}.get(kind, kind))
        self.kind, self.layer, self.head = kind, layer, head
        return self

    def __reduce__(self):
        return Part, (self.kind, self.layer, self.head)


class Contributor(str):
    """One side of one part, ``q:NODE`` / ``k:NODE``, carrying ``side`` and ``part``
    (:class:`Part`)."""

    side: str
    part: Part

    def __new__(cls, side: str, part: Part) -> "Contributor":
        if side not in ("q", "k"):
            raise ValueError(f"Contributor side {side!r} must be 'q' or 'k'")
        self = super().__new__(cls, f"{side}:{part}")
        self.side, self.part = side, part
        return self

    def __reduce__(self):
        return Contributor, (self.side, self.part)


@torch.no_grad()
def residual_parts(model: nn.Module, batch: Batch | Tensor, layer: int) -> tuple[list[Part], Tensor, dict[str, Tensor]]:
    """Every upstream node's part of ``blocks.{layer}.hook_resid_pre`` (module docstring).

    Returns:
        ``(names, parts [batch, P, n_parts, d_model] float64, cache)`` (``names``: each part's
        :class:`Part`); ``cache`` holds the
        block's ``hook_resid_pre``, ``attn.hook_q/k`` and its mixer's scores and pattern hooks
        where it has them (``attn.hook_attn_scores``, ``attn.hook_pattern``). Raises
        when the parts do not sum to ``hook_resid_pre`` within :data:`TOLERANCE` (relative to
        its size): a node this module does not know.
    """
    hooks = model.hook_dict
    n_layers = int(model.cfg.n_layers)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer={layer} outside [0, {n_layers})")
    has_input_mlp = "input_mlp.hook_post" in hooks
    has_seed = "hook_seed_embed" in hooks
    seed_mode = getattr(model.cfg, "seed_mode", "add")
    wanted = {"hook_embed", hook_name(layer, "hook_resid_pre"), hook_name(layer, "attn.hook_q"), hook_name(layer, "attn.hook_k")}
    wanted |= {capability_hook(model, layer, c) for c in ("scores", "pattern")} - {None}
    wanted |= {n for n in ("hook_pos_embed", "hook_seed_embed", "input_mlp.hook_post", hook_name(layer, "ln1.hook_scale"))
               if n in hooks}
    for l in range(layer):
        wanted |= {hook_name(l, "attn.hook_z")} | ({hook_name(l, "hook_mlp_out")} & set(hooks))
    args, kwargs = _forward_args(model, batch)
    _, cache = model.run_with_cache(*args, names_filter=lambda n: n in wanted, **kwargs)
    resid = cache[hook_name(layer, "hook_resid_pre")].double()
    n_batch, n_stream, d_model = resid.shape
    offset = seed_offset(model)

    def front(v: Tensor) -> Tensor:  # task positions -> stream positions (a seed token first)
        return F.pad(v.double(), (0, 0, n_stream - v.shape[1], 0))

    def back(v: Tensor) -> Tensor:  # a seed token's [batch, 1, d] -> the stream
        return F.pad(v.double(), (0, 0, 0, n_stream - v.shape[1]))

    names: list[Part] = []
    parts: list[Tensor] = []
    if not has_input_mlp:
        names.append(Part("embed"))
        parts.append(front(cache["hook_embed"]))
    if "hook_pos_embed" in cache:
        names.append(Part("pos"))
        parts.append(cache["hook_pos_embed"].double().expand(n_batch, -1, -1))
    if has_seed and (seed_mode != "append" or not has_input_mlp):
        names.append(Part("seed"))
        parts.append(back(cache["hook_seed_embed"]) if offset else cache["hook_seed_embed"].double())
    if has_input_mlp:
        mlp = model.input_mlp
        write = cache["input_mlp.hook_post"].double() @ mlp.W_out.double() + mlp.b_out.double()
        names.append(Part("input_mlp"))
        if has_seed and seed_mode == "append":
            # split exactly: the write without the seed (a zero seed projection, i.e. all seed
            # bits 0) and what the seed adds to it through the input MLP
            without = mlp(cache["hook_embed"]).double()
            parts += [front(without), front(write - without)]
            names.append(Part("seed"))
        else:
            parts.append(front(write))
    b_O = torch.zeros(d_model, dtype=torch.float64)
    for l in range(layer):
        attn = _attention(model, l)
        z = cache[hook_name(l, "attn.hook_z")].double()
        # the mixer's own write step (a bridge's attention has the same W_O; Mixer's maths reads it)
        heads = Mixer.head_writes(attn, z.to(attn.W_O.dtype)).double()
        for h in range(heads.shape[2]):
            names.append(Part("head", l, h))
            parts.append(heads[:, :, h])
        b_O = b_O + attn.b_O.double().cpu()
        if hook_name(l, "hook_mlp_out") in cache:
            names.append(Part("mlp", l))
            parts.append(cache[hook_name(l, "hook_mlp_out")].double())
    if bool(b_O.abs().max() > 0):
        names.append(Part("b_O"))
        parts.append(b_O.expand(n_batch, n_stream, -1))
    stacked = torch.stack([p.cpu() for p in parts], dim=2)
    error = float((stacked.sum(2) - resid.cpu()).abs().max())
    if error > TOLERANCE * max(1.0, float(resid.abs().max())):
        raise RuntimeError(f"the residual parts {names} miss {error:.2e} of blocks.{layer}.hook_resid_pre")
    return names, stacked, dict(cache.cache_dict) if hasattr(cache, "cache_dict") else dict(cache)


def _side_inputs(model: nn.Module, layer: int, head: int, parts: Tensor, ln_scale: Tensor, which: str) -> tuple[Tensor, Tensor]:
    """``(per part [batch, P, n, d_head], bias [d_head])``: each part's share of the head's
    ``hook_q`` or ``hook_k`` (frozen LayerNorm scale), and the bias term."""
    attn = _attention(model, layer)
    weight = getattr(attn, f"W_{which}")[head].double().cpu()  # [d_model, d_head]
    bias = getattr(attn, f"b_{which}")[head].double().cpu()
    ln = _ln(model, layer)
    if ln is None:
        return parts @ weight, bias
    scale = ln_scale  # [batch, P, 1]: the block's own LayerNorm scale (its hook_scale), frozen
    u = (parts - parts.mean(-1, keepdim=True)) / scale[:, :, None] * ln.w.double().cpu()
    return u @ weight, ln.b.double().cpu() @ weight + bias
