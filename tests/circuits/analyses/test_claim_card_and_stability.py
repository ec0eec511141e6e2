"""Claim cards and stability matrices."""

from __future__ import annotations

import json

import pytest
import torch
from circuit_models import make_model, micro_model, micro_pairs, token_pairs

from circuits import discover
from circuits.analyses.claim_card import claim_card, random_keep_masks
from circuits.analyses.stability import across_methods, across_models, across_resamples, agreement_matrix
from circuits.draw.claim_card import claim_card_html
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select


@pytest.fixture(scope="module")
def micro():
    model = micro_model()
    clean, corrupted = micro_pairs()
    return model, clean, corrupted


def test_agreement_matrix_by_hand(micro):
    model, clean, corrupted = micro
    eap = discover(model, clean, corrupted, method="eap")
    other = EdgeScores(eap.graph, torch.where(eap.graph.mask, torch.rand(eap.graph.shape,
                                              generator=torch.Generator().manual_seed(0)), 0.0))
    m = agreement_matrix({"eap": eap, "same": eap, "random": other}, 5, selection="top_k", what="test")
    a, c = set(select(eap, 5, "top_k").edges), set(select(other, 5, "top_k").edges)
    assert m.jaccard[0][1] == 1.0 and m.jaccard[0][2] == pytest.approx(len(a & c) / len(a | c))
    assert m.spearman[0][1] == pytest.approx(1.0)
    assert m.mean_jaccard == pytest.approx((1 + 2 * m.jaccard[0][2]) / 3)
    assert m.chance_jaccard == pytest.approx(5 / (2 * eap.graph.n_edges - 5))
    with pytest.raises(ValueError, match="at least two"):
        agreement_matrix({"eap": eap}, 5)


def test_the_micro_circuit_is_stable_and_methods_agree(micro):
    model, clean, corrupted = micro
    res = across_resamples(model, clean, corrupted, k=3, method="eap", n_resamples=3)
    assert res.labels == ("all", "resample 1", "resample 2", "resample 3") and res.min_jaccard == 1.0
    meth = across_methods(model, clean, corrupted, k=3, methods=("exact", "eap"))
    assert meth.jaccard[0][1] == 1.0


def test_twins_of_a_random_model_disagree_more_than_a_model_with_itself():
    clean, corrupted = token_pairs()
    from interp_rand.model.transformer import HookedTransformer

    a = make_model()
    b = HookedTransformer(a.cfg, seed=2).eval()
    twins = across_models({"a": a, "a again": a, "b": b}, clean, corrupted, k=10, method="eap")
    assert twins.jaccard[0][1] == 1.0 and twins.jaccard[0][2] < 1.0


def test_random_keep_masks_have_k_real_edges(micro):
    model, clean, corrupted = micro
    scores = discover(model, clean, corrupted, method="eap")
    masks = random_keep_masks(scores, 7, 4, seed=0)
    assert all(int(m.sum()) == 7 and not bool((m & ~scores.graph.mask).any()) for m in masks)
    assert not torch.equal(masks[0], masks[1])


def test_claim_card_of_the_micro_circuit_holds_and_of_a_wrong_circuit_fails(micro, tmp_path):
    model, clean, corrupted = micro
    card = claim_card(model, clean, corrupted, k=3, method="eap", pairs="token at N-2 changed", n_random=10,
                      n_resamples=2, compare_methods=("exact",), fractions=(0.01, 0.1, 1.0))
    outcome = {c.text.split(" (")[0]: c.verdict.outcome for c in card.claims}
    assert card.sufficiency > 0.99 and abs(card.necessity) < 0.01
    assert outcome["the circuit alone recovers the behaviour"] == "holds"
    assert outcome["ablating the circuit removes the behaviour"] == "holds"
    assert card.stability.min_jaccard == 1.0 and card.methods.jaccard[0][1] == 1.0
    data = json.loads(json.dumps(card.to_dict()))
    assert data["n_edges"] == 3 and data["found_with"]["pairs"] == "token at N-2 changed"
    html = claim_card_html(card)
    assert card.verdict.upper() in html and "sufficiency" in html and "random circuits" in html

    scores = discover(model, clean, corrupted, method="eap")
    wrong = EdgeScores(scores.graph, torch.where(scores.graph.mask, 0.0, 0.0))
    wrong.scores[tuple(scores.graph.mask.nonzero()[:3].T)] = 1.0   # three arbitrary edges
    bad = claim_card(model, clean, corrupted, k=3, scores=wrong, method="eap", n_random=10, n_resamples=2,
                     fractions=(0.01, 1.0))
    assert bad.sufficiency < 0.5 and bad.verdict == "fails"


