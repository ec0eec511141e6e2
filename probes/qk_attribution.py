"""Query/key attribution: why a head attends where it does.

For head ``(layer, head)`` and query position ``q``, the residual stream entering the block is a
sum of upstream nodes' writes, ``resid[p] = sum_i a_i[p]``:

- ``embed`` (``hook_embed``; absent behind an input MLP, which reads it), ``pos``
  (``hook_pos_embed``), ``seed`` (``hook_seed_embed`` when the seed is added to the stream or is
  its own token), ``input_mlp`` (``input_mlp.hook_post @ W_out + b_out``); when the seed is
  appended to the input MLP's input (recall), the input MLP's write is split exactly into
  ``input_mlp``, its value on the embedding alone (a zero seed projection: every seed bit 0),
  and ``seed``, what the seed adds to it through the input MLP;
- each earlier head ``aL.H`` (``hook_z @ W_O``), the earlier blocks' attention output biases
  together as ``b_O`` (only when non-zero) and each earlier MLP ``mL`` (``hook_mlp_out``);
  names as :class:`circuits.graph.nodes.Node` writes them.

The head's score is bilinear in that sum:
``score[q, k] = (sum_i Q_i(q) + Q_b) . (sum_j K_j(k) + K_b) / attn_scale`` with
``Q_i(q) = LN(a_i)[q] @ W_Q[h]`` and the bias node ``bias``:
``Q_b = ln1.b @ W_Q[h] + b_Q[h]`` (keys alike). LayerNorm is linearised in the standard way: each
part is centred and divided by the example's own, frozen LayerNorm scale at its position
(``(a_i - mean a_i) / scale * w``), so the parts sum to the LayerNorm's output exactly; without
LayerNorm the split needs no linearisation at all. Either way the query-node x key-node matrix
``C[i, j](q, k) = Q_i(q) . K_j(k) / attn_scale`` sums to the model's pre-softmax score; the
module checks that (:attr:`QKAttribution.max_error`) and refuses above ``1e-4``.

The parts are read from the cache here rather than from :mod:`circuits.graph.writers`: probes
may not import circuits (``tests/test_layers.py``), the attention report (``probes.report``)
shows the result, and the score needs *every* part of the residual stream, including the
positional embedding and the attention output biases, which are not writer nodes of
:class:`circuits.graph.model_graph.ModelGraph`.

**Patching check** (:func:`qk_patching_check`): a *contributor* is one upstream node on one
side (``q:pos``, ``k:a0.1``; the bias node is the head's own and not a contributor). They are
ranked by how much they move the scores across keys: for softmax attention (where a part
constant over keys changes nothing) the mean absolute deviation over a row's allowed keys of
that side's row of ``C`` summed over the other side; for linear attention (no softmax to cancel
a constant) its mean absolute value over allowed keys; averaged over examples. The top ``k``
contributors are removed from the head's query input (at ``q``) or key input (at every key):
the block's input is rebuilt without them (zero ablation, or their batch mean per position with
``ablation="mean"``), passed through the block's LayerNorm (recomputed, not frozen) and
``W_Q/W_K``, and written into ``hook_q``/``hook_k`` for this head only. The change of the head's
pattern at ``q`` is the total variation ``0.5 * sum_k |p - p'|`` (for linear attention, half the
L1 change of its unnormalised pattern), averaged over examples, against up to ``n_draws``
distinct random sets of ``k`` of the *other* contributors (every such set when there are fewer;
sets of all of them when fewer than ``k`` are left), as the sort study draws random *other*
heads. (Drawing from all contributors instead lets a random set hold a top one: on a head with
four contributors every 3-set does, and the comparison says nothing.)

**Verdict rule** (the project's ablation rule, :func:`interp_rand.verdicts.exceeds`, fixed before
the zoo models were run): *holds* when the top-``k`` change is at least ``margin`` (0.05) above
the mean random change and at least twice it; *fails* when it is less than ``margin`` above the
mean random change; *inconclusive* in between, and when the test cannot mean anything: no other contributor to draw, or a softmax query that sees
one key (its weight is 1 whatever the scores, so no removal can move the pattern).

    >>> attr = qk_attribution(model, batch, layer=1, head=2, query=7)   # zoo:sort's a1.2 at y1
    >>> attr.nodes            # ('embed', 'pos', 'a0.0', ..., 'a0.3', 'm0', 'b_O', 'bias')
    >>> attr.mean.shape       # [keys, nodes, nodes]
    >>> qk_patching_check(model, batch, attr).verdict                    # 'holds'
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp_rand.model.attention import scores_of
from interp_rand.model.hook_names import hook_name, seed_offset
from interp_rand.model.mixer import Mixer, capability_hook
from interp_rand.tasks.base import Batch
from interp_rand.model.transformer import HookedTransformer
from interp_rand.verdicts import Claim, exceeds, inconclusive
from probes.activations import model_args

TOLERANCE = 1e-4  # the decomposition's sum against the model's scores
MARGIN = 0.05  # the verdict's absolute margin
PART_KINDS = ("embed", "pos", "seed", "input_mlp", "head", "mlp", "b_O", "bias")


# ---------------------------------------------------------------------- residual parts


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


# ---------------------------------------------------------------------- attribution


@dataclass(frozen=True)
class QKAttribution:
    """The query-node x key-node split of one head's scores at one query position.

    Attributes:
        layer, head, query: the head and the query's residual-stream position (a seed token,
            if any, is position 0).
        nodes: the nodes of both sides (the same list on each) as :class:`Part` s (their
            names, carrying their kind, layer and head), ``bias`` last when the head has a bias
            term.
        per_example: ``[batch, P, n_nodes, n_nodes]`` ``C[b, k, i, j]``: query node ``i`` with
            key node ``j`` at key position ``k`` (zero where the key is masked).
        allowed: ``[batch, P]`` bool, the keys the query may attend.
        scores: ``[batch, P]`` the model's pre-softmax scores (``hook_attn_scores``; on a
            model other than ours, e.g. a ``TransformerBridge``, whose ``hook_attn_scores`` in
            TransformerLens 4.x holds the softmaxed pattern, ``hook_q . hook_k / attn_scale``; masked
            keys as the model writes them).
        pattern: ``[batch, P]`` the head's pattern row at ``query``.
        max_error: largest ``|sum C - score|`` over allowed keys (at most :data:`TOLERANCE`).
        softmax: the head's attention is softmax (else linear).
    """

    layer: int
    head: int
    query: int
    nodes: tuple[str, ...]
    per_example: Tensor
    allowed: Tensor
    scores: Tensor
    pattern: Tensor
    max_error: float
    softmax: bool = True

    @property
    def mean(self) -> Tensor:
        """``[P, n_nodes, n_nodes]`` averaged over the examples where each key is allowed (NaN
        where none is)."""
        return self.mean_where()

    def mean_where(self, where: Tensor | None = None) -> Tensor:
        """:attr:`mean` over the examples selected by ``where`` (``[batch]`` bool; all by
        default), e.g. those with a seed bit set: which keys the head reads under which seed."""
        w = self.allowed.double() * (1.0 if where is None else where.to(torch.float64)[:, None])
        total = (self.per_example * w[:, :, None, None]).sum(0)
        count = w.sum(0)[:, None, None]
        return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))

    @property
    def query_side(self) -> Tensor:
        """``[batch, P, n_nodes]``: each query node's contribution to the score (summed over
        the key side)."""
        return self.per_example.sum(3)

    @property
    def key_side(self) -> Tensor:
        """``[batch, P, n_nodes]``: each key node's contribution (summed over the query side)."""
        return self.per_example.sum(2)

    @property
    def mean_pattern(self) -> Tensor:
        """``[P]`` the head's pattern row at ``query``, averaged over examples."""
        return self.pattern.mean(0)

    def contrast(self, key: int) -> Tensor:
        """``[n_nodes, n_nodes]``: per example, ``C`` at ``key`` minus its mean over the row's
        other allowed keys, averaged over the examples where ``key`` is allowed and has another
        allowed key. What makes the head prefer ``key`` to its alternatives under softmax (a
        term equal at every key changes nothing)."""
        others = self.allowed.clone()
        others[:, key] = False
        n_other = others.sum(1).double()
        use = self.allowed[:, key] & (n_other > 0)
        if not bool(use.any()):
            return torch.full(self.per_example.shape[2:], float("nan"), dtype=torch.float64)
        rest = (self.per_example * others[:, :, None, None]).sum(1) / n_other.clamp(min=1)[:, None, None]
        return (self.per_example[:, key] - rest)[use].mean(0)

    def contributors(self) -> list[str]:
        """Every contributor: ``q:NODE`` then ``k:NODE`` for each upstream node (not ``bias``)."""
        upstream = [n for n in self.nodes if n != "bias"]
        return [Contributor("q", n) for n in upstream] + [Contributor("k", n) for n in upstream]

    def importance(self) -> dict[str, float]:
        """Per contributor, how much it moves this row's scores across keys (module docstring),
        in :meth:`contributors` order."""
        out = {}
        w = self.allowed.double()
        n_keys = w.sum(1).clamp(min=1)
        for side, values in (("q", self.query_side), ("k", self.key_side)):
            for i, node in enumerate(self.nodes):
                if node == "bias":
                    continue
                v = values[:, :, i]
                if self.softmax:
                    centre = (v * w).sum(1, keepdim=True) / n_keys[:, None]
                    v = v - centre
                out[Contributor(side, node)] = float(((v.abs() * w).sum(1) / n_keys).mean())
        return out

    def top(self, k: int = 3) -> list[str]:
        """The ``k`` most important contributors, most important first (ties: node order)."""
        imp = self.importance()
        return sorted(imp, key=lambda c: -imp[c])[:k]

    def to_dict(self, digits: int = 4) -> dict[str, Any]:
        def r(t: Tensor) -> Any:
            return [[None if v != v else round(float(v), digits) for v in row] for row in t.tolist()]

        key = int(self.mean_pattern.argmax()) if self.softmax else int(self.mean_pattern.abs().argmax())
        return {"layer": self.layer, "head": self.head, "query": self.query, "nodes": list(self.nodes),
                "n_examples": int(self.per_example.shape[0]), "max_error": self.max_error,
                "mean_pattern": [round(float(v), digits) for v in self.mean_pattern],
                "top_key": key, "at_top_key": r(self.mean[key]), "contrast_at_top_key": r(self.contrast(key)),
                "importance": {c: round(v, digits) for c, v in self.importance().items()}}


