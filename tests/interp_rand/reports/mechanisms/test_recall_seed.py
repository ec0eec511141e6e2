"""Recall's seed mechanism on ``zoo:recall-Aq_R`` at reduced sizes (the notes give the card at
n = 2000): what nearly holds (scrubbing to the two heads at the query) and what holds (the seed-bit
intervention acts as the rule says far above a control bit) and what does not (recall is not decided by the seed
alone: both S(seed) predictions fail), and that wrong variants are caught."""

from __future__ import annotations

import pytest
import torch

from circuits.graph.nodes import Node
from circuits.mechanisms import check_mechanism
from interp_rand import zoo
from interp_rand.reports.mechanisms import recall_seed
from interp_rand.reports.mechanisms.recall_seed import RULE, flip_intervention, in_stored_set, mechanism, stored_set


@pytest.fixture(scope="module")
def recall():
    torch.set_num_threads(1)
    ckpt = zoo.load(recall_seed.RUN.removeprefix("zoo:"))
    return ckpt.model().eval(), ckpt.spec.make_task()


def _card(model, task, **kw):
    return check_mechanism(model, task, mechanism(task, n_predict=1500, **kw), n=400, n_pairs=100, n_random=3)


def _claims(card):
    return {c.text: c for c in card.claims}


def test_the_card_as_found(recall):
    model, task = recall
    card = _card(model, task)
    claims = _claims(card)
    # scrubbing to the two heads at the query keeps most of the behaviour (0.883 at n = 2000,
    # just under the 0.9 bar: the heads carry the value *with* its interference), far above
    # random location sets of the same size
    scrub = card.scrubbing
    assert 0.8 <= scrub.share["logprob"] <= 0.95 and scrub.control_mean("logprob") <= scrub.share["logprob"] - 0.5
    # the algorithm says "the queried value"; the model recalls only ~0.85 of queries
    assert claims["the algorithm's answer is the model's answer"].verdict.outcome == "fails"
    for check in card.interchange:  # IIA at the model's own accuracy, far above every control
        assert check.iia >= 0.75 and max(check.controls.values()) <= 0.3
    inside, outside = card.predictions
    # the rule carries information about recall on held-out seeds ...
    assert inside.accuracy_where > outside.accuracy_where + 0.08
    # ... but neither prediction holds: failure is not a function of the seed
    assert claims[f"prediction: the model succeeds on {inside.name}"].verdict.outcome == "fails"
    assert claims[f"prediction: the model fails on {outside.name}"].verdict.outcome == "fails"


def test_retrieval_moved_to_the_first_pair_fails(recall):
    model, task = recall
    wrong = (Node("head", 0, 0, position=0), Node("head", 1, 0, position=0))
    card = _card(model, task, retrieved_at=wrong)
    assert _claims(card)["causal scrubbing keeps the model's behaviour"].verdict.outcome == "fails"
    assert card.scrubbing.share["logprob"] <= 0.5
    assert card.interchange[1].iia <= 0.3


def test_the_inverted_rule_predicts_backwards(recall):
    model, task = recall
    inverted = tuple((b, 1 - v) for b, v in RULE)
    inside, outside = _card(model, task, rule=inverted).predictions
    assert inside.accuracy_where < outside.accuracy_where - 0.08


def test_flipping_the_rule_bit_moves_the_key_as_predicted(recall):
    model, task = recall
    results = {(r.bit, r.site): r for r in flip_intervention(model, task, 1500, torch.Generator().manual_seed(1))}
    rule = results[("b(q)", "everywhere")]
    control = results[("another bit (control)", "everywhere")]
    assert rule.in_after > rule.in_before + 0.08 and rule.out_after < rule.out_before - 0.08
    assert rule.as_predicted >= 0.7 and control.as_predicted <= 0.6
    # the seed decides through the pairs' tokens (the stored keys), not the query's
    assert results[("b(q)", "pair tokens")].as_predicted >= 0.7
    assert results[("b(q)", "query token")].as_predicted <= 0.6
    # seen only by the queried pair's own token, the few changes it makes all go the rule's way
    assert results[("b(q)", "queried pair's token")].as_predicted >= 0.9
    assert results[("another bit (control)", "queried pair's token")].as_predicted <= 0.6


def test_the_rule_reads_one_bit_per_key():
    seed = torch.zeros(10)
    assert stored_set(seed) == [k for k, (_, v) in enumerate(RULE) if v == 0]
    keys = torch.arange(12)
    assert torch.equal(in_stored_set(torch.ones(12, 10), keys), torch.tensor([v == 1 for _, v in RULE]))
    with pytest.raises(ValueError, match="one \\(bit"):
        mechanism(zoo.load("recall-Aq_R").spec.make_task(), rule=((0, 1),))


def test_the_shortfall_line_is_the_key_code_account_measured_and_none_where_it_does_not_fit(recall):
    """Where S(seed) falls short, measured: crosstalk predicts failure beyond the signal and another
    seed's codes rescue beyond its values (numbers that could come out the other way); a softmax
    recall model, which the exact key-code split does not fit, gets no line rather than a wrong one."""
    import re

    from interp_rand.model import HookedTransformer

    model, task = recall
    line = recall_seed.shortfall(model, task)
    auc, signal, codes, values = (float(x) for x in re.search(
        r"AUC ([\d.]+), the signal alone ([\d.]+)\), and another seed's codes alone rescue ([\d.]+) of failing "
        r"recalls, its values ([\d.]+)", line).groups())
    assert auc > signal + 0.1 and codes > values + 0.2
    softmax = HookedTransformer(task.model_config(attention="softmax"), seed=0)
    assert recall_seed.shortfall(softmax, task) is None
