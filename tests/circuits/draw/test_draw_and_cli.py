"""Layout, the offline HTML drawing, and ``interp-rand circuit`` end to end."""

import json

import pytest

from circuits import Circuit, Edge, Node, discover
from circuits.draw.circuit_figure import circuit_figure, write_circuit_html
from circuits.draw.layout import layered_layout
from circuits.graph.selection import connected_edges
from interp_rand.cli.main import main
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train


def test_layered_layout_puts_layers_in_columns_and_heads_in_rows(model, pairs):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=40)
    pos = layered_layout(circuit)
    for node in circuit.nodes:
        x, y = pos[node.name]
        if node.kind == "head":
            assert x == 2 * node.layer + 1
            assert y == node.head + node.position * 3.5
        elif node.kind == "logits":
            assert x == 5
    # later positions sit above earlier ones
    heads = [n for n in circuit.nodes if n.kind == "head"]
    a, b = min(heads, key=lambda n: n.position), max(heads, key=lambda n: n.position)
    assert a.position == b.position or pos[a.name][1] < pos[b.name][1]


def test_figure_encodes_sign_width_and_hover(model):
    from circuits.draw.circuit_figure import score_colour

    arch = discover.__globals__["ModelGraph"].of(model, 6).arch
    e1 = Edge(Node("embed"), Node("head", 1, 0), "v")
    e2 = Edge(Node("head", 0, 1), Node("logits"), "logits")
    circuit = Circuit({e1: 2.0, e2: -0.1}, arch, {"method": "eap"}, 46)
    fig = circuit_figure(circuit)
    lines = {t.hovertext[0].split("<br>")[0]: t for t in fig.data if t.mode == "lines" and t.x[0] is not None}
    big, small = lines["embed → a1.0 &lt;v&gt;"], lines["a0.1 → logits &lt;logits&gt;"]
    assert big.line.width > small.line.width  # width: |score|
    assert big.line.color == score_colour(2.0, 2.0) and small.line.color == score_colour(-0.1, 2.0)
    assert "+2" in big.hovertext[0] and "-0.1" in small.hovertext[0]
    assert len(big.hovertext) == len(big.x) > 2  # hover anywhere along the edge
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert "into the head's k" in legend and "width: |score|" in legend
    bar = next(t for t in fig.data if t.marker is not None and t.marker.showscale)
    assert bar.marker.cmin == -2.0 and bar.marker.cmax == 2.0  # the score scale, centred at 0


def test_key_value_edges_are_drawn_to_the_query_positions_that_attend(model):
    import torch

    from circuits.analyses.flow import attention_flow

    arch = discover.__globals__["ModelGraph"].of(model, 6).arch
    into_k = Edge(Node("embed", position=1), Node("head", 1, 0, position=1), "k")
    into_q = Edge(Node("embed", position=4), Node("head", 1, 0, position=4), "q")
    out_3 = Edge(Node("head", 1, 0, position=3), Node("logits", position=3), "logits")
    out_4 = Edge(Node("head", 1, 0, position=4), Node("logits", position=4), "logits")
    circuit = Circuit({into_k: 1.0, into_q: 0.5, out_3: 1.0, out_4: 1.0}, arch, {"by_position": True}, 46)
    attention = torch.full((arch.n_layers, arch.n_heads, 6, 6), 0.01)
    attention[1, 0, 3, 1], attention[1, 0, 4, 1] = -0.7, 0.005  # signed (linear): |a| counts
    flows = {(f.source.name, f.dest.name, f.input): f.share for f in attention_flow(circuit, attention, 0.1)}
    # query 3 attends to key 1 (share 0.7 / 0.75 of its row); query 4 barely (0.005 / 0.055): not drawn
    assert flows[("embed@1", "a1.0@3", "k")] == pytest.approx(0.7 / 0.75)
    assert ("embed@1", "a1.0@4", "k") not in flows
    assert ("embed@1", "a1.0@1", "k") not in flows  # moved off its key position
    assert flows[("embed@4", "a1.0@4", "q")] is None  # queries stay where they are
    fig = circuit_figure(circuit, attention=attention, position_names=["x0", "x1", "x2", "SEP", "y0", "y1"])
    assert list(fig.layout.yaxis.ticktext) == ["x1", "SEP", "y0"]  # token names, empty positions dropped
    labels = next(t for t in fig.data if t.name == "nodes").text
    assert "a1.0" in labels and not any("@" in label for label in labels)


