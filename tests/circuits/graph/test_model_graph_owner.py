"""ModelGraph is the one owner of the graph's structure: the residual order and column of every
node (circuit sort order, layout, figure ticks and the edge mask all read it), each writer's
hook, and the one table of reader sites that edge patching and EAP gradients loop over."""

import dataclasses

import pytest
import torch
from circuit_models import make_model, token_pairs

from circuits import Circuit, ModelGraph, Node
from circuits.draw.circuit_figure import circuit_figure
from circuits.draw.layout import Layout, layered_layout
from circuits.graph.architecture import attention_input, input_mlp_input, mlp_input
from circuits.interventions.ablation import node_hook_name
from circuits.interventions.metrics import evaluate_metric, get_metric
from circuits.methods.attribution import reader_gradients


def _seeded(seed_mode, d_input_mlp=8):
    model = make_model(d_seed=3, seed_mode=seed_mode, d_input_mlp=d_input_mlp, n_ctx=7)
    clean, _ = token_pairs()
    seeds = torch.randn(len(clean), 3, generator=torch.Generator().manual_seed(5))
    return model, dataclasses.replace(clean, seeds=seeds)


def _every_node_circuit(graph):
    """A circuit touching every node: one edge from each writer into its last reader, one into
    each reader input from its first source, at position 1."""
    edges = {}
    pairs = [(w, int(graph.valid[w].nonzero()[-1, 0])) for w in range(len(graph.writers))]
    pairs += [(int(graph.valid[:, r].nonzero()[0, 0]), r) for r in range(len(graph.readers))]
    for w, r in pairs:
        edges[graph.edge(1, w, r)] = 1.0 + w + r
    return Circuit(edges, graph.arch, {"method": "test"}, graph.n_edges)


@pytest.mark.parametrize("seed_mode", ["append", "token"])
def test_order_and_columns_come_from_the_model_graph_alone(seed_mode):
    model, _ = _seeded(seed_mode)
    graph = ModelGraph.of(model, 6)
    assert graph.arch.has_input_mlp and graph.arch.has_seed
    circuit = _every_node_circuit(graph)
    kinds = {n.kind for n in circuit.nodes}
    assert kinds == {"embed", "seed", "input_mlp", "head", "mlp", "logits"}
    # circuit sort order: the graph's node order (writers in residual order, then the logits)
    names = list(circuit.graph.nodes)
    assert names == [n.name for n in sorted(circuit.nodes, key=graph.node_order)]
    assert names[:3] == ["embed@1", "seed@1", "input_mlp@1"] and names[-1] == "logits@1"
    # layout column and figure ticks: both the graph's columns
    pos = layered_layout(circuit)
    ticks = circuit_figure(circuit).layout.xaxis
    label_at = dict(zip(ticks.tickvals, ticks.ticktext))
    drawn = Layout.of(circuit.nodes, circuit.arch)
    expected = {"embed": "embed", "seed": "embed", "input_mlp": "input MLP", "logits": "logits"}
    for node in circuit.nodes:
        column = graph.column(node)
        assert pos[node.name][0] == column
        label = expected.get(node.kind) or f"{'attn' if node.kind == 'head' else 'mlp'} {node.layer}"
        assert label_at[drawn.x(node)] == label, node.name  # the drawing keeps the graph's columns in order
    assert list(ticks.tickvals) == sorted(ticks.tickvals)
    # the edge mask: a writer feeds exactly the readers of later columns (around the input MLP,
    # only it reads the embedding and the appended seed)
    for w, writer in enumerate(graph.writers):
        for r, (reader, _) in enumerate(graph.readers):
            later = graph.column(writer) < graph.column(reader)
            into_input_mlp = writer.kind in graph.input_mlp_sources
            assert bool(graph.valid[w, r]) == (later and into_input_mlp == (reader.kind == "input_mlp"))


