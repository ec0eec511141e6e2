"""Choosing between mechanisms: treeified scrubbing recomputes what a hypothesis says is
computed (exact when every location is named, failing when the named parents are not what the
model reads), the decisive experiments find where rivals disagree and name the one the model
follows, and the rule says INDISTINGUISHABLE rather than pick when nothing separates them."""

import dataclasses

import pytest
import torch

from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Site, Variable, check_mechanism, compare_mechanisms
from circuits.mechanisms.compare import decide
from circuits.mechanisms.decisive import (Experiment, judge, patch_prediction, wilson, written_edits,
                                          written_positions)
from circuits.mechanisms.patching import mechanism_hooks, record
from circuits.mechanisms.scrubbing import scrub
from interp_rand.reports.mechanisms import sorting
from interp_rand.run_names import resolve_run
from interp_rand.training import load_checkpoint


@pytest.fixture(scope="module")
def sort_run():
    torch.set_num_threads(1)
    ck = load_checkpoint(resolve_run("zoo:sort"))
    return ck.model().eval(), ck.spec.make_task()


def _layered(task, graph, value, whole_residual: bool):
    """tok (every embedding) -> mid (all of layer 0) -> out (all of layer 1): every location
    named; ``value`` the variables' common value (unique per row: only the row itself agrees)."""
    P = range(graph.n_positions)

    def layer(l):
        return Site.of(*[Node("head", l, h, p) for h in range(4) for p in P], *[Node("mlp", l, position=p) for p in P])

    variables = (Variable("tok", value, site=Site.of(*[Node("embed", position=p) for p in P])),
                 Variable("mid", value, ("tok",), site=layer(0)), Variable("out", value, ("mid", "tok"), site=layer(1)))
    return Mechanism("layers", "sort", variables, answer=lambda b, **v: b.inputs[:, : task.length].sort(1).values,
                     answer_parents=("out", "mid", "tok") if whole_residual else ("out",),
                     outputs=tuple(range(task.length)))


def test_treeified_scrub_is_exact_when_every_location_is_named_and_recomputed(sort_run):
    model, task = sort_run
    g = torch.Generator().manual_seed(0)
    batch = task.sample(200, g)
    graph = ModelGraph.of(model, batch.inputs.shape[1])
    row_id = lambda b, **_: torch.arange(len(b))  # noqa: E731 - only the row itself agrees
    constant = lambda b, **_: torch.zeros(len(b), dtype=torch.long)  # noqa: E731 - every row agrees
    results = {}
    for name, value, reads_tok in (("exact", row_id, True), ("skips the residual", row_id, False),
                                   ("says nothing", constant, True)):
        mech = _layered(task, graph, value, reads_tok)
        acts = record(model, batch, mechanism_hooks(graph, [v.site for v in mech.mapped]))
        results[name] = scrub(model, graph, mech, batch, mech.values(batch), acts, g, n_random=1)
    exact = results["exact"]
    # out, mid inside out's tree, and mid again for the answer (treeified: a forward per path); tok is the input
    assert exact.details["forwards"] == 3
    assert exact.share["logprob"] == pytest.approx(1.0, abs=1e-5) and exact.scrubbed["accuracy"] == 1.0
    # the unembedding reads the whole residual stream: an answer said to read only layer 1 has
    # the embedding and layer 0 resampled under it
    assert results["skips the residual"].scrubbed["accuracy"] < 0.9
    assert results["says nothing"].scrubbed["accuracy"] < 0.1


def test_scrubbing_rejects_the_sort_rivals_and_keeps_the_rank_readout(sort_run):
    model, task = sort_run
    cards = {m.name: check_mechanism(model, task, m, n=400, n_pairs=80, n_random=3)
             for m in [sorting.mechanism(task, n_lists=300), *sorting.rivals(task).values()]}
    whole = {k: c.claims[2] for k, c in cards.items()}  # the whole-output claim
    assert whole["sort-rank-readout"].verdict.holds, cards["sort-rank-readout"].lines()
    assert cards["sort-rank-readout"].scrubbing.details["recursive"]
    for rival in ("sort-next-larger", "sort-copy-heads"):
        assert cards[rival].verdict == "fails"
        assert whole[rival].verdict.outcome == "fails", cards[rival].lines()  # whole outputs lost
        assert cards[rival].scrubbing.scrubbed["accuracy"] < cards["sort-rank-readout"].scrubbing.scrubbed["accuracy"] - 0.05