@torch.no_grad()
def qk_attribution(model: nn.Module, batch: Batch | Tensor, layer: int, head: int, query: int) -> QKAttribution:
    """Split head ``(layer, head)``'s scores at residual-stream position ``query`` into
    query-node x key-node contributions (module docstring), checked against the model's
    ``hook_attn_scores`` (raises above :data:`TOLERANCE`; on another model, its own ``hook_q``
    and ``hook_k``: see :attr:`QKAttribution.scores`)."""
    n_heads = int(model.cfg.n_heads)
    if not 0 <= head < n_heads:
        raise ValueError(f"head={head} outside [0, {n_heads})")
    # a mixer without scores is refused before the forward; residual_parts refuses a bad layer
    scores_hook, pattern_hook = _score_hooks(model, layer) if 0 <= layer < int(model.cfg.n_layers) else (None, None)
    names, parts, cache = residual_parts(model, batch, layer)
    n_batch, n_stream = parts.shape[:2]
    if not 0 <= query < n_stream:
        raise ValueError(f"query={query} outside the residual stream's positions [0, {n_stream})")
    ln_scale = cache.get(hook_name(layer, "ln1.hook_scale"))
    ln_scale = None if ln_scale is None else ln_scale.double().cpu()
    q_parts, q_bias = _side_inputs(model, layer, head, parts[:, query : query + 1],
                                   None if ln_scale is None else ln_scale[:, query : query + 1], "Q")
    k_parts, k_bias = _side_inputs(model, layer, head, parts, ln_scale, "K")
    has_bias = bool(q_bias.abs().max() > 0 or k_bias.abs().max() > 0)
    if has_bias:
        names = names + [Part("bias")]
        q_parts = torch.cat([q_parts, q_bias.expand(n_batch, 1, 1, -1)], dim=2)
        k_parts = torch.cat([k_parts, k_bias.expand(n_batch, n_stream, 1, -1)], dim=2)
    contrib = torch.einsum("bie,bkje->bkij", q_parts[:, 0], k_parts) / _attn_scale(model, layer)
    allowed = _allowed(model, batch, n_stream, n_batch)[:, query]
    contrib = contrib * allowed[:, :, None, None]
    if isinstance(model, HookedTransformer):
        scores = cache[scores_hook][:, head, query].double().cpu()
    else:
        q = cache[hook_name(layer, "attn.hook_q")][:, query, head].double().cpu()
        k = cache[hook_name(layer, "attn.hook_k")][:, :, head].double().cpu()
        scores = scores_of(q[:, None, None], k[:, :, None], _attn_scale(model, layer))[:, 0, 0]  # the mixer's maths
    diff = (contrib.sum((2, 3)) - scores).abs()
    error = float(diff[allowed].max()) if bool(allowed.any()) else 0.0
    if error > TOLERANCE * max(1.0, float(scores[allowed].abs().max()) if bool(allowed.any()) else 1.0):
        raise RuntimeError(f"the contributions miss the scores of a{layer}.{head} at {query} by {error:.2e}")
    pattern = cache[pattern_hook][:, head, query].double().cpu()
    return QKAttribution(layer, head, query, tuple(names), contrib, allowed, scores, pattern, error, _softmax(model))


