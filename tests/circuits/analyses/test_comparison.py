"""Circuit comparison: alignment, cross-faithfulness, the side-by-side HTML and `interp-rand compare`."""

import json

import pytest
from circuit_models import make_model, token_pairs

from circuits import Circuit, Edge, Node, discover
from circuits.analyses.comparison import compare_circuits
from circuits.draw.circuit_figure import ATTENTION, MAX_CROSSINGS_PER_BAND, ROW_PX, edge_crossings, figure_bands
from circuits.draw.comparison_figure import FRAME_PX, SHARED_SYMBOL, UNIQUE_SYMBOL, comparison_figure, write_comparison_html
from circuits.graph.model_graph import ModelGraph
from interp_rand.cli.main import main
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, train


@pytest.fixture(scope="module")
def circuit(model, pairs):
    return discover(model, *pairs, method="eap").circuit(top_k=15)


def test_identical_circuits_share_every_edge_and_cross_equals_self(model, pairs, circuit):
    result = compare_circuits(circuit, circuit, models=(model, model), data=(pairs, pairs))
    assert len(result.shared) == 15 and not result.only_a and not result.only_b
    assert result.jaccard == 1.0 and result.node_jaccard == 1.0
    assert result.spearman == pytest.approx(1.0)
    assert result.cross["a_on_b"] == pytest.approx(result.cross["b_on_b"])
    assert result.cross["b_on_a"] == pytest.approx(result.cross["a_on_a"])
    assert json.loads(json.dumps(result.to_dict()))["n_shared"] == 15


def test_other_model_gives_other_cross_faithfulness(model, pairs, circuit):
    other = HookedTransformer(make_model().cfg, seed=7).eval()
    other_pairs = token_pairs(seed=3)
    circuit_b = discover(other, *other_pairs, method="eap").circuit(top_k=15)
    result = compare_circuits(circuit, circuit_b, models=(model, other), data=(pairs, other_pairs))
    assert set(result.cross) == {"a_on_a", "b_on_a", "b_on_b", "a_on_b"}
    # a circuit on its own model is measured exactly as `faithfulness` would
    from circuits import faithfulness
    assert result.cross["a_on_a"] == pytest.approx(faithfulness(model, circuit, *pairs).recovered)
    assert len(result.shared) + len(result.only_a) == 15 and 0 <= result.jaccard <= 1


def test_disjoint_circuits_share_nothing(model):
    arch = ModelGraph.of(model, 6).arch
    a = Circuit({Edge(Node("embed"), Node("head", 0, 0), "q"): 1.0}, arch, {}, 46)
    b = Circuit({Edge(Node("head", 1, 1), Node("logits"), "logits"): -0.5}, arch, {}, 46)
    result = compare_circuits(a, b)
    assert not result.shared and result.jaccard == 0.0 and result.node_jaccard == 0.0
    assert result.spearman is None and result.cross == {}
    assert [e.name for e, _ in result.only_b] == ["a1.1->logits"]


def test_mismatched_architectures_are_refused(model, circuit):
    deeper = discover(make_model(n_layers=3), *token_pairs(), method="eap").circuit(top_k=5)
    with pytest.raises(ValueError, match="different architectures.*n_layers=2 vs 3"):
        compare_circuits(circuit, deeper)
    other_task = Circuit(circuit.edges, circuit.arch, {**circuit.settings, "task": "sort"}, 46)
    with pytest.raises(ValueError, match="differ in task"):
        compare_circuits(Circuit(circuit.edges, circuit.arch, {"task": "addition"}, 46), other_task)