def test_circuit_drawing_in_a_browser_labels_axes_and_cuts_nothing(model, pairs, tmp_path):
    import browser
    from circuits.analyses.flow import mean_attention
    from interp_rand.figures.headline import Headline

    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=40)
    page = write_circuit_html(circuit, tmp_path / "c.html", "tiny: eap, 40 edges",
                              attention=mean_attention(model, clean), position_names=[f"t{i}" for i in range(6)],
                              headline=Headline("circuit of the tiny model", "40 edges"))
    result = browser.first_look(page, browser.screenshot_path(tmp_path, "circuit.png"))
    browser.assert_first_look(result, verdict=False)
    fig = next(iter(result["figures"].values()))
    assert fig["xticks"][0] == "embed" and fig["xticks"][-1] == "logits"
    assert fig["yticks"] and all(t.startswith("t") for t in fig["yticks"])


def test_html_loads_the_folders_plotly(model, pairs, tmp_path):
    clean, corrupted = pairs
    circuit = discover(model, clean, corrupted, method="eap").circuit(top_k=10)
    html = write_circuit_html(circuit, tmp_path / "c.html").read_text()
    assert "src='plotly.min.js'" in html and (tmp_path / "plotly.min.js").is_file()  # offline, not inlined
    assert html.count("Plotly.newPlot") == 1 and len(html) < 1_000_000


@pytest.mark.slow
def test_cli_end_to_end(tmp_path, capsys):
    task = make_task("sort", length=3, vocab=4)
    run_dir = tmp_path / "run"
    train(task, task.model_config(d_model=16, n_heads=2), TrainConfig(steps=3, batch_size=16, eval_size=16, eval_every=3),
          run_dir, progress=False)
    out = tmp_path / "out"
    assert main(["circuit", str(run_dir), "--method", "eap-ig", "--steps", "2", "--n", "16",
                 "--top-k", "15", "--selection", "top_k", "--resamples", "2", "--out", str(out)]) == 0
    for name in ("circuit.json", "circuit.graphml", "circuit.dot", "circuit.tracer.json", "faithfulness.json",
                 "circuit.html", "card.json", "card.html"):
        assert (out / name).stat().st_size > 0
    from circuits.graph.tracer_export import check_circuit_tracer

    check_circuit_tracer(json.loads((out / "circuit.tracer.json").read_text()))
    assert "circuit.dot, circuit.tracer.json, faithfulness.json" in capsys.readouterr().out
    summary = json.loads((out / "faithfulness.json").read_text())
    assert summary["n_edges"] == 15 and len(summary["spread"]) == 2 and summary["curve"]
    assert json.loads((out / "circuit.json").read_text())["settings"]["task"] == "sort"
    card = json.loads((out / "card.json").read_text())
    assert card["n_edges"] == 15 and card["found_with"]["selection"] == "top_k" and len(card["claims"]) == 4
    assert card["sufficiency"] == pytest.approx(summary["recovered"], abs=1e-5)  # the same circuit, measured twice
    assert card["verdict"].upper() in (out / "card.html").read_text()
    # the default selection drops dangling edges and says how many
    connected = tmp_path / "connected"
    assert main(["circuit", str(run_dir), "--method", "eap-ig", "--steps", "2", "--n", "16", "--top-k", "15",
                 "--resamples", "0", "--no-card", "--out", str(connected)]) == 0
    saved = json.loads((connected / "circuit.json").read_text())
    edges = [Edge.from_dict(e) for e in saved["edges"]]
    assert saved["settings"]["selection"] == "connected" and len(edges) == 15 - saved["settings"]["n_dropped"]
    assert set(connected_edges(edges)) == set(edges) and not (connected / "card.json").exists()
    # ACDC, edges over all positions
    assert main(["circuit", str(run_dir), "--method", "acdc", "--n", "8", "--resamples", "0",
                 "--no-positions", "--out", str(tmp_path / "acdc")]) == 0
    assert json.loads((tmp_path / "acdc" / "circuit.json").read_text())["settings"]["by_position"] is False
    with pytest.raises(SystemExit):
        main(["circuit", str(run_dir), "--method", "nope", "--out", str(out)])
    assert main(["circuit", str(tmp_path / "missing"), "--out", str(out)]) == 2
    # an existing circuit is measured again; one of another architecture is refused
    again = tmp_path / "again"
    assert main(["circuit", str(run_dir), "--circuit", str(out / "circuit.json"), "--n", "16",
                 "--resamples", "0", "--out", str(again)]) == 0
    assert json.loads((again / "circuit.json").read_text())["edges"] == json.loads((out / "circuit.json").read_text())["edges"]
    other = tmp_path / "other"
    train(task, task.model_config(d_model=16, n_heads=4), TrainConfig(steps=1, batch_size=8, eval_size=8, eval_every=1),
          other, progress=False)
    assert main(["circuit", str(other), "--circuit", str(out / "circuit.json"), "--out", str(again)]) == 2
    assert "n_heads=4 vs 2" in capsys.readouterr().err
