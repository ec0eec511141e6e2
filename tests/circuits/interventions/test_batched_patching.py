"""Batched exact edge patching and the batched ACDC search against their one-forward-per-edge
references (``exact_edge_scores``, ``acdc_scores_sequential``): on our models and a
TransformerBridge, with and without position-resolved edges, with a seed channel, an input MLP
and the hand-set recall model (vector inputs, an appended seed, no positional embedding)."""

import dataclasses

import pytest
import torch
from circuit_models import make_model, micro_model, micro_pairs, recall_path_model, token_pairs

from circuits import Ablation, ModelGraph, discover, run_with_edges, writer_values
from circuits.graph.architecture import run_model
from circuits.interventions.batched_patching import (
    PatchRun,
    batched_edge_scores,
    clean_run,
    MAX_ROWS,
    copies_per_forward,
    run_with_edge_sets,
)
from circuits.interventions.edge_patching import exact_edge_scores
from circuits.interventions.incremental_run import IncrementalRun
from circuits.interventions.metrics import evaluate_metric, logprob
from circuits.methods.acdc import acdc_scores, acdc_scores_sequential
from interp_rand.model.bridge import to_bridge


def _pairs(n_pos):
    """Token pairs over ``n_pos`` positions, corrupted at position 2 (1 when there are only 3)."""
    return token_pairs(n_pos=n_pos, changed=min(2, n_pos - 2))


def _seeded(seed_mode, n_pos, d_input_mlp=0):
    model = make_model(d_seed=3, seed_mode=seed_mode, d_input_mlp=d_input_mlp, n_ctx=n_pos + 1)
    clean, corrupted = _pairs(n_pos)
    g = torch.Generator().manual_seed(5)
    return (model, dataclasses.replace(clean, seeds=torch.randn(len(clean), 3, generator=g)),
            dataclasses.replace(corrupted, seeds=torch.randn(len(clean), 3, generator=g)))


def _recall(n_pos):
    """The hand-set recall model; its task fixes the positions (``n_pos`` is not used)."""
    task, model = recall_path_model()
    g = torch.Generator().manual_seed(0)
    pairs = task.corrupt(task.sample(16, g), g)
    return model, pairs.clean, pairs.corrupted


def _masked(n_pos):
    """Per-example attention masks (``mask="custom"``), one query of one example attending nothing."""
    model = make_model(mask="custom", n_ctx=n_pos)
    clean, corrupted = _pairs(n_pos)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(len(clean), n_pos, n_pos, generator=g) < 0.6
    mask |= torch.eye(n_pos, dtype=torch.bool)
    mask[0, 2] = False
    return (model, dataclasses.replace(clean, attention_mask=mask), dataclasses.replace(corrupted, attention_mask=mask))


# each case builds its model and clean/corrupted pairs for ``n_pos`` token positions
CASES = {
    "plain": lambda n_pos: (make_model(n_ctx=n_pos), *_pairs(n_pos)),
    "linear-full": lambda n_pos: (make_model(attention="linear", mask="full", n_ctx=n_pos), *_pairs(n_pos)),
    "softmax-custom-mask": _masked,
    "alibi": lambda n_pos: (make_model(positional="alibi", n_ctx=n_pos), *_pairs(n_pos)),
    "digit-index": lambda n_pos: (make_model(positional="digit_index", digit_tokens=3, n_ctx=n_pos), *_pairs(n_pos)),
    "full-attn-only-no-ln": lambda n_pos: (make_model(mask="full", attn_only=True, normalization_type=None, n_layers=3,
                                                      n_ctx=n_pos), *_pairs(n_pos)),
    "seed-token": lambda n_pos: _seeded("token", n_pos),
    "seed-add+input-mlp": lambda n_pos: _seeded("add", n_pos, d_input_mlp=8),
    "seed-append+input-mlp": lambda n_pos: _seeded("append", n_pos, d_input_mlp=8),
    "recall-paths": _recall,
}

# The grids against the one-forward-per-edge references use 3 positions: a reference costs a
# forward per edge, and position-resolved edges grow with the positions (the answer, at the
# last position, still reads the corrupted position 1 through attention).
GRID_POSITIONS = 3