def test_html_is_self_contained_and_panels_share_positions(model, pairs, circuit, tmp_path):
    circuit_b = Circuit(dict(list(circuit.edges.items())[:8])
                        | {Edge(Node("embed", position=5), Node("head", 1, 1, position=5), "k"): -0.3},
                        circuit.arch, circuit.settings, circuit.total_edges)
    result = compare_circuits(circuit, circuit_b)
    fig = comparison_figure(circuit, circuit_b, result)
    nodes_a = next(t for t in fig.data if t.name == "nodes A")
    nodes_b = next(t for t in fig.data if t.name == "nodes B")
    assert list(nodes_a.x) == list(nodes_b.x) and list(nodes_a.y) == list(nodes_b.y)
    assert nodes_a.xaxis == "x" and nodes_b.xaxis == "x2"
    # the marker on each edge: its symbol says shared or unique, its colour the signed score
    # (one diverging scale centred on 0 for both panels), its hover which circuit has it
    marks = [t for t in fig.data if t.name in ("edges A", "edges B")]
    symbols = {(t.name, t.marker.symbol) for t in marks}
    assert symbols == {("edges A", SHARED_SYMBOL), ("edges A", UNIQUE_SYMBOL), ("edges B", SHARED_SYMBOL),
                       ("edges B", UNIQUE_SYMBOL)}
    scores = sorted(v for t in marks for v in t.marker.color)
    assert scores[0] == pytest.approx(-0.3) and scores[-1] > 0  # the sign is kept
    assert all(t.marker.cmid == 0 and t.marker.cmin == -t.marker.cmax for t in marks)
    assert sum(bool(t.marker.showscale) for t in marks) == 1  # one colour bar
    unique_b = next(t for t in marks if t.name == "edges B" and t.marker.symbol == UNIQUE_SYMBOL)
    assert len(unique_b.x) == 1 and "in B only" in unique_b.hovertext[0]
    assert fig.layout.width is None  # follows the window
    page = write_comparison_html(circuit, circuit_b, result, tmp_path / "c.html")
    html = page.read_text()
    assert "src='plotly.min.js'" in html and (tmp_path / "plotly.min.js").is_file()
    assert html.count("Plotly.newPlot") == 1


def test_unused_columns_and_positions_are_dropped_and_the_height_follows_the_rows(circuit):
    """Without MLP nodes no MLP column is drawn; the y axis spans the drawn position bands'
    rows (one unit each), each ROW_PX high."""
    no_mlp = {e: s for e, s in circuit.edges.items() if "mlp" not in (e.source.kind, e.dest.kind)}
    a = Circuit(no_mlp, circuit.arch, circuit.settings, circuit.total_edges)
    b = Circuit(dict(list(no_mlp.items())[:3]), circuit.arch, circuit.settings, circuit.total_edges)
    fig = comparison_figure(a, b, compare_circuits(a, b))
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[0] == "embed" and ticks[-1] == "logits" and not [t for t in ticks if t.startswith("mlp")]
    assert list(fig.layout.xaxis.tickvals) == list(range(len(ticks)))
    low, high = fig.layout.yaxis.range
    assert fig.layout.height == FRAME_PX + ROW_PX * round(high - low)
    positions = {e.source.position for e in no_mlp} | {e.dest.position for e in no_mlp}
    assert len(fig.layout.yaxis.tickvals) == len(positions)  # one tick per position drawn, none for empty ones
    one_band = Circuit(dict(list((e, s) for e, s in no_mlp.items() if e.dest.position == e.source.position)[:1]),
                       circuit.arch, circuit.settings, circuit.total_edges)
    small = comparison_figure(one_band, one_band, compare_circuits(one_band, one_band))
    assert len(small.layout.yaxis.tickvals) == 1 and small.layout.height < fig.layout.height


def test_comparison_is_drawn_by_the_circuit_drawing_and_no_band_is_a_hairball(model, pairs, circuit):
    """Both panels use the circuit drawing's strokes: key/value edges run into their head's grey
    attention lane and branch to the query positions, hover on the whole edge says which circuit
    has it, each panel crosses exactly as the circuit drawing of its circuit does, and no
    position band has more than MAX_CROSSINGS_PER_BAND crossings."""
    from circuits.analyses.flow import attention_flow, mean_attention
    from circuits.draw.circuit_figure import circuit_figure

    a = discover(model, *pairs, method="eap").circuit(top_k=25)
    b = circuit  # the 15 strongest edges: a subset of a, so the shared layout is a's own
    attention = mean_attention(model, pairs[0])
    fig = comparison_figure(a, b, compare_circuits(a, b), attention=(attention, attention))
    assert [f for f in attention_flow(a, attention, 0.1) if f.share is not None]  # there is attention flow to draw
    bands = figure_bands(fig)
    assert len(bands) >= 3
    for axis, c in (("x", a), ("x2", b)):
        lanes = [t for t in fig.data if (t.xaxis or "x") == axis and t.mode == "lines" and t.line.color == ATTENTION]
        assert lanes  # each panel draws the attention lanes
        scored = [t for t in fig.data if (t.xaxis or "x") == axis and t.mode == "lines" and t.line.color != ATTENTION
                  and t.x and t.x[0] is not None]
        assert scored and all(len(set(t.hovertext)) == 1 and len(t.hovertext) == len(t.x) for t in scored)
        assert all("in both circuits" in t.hovertext[0] or " only" in t.hovertext[0] for t in scored)
        crossings = edge_crossings(fig, bands, axis)
        alone = circuit_figure(c, attention=attention, components=False)
        own = edge_crossings(alone, figure_bands(alone))
        assert {k: v for k, v in crossings.items() if k in own} == own  # one edge drawing: the same crossings
        assert max(crossings.values()) <= MAX_CROSSINGS_PER_BAND, crossings


