"""Checked against TransformerLens 4.x itself.

* EAP: TL's ``attribution_patch`` refuses edge granularity on a ``boot_native`` bridge
  (its ``AttentionBridge`` cannot turn on the per-head ``use_attn_result`` hook), so we compare
  at the granularity TL does run: each writer's summed outgoing EAP edge scores equal TL's node
  scores (both are ``Δactivation · ∂metric/∂activation``, the node score contracted at the
  writer, ours split over its readers).
* Node patching sweeps equal ``transformer_lens.patching``'s.
"""

import pytest
import torch
from circuit_models import token_pairs
from transformer_lens import patching as tl_patching
from transformer_lens.tools.analysis.attribution_patching import (
    EdgeAttributionConfig,
    attribution_patch,
)

from circuits import ModelGraph, Node, agreement, discover, eap_scores, patch_sweep


def _tl_metric(targets):
    """TL calls ``metric_fn`` on one example at a time (clean, then corrupted, per pair)."""
    calls = [0]

    def metric(logits):
        i = calls[0] // 2
        calls[0] += 1
        return torch.log_softmax(logits[0, -1], -1)[targets[i]]

    return metric


def _our_metric(logits, batch):
    target = batch.targets[:, -1]
    return torch.log_softmax(logits[:, -1], -1).gather(-1, target[:, None]).mean()


def _tl_node(node):
    kinds = {"embed": "embed", "attn_head_out": "head", "mlp_out": "mlp"}
    return Node(kinds[node.kind], node.layer, node.head, node.position)


@pytest.mark.parametrize("on", ["ours", "bridge"])
def test_eap_matches_transformer_lens_attribution_patch(model, bridge, on):
    clean, corrupted = token_pairs(n=12, seed=3)
    ours_model = model if on == "ours" else bridge
    graph = ModelGraph.of(ours_model, clean.inputs.shape[1])
    scores = eap_scores(ours_model, graph, clean.inputs, corrupted.inputs, lambda l, _b: _our_metric(l, clean))
    tl = attribution_patch(bridge, clean.inputs, corrupted.inputs, _tl_metric(clean.targets[:, -1]),
                           EdgeAttributionConfig(granularity="node"))
    theirs, mine = [], []
    for node, value in tl.node_scores.items():
        ours_node = _tl_node(node)
        theirs.append(value)
        mine.append(float(scores[ours_node.position, graph.writer_index(ours_node)].sum()))
    theirs, mine = torch.tensor(theirs), torch.tensor(mine)
    assert len(theirs) == 6 * (1 + 2 * 3)  # positions x (embed + per layer 2 heads + MLP)
    assert theirs.abs().max() > 1e-3  # a real signal, not all zeros
    result = agreement(mine, theirs, k=20)
    assert result.pearson >= 0.999
    assert result.top_k_overlap == 1.0
    torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-4)


def test_discover_eap_measures_the_clean_answer_like_tl(model, bridge):
    """The corrupted batch carries other targets; the metric must read the clean ones."""
    clean, corrupted = token_pairs(n=10, seed=4)
    assert not torch.equal(clean.targets, corrupted.targets)
    scores = discover(model, clean, corrupted, metric="logprob", method="eap")
    tl = attribution_patch(bridge, clean.inputs, corrupted.inputs, _tl_metric(clean.targets[:, -1]),
                           EdgeAttributionConfig(granularity="node"))
    mine = [float(scores.scores[n.position, scores.graph.writer_index(_tl_node(n))].sum()) for n in tl.node_scores]
    torch.testing.assert_close(torch.tensor(mine), torch.tensor(list(tl.node_scores.values())), atol=1e-6, rtol=1e-4)


def test_tl_edge_attribution_is_unavailable_on_boot_native_bridges(bridge, pairs):
    """Documents why the comparison above is at node level; if TL starts supporting it, this
    fails and the edge-level comparison should be added."""
    clean, corrupted = pairs
    with pytest.raises(NotImplementedError, match="use_attn_result"):
        attribution_patch(bridge, clean.inputs, corrupted.inputs, _tl_metric(clean.targets[:, -1]),
                          EdgeAttributionConfig(granularity="edge"))


@pytest.mark.parametrize("on", ["ours", "bridge"])
@pytest.mark.parametrize(
    "activation,by_position,tl_fn",
    [
        ("z", True, tl_patching.get_act_patch_attn_head_out_by_pos),
        ("z", False, tl_patching.get_act_patch_attn_head_out_all_pos),
        ("v", True, tl_patching.get_act_patch_attn_head_v_by_pos),
        ("resid_pre", True, tl_patching.get_act_patch_resid_pre),
        ("mlp_out", True, tl_patching.get_act_patch_mlp_out),
    ],
)
def test_node_patching_matches_transformer_lens(model, bridge, pairs, on, activation, by_position, tl_fn):
    clean, corrupted = pairs
    m = model if on == "ours" else bridge
    metric = lambda logits, _batch=None: _our_metric(logits, clean)
    ours = patch_sweep(m, clean, corrupted, metric, activation, by_position=by_position, chunk=5)
    _, cache = m.run_with_cache(clean.inputs)
    theirs = tl_fn(m, corrupted.inputs, cache, metric)
    assert ours.shape == theirs.shape
    assert ours.std() > 0
    torch.testing.assert_close(ours, theirs.float(), atol=1e-5, rtol=1e-5)
