"""Verdicts: the rules on hand-made numbers (the under-trained sort model a user reported among
them), the claims of the case studies on a constructed failing case and on the zoo's trained
models, and the comparison's claims."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from circuits import Circuit, Edge, Node
from interp_rand.reports.case_studies import SortConfig, sort_study
from interp_rand.reports.case_studies.claims import sort_claims
from circuits.analyses.comparison import compare_circuits, comparison_claims
from circuits.graph.model_graph import ModelGraph
from interp_rand.verdicts import Verdict, exceeds, exceeds_on_scale, gap_floor_reason, keeps, meets, summary_line


def test_the_reported_under_trained_sort_model_fails_its_claim():
    """The named heads mattered 7x less than random heads: that is a failed claim, said so."""
    claim = exceeds("ablating the next-element heads hurts sorting", 0.057, 0.417, control_label="random heads")
    assert claim.verdict.outcome == "fails"
    assert claim.line() == ("claim: ablating the next-element heads hurts sorting — FAILS: below its control "
                            "(0.057 vs 0.417 for random heads)")


def test_exceeds_holds_only_past_the_margin_and_the_ratio():
    holds = exceeds("x", 0.385, 0.105, control_label="random heads")
    assert holds.verdict.holds and holds.line() == "claim: x — HOLDS (0.385 vs 0.105 for random heads)"
    assert exceeds("x", 0.14, 0.10, control_label="c").verdict.outcome == "fails"  # within the margin 0.05
    between = exceeds("x", 0.5, 0.3, control_label="c")  # past the margin, short of 2x
    assert between.verdict.outcome == "inconclusive" and "less than 2x" in between.line()
    for missing in (None, math.nan):
        assert exceeds("x", 0.5, missing, control_label="c").verdict.outcome == "inconclusive"
    data = holds.to_dict()
    assert data["verdict"] == "holds" and data["rule"] == "value >= control + 0.05 and >= 2x control"


def test_meets_holds_on_its_side_of_the_bound_and_fails_on_the_other():
    at_least = lambda v, **kw: meets("m", v, 0.9, side="at least", control=0.5, control_label="elsewhere", **kw)
    at_most = lambda v, **kw: meets("m", v, 0.2, side="at most", control=0.5, control_label="elsewhere", **kw)
    assert at_least(0.9).verdict.holds and at_most(0.2).verdict.holds  # the bound itself is on its side
    low, high = at_least(0.899), at_most(0.201)
    assert low.verdict.outcome == "fails" and low.verdict.reason == "value 0.899 < 0.9"
    assert high.verdict.outcome == "fails" and high.verdict.reason == "value 0.201 > 0.2"
    assert high.line() == "claim: m — FAILS: value 0.201 > 0.2 (0.201 vs 0.500 for elsewhere)"
    for missing in (None, math.nan):
        assert at_least(missing).verdict.outcome == "inconclusive"
    few = at_least(0.1, too_few="only 3 inputs", condition="at least 10 inputs")
    assert few.verdict.outcome == "inconclusive" and few.verdict.rule == "value >= 0.9 (at least 10 inputs)"
    with pytest.raises(ValueError, match="side='above' is not allowed"):
        meets("m", 0.5, 0.5, side="above", control_label="c")


def test_the_mechanism_card_s_prediction_claim_is_meets_and_can_fail():
    from circuits.mechanisms.card import MIN_WHERE, prediction_claim
    from circuits.mechanisms.predictions import PredictionCheck

    def check(expect, accuracy, n_where=50):
        return prediction_claim(PredictionCheck("p", "why", expect, 0.3 if expect == "fail" else 0.9, accuracy, 0.6,
                                                n_where, 100))

    assert check("succeed", 0.95).verdict.holds and check("fail", 0.1).verdict.holds
    missed = check("succeed", 0.5)
    assert missed.verdict.outcome == "fails" and missed.text == "prediction: the model succeeds on p"
    assert missed.verdict.rule == f"accuracy where predicted >= 0.9 (at least {MIN_WHERE} inputs)"
    assert check("fail", 0.31).verdict.outcome == "fails"  # it succeeds where it was to fail
    assert check("fail", 0.1, n_where=MIN_WHERE - 1).verdict.outcome == "inconclusive"
    assert missed.control == 0.6 and missed.control_label == "accuracy elsewhere (100 inputs)"


def test_keeps_and_the_summary():
    kept, lost = keeps("k", 0.97, 1.0, control_label="intact"), keeps("k", 0.90, 1.0, control_label="intact")
    assert kept.verdict.holds and lost.verdict.outcome == "fails"
    assert summary_line([kept, lost]) == "verdicts: 1 of 2 claims hold, 1 fail, 0 inconclusive"
    with pytest.raises(ValueError, match="Verdict.outcome='maybe'"):
        Verdict("maybe", "rule")


def test_sort_claims_fail_on_a_random_init_model():
    """A random-init model of zoo:sort's architecture, with the head threshold lowered so the
    study names some heads: their next_larger scores do not beat a random-init model's, and the
    duplicate claims are not granted to a model that does not sort."""
    from interp_rand import zoo
    from probes import random_init_like

    ckpt = zoo.load("sort")
    model = random_init_like(ckpt.model().eval(), 5)
    study = sort_study(model, ckpt.spec.make_task(), SortConfig(n_pairs=32, n_eval=500, n_controls=3,
                                                                min_score=0.1))
    role, ablation, *duplicates = sort_claims(study)
    assert role.verdict.outcome == "fails" and "FAILS" in role.line()
    assert not ablation.verdict.holds
    assert all(c.verdict.outcome == "inconclusive" and "does not sort" in c.verdict.reason for c in duplicates)


@pytest.mark.slow
def test_sort_claims_hold_on_the_zoo_model_and_fail_when_random_heads_matter_more(zoo_sort_study):
    study = zoo_sort_study  # tests/conftest.py; the study tests/interp_rand/reports/test_case_studies_zoo.py checks
    assert all(c.verdict.holds for c in sort_claims(study)), [c.line() for c in sort_claims(study)]
    # the same study with the random heads' ablation and the named heads' swapped
    swapped = dataclasses.replace(study, ablated=study.controls.mean(0), controls=study.ablated[None])
    assert sort_claims(swapped)[1].verdict.outcome == "fails"


@pytest.mark.slow
def test_carry_claims_hold_on_the_zoo_model(zoo_carry_study):
    """The carry claims about ablations hold on zoo:addition; the per-place probe claims are
    reported whatever they say (place 3's selectivity is below the random-init model's). The study
    (tests/conftest.py) is the one tests/interp_rand/reports/test_case_studies_zoo.py checks."""
    from interp_rand.reports.case_studies.claims import carry_claims

    claims = carry_claims(zoo_carry_study)
    ablations = claims[:4]
    assert all(c.verdict.holds for c in ablations), [c.line() for c in ablations]
    assert len(claims) == 4 + 3 and any(c.verdict.holds for c in claims[4:])


def test_comparison_claims_against_random_circuits():
    from circuit_models import make_model, token_pairs

    from circuits import discover

    model, pairs = make_model(), token_pairs()
    circuit = discover(model, *pairs, method="eap").circuit(top_k=15)
    same = compare_circuits(circuit, circuit, models=(model, model), data=(pairs, pairs), n_random=2)
    assert set(same.random_cross) == {"a_on_a", "b_on_a", "b_on_b", "a_on_b"}
    assert 0 < same.random_jaccard < 0.3  # 15 of 46 edges twice: 15*15/46 shared in expectation
    claims = comparison_claims(same, gaps=(1.0, 1.0))
    assert claims[0].verdict.holds and claims[-1].verdict.holds  # Jaccard 1, Spearman 1
    # a run whose metric the corruption barely moves: its claims are inconclusive, not "holds"
    quiet = comparison_claims(same, gaps=(1.0, 1e-4))
    assert [c.verdict.outcome for c in quiet[1:5]].count("inconclusive") == 2
    # two disjoint one-edge circuits: they do not share their edges
    arch = ModelGraph.of(model, 6).arch
    a = Circuit({Edge(Node("embed"), Node("head", 0, 0), "q"): 1.0}, arch, {}, 46)
    b = Circuit({Edge(Node("head", 1, 1), Node("logits"), "logits"): -0.5}, arch, {}, 46)
    disjoint = comparison_claims(compare_circuits(a, b))
    assert disjoint[0].verdict.outcome == "fails" and disjoint[-1].verdict.outcome == "inconclusive"
    assert torch.isfinite(torch.tensor(list(same.random_cross.values()))).all()


def test_a_floor_refuses_a_claim_that_only_beats_a_negative_control():
    from interp_rand.verdicts import exceeds

    # random circuits' recovered share can be far below 0: 0.08 beats it but recovers nothing
    weak = exceeds("recovers", 0.08, -1.19, control_label="random circuits", margin=0.1, floor=0.5)
    assert weak.verdict.outcome == "fails" and "floor" in weak.verdict.reason
    assert exceeds("recovers", 0.88, 0.02, control_label="random circuits", margin=0.1, floor=0.5).verdict.outcome == "holds"


def test_a_near_zero_denominator_is_inconclusive_not_a_division():
    """The share of a gap below the floor (or whose interval covers 0) is not taken: the claim
    is inconclusive with no value, whatever the effects; nothing is divided by ~0."""
    tiny = exceeds_on_scale("learned", 0.7e-9, 0.1e-9, 1e-9, control_label="random init", gap_floor=0.01)
    assert tiny.verdict.outcome == "inconclusive" and "below the floor" in tiny.verdict.reason
    assert tiny.value is None and tiny.control is None and "0.7" not in tiny.line().split("metric units")[0]
    zero = exceeds_on_scale("learned", 0.5, 0.0, 0.0, control_label="random init")
    assert zero.verdict.outcome == "inconclusive"
    # a gap above the floor whose resamples change sign: no share is defined either
    noisy = exceeds_on_scale("learned", 0.9, 0.0, 0.05, control_label="c",
                             resamples=[(0.9, 0.0, 0.05), (0.9, 0.0, -0.04)] * 20)
    assert noisy.verdict.outcome == "inconclusive" and "contains 0" in noisy.verdict.reason
    assert gap_floor_reason(1.0, [0.9, 1.1], gap_floor=0.01) == ""


def test_exceeds_on_scale_decides_by_the_interval_of_the_difference():
    holds = exceeds_on_scale("x", 1.6, 0.2, 2.0, control_label="c", resamples=[(1.6, 0.2, 2.0)] * 10)
    assert holds.verdict.holds and holds.value == pytest.approx(0.8) and holds.control == pytest.approx(0.1)
    assert "metric units: 1.6 vs 0.2 of a gap of 2" in holds.line()
    # the control's interval straddles the margin: one draw cannot decide, so not a failure
    straddles = [(1.2, 1.2 - 2.0 * d, 2.0) for d in (0.02, 0.05, 0.1, 0.15, 0.2, 0.25)]
    mid = exceeds_on_scale("x", 1.2, 0.9, 2.0, control_label="c", resamples=straddles)
    assert mid.verdict.outcome == "inconclusive" and "cannot decide" in mid.verdict.reason
    below = exceeds_on_scale("x", 1.2, 1.1, 2.0, control_label="c", resamples=[(1.2, 1.1, 2.0)] * 10)
    assert below.verdict.outcome == "fails"
    assert exceeds_on_scale("x", 0.6, 0.0, 2.0, control_label="c").verdict.outcome == "fails"  # below the floor
    assert exceeds_on_scale("x", 1.2, None, 2.0, control_label="c").verdict.outcome == "inconclusive"
    assert "value - control >= 0.1" in holds.verdict.rule and "bootstrap interval" in holds.verdict.rule


# ------------------------------------------------------------------ one rule module for every verdict
def test_within_the_margin_of_its_control_a_claim_fails_in_every_module():
    """The case the rules disagreed on: above the control but by less than the margin. The
    circuits' rule failed it, the query/key patching check called it inconclusive; the one rule
    (:func:`exceeds`) fails it, and the check now uses that rule."""
    from probes.qk_attribution import MARGIN, QKPatchCheck

    claim = exceeds("x", 0.09, 0.06, control_label="random", margin=0.05, ratio=2.0)
    assert claim.verdict.outcome == "fails" and "by 0.05" in claim.verdict.reason
    check = QKPatchCheck(0, 0, 0, ("q:pos",), 0.09, (("k:embed",), ("k:pos",)), (0.05, 0.07), "zero")
    assert MARGIN == 0.05 and check.verdict == "fails" and check.claim.verdict.rule == claim.verdict.rule
    # the check's inapplicable cases stay inconclusive
    assert dataclasses.replace(check, random_sets=(), random_changes=()).verdict == "inconclusive"
    assert dataclasses.replace(check, pattern_fixed=True, top_change=0.9).verdict == "inconclusive"


def test_the_interchange_rule_is_one_for_the_probe_and_the_mechanism_card():
    """probes.interchange.verdict and the mechanism card's variable claim disagreed on two cases;
    both now decide by :func:`interp_rand.verdicts.reaches` with probes.interchange's numbers:
    a low IIA on a model that solves the task fails whatever its controls (the card said
    inconclusive when a control was high), and a model that does not solve the task is
    inconclusive even at a high IIA (the card said holds)."""
    from circuits.mechanisms.card import variable_claim
    from circuits.mechanisms.interchange import VariableCheck
    from probes.interchange import verdict

    ok = {"random_site": 0.0, "random_init": 0.1}
    cases = [  # (iia, controls, base accuracy, outcome)
        (0.95, ok, 1.0, "holds"),
        (0.95, {**ok, "random_site": 0.6}, 1.0, "inconclusive"),  # the test cannot tell
        (0.95, {**ok, "random_init": math.nan}, 1.0, "inconclusive"),  # a control not measured
        (0.5, ok, 1.0, "fails"),
        (0.5, {**ok, "random_site": 0.6}, 1.0, "fails"),  # was inconclusive on the card
        (0.95, ok, 0.5, "inconclusive"),  # was holds on the card
        (0.5, ok, 0.5, "inconclusive"),
    ]
    for iia, controls, base, outcome in cases:
        assert verdict(iia, controls, base) == outcome, (iia, controls, base)
        card = variable_claim(VariableCheck("v", "site", iia, controls, 100, base))
        assert card.verdict.outcome == outcome, (iia, controls, base)
    assert variable_claim(VariableCheck("v", "site", 0.95, ok, 5, 1.0)).verdict.outcome == "inconclusive"


def test_reaches_with_a_margin_is_the_scrubbing_rule():
    from interp_rand.verdicts import reaches

    rule = lambda value, control: reaches("s", value, target=0.9, controls={"random": control}, margin=0.1)  # noqa: E731
    assert rule(0.95, 0.5).verdict.outcome == "holds"
    assert rule(0.95, 0.9).verdict.outcome == "inconclusive"  # random locations recover about as much
    assert rule(0.5, 0.0).verdict.outcome == "fails"
    assert rule(float("nan"), 0.0).verdict.outcome == "inconclusive"
    assert rule(0.95, 0.5).control == 0.5 and "random" in rule(0.95, 0.5).control_label


def test_named_tables_refuse_a_second_entry_under_a_name():
    """The randomness analyses overwrote silently; they and THRESHOLDS are registries now."""
    from interp_rand.registry import DuplicateName
    from interp_rand.reports.dynamics.view import THRESHOLDS, Threshold
    from interp_rand.reports.randomness import RANDOMNESS_ANALYSES, register_randomness_analysis

    import interp_rand.reports.dynamics.analyses  # noqa: F401  (registers its thresholds)

    assert "recall" in RANDOMNESS_ANALYSES and "coloring" in RANDOMNESS_ANALYSES
    with pytest.raises(DuplicateName, match="recall"):
        register_randomness_analysis("recall")(lambda *a, **k: None)
    assert THRESHOLDS.get("accuracy") == (Threshold("accuracy/", 0.99),)
    with pytest.raises(DuplicateName, match="accuracy"):
        THRESHOLDS.register("accuracy", (Threshold("accuracy/", 0.5),))
