"""The query-node x key-node split of one head's scores at one query position (see the
package's doc)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from interp_rand.model.alibi import alibi_bias
from interp_rand.model.attention import scores_of
from interp_rand.model.hook_names import hook_name
from interp_rand.tasks.base import Batch
from interp_rand.model.transformer import HookedTransformer
from probes.qk_attribution.parts import (TOLERANCE, Contributor, Part, _allowed, _attn_scale, _score_hooks, _side_inputs, _softmax, residual_parts)


@dataclass(frozen=True)
class QKAttribution:
    """The query-node x key-node split of one head's scores at one query position.

    Attributes:
        layer, head, query: the head and the query's residual-stream position (a seed token,
            if any, is position 0).
        nodes: the nodes of both sides (the same list on each) as :class:`Part` s (their
            names, carrying their kind, layer and head), ``bias`` when the head has a bias
            term, and ``alibi`` last for an ALiBi model's distance penalty.
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
    penalty = alibi_bias(model.cfg, n_stream, n_stream, heads=torch.tensor([head])) if isinstance(
        model, HookedTransformer) else None
    if penalty is not None:  # the distance penalty: a node of its own, on the diagonal
        names = names + [Part("alibi")]
        contrib = torch.nn.functional.pad(contrib, (0, 1, 0, 1))
        contrib[:, :, -1, -1] = penalty[0, query].double()
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