# ---------------------------------------------------------------------- patching check


@dataclass(frozen=True)
class QKPatchCheck:
    """Does removing the top contributors move the head's pattern more than random ones?

    Attributes:
        top: the top ``k`` contributors (``q:NODE`` / ``k:NODE``).
        top_change: mean total variation of the pattern row with them removed.
        random_sets, random_changes: the random draws (of the other contributors) and their
            changes.
        ablation: ``zero`` or ``mean``.
        pattern_fixed: the pattern row cannot change (a softmax query that sees one key): the
            check is inapplicable and its verdict inconclusive.
        verdict: ``holds`` / ``inconclusive`` / ``fails`` (module docstring).
    """

    layer: int
    head: int
    query: int
    top: tuple[str, ...]
    top_change: float
    random_sets: tuple[tuple[str, ...], ...]
    random_changes: tuple[float, ...]
    ablation: str
    margin: float = MARGIN
    pattern_fixed: bool = False

    @property
    def random_mean(self) -> float:
        return sum(self.random_changes) / max(1, len(self.random_changes))

    @property
    def share_beaten(self) -> float:
        """Share of the random draws whose change is below the top contributors'."""
        return sum(c < self.top_change for c in self.random_changes) / max(1, len(self.random_changes))

    @property
    def claim(self) -> Claim:
        """The check as a claim, by :func:`interp_rand.verdicts.exceeds` (margin ``margin``, twice
        the random mean); inconclusive when there is no other contributor to draw or nothing can
        move the pattern."""
        claim = exceeds(f"removing the top {len(self.top)} contributors of a{self.layer}.{self.head} at {self.query} "
                        "moves its pattern", self.top_change, self.random_mean if self.random_changes else None,
                        control_label=f"{len(self.random_changes)} random sets of the other contributors",
                        margin=self.margin, ratio=2.0, unavailable="no other contributor to draw")
        if self.pattern_fixed:
            return inconclusive(claim, "the query sees one key: a softmax pattern fixed at 1")
        return claim

    @property
    def verdict(self) -> str:
        return self.claim.verdict.outcome

    @property
    def rule(self) -> str:
        return (f"{self.claim.verdict.rule} (value: the top-{len(self.top)} change, control: the mean random change); "
                "inconclusive when no other contributor can be drawn or the query sees one key")

    def to_dict(self, digits: int = 4) -> dict[str, Any]:
        return {"layer": self.layer, "head": self.head, "query": self.query, "top": list(self.top),
                "top_change": round(self.top_change, digits), "random_mean": round(self.random_mean, digits),
                "random_max": round(max(self.random_changes, default=0.0), digits),
                "share_beaten": round(self.share_beaten, digits), "n_draws": len(self.random_changes),
                "ablation": self.ablation, "pattern_fixed": self.pattern_fixed, "verdict": self.verdict,
                "rule": self.rule}