def test_written_tokens_are_found_and_edited(sort_run):
    _, task = sort_run
    batch = task.sample(50, torch.Generator().manual_seed(1))
    L = task.length
    assert written_positions(batch) == list(range(L + 1, 2 * L))  # y_0 .. y_{L-2}; SEP is not an answer
    edited = written_edits(batch, L + 1)
    src = edited.metadata["edited_from"]
    assert bool((edited.inputs[:, L + 1] != batch.inputs[src, L + 1]).all())
    same = torch.ones(edited.inputs.shape[1], dtype=torch.bool)
    same[L + 1] = False
    assert bool((edited.inputs[:, same] == batch.inputs[src][:, same]).all())


def test_compare_names_the_rank_readout_and_refuses_to_pick_between_equals(sort_run):
    model, task = sort_run
    flagship = sorting.mechanism(task, n_lists=300)
    result = compare_mechanisms(model, task, [flagship, sorting.next_larger_mechanism(task)], n=300, cards=False)
    assert result.winner == "sort-rank-readout", "\n".join(result.lines())
    edit = next(e for e in result.pairs[0].experiments if e.kind == "edit" and e.name.startswith(f"written token @{task.length + 1}"))
    assert edit.winner == "sort-rank-readout" and edit.n_disagree >= 100 and edit.share_b < 0.1
    # a prediction the rival makes too does not discriminate: both sort lists with duplicates;
    # only the rank readout says a lowered written token leaves every answer right
    assert result.discriminating["sort-rank-readout"]["lists with duplicates"] is False
    assert result.discriminating["sort-rank-readout"]["a written token lowered"] is True
    # the same algorithm under another name: no experiment separates them, nothing is picked
    twin = dataclasses.replace(flagship, name="twin")
    same = compare_mechanisms(model, task, [flagship, twin], n=200, cards=False)
    assert same.winner is None and same.pairs[0].outcome == "indistinguishable"
    assert all(e.n_disagree == 0 for e in same.pairs[0].experiments)


def test_a_patch_a_mechanism_does_not_name_predicts_no_change(sort_run):
    _, task = sort_run
    batch = task.sample(64, torch.Generator().manual_seed(2))
    source = torch.arange(64).roll(1)
    flagship, copy = sorting.mechanism(task, n_lists=10), sorting.copy_heads_mechanism(task)
    m0 = Site.of(Node("mlp", 0, position=task.length + 2))
    unchanged = patch_prediction(copy, m0, batch, source)
    assert torch.equal(unchanged, copy.answer_of(batch, copy.values(batch)))
    moved = patch_prediction(flagship, m0, batch, source)
    assert torch.equal(moved[:, 2], batch.inputs[source, : task.length].sort(1).values[:, 2])
    # one head of the four holding the histogram: part of a site, ambiguous, not scored
    assert patch_prediction(flagship, Site.of(Node("head", 0, 0, task.length + 2)), batch, source) is None


def test_the_rule_of_one_experiment_and_of_a_pair():
    model_answer = torch.tensor([[1], [1], [1], [2]] * 10)
    a, b = torch.ones_like(model_answer), torch.full_like(model_answer, 2)
    e = judge("edit", "x", "A", "B", 40, model_answer, a, b)
    assert e.winner == "A" and e.follows_a == 30 and e.follows_b == 10
    few = judge("edit", "x", "A", "B", 10, model_answer[:10], a[:10], b[:10])
    assert few.winner is None  # fewer than MIN_DISAGREE
    assert judge("edit", "x", "A", "B", 40, torch.zeros_like(a), a, b).winner == "neither"
    lo, hi = wilson(0, 0)
    assert (lo, hi) == (0.0, 1.0) and wilson(30, 40)[0] > 0.5
    mk = lambda w: Experiment("edit", "x", "A", "B", 40, 40, 0, 0, w, "")  # noqa: E731
    assert decide("A", "B", [mk("A"), mk(None)]).winner == "A"
    assert decide("A", "B", [mk("A"), mk("B")]).outcome == "split"
    assert decide("A", "B", [mk(None)]).outcome == "indistinguishable"
    assert decide("A", "B", [mk("neither")]).outcome == "neither"


def test_a_prediction_is_judged_at_the_outputs_it_concerns(sort_run):
    _, task = sort_run
    mech = sorting.mechanism(task, n_lists=10)
    batch = task.sample(40, torch.Generator().manual_seed(3))
    predicted = batch.targets[:, batch.answer_positions].clone()
    predicted[:, 3] += 1  # one output in five wrong on every input
    assert not bool(mech.correct_of(batch, predicted).any())
    assert bool(mech.correct_of(batch, predicted, only=(0, 1)).all())
    assert not bool(mech.correct_of(batch, predicted, only=(3,)).any())