def _train(run_dir, task, n_heads=2, seed=0):
    cfg = TrainConfig(steps=3, batch_size=16, eval_size=16, eval_every=3, seed=seed)
    train(task, task.model_config(d_model=16, n_heads=n_heads), cfg, run_dir, progress=False)
    return run_dir


def test_cli_compare_end_to_end_and_refusals(tmp_path, capsys):
    task = make_task("sort", length=3, vocab=4)
    run_a, run_b = _train(tmp_path / "a", task), _train(tmp_path / "b", task, seed=1)
    out = tmp_path / "out"
    assert main(["compare", str(run_a), str(run_b), "--method", "eap-ig", "--steps", "2", "--n", "16",
                 "--top-k", "12", "--out", str(out)]) == 0
    summary = json.loads((out / "comparison.json").read_text())
    sizes = [len(json.loads((out / f"circuit_{x}.json").read_text())["edges"]) for x in "ab"]
    dropped = [json.loads((out / f"circuit_{x}.json").read_text())["settings"]["n_dropped"] for x in "ab"]
    assert sizes == [12 - d for d in dropped]  # the connected selection drops dangling edges
    assert summary["n_shared"] + summary["n_only_a"] == sizes[0] and summary["n_shared"] + summary["n_only_b"] == sizes[1]
    cards = [json.loads((out / f"card_{x}.json").read_text()) for x in "ab"]
    assert [c["n_edges"] for c in cards] == sizes and all((out / f"card_{x}.html").exists() for x in "ab")
    assert set(summary["cross_faithfulness"]) == {"a_on_a", "b_on_a", "b_on_b", "a_on_b"}
    printed = capsys.readouterr().out
    page = (out / "comparison.html").read_text()
    assert "jaccard" in printed and "src='plotly.min.js'" in page and (out / "plotly.min.js").is_file()
    # one line per claim with its verdict, in the JSON; on the page the claims table after the figure
    assert len(summary["claims"]) == 6 and sum(summary["verdicts"].values()) == 6
    assert all(c["line"] in printed for c in summary["claims"]) and "verdicts: " in printed
    import html as html_lib
    assert all(html_lib.escape(c["claim"]) in page for c in summary["claims"])
    assert page.index("class='headline'") < page.index("Plotly.newPlot") < page.index("<table")
    # the same run twice: everything shared
    # (the claim cards are checked above; this run and the refusals need none)
    assert main(["compare", str(run_a), str(run_a), "--method", "eap", "--n", "16", "--top-k", "12", "--no-card",
                 "--out", str(tmp_path / "same")]) == 0
    same = json.loads((tmp_path / "same" / "comparison.json").read_text())
    assert same["jaccard"] == 1.0
    assert same["cross_faithfulness"]["a_on_b"] == pytest.approx(same["cross_faithfulness"]["a_on_a"])
    # other architecture, other task config: one-line errors
    wide = _train(tmp_path / "wide", task, n_heads=4)
    assert main(["compare", str(run_a), str(wide), "--out", str(out)]) == 2
    assert "different architectures" in capsys.readouterr().err
    longer = _train(tmp_path / "longer", make_task("sort", length=4, vocab=4))
    assert main(["compare", str(run_a), str(longer), "--out", str(out)]) == 2
    assert "different task configs (length)" in capsys.readouterr().err


