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


def test_the_randomized_model_redraws_its_codes_and_its_erm_twin_does_not(recall_runs):
    r = code_study(*recall_runs["recall-Aq_R"], n_inputs=150, n_seeds=24)
    e = code_study(*recall_runs["recall-AE_R"], n_inputs=150, n_seeds=24)
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
