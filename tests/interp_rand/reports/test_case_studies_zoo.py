"""The case studies' claims on the zoo's trained models (``zoo:addition``, ``zoo:sort``), at
reduced sizes: each assertion is a claim ``interp-rand case-study`` prints, with its control;
and the same studies on TransformerLens's own model of the same weights.

Measured at the CLI's full sizes (closing note of issue 7): carry removed -> carry digits
0.0000, no-carry 1.0000, cascades 0.0000, random same-position controls 0.60 / 1.00 / 0.58;
sort heads a0.1 0.39, a0.0 0.31, a1.2 0.31 (random-init best 0.14), ablation mean drop 0.385
against 0.105 for random heads.
"""

from __future__ import annotations

import pytest
import torch

from interp_rand.reports.case_studies import CarryConfig, SortConfig, carry_study, sort_study
from interp_rand import zoo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def carry(zoo_carry_study):  # tests/conftest.py: CarryConfig(n_pairs=128, n_eval=600, n_cascade=300, n_probe=1500)
    return zoo_carry_study


def test_removing_the_carry_breaks_carry_digits_only(carry):
    """The issue's bar: carry digits to near chance, digits without carries stay >= 99%."""
    assert carry.baseline.carry > 0.99 and carry.baseline.no_carry > 0.99
    assert carry.removed.carry < 0.2
    assert carry.removed.no_carry >= 0.99
    assert carry.removed.cascade is not None and carry.removed.cascade < 0.2


def test_random_components_at_the_same_positions_carry_on(carry):
    for control in carry.controls:
        assert control.carry > carry.removed.carry + 0.2
        assert control.no_carry >= 0.99


def test_carry_probe_beats_its_controls_somewhere(carry):
    """At the hook the graph names, the carry_in probe is above its control task for every place;
    for at least one place its selectivity beats the random-init model's."""
    assert all(row["accuracy"] > row["control"] for row in carry.probe)
    assert any(row["selectivity"] > row["random_init_selectivity"] + 0.05 for row in carry.probe)


@pytest.fixture(scope="module")
def sort(zoo_sort_study):  # tests/conftest.py: SortConfig(n_pairs=64, n_eval=1500, n_controls=4)
    return zoo_sort_study


def test_next_element_heads_score_above_chance_and_random_init(sort):
    assert sort.heads
    best = float(sort.role_scores.max())
    assert best > sort.random_init_best + 0.1 and best > sort.chance_score + 0.1


def test_ablating_the_heads_hurts_more_than_random_heads(sort):
    drop = float((sort.baseline - sort.ablated).mean())
    control_drop = float((sort.baseline[None] - sort.controls).mean())
    assert drop > 0.2 and drop > 2 * control_drop


def test_duplicates_and_near_ties_are_sorted_with_attention_split_over_copies(sort):
    """The explanation the study prints: on a duplicated value the heads spread their attention
    over every copy, so the value is still read out; near-ties (gap 1) are sorted too."""
    dup, distinct = sort.ties["duplicate"], sort.ties["distinct"]
    assert dup["accuracy"] > 0.99 and sort.ties["gap"]["1"]["accuracy"] > 0.99
    assert dup["mass_same_value"] > dup["mass_exact_element"] + 0.1
    assert distinct["mass_same_value"] == pytest.approx(distinct["mass_exact_element"])


def test_studies_give_the_same_answers_on_a_transformer_bridge(sort):
    """TransformerLens's own model (``TransformerBridge``) of zoo:sort and zoo:addition yields
    the same heads, role scores, ablations and carry removal as our model."""
    from interp_rand.model.bridge import to_bridge

    ckpt = zoo.load("sort")
    bridged = sort_study(to_bridge(ckpt.model().eval()), ckpt.spec.make_task(),
                         SortConfig(n_pairs=64, n_eval=1500, n_controls=4))
    assert bridged.heads == sort.heads
    assert torch.allclose(bridged.role_scores, sort.role_scores, atol=1e-5)
    assert torch.equal(bridged.ablated, sort.ablated) and torch.equal(bridged.controls, sort.controls)


def test_carry_study_on_a_transformer_bridge(carry):
    from interp_rand.model.bridge import to_bridge

    ckpt = zoo.load("addition")
    config = CarryConfig(n_pairs=128, n_eval=600, n_cascade=300, n_probe=1500, n_controls=3)
    bridged = carry_study(to_bridge(ckpt.model().eval()), ckpt.spec.make_task(), config)
    assert bridged.components == carry.components
    assert bridged.removed == carry.removed and bridged.controls == carry.controls
    assert [r["selectivity"] for r in bridged.probe] == pytest.approx([r["selectivity"] for r in carry.probe], abs=1e-3)