def test_cli_circuit_and_compare_on_recall_runs(tmp_path, capsys):
    """Recall models (input MLP, seed appended before it, bit answers) go through discovery,
    faithfulness, drawing and comparison like every other model."""
    task = make_task("recall", n_pairs=2, value_bits=1, seed_bits=2)
    runs = []
    for seed in (0, 1):
        run = tmp_path / f"recall{seed}"
        train(task, task.model_config(d_model=16, n_heads=2),
              TrainConfig(steps=2, batch_size=8, eval_size=8, eval_every=2, seed=seed), run, progress=False)
        runs.append(run)
    out = tmp_path / "circuit"
    assert main(["circuit", str(runs[0]), "--n", "16", "--top-k", "8", "--resamples", "2", "--out", str(out)]) == 0
    circuit = json.loads((out / "circuit.json").read_text())
    assert circuit["architecture"]["has_input_mlp"] and circuit["architecture"]["seed_append"]
    assert "input_mlp" in (out / "circuit.html").read_text()
    # compare's claim cards are checked in test_cli_compare_end_to_end_and_refusals
    assert main(["compare", str(runs[0]), str(runs[1]), "--method", "eap", "--n", "16", "--top-k", "8", "--no-card",
                 "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert summary["task"] == "recall" and summary["n_shared"] + summary["n_only_a"] == 8
    assert "jaccard" in capsys.readouterr().out


def test_cli_compare_picks_each_runs_smallest_faithful_circuit_by_default(tmp_path, capsys):
    task = make_task("sort", length=3, vocab=4)
    run_a, run_b = _train(tmp_path / "a", task), _train(tmp_path / "b", task, seed=1)
    out = tmp_path / "out"
    # the size rule does not read the claim cards (checked in test_cli_compare_end_to_end_and_refusals)
    assert main(["compare", str(run_a), str(run_b), "--method", "eap", "--n", "16", "--no-card",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "comparison.json").read_text())
    assert summary["top_k"] == "auto"
    for size, side in zip(summary["edges"], ("a", "b")):
        assert summary["n_shared"] + summary[f"n_only_{side}"] == size
    for name in ("circuit_a.json", "circuit_b.json"):
        assert json.loads((out / name).read_text())["settings"]["size_rule"] == "smallest faithful"
    # each circuit recovers its own run's behaviour within the band of the default target 0.8
    assert abs(summary["cross_faithfulness"]["a_on_a"] - 1) <= 0.2 + 1e-6
    assert abs(summary["cross_faithfulness"]["b_on_b"] - 1) <= 0.2 + 1e-6
    for bad in ("0", "many"):
        with pytest.raises(SystemExit):
            main(["compare", str(run_a), str(run_b), "--top-k", bad, "--out", str(out)])
        assert "--top-k" in capsys.readouterr().err


def test_comparison_in_a_browser_labels_axes_and_cuts_nothing(model, pairs, circuit, tmp_path):
    """Two panels, a headline first, in a 1280 x 800 window: nothing cut off, the second panel
    in view (the figure follows the window), both panels' axes labelled."""
    import browser
    from circuits.analyses.flow import mean_attention
    from interp_rand.figures.headline import Headline

    circuit_b = Circuit(dict(list(circuit.edges.items())[:8]), circuit.arch, circuit.settings, circuit.total_edges)
    result = compare_circuits(circuit, circuit_b, labels=("zoo:erm", "zoo:randomized"))
    attention = mean_attention(model, pairs[0])
    head = Headline("circuits of zoo:erm and zoo:randomized", f"Jaccard {result.jaccard:.3f}", "inconclusive",
                    failing="no random circuits measured")
    page = write_comparison_html(circuit, circuit_b, result, tmp_path / "c.html", attention=(attention, attention),
                                 position_names=[f"t{i}" for i in range(6)], headline=head,
                                 after=["<div class='scroll'><table><tr><td>claims</td></tr></table></div>"])
    result = browser.first_look(page, browser.screenshot_path(tmp_path, "comparison.png"))
    browser.assert_first_look(result)
    (fig,) = result["figures"].values()
    assert fig["xticks"].count("embed") == 2 and fig["xticks"].count("logits") == 2  # both panels
    assert fig["yticks"] and set(fig["yticks"]) <= {f"t{i}" for i in range(6)}  # token names, as circuit_figure
    assert fig["right"] <= 1280 and fig["height"] < 800
