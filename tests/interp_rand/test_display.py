"""How results show themselves (interp_rand.display, issue 38 item 1): every result a user
meets has a short plain repr (at most 10 lines, under 2,000 characters; they ran to 90,000) and
an HTML view with its headline, its verdict in its colour and a small inline SVG figure; the
reports with a picture have ``.figure()`` (plotly). The notebook's own results are checked in
tests/examples/test_notebook.py."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import pytest

from interp_rand.display import VERDICT_COLOURS, Displayed, bars_svg, claims_svg
from interp_rand.verdicts import Claim, Verdict

MAX_LINES, MAX_CHARS = 10, 2000


def svgs(page: str) -> list[ET.Element]:
    """Every inline SVG of an HTML view, parsed (a malformed one raises)."""
    return [ET.fromstring(s) for s in re.findall(r"<svg.*?</svg>", page, flags=re.S)]


def check_shows_itself(result, *, figure: bool = True) -> str:
    text, page = repr(result), result._repr_html_()
    assert text.count("\n") + 1 <= MAX_LINES and len(text) < MAX_CHARS, (type(result).__name__, len(text))
    assert text.startswith(f"<{type(result).__name__}: ")
    head = result._headline_text()
    assert html.escape(head[:40]) in page or html.escape(head.split(" · ", 1)[-1][:40]) in page
    verdict = result.display_verdict()
    if verdict is not None:
        assert f"color:{VERDICT_COLOURS[verdict]}" in page and verdict.upper() in page
    found = svgs(page)
    assert bool(found) == figure, type(result).__name__
    assert len(page) < 40_000
    return page


def test_the_verdict_colours_are_the_pages():
    from interp_rand.figures.style import VERDICT_COLOURS as PAGES

    assert VERDICT_COLOURS == PAGES


def claim(text, value, control, outcome):
    return Claim(text, value, control, "random", Verdict(outcome, "rule", "" if outcome == "holds" else "why"))


def test_claims_and_bars_draw_well_formed_svg():
    claims = [claim("a", 0.9, 0.1, "holds"), claim("b <&> c", -3.0, 2.0, "fails"),
              claim("none", None, None, "inconclusive")] + [claim(f"x{i}", 0.5, None, "holds") for i in range(9)]
    svg = claims_svg(claims)
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "b <&> c" in texts and "FAILS" in texts and "-3.000 vs 2.000" in texts
    assert any(t.startswith("+ 3 more") for t in texts)  # 11 numbered claims, 8 rows shown
    assert claims_svg([claim("none", None, None, "holds")]) is None
    bars = ET.fromstring(bars_svg([("heading", ""), ("up", 0.5), ("down", -0.25), ("gone", None)], threshold=0.3))
    texts = ["".join(t.itertext()) for t in bars.iter("{http://www.w3.org/2000/svg}text")]
    assert "heading" in texts and "not measured" in texts and "-0.25" in texts
    assert bars_svg([("a", None)]) is None


def test_a_result_shows_its_verdict_and_survives_a_figure_that_fails():
    @dataclass(repr=False)
    class Found(Displayed):
        claims: list

        def headline(self):
            return "FAILS · something"

        def lines(self):
            return [self.headline(), "more"]

    found = Found([claim("a", 0.9, 0.1, "holds"), claim("b", 0.1, 0.5, "fails")])
    assert repr(found) == "<Found: FAILS · something>" and found.display_verdict() == "fails"
    page = check_shows_itself(found)
    assert "more</pre>" in page and page.count(">FAILS<") == 2  # once coloured, once in the figure

    class Broken(Found):
        def small_figure(self):
            raise ValueError("no")

    assert "(no figure: ValueError)" in Broken([])._repr_html_()


@pytest.fixture(scope="module")
def zoo_results():
    """The main results on the zoo's models (about 8 s on one core)."""
    import torch

    from interp_rand.evaluation import evaluate
    from interp_rand.reports.circuit import circuit_report
    from interp_rand.reports.compare import compare_report
    from interp_rand.reports.evaluation import evaluation_report
    from interp_rand.training import load_checkpoint

    ckpt = load_checkpoint("zoo:addition")
    task = ckpt.spec.make_task()
    return {
        "circuit": circuit_report("zoo:sort", method="eap-ig", n=64, card=True, card_resamples=2),
        "compare": compare_report("zoo:coloring-AE_R", "zoo:coloring-Aq_R", n=64),
        "eval": evaluation_report("zoo:addition", n=500),
        "seeded": evaluation_report("zoo:recall-Aq_R", n=100, seeds=8),
        "result": evaluate(ckpt.model(), task, task.sample(300, torch.Generator().manual_seed(0))),
    }