@torch.no_grad()
def pattern_change(model: nn.Module, batch: Batch | Tensor, attr: QKAttribution, removed: Sequence[str], *,
                   ablation: str = "zero", parts: tuple[list[str], Tensor, dict] | None = None) -> float:
    """Mean total variation of head ``attr``'s pattern row at ``attr.query`` when the
    contributors ``removed`` (``q:NODE`` / ``k:NODE``) are taken out of its query / key input
    (module docstring)."""
    if ablation not in ("zero", "mean"):
        raise ValueError(f"ablation={ablation!r} must be 'zero' or 'mean'")
    layer, head, query = attr.layer, attr.head, attr.query
    names, stacked, cache = parts or residual_parts(model, batch, layer)
    resid = cache[hook_name(layer, "hook_resid_pre")].double().cpu()
    unknown = [c for c in removed if c[:2] not in ("q:", "k:") or c[2:] not in names]
    if unknown:
        raise ValueError(f"unknown contributor(s) {unknown}; contributors are {attr.contributors()}")
    attn = _attention(model, layer)
    ln = model.blocks[layer].ln1
    new: dict[str, Tensor] = {}
    for side in ("q", "k"):
        idx = [names.index(c[2:]) for c in removed if c[0] == side]
        if not idx:
            continue
        drop = stacked[:, :, idx].sum(2)
        if ablation == "mean":
            drop = drop - drop.mean(0, keepdim=True)
        x = (resid - drop).to(attn.W_Q.dtype).to(attn.W_Q.device)
        # the mixer's own projection (a bridge's attention has the same weights; Mixer's maths reads them)
        new[side] = Mixer.project_heads(attn, ln(x)[:, :, None], side, torch.tensor([head]))[:, :, 0]  # [batch, P, d_head]
    captured: dict[str, Tensor] = {}

    def put_q(value: Tensor, hook: Any) -> Tensor:
        value = value.clone()
        value[:, query, head] = new["q"][:, query].to(value.dtype)
        return value

    def put_k(value: Tensor, hook: Any) -> Tensor:
        value = value.clone()
        value[:, :, head] = new["k"].to(value.dtype)
        return value

    def keep(value: Tensor, hook: Any) -> None:
        captured["pattern"] = value[:, head, query].detach().double().cpu()

    hooks = [(hook_name(layer, "attn.hook_q"), put_q)] if "q" in new else []
    hooks += [(hook_name(layer, "attn.hook_k"), put_k)] if "k" in new else []
    hooks.append((_score_hooks(model, layer)[1], keep))
    args, kwargs = _forward_args(model, batch)
    with model.hooks(fwd_hooks=hooks):
        model(*args, **kwargs)
    return float(0.5 * (captured["pattern"] - attr.pattern).abs().sum(1).mean())


