"""PatchRun's block path after a commit: the incremental run's capture serves the block path as
its unpatched forward (:class:`CleanRun`) only until a commit turns the capture into the committed
run (:meth:`IncrementalRun.commit` writes into it in place); from then on the block path's
:meth:`PatchRun.clean` is a fresh unpatched forward, made once."""

import dataclasses

import torch
from circuit_models import make_model, token_pairs

from circuits import ModelGraph, run_with_edges, writer_values
from circuits.graph.architecture import run_model
from circuits.interventions.batched_patching import PatchRun, clean_run


def _case():
    """A model with an input MLP (its readers are on the block path) and an appended seed."""
    model = make_model(d_seed=3, seed_mode="append", d_input_mlp=16, n_ctx=7)
    clean, corrupted = token_pairs()
    g = torch.Generator().manual_seed(5)
    clean = dataclasses.replace(clean, seeds=torch.randn(len(clean), 3, generator=g))
    corrupted = dataclasses.replace(corrupted, seeds=torch.randn(len(clean), 3, generator=g))
    graph = ModelGraph.of(model, clean.inputs.shape[1])
    return model, graph, clean, writer_values(model, graph, corrupted)


def test_a_commit_renews_the_block_path_s_unpatched_forward():
    model, graph, clean, replacement = _case()
    run = PatchRun(model, graph, clean, replacement)
    unpatched = run_model(model, clean)
    fresh = clean_run(model, graph, clean)
    # before a commit the capture is the unpatched forward, reused (no second forward)
    assert run.clean().logits is run.incremental.logits and run.clean().writers is run.incremental.live
    torch.testing.assert_close(run.clean().logits, unpatched, atol=1e-5, rtol=0)

    # commit the ablation of one edge into head 1.0's query (the incremental path)
    keep = graph.mask.clone()
    head_q = next(s for s in graph.reader_sites if s.layer == 1 and s.input == "q").readers.start
    writer = int(graph.mask[2, :, head_q].nonzero()[0, 0])
    assert int(run.stage_of[head_q]) >= 0
    updates = []
    run.evaluate(torch.tensor([0]), torch.tensor([2]), torch.tensor([writer]), torch.tensor([head_q]), keep, updates)
    run.commit(updates, 0)
    keep[2, writer, head_q] = False
    torch.testing.assert_close(run.logits, run_with_edges(model, graph, clean, keep, replacement), atol=1e-5, rtol=0)
    assert not torch.allclose(run.logits, unpatched, atol=1e-4)  # the capture is the committed run now

    # the block path's clean run is the unpatched forward again, made once
    renewed = run.clean()
    torch.testing.assert_close(renewed.logits, unpatched, atol=1e-5, rtol=0)
    assert renewed is run.clean() and renewed.logits is not run.incremental.logits
    torch.testing.assert_close(renewed.writers, fresh.writers, atol=1e-5, rtol=0)
    for got, want in zip(renewed.resid, fresh.resid, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

    # and a block-path candidate (an input-MLP reader) on top of the committed set is its reference
    r = next(s for s in graph.reader_sites if s.layer is None and s.input != "logits").readers.start
    assert int(run.stage_of[r]) < 0
    w = int(graph.valid[:, r].nonzero()[0, 0])
    then = keep.clone()
    then[0, w, r] = False
    logits = run.evaluate(torch.tensor([0]), torch.tensor([0]), torch.tensor([w]), torch.tensor([r]), keep)
    torch.testing.assert_close(logits[0], run_with_edges(model, graph, clean, then, replacement), atol=1e-5, rtol=1e-5)