def _case(name, on="ours", n_pos=6):
    model, clean, corrupted = CASES[name](n_pos)
    if on == "bridge":  # a bridge takes plain token tensors; the metric reads the clean targets
        return to_bridge(model), clean.inputs, corrupted.inputs, lambda logits, _b: logprob(logits, clean)
    return model, clean, corrupted, logprob


def _n_pos(batch):
    return (batch if isinstance(batch, torch.Tensor) else batch.inputs).shape[1]


@pytest.mark.parametrize("by_position", [True, False])
@pytest.mark.parametrize("name,on", [("plain", "ours"), ("plain", "bridge"), ("seed-token", "ours"),
                                     ("seed-append+input-mlp", "ours"), ("recall-paths", "ours")])
def test_each_copy_is_its_own_patched_run(name, on, by_position):
    model, clean, corrupted, _ = _case(name, on)
    graph = ModelGraph.of(model, _n_pos(clean), by_position)
    replacement = writer_values(model, graph, corrupted)
    g = torch.Generator().manual_seed(1)
    keeps = torch.rand((5, *graph.shape), generator=g) < torch.tensor([1.0, 0.9, 0.5, 0.1, 0.0])[:, None, None, None]
    # a copy whose only ablated edges go into the last layer's readers and the logits
    late = graph.mask.clone()
    late[..., graph.reader_sites[-2].readers.start:] &= torch.rand(late[..., graph.reader_sites[-2].readers.start:].shape,
                                                                  generator=g) < 0.5
    keeps = torch.cat([keeps, late[None]])
    for cache in (None, clean_run(model, graph, clean)):
        batched = run_with_edge_sets(model, graph, clean, keeps, replacement, cache)
        for e in range(len(keeps)):
            one = run_with_edges(model, graph, clean, keeps[e], replacement)
            torch.testing.assert_close(batched[e], one, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(batched[0], batched[-2], atol=1e-3)  # the masks do differ in effect


def test_the_forward_starts_at_the_first_patched_block():
    model, clean, corrupted, _ = _case("plain")
    graph = ModelGraph.of(model, 6)
    replacement = writer_values(model, graph, corrupted)
    cache = clean_run(model, graph, clean)
    calls = []
    hooks = [(f"blocks.{l}.hook_resid_pre", lambda v, hook, l=l: calls.append(l)) for l in range(2)]
    keep = graph.mask.clone()
    keep[:, :, graph.reader_index(*graph.readers[-1])] = False  # ablate every edge into the logits
    with model.hooks(fwd_hooks=hooks):
        run_with_edge_sets(model, graph, clean, keep[None], replacement, cache)
        assert calls == []  # only the final LayerNorm and unembedding ran
        keep[:, :, graph.reader_sites[-2].readers] = False  # and into the last block's MLP
        run_with_edge_sets(model, graph, clean, keep[None], replacement, cache)
        assert calls == [1]
        run_with_edge_sets(model, graph, clean, keep[None], replacement)  # no cache: the whole forward
        assert calls == [1, 0, 1]


# Every case (and the bridge) against its reference, on both paths (incremental True/False) and
# both graphs (by_position True/False): four checks per case, each with one batching regime.
GRID = [(name, "ours") for name in CASES] + [("plain", "bridge")]


def _regime(regimes, k, by_position, incremental):
    """Case ``k``'s batching regime for one of its four checks, so that each case meets all
    three of ``regimes`` = (one copy per forward, a few, as many as fit). One copy per forward,
    the costliest, goes with the node-level graph (one slot, not one per position), on the
    incremental path for even cases and the block path for odd ones; the other two, swapped
    along the cases, take the rest."""
    one, few, fit = regimes
    first = incremental == (k % 2 == 0)
    if by_position:
        return few if first else fit
    return one if first else (few if k % 2 == 0 else fit)


def _where(**what):
    return lambda message: f"{message}\n({', '.join(f'{k}={v}' for k, v in what.items())})"


@pytest.mark.parametrize("k,name,on", [(k, name, on) for k, (name, on) in enumerate(GRID)],
                         ids=[f"{name}-{on}" for name, on in GRID])
def test_batched_exact_scores_equal_the_one_edge_reference(k, name, on):
    model, clean, corrupted, metric = _case(name, on, GRID_POSITIONS)
    for by_position in (True, False):
        graph = ModelGraph.of(model, _n_pos(clean), by_position)
        replacement = writer_values(model, graph, corrupted)
        reference = exact_edge_scores(model, graph, clean, replacement, metric)  # shared by both paths
        assert reference.abs().max() > 1e-3
        for incremental in (True, False):
            max_batch = _regime((1, 7, None), k, by_position, incremental)
            fast = batched_edge_scores(model, graph, clean, replacement, metric, max_batch=max_batch,
                                       incremental=incremental)
            where = _where(by_position=by_position, incremental=incremental, max_batch=max_batch)
            torch.testing.assert_close(fast, reference, atol=1e-5, rtol=0, msg=where)


def test_discover_exact_is_the_reference_in_its_denoising_form():
    model, clean, corrupted, _ = _case("plain", n_pos=GRID_POSITIONS)
    scores = discover(model, clean, corrupted, metric="logprob", method="exact")
    graph = scores.graph
    reference = exact_edge_scores(model, graph, corrupted, writer_values(model, graph, clean), logprob, clean)
    torch.testing.assert_close(scores.scores, reference, atol=1e-5, rtol=0)


# A threshold that keeps some edges and drops others, per case, on both graphs (the
# attention-only model's edges are weaker); threshold 0 (no removal accepted, its own branch of
# the search) on two cases.
ACDC_THRESHOLDS = {"full-attn-only-no-ln": 0.003}
ACDC_GRID = [(name, on, ACDC_THRESHOLDS.get(name, 0.02)) for name, on in GRID]
ACDC_GRID += [(name, on, 0.0) for name, on in GRID if name in ("plain", "recall-paths") and on == "ours"]


@pytest.mark.parametrize("k,name,on,threshold", [(k, *row) for k, row in enumerate(ACDC_GRID)],
                         ids=[f"{name}-{on}-{threshold}" for name, on, threshold in ACDC_GRID])
def test_batched_acdc_keeps_the_sequential_search_s_edges(k, name, on, threshold):
    model, clean, corrupted, metric = _case(name, on, GRID_POSITIONS)
    for by_position in (True, False):
        graph = ModelGraph.of(model, _n_pos(clean), by_position)
        replacement = Ablation("resample").replacement(model, graph, clean, corrupted)
        reference = acdc_scores_sequential(model, graph, clean, replacement, metric, threshold)  # both paths'
        kept = reference.abs() >= threshold
        if threshold > 0:  # the search keeps some edges and drops others
            assert 0 < int(kept.sum()) < graph.n_edges, (by_position, int(kept.sum()))
        for incremental in (True, False):
            max_batch = _regime((1, 3, None), k, by_position, incremental)
            where = _where(by_position=by_position, incremental=incremental, max_batch=max_batch)
            fast = acdc_scores(model, graph, clean, replacement, metric, threshold, max_batch=max_batch,
                               incremental=incremental)
            assert torch.equal(fast.abs() >= threshold, kept), where("kept sets differ")
            torch.testing.assert_close(fast, reference, atol=1e-5, rtol=0, msg=where)


@pytest.mark.parametrize("zoo,by_position", [("sort", False), ("addition", False), ("coloring-Aq_R", True),
                                             ("recall-Aq_R", True)])
def test_the_incremental_paths_equal_the_references_on_the_zoo_models(zoo, by_position):
    """The zoo's trained models in the denoising form discovery uses: sort and addition (causal
    softmax with MLPs), the randomized colouring model (seed channel, per-example masks, no
    LayerNorm) and the randomized recall model (linear attention, a seed appended before an
    input MLP, whose edges take the general path). Sort and addition on the node-level graph
    (their 1,100 and 1,210 position-resolved edges cost a single-edge forward each in the
    reference, ~20 s; position-resolved edges are checked on every case above), the two
    randomized models position-resolved."""
    from circuits.interventions.metrics import get_metric
    from circuits.methods.discovery import patch_data
    from interp_rand.reports.inputs import load_run_inputs

    run = load_run_inputs(f"zoo:{zoo}", n=2, seed=3, pairs="task")  # two examples: fewer rows per batched forward
    model, clean, corrupted = run.model, run.pairs.clean, run.pairs.corrupted
    graph = ModelGraph.of(model, _n_pos(clean), by_position)
    data = patch_data(model, graph, clean, corrupted, Ablation("resample"))
    metric = get_metric("logprob")
    clean_writers = writer_values(model, graph, clean)
    reference = exact_edge_scores(model, graph, data.source, clean_writers, metric, clean)
    assert reference.abs().max() > 1e-2
    fast = batched_edge_scores(model, graph, data.source, clean_writers, metric, clean)
    torch.testing.assert_close(fast, reference, atol=1e-5, rtol=0)
    # a search that keeps some edges and drops most: the 90th percentile of the edges' own effects
    # in the search with nothing removed (threshold 0), among those that have one (on these two
    # recall examples most edges score exactly 0 and the exact scores sit on another scale)
    alone = acdc_scores_sequential(model, graph, clean, data.replacement, metric, 0.0)[graph.mask].abs()
    threshold = float(alone[alone > 0].quantile(0.9))
    reference = acdc_scores_sequential(model, graph, clean, data.replacement, metric, threshold)
    kept = reference.abs() >= threshold
    assert 0 < int(kept.sum()) < graph.n_edges
    fast = acdc_scores(model, graph, clean, data.replacement, metric, threshold)
    assert torch.equal(fast.abs() >= threshold, kept)
    torch.testing.assert_close(fast, reference, atol=1e-5, rtol=0)


def test_the_incremental_run_is_ours_only_and_a_bridge_takes_the_general_path():
    model, clean, corrupted, metric = _case("plain", "bridge")
    graph = ModelGraph.of(model, 6)
    assert not IncrementalRun.supports(model) and IncrementalRun.supports(make_model())
    with pytest.raises(TypeError, match="HookedTransformer"):
        IncrementalRun(model, graph, clean, writer_values(model, graph, corrupted))


def test_a_committed_copy_is_the_patched_run_of_its_keep_mask():
    """After :meth:`IncrementalRun.commit`, the run is the patched forward of the committed keep
    mask: a further edge change evaluated from it equals a fresh patched run of both changes."""
    model, clean, corrupted, _ = _case("softmax-custom-mask")
    graph = ModelGraph.of(model, 6)
    replacement = writer_values(model, graph, corrupted)
    run = IncrementalRun(model, graph, clean, replacement)
    keep = graph.mask.clone()
    head_v = next(s for s in graph.reader_sites if s.layer == 1 and s.input == "v").readers.start  # head 1.0's v
    first = [(2, 0, head_v), (3, 1, head_v)]  # edges into one reader at two positions
    stage = int(run.stage_of[head_v])
    slot, writer, reader = torch.tensor(first).T
    updates = []
    pos, dx, aff = run.edge_inputs(stage, torch.zeros(2, dtype=torch.long), slot, writer, reader)
    run.propagate(stage, pos, dx, aff, keep, updates)
    run.commit(updates, 0)
    for s_, w_, r_ in first:
        keep[s_, w_, r_] = False
    # then an edge into the logits and one into the last MLP, each on top of the committed set
    for edge in [(4, 1, len(graph.readers) - 1), (5, 3, graph.reader_sites[-2].readers.start)]:
        then = keep.clone()
        then[edge] = False
        stage = int(run.stage_of[edge[2]])
        pos, dx, aff = run.edge_inputs(stage, torch.zeros(1, dtype=torch.long), *torch.tensor([edge]).T)
        logits = run.propagate(stage, pos, dx, aff, keep)[0]
        torch.testing.assert_close(logits, run_with_edges(model, graph, clean, then, replacement), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(run.logits, run_with_edges(model, graph, clean, keep, replacement), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(run.logits, run_model(model, clean), atol=1e-3)


def test_one_mask_on_the_batched_hooks_is_the_single_mask_run_bitwise():
    """patched_edges and run_with_edge_sets are one engine (edge_patching.edge_hooks): a single
    mask batched, over the whole forward, is the single-mask run to the bit."""
    model, clean, corrupted, _ = _case("seed-append+input-mlp")
    graph = ModelGraph.of(model, _n_pos(clean))
    replacement = writer_values(model, graph, corrupted)
    keep = torch.rand(graph.shape, generator=torch.Generator().manual_seed(1)) < 0.7
    assert torch.equal(run_with_edge_sets(model, graph, clean, keep[None], replacement)[0],
                       run_with_edges(model, graph, clean, keep, replacement))


def test_the_patch_run_s_two_paths_agree_and_a_commit_renews_the_block_path_s_clean_run():
    """PatchRun evaluates a candidate on the incremental path (our model) or the block path
    (incremental=False) with the same answer; after a commit, the block path of the committed
    run still starts from the unpatched forward (the reference of its keep mask)."""
    model, clean, corrupted, _ = _case("seed-append+input-mlp")
    graph = ModelGraph.of(model, _n_pos(clean))
    replacement = writer_values(model, graph, corrupted)
    inc, block = PatchRun(model, graph, clean, replacement), PatchRun(model, graph, clean, replacement, False)
    assert inc.incremental is not None and block.incremental is None
    keep = graph.mask.clone()
    head_q = next(s for s in graph.reader_sites if s.layer == 1 and s.input == "q").readers.start
    # copy 0 ablates one edge into head 1.0's query, copy 1 two (at two positions)
    ws = graph.mask[2, :, head_q].nonzero()[:, 0]  # its writers (the input MLP, block 0's heads and MLP)
    copy, slot, writer = torch.tensor([0, 1, 1]), torch.tensor([2, 2, 3]), torch.stack([ws[0], ws[-1], ws[-1]])
    reader = torch.full_like(copy, head_q)
    assert graph.mask[slot, writer, reader].all()
    updates = []
    a = inc.evaluate(copy, slot, writer, reader, keep, updates)
    b = block.evaluate(copy, slot, writer, reader, keep)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for e in range(2):
        then = keep.clone()
        then[slot[copy == e], writer[copy == e], head_q] = False
        torch.testing.assert_close(a[e], run_with_edges(model, graph, clean, then, replacement), atol=1e-5, rtol=1e-5)
    inc.commit(updates, 1)
    keep[slot[copy == 1], writer[copy == 1], head_q] = False
    # an input-MLP reader: the block path, from a fresh unpatched run (the capture is the committed run now)
    r = next(s for s in graph.reader_sites if s.layer is None and s.input != "logits").readers.start
    assert int(inc.stage_of[r]) < 0
    w = int(graph.valid[:, r].nonzero()[0, 0])
    then = keep.clone()
    then[0, w, r] = False
    logits = inc.evaluate(torch.zeros(1, dtype=torch.long), torch.tensor([0]), torch.tensor([w]), torch.tensor([r]), keep)
    torch.testing.assert_close(logits[0], run_with_edges(model, graph, clean, then, replacement), atol=1e-5, rtol=1e-5)


def test_batched_acdc_recovers_the_micro_circuit():
    model = micro_model()
    clean, corrupted = micro_pairs()
    scores = discover(model, clean, corrupted, metric="logit_diff", method="acdc", threshold=0.5)
    graph = scores.graph
    replacement = writer_values(model, graph, corrupted)
    from circuits.interventions.metrics import logit_diff

    reference = acdc_scores_sequential(model, graph, clean, replacement, logit_diff, 0.5)
    assert torch.equal(scores.scores.abs() >= 0.5, reference.abs() >= 0.5)
    assert int((reference.abs() >= 0.5).sum()) == 3


def test_copies_per_forward_follows_the_budget():
    model = make_model()
    graph = ModelGraph.of(model, 6)
    small, large = (copies_per_forward(graph, model, 16, budget) for budget in (2**18, 2**30))
    assert 1 <= small < large
    assert large == MAX_ROWS // 16  # the row cap
    assert copies_per_forward(graph, model, 64, 2**30, max_batch=3) == 3
    assert copies_per_forward(graph, model, 10**9, 1) == 1
    with pytest.raises(ValueError, match="max_batch"):
        copies_per_forward(graph, model, 64, max_batch=0)


def test_a_keep_mask_of_the_wrong_shape_is_refused():
    model, clean, corrupted, _ = _case("plain")
    graph = ModelGraph.of(model, 6)
    with pytest.raises(ValueError, match="keep masks"):
        run_with_edge_sets(model, graph, clean, graph.mask, writer_values(model, graph, corrupted))
