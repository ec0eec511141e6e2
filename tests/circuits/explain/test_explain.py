"""``explain``: the primitive library, candidate enumeration with match accuracy, the search
that locates a candidate, and the whole search on ``zoo:sort`` (it rediscovers the rank
readout and rejects the next-larger search by a decisive experiment) and on a random-initialised
model (nothing fits: a partial answer, FAILS)."""

import pytest
import torch

from circuits.explain import PRIMITIVES, Frame, enumerate_candidates, explain, primitives_of, register_primitive
from circuits.explain.primitives import multiset_code
from interp_rand import make_task
from interp_rand.reports.mechanisms.sorting import _successor
from interp_rand.training import load_checkpoint
from probes.controls import random_init_like


@pytest.fixture(scope="module")
def sort_run():
    ckpt = load_checkpoint("zoo:sort")
    return ckpt.model().eval(), ckpt.spec.make_task()


@pytest.fixture(scope="module")
def sort_found(sort_run):
    model, task = sort_run
    return explain(model, task, n=600, n_pairs=150, n_random=3)


def test_multiset_codes_ignore_order_and_batch_but_not_content():
    rows = torch.tensor([[3, 1, 2], [2, 3, 1], [3, 3, 1], [1, 2, 4]])
    code = multiset_code(rows)
    assert code[0] == code[1] and len({int(c) for c in code[1:]}) == 3
    assert torch.equal(multiset_code(rows[2:3]), code[2:3])  # the same code in another batch


def test_search_and_digit_primitives_compute_what_they_say():
    sort = make_task("sort", length=5, vocab=10)
    batch = sort.sample(300, torch.Generator().manual_seed(0))
    frame = Frame(batch, sort)
    nl, order = PRIMITIVES.get("next_larger"), PRIMITIVES.get("order_statistic")
    for k in range(5):  # on the task both give the answer; next-larger is the flagship rival's rule
        assert torch.equal(order.compute(frame, k), batch.targets[:, batch.answer_positions[k]])
        expected = batch.inputs[:, :5].min(1).values if k == 0 else _successor(batch, 5, k, batch.inputs[:, 5 + k])
        assert torch.equal(nl.compute(frame, k), expected)
    add = make_task("addition", n_digits=3)
    batch = add.sample(2000, torch.Generator().manual_seed(1))
    frame = Frame(batch, add)
    full = torch.stack([PRIMITIVES.get("digit_sum").compute(frame, k) for k in range(4)], 1)
    one = torch.stack([PRIMITIVES.get("digit_sum_lookahead_1").compute(frame, k) for k in range(4)], 1)
    assert torch.equal(full, batch.answer_targets())
    # they differ exactly where the carry comes through a sum-9 place one below (a cascade)
    a, b = add.operand_digits(batch)
    pair = torch.cat([a + b, torch.zeros_like(a[:, :1])], 1)
    places = add.answer_places()
    below_is_nine = torch.stack([pair[:, p - 1] == 9 if p >= 1 else torch.zeros(len(batch), dtype=torch.bool)
                                 for p in places.tolist()], 1)
    differs = full != one
    assert bool(differs.any()) and bool(below_is_nine[differs].all())
    # a sort task has no operands: the digit family does not apply to it
    assert not PRIMITIVES.get("digit_sum").applies(Frame(sort.sample(2, torch.Generator()), sort))


def test_candidates_match_the_model_and_one_program_written_twice_is_merged(sort_run):
    model, task = sort_run
    batch = task.sample(400, torch.Generator().manual_seed(2))
    scored = {s.candidate.name: s for s in enumerate_candidates(model, task, batch)}
    assert scored["order_statistic"].match == 1.0 and scored["next_larger"].match == 1.0
    assert "order_statistic_desc_reversed" in scored["order_statistic"].same_as
    assert "order_statistic_desc_reversed" not in scored
    assert not scored["copy_source"].kept and scored["copy_source"].match < 0.5
    with pytest.raises(ValueError, match="unknown primitive families"):
        primitives_of(task, ["nope"])