def _random_sets(others: list[str], k: int, n: int, gen: torch.Generator) -> list[tuple[str, ...]]:
    """Up to ``n`` distinct random ``k``-subsets of ``others`` (all of them if there are fewer),
    as the sort study draws its control heads."""
    every = list(itertools.combinations(others, k))
    if len(every) <= n:
        return every
    return [every[i] for i in sorted(torch.randperm(len(every), generator=gen)[:n].tolist())]


@torch.no_grad()
def qk_patching_check(model: nn.Module, batch: Batch | Tensor, attr: QKAttribution, *, k: int = 3,
                      n_draws: int = 20, ablation: str = "zero", seed: int = 0) -> QKPatchCheck:
    """The top-``k`` contributors of ``attr`` removed against ``n_draws`` random ``k``-sets of
    the other contributors (module docstring), on the same ``batch`` the attribution was
    computed on. A head with at most ``k`` contributors has no control, and a softmax query
    that sees one key has a pattern nothing can move: their verdict is inconclusive."""
    candidates = attr.contributors()
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    k = min(k, len(candidates))  # a head with fewer contributors: all of them, and no control
    parts = residual_parts(model, batch, attr.layer)
    top = tuple(attr.top(k))
    top_change = pattern_change(model, batch, attr, top, ablation=ablation, parts=parts)
    others = [c for c in candidates if c not in top]
    sets = _random_sets(others, min(k, len(others)), n_draws, torch.Generator().manual_seed(seed)) if others else []
    changes = [pattern_change(model, batch, attr, pick, ablation=ablation, parts=parts) for pick in sets]
    fixed = attr.softmax and int(attr.allowed.sum(1).max()) <= 1
    return QKPatchCheck(attr.layer, attr.head, attr.query, top, top_change, tuple(sets), tuple(changes), ablation,
                        pattern_fixed=fixed)


