"""Query/key attribution drawn on the circuit: arrows from the top contributors to the head, a
label with the patching verdict, and ``interp-rand circuit --qk-head``."""

import json

from circuits import discover
from circuits.analyses.flow import attention_flow
from circuits.draw.circuit_figure import circuit_figure, figure_layout
from circuits.draw.layout import Layout, layered_layout
from circuits.draw.qk_overlay import attended_key, contributor_node, node_xy
from circuits.graph.nodes import Node
from interp_rand.cli.main import main
from probes.qk_attribution import Part, explain_heads


def test_contributor_parts_map_to_graph_nodes_or_none():
    assert contributor_node(Part("head", 0, 3), 2) == Node("head", 0, 3, 2)
    assert contributor_node(Part("mlp", 1), 4) == Node("mlp", 1, None, 4)
    assert contributor_node(Part("embed"), 0) == Node("embed", position=0)
    assert contributor_node(Part("input_mlp"), 1) == Node("input_mlp", position=1)
    assert contributor_node(Part("pos"), 3) is None and contributor_node(Part("b_O"), 3) is None
    # the node comes from the part's identity, not its name
    assert contributor_node(Part("head", 0, 3), 2).name == Part("head", 0, 3) + "@2"


def test_node_xy_is_where_the_layout_puts_circuit_nodes(model, pairs):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=30)
    pos = layered_layout(circuit)
    layout = Layout.of(circuit.nodes, circuit.arch, compact=False)
    for node in circuit.nodes:
        assert node_xy(node, layout) == pos[node.name]


def test_overlay_draws_one_arrow_per_top_contributor_that_is_a_node(model, pairs):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=30)
    ((attr, check),) = explain_heads(model, clean[:64], [(1, 0, 4)], seed=0)
    fig = circuit_figure(circuit, qk=((attr, check),))
    layout = figure_layout(circuit, attention_flow(circuit, None), ((attr, check),))
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    key = attended_key(attr)
    expected = {}
    for c in check.top:
        node = contributor_node(c.part, attr.query if c.side == "q" else key)
        if node is not None:
            expected[c] = node_xy(node, layout)
    assert len(arrows) == len(expected)
    head_xy = node_xy(Node("head", 1, 0, 4), layout)
    assert {(a.x, a.y) for a in arrows} == {head_xy}
    assert {(a.ax, a.ay) for a in arrows} == set(expected.values())
    label = next(a.text for a in fig.layout.annotations if not a.showarrow and "why" in a.text)
    assert f"a1.0 @ 4 attends {key}" in label and check.verdict in label
    assert all(c[2:] in label for c in check.top)
    # the attended key's position is named on the axis even if no circuit node sits there
    centre = {t: v for v, t in zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext)}
    assert str(key) in centre and centre[str(key)] == layout.centre(key)


def test_circuit_command_draws_and_reports_the_asked_heads(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["circuit", "zoo:sort", "--top-k", "20", "--no-card", "--resamples", "0", "--n", "64",
                 "--qk-head", "1.2@7", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "faithfulness.json").read_text())
    (entry,) = summary["qk"]
    check = entry["patching_check"]
    assert (check["layer"], check["head"], check["query"]) == (1, 2, 7)
    assert f"a1.2@7: top {', '.join(check['top'])}" in printed and check["verdict"] in printed
    assert "why a1.2 @ 7" in (out / "circuit.html").read_text()


def test_circuit_command_refuses_a_head_outside_the_model_before_any_work(tmp_path, capsys):
    assert main(["circuit", "zoo:sort", "--top-k", "20", "--qk-head", "5.0@1", "--out", str(tmp_path / "c")]) == 2
    assert "outside the model" in capsys.readouterr().err and not (tmp_path / "c" / "circuit.json").exists()