def test_a_user_primitive_is_a_few_lines_and_joins_the_search(sort_run):
    model, task = sort_run
    prim = PRIMITIVES.get("running_max")
    with PRIMITIVES.temporarily("second_largest", prim.__class__("order", "second_largest", "the second largest",
                                                                  lambda f, k: f.source.sort(1).values[:, -2])):
        names = [s.candidate.name for s in enumerate_candidates(model, task, task.sample(50, torch.Generator()),
                                                                 ["order"])]
    assert "second_largest" in names and "next_larger" not in names
    assert callable(register_primitive)


def test_explain_rediscovers_the_rank_readout_and_rejects_next_larger(sort_found, sort_run, tmp_path):
    model, task = sort_run
    found = sort_found
    assert found.chosen == "order_statistic" == found.winner and found.verdict == "holds"
    mech = found.located["order_statistic"].mechanism
    L = task.length
    for k in range(L):  # the flagship's sites, found by the sweep: m0 at the output, fed by the layer-0 heads
        assert [n.name for n in mech.variable(f"y_{k}").site.nodes] == [f"m0@{L + k}"]
        assert {n.layer for n in mech.variable(f"read_{k}").site.nodes} == {0}
    pair = found.comparison.pairs[0]
    assert pair.winner == "order_statistic" and any(e.kind == "edit" for e in pair.deciding())
    assert "m0 @ r_k" in found.pseudocode() and "k-th smallest" in found.pseudocode()
    from interp_rand.reports.explain import ExplainReport

    report = ExplainReport(found, "zoo:sort")
    # in a notebook: a short repr and an HTML view that leads with the verdict
    assert repr(found).startswith("<Explanation: HOLDS: order_statistic") and len(repr(found)) < 300
    assert "HOLDS: order_statistic" in report._repr_html_() and "<pre" in found._repr_html_()
    assert len(repr(found.cards["order_statistic"])) < 300
    assert report.figure().layout.title.text.startswith("order_statistic") and len(report.figure().data) > 0
    report.write(tmp_path)
    assert "HOLDS: order_statistic" in (tmp_path / "explain.html").read_text()
    assert '"chosen": "order_statistic"' in (tmp_path / "explain.json").read_text()


def test_on_a_random_model_nothing_fits_and_the_answer_says_so(sort_run):
    model, task = sort_run
    fresh = random_init_like(model, seed=3)
    found = explain(fresh, task, n=300, n_pairs=100, n_random=2, max_candidates=1)
    assert not found.fits and found.verdict == "fails"
    assert found.headline().startswith("no candidate reaches match 0.9")
    assert found.shortfall()


def test_an_explanation_carried_to_another_length_keeps_its_components_and_detects_the_break(sort_run, sort_found):
    """relocate at the trained length is the located mechanism itself; at length 4 each answer
    sits at the same components at its own position. The zoo sort model (learned positions,
    trained at length 5 only) answers no list of length 4 right, and the answer variable's
    interchange accuracy falls there: the first fall is named at length 4."""
    from circuits.explain.by_length import mechanism_by_length
    from circuits.explain.localise import relocate
    from interp_rand.tasks.lengths import at_length

    model, task = sort_run
    located = sort_found.located[sort_found.chosen]
    same = relocate(located, model, task, task.sample(50, torch.Generator().manual_seed(1)))
    assert [v.site for v in same.family("y")] == [v.site for v in located.mechanism.family("y")]
    short = at_length(task, 4)
    shorter = relocate(located, model, short, short.sample(50, torch.Generator().manual_seed(1)))
    assert len(shorter.family("y")) == 4
    for k, v in enumerate(shorter.family("y")):
        trained = located.mechanism.family("y")[k].site.nodes
        assert [(n.kind, n.layer, n.head) for n in v.site.nodes] == [(n.kind, n.layer, n.head) for n in trained]
        assert {n.position for n in v.site.nodes} == {4 + k}  # output k of length 4 is predicted at 4 + k
    found = mechanism_by_length(model, task, [4], located=located, n=200, n_pairs=60)
    assert found.iia[5]["y"] > 0.5 and found.iia[4]["y"] < found.iia[5]["y"] - 0.1
    assert found.first_fall()[:2] == (4, "y")
