"""The attention-pattern report: what it holds, its size, the CLI, and a real browser
(headless Debian chromium, tests/browser.py's one per test process) that must render every
figure with no console error."""

from __future__ import annotations

import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from interp_rand import HookedTransformer, make_task
from interp_rand.cli.main import main
from probes.report import ReportConfig, build_report, position_labels
from probes.report_html import render_html, write_report

PLOTLY_BANNER = re.compile(r"\* plotly\.js v\d")
# Reports page errors to the console before any other script runs: uncaught exceptions,
# rejected promises and console.error calls all become "PAGE_ERROR" lines.
_CATCHER = """<script>
window.addEventListener('error', function (e) { console.log('PAGE_ERROR ' + e.message); });
window.addEventListener('unhandledrejection', function (e) { console.log('PAGE_ERROR ' + e.reason); });
console.error = function () { console.log('PAGE_ERROR ' + Array.prototype.join.call(arguments, ' ')); };
</script>"""


class _Figures(HTMLParser):
    """Per plotly div (by id): whether plotly turned it into a plot with an svg inside."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str | None]] = []  # (tag, id of the plotly div it is in)
        self.rendered: dict[str, bool] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        current = self.stack[-1][1] if self.stack else None
        if "plotly-graph-div" in classes:
            current = a.get("id")
            self.rendered[current] = "js-plotly-plot" in classes and self.rendered.get(current, False)
        if current and "main-svg" in classes:
            self.rendered[current] = True
        if tag not in ("br", "img", "input", "meta", "link", "hr", "path", "rect", "circle", "line", "image"):
            self.stack.append((tag, current))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break


def _tiny_report(task_name: str, **kw):
    task = make_task(task_name, **kw)
    extra = dict(d_model=16) if task_name == "recall" else dict(d_model=16, n_heads=2)
    model = HookedTransformer(task.model_config(**extra), seed=0).eval()
    config = ReportConfig(n_examples=100, n_probe_examples=300, n_attribution_examples=8)
    return build_report(model, task, config, info={"run": "tiny"})


def test_report_holds_patterns_roles_probes_and_seed_share():
    data = _tiny_report("recall", n_pairs=5, value_bits=2, seed_bits=3)
    # the patterns are the model's own: run_with_cache on the report's 100 examples (config seed 0)
    task = make_task("recall", n_pairs=5, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=16), seed=0).eval()
    batch = task.sample(100, torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.inputs, **batch.model_kwargs())
    cached = torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(2)], 1)  # [b, L, H, q, k]
    assert set(data.mean_patterns) == {"all", "recent query", "distant query"}
    assert data.mean_patterns["all"].shape == (2, 1, 6, 6)
    close = dict(atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(data.mean_patterns["all"], cached.mean(0), **close)
    query = batch.metadata["query_index"]  # 5 pairs: recent = the last pair, distant = 2+ pairs back
    torch.testing.assert_close(data.mean_patterns["recent query"], cached[query == 4].mean(0), **close)
    torch.testing.assert_close(data.mean_patterns["distant query"], cached[query <= 2].mean(0), **close)
    torch.testing.assert_close(data.examples[0].pattern, cached[0], **close)
    # head roles by hand: |pattern| rows normalised to 1, the mass on the template's key
    mass = cached.abs() / cached.abs().sum(-1, keepdim=True)
    previous = mass[..., torch.arange(1, 6), torch.arange(0, 5)].mean((0, 3))  # q reads q - 1
    key_match = mass[torch.arange(100), :, :, 5, query].mean(0)  # the query reads the queried pair
    assert set(data.roles.scores) == {"previous_token", "key_match", "seed_reader"}
    torch.testing.assert_close(data.roles.scores["previous_token"], previous, **close)
    torch.testing.assert_close(data.roles.scores["key_match"], key_match, **close)
    assert ((data.roles.scores["seed_reader"] >= 0) & (data.roles.scores["seed_reader"] <= 1)).all()
    # probes: one row per seed bit and per key; selectivity is the accuracy over the control
    # task's, at the best (hook, position), where the causal check ran; random-init: its best is its max
    rows = data.probe_rows
    assert [(r["variable"], r["instance"]) for r in rows] == \
        [("seed_bit", f"bit {i}") for i in range(3)] + [("key_stored", f"key {i}") for i in range(5)]
    for row in rows:
        assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control"], abs=1e-6)
        assert row["random_best_selectivity"] >= row["random_selectivity"] - 1e-6
        # a probe the random-init model matches at the same place is flagged as not learned
        assert (row["learned"] == "yes") == (row["accuracy"] >= row["random_accuracy"] + 0.05)
        assert 0 <= row["accuracy"] <= 1 and row["causal_hook"] == row["hook"]
    # the seed share: a fraction, and its mean is the mean of the two answer bits' shares
    share = data.seed_share
    assert set(share) == {"mean", "pos 5 bit 0", "pos 5 bit 1"} and 0 < share["mean"] < 1
    assert share["mean"] == pytest.approx((share["pos 5 bit 0"] + share["pos 5 bit 1"]) / 2, rel=1e-5)
    assert [ex.title.split(" (")[0] for ex in data.examples] == ["first example", "recent query", "distant query"]
    assert data.examples[0].labels[0].startswith("0 k0: key ")
    assert data.position_names == ("k0", "k1", "k2", "k3", "k4", "query")
    page = render_html(data)
    assert len(PLOTLY_BANNER.findall(page)) == 1  # plotly.js inlined once
    assert "<script src=" not in page  # nothing fetched: works offline
    assert page.count('class="plotly-graph-div"') == 1 + 3 + 3 + 1


def test_position_labels():
    assert position_labels(make_task("addition", n_digits=2), 8) == \
        ["0 a1", "1 a0", "2 +", "3 b1", "4 b0", "5 =", "6 s2", "7 s1"]
    assert position_labels(make_task("sort", length=2, vocab=3), 4) == ["0 x0", "1 x1", "2 SEP", "3 y0"]
    assert position_labels(make_task("coloring", n_vertices=3), 4) == ["0 v0", "1 v1", "2 v2", "3 p3"]


@pytest.mark.parametrize("name, config", [("sort", dict(length=3, vocab=5)), ("addition", dict(n_digits=2)),
                                          ("recall", dict(n_pairs=3)), ("coloring", dict(n_vertices=4))])
def test_every_task_names_each_position_and_labels_each_token(name, config):
    task = make_task(name, **config)
    batch = task.sample(2, torch.Generator().manual_seed(0))
    names = task.position_names()
    assert len(names) == batch.inputs.shape[1] == len(set(names))
    labels = task.token_labels(batch, 1)
    assert [label.split(":")[0] for label in labels] == names


def test_signed_patterns_get_a_symmetric_scale_shared_by_compared_panels():
    from probes.report_html import pattern_scale

    softmax, linear = torch.tensor([[0.2, 0.8]]), torch.tensor([[-1.7, 0.04]])
    assert pattern_scale(softmax) == {"zmin": 0.0, "zmax": pytest.approx(0.8), "colorscale": "Blues"}
    both = pattern_scale(softmax, linear)
    assert (both["zmin"], both["zmax"], both["zmid"]) == (pytest.approx(-1.7), pytest.approx(1.7), 0.0)


def test_report_in_a_browser_has_token_ticks_and_nothing_cut_off(tmp_path):
    import browser

    data = _tiny_report("recall", n_pairs=5, value_bits=2, seed_bits=3)
    page = write_report(data, tmp_path / "report.html")
    result = browser.render(page, browser.screenshot_path(tmp_path, "report.png"), "1400,2400")
    browser.assert_readable(result, figures=1 + 3 + 3 + 1)
    mean = result["figures"]["mean-0"]
    assert mean["xticks"][:6] == ["k0", "k1", "k2", "k3", "k4", "query"]
    assert mean["yticks"][:6] == ["k0", "k1", "k2", "k3", "k4", "query"]
    # an example's own tokens on both axes (CircuitsVis-style): position name and the token it holds
    example = result["figures"]["example-0"]
    tokens = [label.split(" ", 1)[1] for label in data.examples[0].labels]
    assert example["xticks"][:6] == example["yticks"][:6] == tokens[:6]
    assert all(":" in t for t in example["xticks"][:5]) and example["xticks"][:5] != mean["xticks"][:5]


@pytest.mark.slow
def test_cli_report_for_a_trained_model_in_a_browser(trained_addition, tmp_path):
    run_dir, _, _ = trained_addition
    out = tmp_path / "report.html"
    began = time.perf_counter()
    assert main(["report", str(run_dir), "--out", str(out), "--n-probe-examples", "2000"]) == 0
    seconds = time.perf_counter() - began
    assert seconds < 20
    size = out.stat().st_size
    assert size < 10e6
    page = out.read_text()
    # plotly.js is not inlined: the page loads its folder's one plotly.min.js
    assert not PLOTLY_BANNER.findall(page) and page.count("src='plotly.min.js'") == 1
    assert PLOTLY_BANNER.findall((out.parent / "plotly.min.js").read_text()[:2000])
    for needle in ("aligned_digit", "carry_source", "carry_in", "mean pattern: no carry", "mean pattern: cascade "):
        assert needle in page, needle
    n_figures = page.count('class="plotly-graph-div"')
    assert n_figures == 1 + 3 + 3 + 1  # roles, 3 mean patterns, 3 examples, probe layers

    import browser

    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("<head>", "<head>" + _CATCHER, 1))
    shot = Path(os.environ.get("PROBES_SCREENSHOT_DIR", tmp_path)) / "report.png"
    dom, console = browser.load(checked, shot, "1400,2400")
    errors = browser.page_errors(console)
    assert not errors, errors
    figures = _Figures()
    figures.feed(dom)
    assert len(figures.rendered) == n_figures, sorted(figures.rendered)
    assert all(figures.rendered.values()), {k: v for k, v in figures.rendered.items() if not v}
    assert shot.exists() and shot.stat().st_size > 20_000


def test_the_browser_check_catches_errors_and_unrendered_figures(tmp_path):
    import browser

    page = render_html(_tiny_report("addition", n_digits=2))
    # break the page: a script error, and one figure that is never drawn
    page = page.replace("</body>", "<script>undefinedFunction();</script></body>")
    page, n = re.subn(r'Plotly\.newPlot\(\s*"roles"', '(function () {})("roles"', page)
    assert n == 1
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace("<head>", "<head>" + _CATCHER, 1))
    dom, console = browser.load(bad, tmp_path / "bad.png", "800,600")  # headless chromium's default window
    assert browser.page_errors(console)
    figures = _Figures()
    figures.feed(dom)
    assert figures.rendered["roles"] is False
    assert len(figures.rendered) > 1 and all(v for k, v in figures.rendered.items() if k != "roles")


def test_cli_report_adds_the_query_key_heads_asked_for(tmp_path, capsys):
    """``report --qk-head L.H@Q`` adds that head's query/key section; a head outside the model, or
    a malformed one, is refused before any work."""
    import argparse

    from interp_rand.cli.options import qk_head
    from interp_rand.tasks import make_task
    from interp_rand.training import TrainConfig, train

    task = make_task("sort", length=3, vocab=4)
    run_dir = tmp_path / "run"
    train(task, task.model_config(d_model=16, n_heads=2), TrainConfig(steps=2, batch_size=8, eval_size=8, eval_every=2),
          run_dir, progress=False)
    out = tmp_path / "report.html"
    assert main(["report", str(run_dir), "--out", str(out), "--n-examples", "40", "--no-probes",
                 "--qk-head", "1.0@4", "--qk-head", "0.1@3"]) == 0
    page = out.read_text()
    assert page.count("a1.0") >= 1 and "a0.1" in page and "query/key" in page.lower()
    assert main(["report", str(run_dir), "--out", str(tmp_path / "bad.html"), "--qk-head", "5.0@1"]) == 2
    assert "outside the model" in capsys.readouterr().err and not (tmp_path / "bad.html").exists()
    assert qk_head("1.2@7") == (1, 2, 7)
    with pytest.raises(argparse.ArgumentTypeError, match="LAYER.HEAD@QUERY"):
        qk_head("1-2")


def test_report_shows_which_keys_a_recall_head_reads_under_which_seed_bits():
    """On a key/value recall task each --qk-head gets its seed-bit reads (with their control) in
    the report; the figure's numbers are the reads' own differences."""
    from probes.qk_attribution import reads_by_seed_bit
    from seeded_models import recall_model

    task, model = recall_model(zero_seed=False)
    config = ReportConfig(n_examples=64, n_probe_examples=64, n_attribution_examples=4, probes=False)
    data = build_report(model, task, config, info={"run": "tiny"}, qk_heads=((1, 0, task.n_pairs),))
    (reads,) = data.qk_seed_reads
    attr, _ = data.qk[0]
    batch = task.sample(config.n_examples, torch.Generator().manual_seed(config.seed))
    direct = reads_by_seed_bit(attr, batch, task, seed=config.seed)
    assert torch.allclose(reads.difference, direct.difference, equal_nan=True)
    page = render_html(data)
    assert "seed bit set minus unset" in page and "shuffled across examples (control)" in page


def test_the_chance_baseline_is_the_score_of_a_uniformly_attending_head(previous_token_model):
    """The hand-built model's zero-weight heads attend uniformly over the keys they may see, so
    their role score is the chance baseline the report computes (independently, from uniform
    patterns); the previous-token head is far above it."""
    task = make_task("sort", length=4, vocab=6)
    data = build_report(previous_token_model(task), task, ReportConfig(n_examples=100, probes=False), info={"run": "t"})
    scores = data.roles.scores["previous_token"]
    assert data.role_chance["previous_token"] == pytest.approx(float(scores[0, 1]), abs=1e-4)
    assert float(scores[0, 0]) > 0.99 > 3 * data.role_chance["previous_token"]
    assert set(data.role_chance) == set(data.roles.scores)
    from probes.report_html import headline

    line = headline(data)
    assert line.verdict is None and "previous_token: a0.0 scores 1.00" in line.number
    assert "uniform attention" in line.number


def test_report_first_look_headline_on_top_heads_named_a0_3_and_no_json_on_top(tmp_path):
    """At 1280 x 800: the headline first (no verdict: nothing tested), figures before tables, the
    probe table in a scrolling box, the legend of the selectivity figure inside it, heads named
    a0.3 (never L0H3), the run's details after everything else."""
    import browser

    data = _tiny_report("addition", n_digits=2)
    page = write_report(data, tmp_path / "report.html")
    result = browser.first_look(page, browser.screenshot_path(tmp_path, "report-first-look.png"))
    browser.assert_first_look(result, verdict=False)
    assert result["headline"]["text"].startswith("attention of tiny's 4 heads")
    assert result["figures"]["roles"]["xticks"] == ["a0.0", "a0.1", "a1.0", "a1.1"]
    assert any("chance" in t for t in result["figures"]["roles"]["yticks"])
    text = page.read_text()
    assert not re.search(r"L\dH\d", text)
    assert text.index("<details>") > text.index('id="probe-layers"')  # the run's JSON last, folded
    assert result["figures"]["probe-layers"]["outside"] == []  # the legend is not cut off
    assert "dotted: the same probe on a random-init model" in text


def test_a_probe_a_random_network_passes_too_is_not_learned():
    """The issue's case: the answer is already the token where the probe reads (0.98 trained,
    0.99 random-init): flagged, with both numbers; a probe well above its random-init twin is learned."""
    from probes.suite import learned

    assert learned(0.98, 0.99) == "no: a random-init model reads it as well (0.99 vs 0.98)"
    assert learned(0.95, 0.60) == "yes"
