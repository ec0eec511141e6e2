"""ACDC-style threshold search (Conmy et al. 2023), on exact edge patching.

Start from the full graph on the clean run. Visit readers from the logits backwards (reverse
topological order); for each incoming edge, ablate it on top of the edges removed so far and
keep the removal when the metric moves by less than ``threshold``. An edge's score is the
signed change its removal caused when it was tested (``metric(with) − metric(without)``), so
``|score| >= threshold`` is exactly the set ACDC kept. A query or MLP input whose node has no
kept outgoing edge at that position, or a key/value input of a head with no kept outgoing edge
anywhere, cannot affect the output; its edges are removed without a forward pass (score 0).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.interventions.edge_patching import run_with_edges
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import Metric, evaluate_metric
from interp_rand.progress import bar


def acdc_scores(
    model: Any, graph: ModelGraph, clean: Any, replacement: Tensor, metric: Metric, threshold: float = 0.01,
    progress: bool = False,
) -> Tensor:
    """Scores ``[n_slots, n_writers, n_readers]``; ``threshold_mask(threshold)`` is ACDC's circuit."""
    if threshold < 0:
        raise ValueError(f"ACDC threshold={threshold} must be >= 0")
    keep = graph.mask.clone()
    scores = torch.zeros(graph.shape)
    with torch.no_grad():
        current = float(evaluate_metric(metric, run_model(model, clean), clean))
    writer_of = {n.at(None): i for i, n in enumerate(graph.writers)}
    for r in bar(range(len(graph.readers) - 1, -1, -1), desc="ACDC: pruning the inputs of each node",
                 enabled=progress):
        node, which = graph.readers[r]
        w_out = writer_of.get(node)
        for slot in range(graph.n_slots):
            # This input cannot reach the output: a query or MLP input whose node writes nothing
            # kept at this slot, or a key/value input of a head that writes nothing kept at all.
            if w_out is not None:
                alive = keep[slot, w_out].any() if which in ("q", "mlp") else keep[:, w_out].any()
            if w_out is not None and not alive:
                keep[slot, :, r] = False
                continue
            for w in reversed(graph.valid[:, r].nonzero()[:, 0].tolist()):
                keep[slot, w, r] = False
                value = float(evaluate_metric(metric, run_with_edges(model, graph, clean, keep, replacement), clean))
                change = current - value
                if abs(change) < threshold:
                    current = value
                    scores[slot, w, r] = change
                else:
                    keep[slot, w, r] = True
                    scores[slot, w, r] = change if change != 0 else threshold
    return scores


__all__ = ["acdc_scores"]
