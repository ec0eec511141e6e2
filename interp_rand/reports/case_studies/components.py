"""Position-resolved component scores and ablation effects shared by the case studies.

A component is a :class:`~circuits.graph.nodes.Node` (attention head or MLP) at one residual-stream
position. Its score is the share of the clean-corrupted metric gap recovered when only its
output is patched from the clean run into the corrupted run (denoising node patching, via
:func:`circuits.patch_sweep`).

    >>> scores = node_patch_scores(model, clean, corrupted, metric)
    >>> scores.select(min_share=0.1)          # [Node, ...] largest first
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import Ablation, ablate_nodes
from circuits.graph.architecture import run_model
from circuits.interventions.metrics import Metric, evaluate_metric, get_metric
from circuits.interventions.node_patching import patch_sweep
from circuits.graph.nodes import Node
from interp_rand.losses import answer_logits, decoding_for_targets


@dataclass(frozen=True)
class ComponentScores:
    """Recovered share of the metric gap per component.

    Attributes:
        heads: ``[layer, pos, head]`` share recovered by patching one head's ``hook_z``.
        mlps: ``[layer, pos]`` share recovered by patching one MLP's output (``None`` when
            the model has no MLPs).
        clean, corrupted: the metric on the clean and the corrupted run.
    """

    heads: Tensor
    mlps: Tensor | None
    clean: float
    corrupted: float

    def items(self) -> list[tuple[Node, float]]:
        """Every component with its share, largest first."""
        out = [(Node("head", l, h, p), float(self.heads[l, p, h]))
               for l, p, h in torch.cartesian_prod(*(torch.arange(s) for s in self.heads.shape)).tolist()]
        if self.mlps is not None:
            out += [(Node("mlp", l, None, p), float(self.mlps[l, p]))
                    for l, p in torch.cartesian_prod(*(torch.arange(s) for s in self.mlps.shape)).tolist()]
        return sorted(out, key=lambda kv: -kv[1])

    def select(self, min_share: float) -> list[Node]:
        """Components recovering at least ``min_share`` of the gap, largest first."""
        return [node for node, share in self.items() if share >= min_share]

    def to_dict(self) -> dict[str, Any]:
        return {"clean_metric": self.clean, "corrupted_metric": self.corrupted,
                "top": [{"node": n.name, "share": round(s, 4)} for n, s in self.items()[:20]]}


@torch.no_grad()
def node_patch_scores(model: Any, clean: Any, corrupted: Any, metric: str | Metric) -> ComponentScores:
    """Denoising node patching of every head and MLP at every position, as gap shares."""
    metric = get_metric(metric)
    m_clean = float(evaluate_metric(metric, run_model(model, clean), clean))
    m_corrupt = float(evaluate_metric(metric, run_model(model, corrupted), clean))
    gap = m_clean - m_corrupt
    if abs(gap) < 1e-9:
        raise ValueError("clean and corrupted runs give the same metric: nothing to attribute")
    heads = (patch_sweep(model, clean, corrupted, metric, "z") - m_corrupt) / gap
    mlps = None
    if not getattr(model.cfg, "attn_only", False):
        mlps = (patch_sweep(model, clean, corrupted, metric, "mlp_out") - m_corrupt) / gap
    return ComponentScores(heads, mlps, m_clean, m_corrupt)


def all_components(model: Any, n_positions: int) -> list[Node]:
    """Every head and MLP at every position."""
    cfg = model.cfg
    nodes = [Node("head", l, h, p) for l in range(cfg.n_layers) for p in range(n_positions)
             for h in range(cfg.n_heads)]
    if not getattr(cfg, "attn_only", False):
        nodes += [Node("mlp", l, None, p) for l in range(cfg.n_layers) for p in range(n_positions)]
    return nodes


def random_controls(model: Any, nodes: list[Node], n_positions: int, n_draws: int,
                    generator: torch.Generator) -> list[list[Node]]:
    """``n_draws`` random sets of components outside ``nodes``, one per node at the same
    position (of any kind), so a control ablates as much of each position as the circuit does.
    Falls back to any position where a position has no component left."""
    chosen = set(nodes)
    pool = [n for n in all_components(model, n_positions) if n not in chosen]
    draws = []
    for _ in range(n_draws):
        taken: set[Node] = set()
        draw = []
        for node in nodes:
            same = [n for n in pool if n.position == node.position and n not in taken]
            options = same or [n for n in pool if n not in taken]
            pick = options[int(torch.randint(len(options), (1,), generator=generator))]
            taken.add(pick)
            draw.append(pick)
        draws.append(draw)
    return draws


@torch.no_grad()
def correct_under_ablation(model: Any, batch: Any, nodes: list[Node], ablation: Ablation,
                           reference: Any = None) -> Tensor:
    """``[batch, n_answer]`` bool: answer right with ``nodes`` ablated, decoded as the batch's
    targets say (:func:`~interp_rand.losses.decoding_for_targets`: the argmax class for the
    class targets of addition and sort, every bit for bit targets).

    ``mean`` ablation takes its means over ``reference`` (default: ``batch``)."""
    if nodes:
        with ablate_nodes(model, nodes, ablation, batch, reference=reference):
            logits = run_model(model, batch)
    else:
        logits = run_model(model, batch)
    return decoding_for_targets(batch.targets).correct(answer_logits(logits, batch), batch.answer_targets())


__all__ = ["ComponentScores", "all_components", "correct_under_ablation", "node_patch_scores", "random_controls"]