def test_the_tables_are_the_graph():
    model, _ = _seeded("append")
    graph = ModelGraph.of(model, 6)
    # readers are the reader-site table flattened, contiguous and in order
    flat = [i for site in graph.reader_sites for i in site.readers]
    assert flat == list(range(len(graph.readers)))
    for site in graph.reader_sites:
        for r in site.readers:
            node, which = graph.readers[r]
            assert which == site.input and node.layer == site.layer
            assert site.hook in model.hook_dict and (site.source is None or site.source in model.hook_dict)
    assert [s.hook for s in graph.reader_sites][:2] == ["input_mlp.hook_pre", "blocks.0.attn.hook_q"]
    # writers: one hook per writer site; ablation replaces a node at its graph hook
    assert [i for site in graph.writer_sites for i in site.writers] == list(range(len(graph.writers)))
    for site in graph.writer_sites:
        assert site.hook in model.hook_dict
        assert {node_hook_name(graph.writers[i]) for i in site.writers} == {site.hook}
    assert graph.writer_hooks == ["hook_embed", "hook_seed_embed", "input_mlp.hook_post", "blocks.0.attn.hook_z",
                                  "blocks.0.hook_mlp_out", "blocks.1.attn.hook_z", "blocks.1.hook_mlp_out"]
    with pytest.raises(ValueError, match="writes nothing"):
        node_hook_name(Node("logits"))


def _oracle_gradient(model, batch, metric, hook, rebuild, source=None):
    """d metric / d (one reader's residual input), by adding ``eps`` to that reader's input only:
    the reader's hook value becomes ``value + rebuild(x + eps) - rebuild(x)`` (``x`` its
    residual source's value, read by a forward hook), an independent path from the graph's."""
    saved = {}
    eps = torch.zeros(len(batch), batch.inputs.shape[1], model.cfg.d_model, requires_grad=True)

    def keep(value, hook):
        saved["x"] = value.detach()

    def patch(value, hook):
        x = saved.get("x", torch.zeros_like(eps))
        return value + rebuild(x + eps) - rebuild(x)

    fwd = ([(source, keep)] if source else []) + [(hook, patch)]
    with torch.enable_grad(), model.hooks(fwd_hooks=fwd):
        value = evaluate_metric(metric, model(batch.inputs, seeds=batch.seeds), batch)
        return torch.autograd.grad(value, eps)[0] * len(batch)


def test_reader_gradients_rows_are_the_reader_table():
    model, batch = _seeded("append")
    graph = ModelGraph.of(model, 6)
    metric = get_metric("logprob")
    grads, _, _ = reader_gradients(model, graph, batch, metric)
    assert grads.shape[2] == len(graph.readers)
    n_heads = graph.arch.n_heads

    def one_head(layer, which, head):
        def rebuild(x):
            copies = torch.stack([x if h == head else x.detach() for h in range(n_heads)], dim=2)
            return attention_input(model, layer, which, copies)
        return rebuild

    cases = [
        ((Node("input_mlp"), "mlp"), "input_mlp.hook_pre", lambda x: input_mlp_input(model, x), None),
        ((Node("head", 1, 1), "k"), "blocks.1.attn.hook_k", one_head(1, "k", 1), "blocks.1.hook_resid_pre"),
        ((Node("head", 0, 0), "q"), "blocks.0.attn.hook_q", one_head(0, "q", 0), "blocks.0.hook_resid_pre"),
        ((Node("mlp", 0), "mlp"), "blocks.0.mlp.hook_pre", lambda x: mlp_input(model, 0, x), "blocks.0.hook_resid_mid"),
        ((Node("logits"), "logits"), "blocks.1.hook_resid_post", lambda x: x, None),
    ]
    for (node, which), hook, rebuild, source in cases:
        expected = _oracle_gradient(model, batch, metric, hook, rebuild, source)
        assert expected.abs().max() > 0, node.name
        row = graph.reader_index(node, which)
        torch.testing.assert_close(grads[:, :, row], expected, atol=1e-5, rtol=1e-4)
        # and not in any other row
        others = [r for r in range(len(graph.readers)) if r != row]
        assert min(float((grads[:, :, r] - expected).abs().max()) for r in others) > 1e-4