def _outcomes(card):
    return {c.text.split(" (")[0].split(":")[0]: c.verdict.outcome for c in card.claims}


def test_the_learned_control_is_on_the_trained_scale_and_a_random_model_as_good_fails(micro):
    """The random-initialised model's gap is near zero; the control never divides by it: it is
    the random model's effect over the trained gap. A 'random' control as good as the model (the
    model itself) fails the learned claim."""
    model, clean, corrupted = micro
    card = claim_card(model, clean, corrupted, k=3, method="eap", n_random=4, n_resamples=1, fractions=(0.1, 1.0))
    learned = card.claims[2]
    init = card.random_init
    assert abs(init.gap) < 0.05 * abs(card.gap)                  # the old denominator: near zero
    assert learned.control == pytest.approx(init.effect / card.gap) and learned.value == pytest.approx(card.sufficiency)
    assert learned.verdict.holds and "metric units" in learned.line() and "interval" in learned.line()
    data = json.loads(json.dumps(card.to_dict()))
    assert data["random_init"]["control_share_of_trained_gap"] == pytest.approx(learned.control)
    assert data["effects"]["circuit"] == pytest.approx(card.sufficiency * card.gap)
    html = claim_card_html(card)
    assert "never a denominator" in html and "logprob" in html

    same = claim_card(model, clean, corrupted, k=3, method="eap", n_random=4, n_resamples=1, fractions=(0.1, 1.0),
                      random_init=model)
    assert same.claims[2].verdict.outcome == "fails" and same.verdict == "fails"
    assert same.claims[0].verdict.holds   # sufficient, but no better than the 'random' model


def test_a_gap_below_the_floor_makes_every_share_claim_inconclusive(micro):
    """The same circuit measured in units 10^4 times smaller: the trained gap is below the floor,
    so sufficiency, necessity and learned are inconclusive (not failed); stability still holds."""
    from circuits.interventions.metrics import logprob

    model, clean, corrupted = micro

    def tiny(logits, batch):
        return 1e-4 * logprob(logits, batch)

    card = claim_card(model, clean, corrupted, k=3, method="eap", metric=tiny, n_random=4, n_resamples=1,
                      fractions=(0.1, 1.0))
    assert abs(card.gap) < 0.01
    assert [c.verdict.outcome for c in card.claims[:3]] == ["inconclusive"] * 3
    assert all("below the floor" in c.verdict.reason for c in card.claims[:3])
    assert card.claims[3].verdict.holds and card.verdict == "inconclusive"


def test_a_learned_circuit_of_the_zoo_sort_model_passes_the_learned_claim():
    """A trained fixture: the smallest circuit of zoo:sort recovering 0.9 of its behaviour is
    learned (its random-initialised twin carries a small fraction of the trained gap)."""
    from circuits import Ablation, smallest_faithful_circuit
    from interp_rand.reports.inputs import load_run_inputs

    inputs = load_run_inputs("zoo:sort", 24, 0, "task")
    model, clean, corrupted = inputs.model, inputs.pairs.clean, inputs.pairs.corrupted
    ablation = Ablation("resample")
    scores = discover(model, clean, corrupted, method="eap", ablation=ablation)
    circuit, _ = smallest_faithful_circuit(model, scores, clean, corrupted, ablation=ablation, target=0.9)
    card = claim_card(model, clean, corrupted, circuit=circuit, scores=scores, method="eap", ablation=ablation,
                      selection="connected", n_random=4, n_resamples=1, fractions=(0.1, 1.0), n_bootstrap=100)
    learned = card.claims[2]
    assert learned.verdict.holds, learned.line()
    assert learned.control < 0.5 * learned.value
