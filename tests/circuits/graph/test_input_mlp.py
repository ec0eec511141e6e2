"""Models with an input MLP and an appended seed (the recall task's): the input MLP is a node of
the graph, the embedding and an appended seed feed only it, and ablation, edge patching, EAP,
discovery, faithfulness and the randomness-usage score all go through the same code paths."""

import dataclasses

import pytest
import torch
from circuit_models import make_model, recall_path_model, token_pairs
from seeded_models import recall_model, seed_path_model

from circuits import (
    Ablation,
    Circuit,
    Edge,
    ModelGraph,
    Node,
    ablate_nodes,
    architecture,
    discover,
    faithfulness,
    randomness_usage,
    run_with_edges,
)
from circuits.graph.architecture import run_model
from circuits.analyses.randomness import answer_distribution, answers, total_variation


def _recall_pairs(task, n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return task.corrupt(task.sample(n, g), g)


def _seeded_token_model(seed_mode):
    model = make_model(d_seed=3, seed_mode=seed_mode, d_input_mlp=8, n_ctx=7)
    clean, corrupted = token_pairs()
    seeds = torch.randn(len(clean), 3, generator=torch.Generator().manual_seed(5))
    return model, dataclasses.replace(clean, seeds=seeds), dataclasses.replace(corrupted, seeds=seeds)


def test_architecture_accepts_the_recall_model_and_wires_the_input_mlp():
    task, model = recall_model(zero_seed=False)
    arch = architecture(model)
    assert arch.has_input_mlp and arch.seed_append and arch.has_seed and arch.seed_offset == 0
    graph = ModelGraph.of(model, task.n_ctx)
    assert [n.name for n in graph.writers] == ["embed", "seed", "input_mlp", "a0.0", "a1.0"]
    assert graph.readers[0] == (Node("input_mlp"), "mlp")
    w = {n.name: i for i, n in enumerate(graph.writers)}
    # the embedding and the appended seed feed the input MLP and nothing else
    assert graph.valid[w["embed"]].tolist() == graph.valid[w["seed"]].tolist() == [True] + [False] * 7
    assert not graph.valid[w["input_mlp"], 0] and graph.valid[w["input_mlp"], 1:].all()
    with pytest.raises(ValueError, match="only through the input MLP"):
        graph.index(Edge(Node("seed", position=1), Node("head", 0, 0, 1), "v"))
    with pytest.raises(ValueError, match="input MLP reads only embed and seed"):
        graph.index(Edge(Node("input_mlp", position=1), Node("input_mlp", position=1), "mlp"))
    # seed_mode="add": the seed is added after the input MLP and keeps its direct edges
    add = ModelGraph.of(make_model(d_seed=3, seed_mode="add", d_input_mlp=8), 6)
    seed, reader = add.writer_index(Node("seed")), add.reader_index(Node("input_mlp"), "mlp")
    assert not add.valid[seed, reader] and add.valid[seed, reader + 1:].all()


def test_parallel_blocks_are_still_refused():
    class Parallel:
        cfg = dataclasses.make_dataclass("Cfg", [("parallel_attn_mlp", bool, True)])()
        hook_dict = ("hook_embed", "blocks.0.attn.hook_z")

    with pytest.raises(ValueError, match="parallel_attn_mlp"):
        architecture(Parallel())


@pytest.mark.parametrize("seed_mode", ["append", "add", "token"])
@pytest.mark.parametrize("kind", ["resample", "seed-resample", "mean"])
def test_full_graph_is_exact_and_empty_graph_is_the_node_ablated_model(seed_mode, kind):
    model, clean, corrupted = _seeded_token_model(seed_mode)
    graph = ModelGraph.of(model, 6)
    assert graph.n_positions == 6 + (seed_mode == "token")
    ablation = Ablation(kind, seed=1)
    replacement = ablation.replacement(model, graph, clean, corrupted)
    with torch.no_grad():
        clean_logits = run_model(model, clean)
        with ablate_nodes(model, graph.writers, ablation, clean, corrupted):
            node_ablated = run_model(model, clean)
    assert torch.equal(run_with_edges(model, graph, clean, graph.mask, replacement), clean_logits)
    empty = run_with_edges(model, graph, clean, torch.zeros(graph.shape, dtype=torch.bool), replacement)
    torch.testing.assert_close(empty, node_ablated, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(empty, clean_logits, atol=1e-3)
    source = ablation.source_batch(clean, corrupted)
    if source is not None:  # resampling: the empty circuit is the source run itself
        torch.testing.assert_close(empty, run_model(model, source), atol=1e-5, rtol=1e-5)


def test_input_mlp_node_positions_skip_a_seed_token():
    model, clean, _ = _seeded_token_model("token")
    with torch.no_grad():
        base = run_model(model, clean)
        # graph position 0 is the seed token: the input MLP writes nothing there
        with ablate_nodes(model, [Node("input_mlp", position=0)], Ablation("zero"), clean):
            assert torch.equal(run_model(model, clean), base)
        # graph position 3 is task position 2: causal, so task positions 0-1 are untouched
        with ablate_nodes(model, [Node("input_mlp", position=3)], Ablation("zero"), clean):
            patched = run_model(model, clean)
    assert torch.equal(patched[:, :2], base[:, :2]) and (patched[:, 2] - base[:, 2]).abs().max() > 1e-4


@pytest.mark.parametrize("method", ["eap", "eap-ig", "exact", "acdc"])
def test_discovery_scores_the_input_mlp(method):
    task, model = recall_model(zero_seed=False)
    pairs = _recall_pairs(task)
    scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method=method)
    graph = scores.graph
    writer, reader = graph.writer_index(Node("input_mlp")), graph.reader_index(Node("input_mlp"), "mlp")
    assert scores.scores[:, writer].abs().sum() > 0  # input_mlp -> later readers
    assert scores.scores[:, graph.writer_index(Node("embed")), reader].abs().sum() > 0  # embed -> input_mlp
    assert (scores.scores[~graph.mask] == 0).all()
    assert scores.circuit(top_k=10).arch == architecture(model)


def test_seed_resample_scores_start_at_the_seed_and_run_through_the_input_mlp():
    task, model = recall_model(zero_seed=False)
    clean = _recall_pairs(task).clean
    scores = discover(model, clean, metric="logprob", method="eap", ablation=Ablation("seed-resample", seed=1))
    graph = scores.graph
    assert scores.scores[:, graph.writer_index(Node("embed"))].abs().sum() == 0  # same input
    assert scores.scores[:, graph.writer_index(Node("seed"))].abs().sum() > 0
    assert scores.scores[:, graph.writer_index(Node("input_mlp"))].abs().sum() > 0


def test_eap_through_the_input_mlp_is_the_first_order_of_exact_patching():
    """For a tiny corruption (seeds and inputs moved by 1e-4, float64) EAP's linearisation must
    agree with exact single-edge patching, edges into and out of the input MLP included."""
    task, model = recall_model(zero_seed=False)
    model = model.double()
    g = torch.Generator().manual_seed(0)
    batch = task.sample(16, g)
    clean = dataclasses.replace(batch, inputs=batch.inputs.double(), seeds=batch.seeds.double())
    noise = {k: 1e-4 * torch.randn(getattr(clean, k).shape, generator=g, dtype=torch.float64) for k in ("inputs", "seeds")}
    corrupted = dataclasses.replace(clean, inputs=clean.inputs + noise["inputs"], seeds=clean.seeds + noise["seeds"])
    eap = discover(model, clean, corrupted, method="eap").scores
    exact = discover(model, clean, corrupted, method="exact").scores
    top = float(exact.abs().max())
    assert top > 0 and exact[:, :, 0].abs().max() > 0.01 * top  # the input MLP's input matters
    torch.testing.assert_close(eap, exact, atol=1e-3 * top, rtol=0)


# ------------------------------------------------------------------ the hand-set known paths


def test_ablating_everything_off_the_known_paths_keeps_the_output():
    task, model = recall_path_model()
    clean = task.sample(32, torch.Generator().manual_seed(0))
    mean = Ablation("mean")
    graph = ModelGraph.of(model, task.n_ctx)
    with torch.no_grad():
        base = run_model(model, clean)
        assert base[:, 3, 1].std() > 1  # the seed moves bit 1's logit
        with ablate_nodes(model, [Node("head", 0, 1)], mean, clean):  # every node off the paths
            assert torch.equal(run_model(model, clean), base)
        for node, changed in ((Node("head", 0, 0), [1]), (Node("seed"), [1]), (Node("input_mlp"), [0, 1])):
            with ablate_nodes(model, [node], mean, clean):
                diff = (run_model(model, clean) - base)[:, 3].abs().amax(0)
            assert [b for b in range(2) if diff[b] > 0.1] == changed, node.name
    # edge level: keep exactly the known paths into the answer (as edges), ablate every other edge
    n = task.n_ctx
    path = [Edge(Node(k, position=p), Node("input_mlp", position=p), "mlp") for k in ("embed", "seed") for p in range(n)]
    path += [Edge(Node("input_mlp", position=p), Node("head", 0, 0, p), "v") for p in range(n)]
    path += [Edge(Node(k, *a, position=3), Node("logits", position=3), "logits")
             for k, a in (("input_mlp", ()), ("head", (0, 0)))]
    replacement = mean.replacement(model, graph, clean)
    keep = graph.keep_mask(path)
    kept = run_with_edges(model, graph, clean, keep, replacement)
    torch.testing.assert_close(kept[:, 3], base[:, 3], atol=1e-5, rtol=1e-5)
    circuit = Circuit({e: 1.0 for e in path}, graph.arch, {"by_position": True}, graph.n_edges)
    assert faithfulness(model, circuit, clean, ablation=mean).recovered == pytest.approx(1.0, abs=1e-4)
    # cutting the seed's edge into the input MLP breaks bit 1 only
    keep[graph.index(Edge(Node("seed", position=3), Node("input_mlp", position=3), "mlp"))] = False
    diff = (run_with_edges(model, graph, clean, keep, replacement) - base)[:, 3].abs().amax(0)
    assert diff[0] < 1e-5 and diff[1] > 0.1


def test_randomness_usage_of_the_known_paths():
    task, model = recall_path_model()
    batch = task.sample(64, torch.Generator().manual_seed(0))
    usage = randomness_usage(model, batch, task.loss_kind)
    assert list(usage.score) == ["embed", "seed", "input_mlp", "a0.0", "a0.1"]
    assert usage.reference > 0.1
    assert usage.score["embed"] == 0.0 and usage.score["a0.1"] == 0.0
    for name in ("seed", "input_mlp", "a0.0"):
        assert usage.score[name] == pytest.approx(usage.reference, abs=1e-6), name


# ------------------------------------------------------------------ randomness usage, old vs new


def _direct_usage(model, batch, loss_kind, sites, n_pos, n_resamples=2, seed=0):
    """The randomness-usage score computed directly, as circuits.analyses.randomness did before it went
    through the ablation machinery: run the seed-resampled batch, then patch each hook (one
    head / one position) with its value there."""
    with torch.no_grad():
        clean_logits = run_model(model, batch)
    pos = batch.answer_positions
    clean_p, clean_a = answer_distribution(clean_logits, pos, loss_kind), answers(clean_logits, pos, loss_kind)

    def effect(logits):
        tv = total_variation(clean_p, answer_distribution(logits, pos, loss_kind))
        return float(tv.mean()), float((answers(logits, pos, loss_kind) != clean_a).float().mean())

    labelled = [(label, hook, head, None) for label, hook, head in sites]
    labelled += [(f"{label}@{p}", hook, head, p) for label, hook, head in sites for p in range(n_pos)]
    totals = {label: [0.0, 0.0] for label, *_ in labelled}
    ref = [0.0, 0.0]
    for r in range(n_resamples):
        source = Ablation("seed-resample", seed=seed + r).source_batch(batch)
        with torch.no_grad():
            source_logits, cache = model.run_with_cache(source.inputs, **source.model_kwargs())
        for i, v in enumerate(effect(source_logits)):
            ref[i] += v / n_resamples
        for label, hook, head, p in labelled:
            def patch(value, hook, name=hook, head=head, p=p, cache=cache):
                out = value.clone()
                at = slice(None) if p is None else p
                if head is None:
                    out[:, at] = cache[name][:, at]
                else:
                    out[:, at, head] = cache[name][:, at, head]
                return out

            with torch.no_grad(), model.hooks(fwd_hooks=[(hook, patch)]):
                values = effect(run_model(model, batch))
            for i, v in enumerate(values):
                totals[label][i] += v / n_resamples
    return totals, ref


@pytest.mark.parametrize("which", ["recall", "hand-set recall", "colouring path"])
def test_randomness_usage_equals_the_direct_computation(which):
    if which == "recall":
        task, model = recall_model(zero_seed=False)
        sites = [("embed", "hook_embed", None), ("seed", "hook_seed_embed", None),
                 ("input_mlp", "input_mlp.hook_post", None), ("a0.0", "blocks.0.attn.hook_z", 0),
                 ("a1.0", "blocks.1.attn.hook_z", 0)]
    elif which == "hand-set recall":
        task, model = recall_path_model()
        sites = [("embed", "hook_embed", None), ("seed", "hook_seed_embed", None),
                 ("input_mlp", "input_mlp.hook_post", None), ("a0.0", "blocks.0.attn.hook_z", 0),
                 ("a0.1", "blocks.0.attn.hook_z", 1)]
    else:
        task, model = seed_path_model()
        sites = [("embed", "hook_embed", None), ("seed", "hook_seed_embed", None),
                 ("a0.0", "blocks.0.attn.hook_z", 0), ("a0.1", "blocks.0.attn.hook_z", 1)]
    batch = task.sample(64, torch.Generator().manual_seed(0))
    n_pos = batch.inputs.shape[1]
    usage = randomness_usage(model, batch, task.loss_kind, per_position=True, seed=3)
    totals, ref = _direct_usage(model, batch, task.loss_kind, sites, n_pos, seed=3)
    assert list(usage.score) == [label for label, *_ in sites]
    assert usage.score == {label: totals[label][0] for label, *_ in sites}
    assert usage.flip == {label: totals[label][1] for label, *_ in sites}
    assert (usage.reference, usage.reference_flip) == tuple(ref)
    assert usage.per_position == {label: [totals[f"{label}@{p}"][0] for p in range(n_pos)] for label, *_ in sites}
    assert usage.reference > 0 and usage.score["seed"] > 0


def test_metrics_read_float_targets_as_bits():
    from circuits.interventions.metrics import logit_diff, logprob, prob

    task, _ = recall_path_model()
    batch = task.sample(8, torch.Generator().manual_seed(0))
    logits = torch.randn(8, task.n_ctx, 2, generator=torch.Generator().manual_seed(1))
    z, t = logits[:, 3], batch.targets[:, 3]  # answer position N = 3; [batch, bits]
    p_bits = torch.where(t == 1, torch.sigmoid(z), 1 - torch.sigmoid(z))
    assert float(prob(logits, batch)) == pytest.approx(float(p_bits.prod(-1).mean()), rel=1e-5)
    assert float(logprob(logits, batch)) == pytest.approx(float(p_bits.log().sum(-1).mean()), rel=1e-5)
    assert float(logit_diff(logits, batch)) == pytest.approx(float(torch.where(t == 1, z, -z).mean()), rel=1e-5)
