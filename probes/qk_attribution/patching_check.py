"""The patching check of an attribution, the top contributors removed against random others,
and its verdict (see the package's doc)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from interp_rand.model.hook_names import hook_name
from interp_rand.model.mixer import Mixer
from interp_rand.tasks.base import Batch
from interp_rand.verdicts import Claim, exceeds, inconclusive
from probes.qk_attribution.attribution import QKAttribution
from probes.qk_attribution.parts import _attention, _forward_args, _score_hooks, residual_parts


MARGIN = 0.05  # the verdict's absolute margin


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