@dataclass(frozen=True)
class SeedBitReads:
    """Which keys a recall head's query reads under which seed bits.

    Attributes:
        layer, head, query: the head and query position of the attribution.
        on, off: ``[seed_bits, N]``: the mean attention weight (its absolute value for linear
            attention) the query puts on the pair holding key identity ``j``, over the examples
            whose seed bit ``i`` is 1 (``on``) or 0 (``off``); NaN where no example has that bit.
        n_on: ``[seed_bits]`` examples with each bit set.
        control: ``[seed_bits, N]`` the same ``on - off`` with the seeds shuffled across the
            examples (a fixed permutation): what sampling noise alone gives.
    """

    layer: int
    head: int
    query: int
    on: Tensor
    off: Tensor
    n_on: Tensor
    control: Tensor

    @property
    def difference(self) -> Tensor:
        """``[seed_bits, N]`` ``on - off``: how setting seed bit ``i`` moves the read of key ``j``."""
        return self.on - self.off

    def to_dict(self, digits: int = 4) -> dict[str, Any]:
        def r(t: Tensor) -> Any:
            return [[None if v != v else round(float(v), digits) for v in row] for row in t.tolist()]

        return {"layer": self.layer, "head": self.head, "query": self.query, "on": r(self.on), "off": r(self.off),
                "difference": r(self.difference), "control": r(self.control), "n_on": [int(v) for v in self.n_on]}


def reads_by_seed_bit(attr: QKAttribution, batch: Batch, task: Any, *, seed: int = 0) -> SeedBitReads:
    """For a task with :data:`~interp_rand.tasks.base.KEY_VALUE_RECALL` (metadata ``key_order``:
    the key identity of each pair, the pairs first in the task's positions), the attention of
    ``attr``'s query on each key *identity* (not position: the pairs are shuffled) split by each
    seed bit, on the ``batch`` the attribution was computed on, with a shuffled-seed control
    (``seed``: its permutation)."""
    from interp_rand.tasks.base import KEY_VALUE_RECALL, require_capability

    require_capability(task, KEY_VALUE_RECALL, "the seed-bit reads of a head")
    key_order = batch.metadata["key_order"].long()
    n, n_pairs = key_order.shape
    if attr.pattern.shape[0] != n:
        raise ValueError(f"the attribution has {attr.pattern.shape[0]} examples and the batch {n}: "
                         "give the batch it was computed on")
    offset = attr.pattern.shape[1] - len(task.position_names())  # a seed token, if any, first
    weights = attr.pattern[:, offset:offset + n_pairs].double()
    weights = weights if attr.softmax else weights.abs()
    by_key = torch.zeros(n, n_pairs, dtype=torch.float64).scatter_(1, key_order, weights)
    bits = batch.seeds.reshape(n, -1) > 0.5
    shuffled = bits[torch.randperm(n, generator=torch.Generator().manual_seed(seed))]
    on, off = _split_means(by_key, bits)
    control_on, control_off = _split_means(by_key, shuffled)
    return SeedBitReads(attr.layer, attr.head, attr.query, on, off, bits.sum(0), control_on - control_off)


def _split_means(values: Tensor, bits: Tensor) -> tuple[Tensor, Tensor]:
    """``[bits, N]`` means of ``values: [batch, N]`` over the rows with each bit set, and unset
    (NaN where there is none)."""
    def mean(rows: Tensor) -> Tensor:
        return values[rows].mean(0) if bool(rows.any()) else torch.full(values.shape[1:], float("nan"), dtype=values.dtype)

    return torch.stack([mean(b) for b in bits.T]), torch.stack([mean(~b) for b in bits.T])


def explain_heads(model: nn.Module, batch: Batch | Tensor, heads: Sequence[tuple[int, int, int]], *,
                  seed: int = 0) -> tuple[tuple[QKAttribution, QKPatchCheck], ...]:
    """:func:`qk_attribution` and its :func:`qk_patching_check` for each ``(layer, head, query)``
    of ``heads`` on ``batch``: what the attention report and the circuit drawing show."""
    out = []
    for layer, head, query in heads:
        attr = qk_attribution(model, batch, layer, head, query)
        out.append((attr, qk_patching_check(model, batch, attr, seed=seed)))
    return tuple(out)


__all__ = ["MARGIN", "PART_KINDS", "Contributor", "Part", "QKAttribution", "QKPatchCheck", "SeedBitReads", "TOLERANCE", "explain_heads",
           "pattern_change", "qk_attribution", "qk_patching_check", "reads_by_seed_bit", "residual_parts"]
