"""Recall as a memory of key codes (:mod:`circuits.analyses.recall_codes`): the split of the
answer into signal, crosstalk and rest is exact; the zoo's randomized model redraws its codes
with the seed and its ERM twin does not; the AUC and the claims can fail."""

import math

import pytest
import torch

from circuits.analyses.recall_codes import auc, check_architecture, code_claims, code_study, decompose
from interp_rand.training import load_checkpoint


@pytest.fixture(scope="module")
def recall_runs():
    out = {}
    for name in ("recall-Aq_R", "recall-AE_R"):
        ckpt = load_checkpoint(f"zoo:{name}")
        out[name] = (ckpt.model().eval(), ckpt.spec.make_task())
    return out


def test_signal_crosstalk_and_rest_add_up_to_the_margin(recall_runs):
    model, task = recall_runs["recall-Aq_R"]
    batch = task.sample(200, torch.Generator().manual_seed(0))
    d = decompose(model, batch)
    assert torch.allclose(d.signal + d.crosstalk.sum(1) + d.rest, d.margin, atol=1e-4)
    rows = torch.arange(len(batch))
    assert bool((d.crosstalk[rows, d.queried] == 0).all())
    # the margin is the model's own: a wrong bit is a negative margin
    logits = model(batch.inputs, seeds=batch.seeds)[:, task.n_pairs]
    wrong = ((logits > 0).float() != batch.targets[:, task.n_pairs]).any(1)
    assert torch.equal(wrong, d.fails)


@pytest.fixture(scope="module")
def studies(recall_runs):
    return {name: code_study(*run, n_inputs=400, n_seeds=32) for name, run in recall_runs.items()}


def test_the_randomized_model_redraws_its_codes_and_its_erm_twin_does_not(studies):
    r, e = studies["recall-Aq_R"], studies["recall-AE_R"]
    assert e.overlap_correlation > 0.99 > 0.95 > r.overlap_correlation
    assert e.collide_every_seed > 0.5 and r.collide_every_seed < 0.1
    assert r.interference_auc > r.signal_auc + 0.1
    claims = code_claims(r.to_dict(), e.to_dict(), "R", "E")
    assert claims[1].verdict.outcome == "holds" and claims[2].verdict.outcome == "holds"
    # the same model against itself: no randomized signature, the comparison claims fail
    same = code_claims(e.to_dict(), e.to_dict(), "E", "E")
    assert [c.verdict.outcome for c in same[1:4]] == ["fails", "fails", "fails"]


def test_auc_and_the_architecture_check():
    score = torch.tensor([0.1, 0.4, 0.35, 0.8])
    assert auc(score, torch.tensor([False, False, True, True])) == pytest.approx(0.75)
    assert auc(score, torch.tensor([False, False, False, True])) == 1.0
    assert auc(torch.zeros(4), torch.tensor([True, False, True, False])) == 0.5
    assert math.isnan(auc(score, torch.zeros(4, dtype=torch.bool)))
    sort = load_checkpoint("zoo:sort").model()
    with pytest.raises(ValueError, match="needs linear attention"):
        check_architecture(sort)


def test_the_seed_rescues_recall_through_the_codes_and_not_through_the_values(studies):
    """(c): another seed's codes alone (the query's and every key's) rescue the randomized
    model's failing recalls nearly as often as the whole seed, its values alone far less; the
    ERM twin's failures are rescued by neither more than the other, so the claim fails there.
    Among failing recalls one pair overturns, a seed that separates the pair rescues beyond
    one under which it still collides."""
    r, e = studies["recall-Aq_R"], studies["recall-AE_R"]
    anywhere, twin = r.details["transplant_any"], e.details["transplant_any"]
    assert anywhere["n_cases"] >= 100 and twin["n_cases"] >= 20
    assert anywhere["all_codes"] > anywhere["values"] + 0.3
    assert anywhere["all_codes"] > anywhere["whole_seed"] - 0.1
    assert abs(twin["all_codes"] - twin["values"]) < 0.1
    moved = r.details["transplant"]
    assert moved["whole_seed"] == pytest.approx(r.rescue_switch)  # the same seed, the same cases
    assert r.rescue_switch > r.details["rescue_still_colliding"] + 0.15
    codes = [c for c in code_claims(r.to_dict(), e.to_dict(), "R", "E") if "acts through the codes" in c.text]
    assert codes[0].verdict.holds
    same = [c for c in code_claims(e.to_dict(), e.to_dict(), "E", "E") if c.text.startswith("(c)")]
    assert len(same) == 3 and not any(c.verdict.holds for c in same)
