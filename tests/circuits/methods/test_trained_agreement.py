"""On a (briefly) trained sort model, exact path patching and EAP-IG agree in ranking, and a
top-k EAP-IG circuit recovers much of the clean-corrupted gap. The full-size figures (2-layer,
4-head sort and addition models on 256 examples) come from bench/circuits_bench.py."""

import pytest
import torch

from circuits import agreement, discover, faithfulness
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train


@pytest.mark.slow
def test_exact_and_eap_ig_rank_edges_alike_on_a_trained_model(tmp_path):
    task = make_task("sort", length=3, vocab=5)
    result = train(task, task.model_config(d_model=32, n_heads=2, d_mlp=64),
                   TrainConfig(steps=300, batch_size=64, lr=3e-3, eval_every=300, eval_size=128),
                   tmp_path / "run", progress=False)
    assert result.last_eval.exact_match > 0.5  # it learned something
    model = result.model.eval()
    g = torch.Generator().manual_seed(0)
    pairs = task.corrupt(task.sample(64, g), g)
    exact = discover(model, pairs.clean, pairs.corrupted, method="exact")
    ig = discover(model, pairs.clean, pairs.corrupted, method="eap-ig", steps=5)
    eap = discover(model, pairs.clean, pairs.corrupted, method="eap")
    by_size = agreement(ig.values().abs(), exact.values().abs(), k=10)
    assert by_size.spearman > 0.8
    assert by_size.top_k_overlap >= 0.6
    assert agreement(ig.values(), exact.values()).spearman > 0.5
    assert agreement(eap.values().abs(), exact.values().abs()).spearman > 0.8
    top = faithfulness(model, ig.circuit(top_k=ig.graph.n_edges // 5), pairs.clean, pairs.corrupted)
    assert top.recovered > 0.5