def test_every_result_on_the_zoo_has_a_short_repr_and_a_picture(zoo_results):
    import plotly.graph_objects as go

    circuit, compare = zoo_results["circuit"], zoo_results["compare"]
    results = [circuit, circuit.circuit, circuit.card, compare, compare.result, *compare.cards,
               *compare.circuits, zoo_results["eval"], zoo_results["seeded"], zoo_results["result"]]
    for result in results:
        check_shows_itself(result)
    # the small results nested in them were short already: at most 10 lines and 2,000 characters
    for nested in (circuit.faithfulness, circuit.card.integrals, circuit.card.stability, circuit.card.random_init,
                   *circuit.card.claims, circuit.circuit.arch, *compare.claims):
        text = repr(nested)
        assert text.count("\n") + 1 <= MAX_LINES and len(text) < MAX_CHARS, type(nested).__name__
    assert circuit.card.display_verdict() == circuit.card.verdict
    assert "of 1100 edges" in repr(circuit.circuit) and "Jaccard" in repr(compare.result)
    assert repr(zoo_results["seeded"]).count("worst 5%") == 1
    for report in (circuit, compare, zoo_results["eval"], zoo_results["seeded"]):
        assert isinstance(report.figure(), go.Figure)
    assert len(zoo_results["seeded"].figure().data) == 2  # accuracy per position, the seeded histogram


def test_a_checkpoint_shows_its_task_step_and_stored_evaluation():
    """A loaded checkpoint (no weights read) shows itself instead of a dataclass repr of its
    configs and metrics (1,500 characters on zoo:sort)."""
    from dataclasses import replace

    from interp_rand.training import load_checkpoint

    ckpt = load_checkpoint("zoo:sort")
    page = check_shows_itself(ckpt)
    assert repr(ckpt).startswith("<Checkpoint: sort (length 5, vocab 10) at step 1250: held-out exact match 0.9995")
    assert "ModelConfig" not in repr(ckpt) and "2 layers x 4 heads" in page
    bars = ["".join(t.itertext()) for s in svgs(page) for t in s.iter("{http://www.w3.org/2000/svg}text")]
    assert "answer position 4" in bars  # the stored accuracy per answer position
    bare = replace(ckpt, metrics={})
    assert "no stored evaluation" in repr(bare)
    check_shows_itself(bare, figure=False)


def test_the_seed_studies_show_themselves():
    """NoiseUse and CodeStudy on small samples of the zoo's models: a one-line repr and the
    headline in the HTML view; the code study's shares as bars (NoiseUse draws none)."""
    from circuits.analyses.recall_codes import code_study
    from interp_rand.seeded_evaluation.noise_use import noise_use
    from interp_rand.training import load_checkpoint

    recall = load_checkpoint("zoo:recall-Aq_R")
    study = code_study(recall.model().eval(), recall.spec.make_task(), n_inputs=40, n_seeds=8)
    page = check_shows_itself(study)
    assert repr(study).startswith("<CodeStudy: recall fails on ") and "(d) an adversary" in page
    bars = ["".join(t.itertext()) for s in svgs(page) for t in s.iter("{http://www.w3.org/2000/svg}text")]
    assert {"the crosstalk", "its colliding pair separates", "the values", "oblivious: seeds its input fails"} <= set(bars)
    randomized, erm = load_checkpoint("zoo:coloring-Aq_R"), load_checkpoint("zoo:coloring-AE_R")
    use = noise_use(randomized.model().eval(), erm.model().eval(), randomized.spec.make_task(), n_cycles=50, n_noise=4)
    page = check_shows_itself(use, figure=False)
    assert repr(use).startswith("<NoiseUse: 50 cycles x 4 noise draws") and "in conflict" in page


def test_the_colouring_rule_comparison_shows_itself():
    """RuleComparison (and the PatternTables in it) on 200 cycles of zoo:coloring-Aq_R: a
    one-line repr, the agreement and its shuffled control in the HTML view and as bars."""
    import torch

    from interp_rand.seeded_evaluation.symmetry_rule import rule_comparison
    from interp_rand.training import load_checkpoint

    ckpt = load_checkpoint("zoo:coloring-Aq_R")
    task = ckpt.spec.make_task()
    found = rule_comparison(ckpt.model().eval(), task, task.sample(200, torch.Generator().manual_seed(0)))
    page = check_shows_itself(found)
    assert repr(found).startswith("<RuleComparison: the model's colouring against one round") and "two hops" in page
    bars = ["".join(t.itertext()) for s in svgs(page) for t in s.iter("{http://www.w3.org/2000/svg}text")]
    assert {"agreement with the routine", "the routine on shuffled noise"} <= set(bars)
    table = check_shows_itself(found.one_hop)
    assert repr(found.one_hop).startswith("<PatternTable: the colour given the noise-rank pattern") and "vertices" in table
