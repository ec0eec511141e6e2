"""The mechanism engine on the zoo's sort model: a hypothesis that is true by construction
holds, wrong ones fail (each check shown able to fail), and the pieces keep their contracts."""

import pytest
import torch

from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable, check_mechanism
from circuits.mechanisms.card import scrubbing_claim, variable_claim
from circuits.mechanisms.interchange import VariableCheck
from circuits.mechanisms.patching import agreeing_rows, mechanism_hooks, record, writer_locations
from circuits.mechanisms.scrubbing import Scrubbing, scrub
from interp_rand.training import load_checkpoint
from interp_rand.run_names import resolve_run


@pytest.fixture(scope="module")
def sort_run():
    ck = load_checkpoint(resolve_run("zoo:sort"))
    return ck.model(), ck.spec.make_task()


def _output_mechanism(task, rule, hook="blocks.1.hook_resid_post", shift=0, predictions=()):
    """next_k = rule(batch)[:, k], held in the residual stream at the position predicting y_k."""
    L = task.length
    variables = tuple(Variable(f"next_{k}", (lambda b, k=k: rule(b)[:, k]),
                               site=Site.at(hook, L + (k + shift) % L)) for k in range(L))
    return Mechanism("test-sort", "sort", variables,
                     answer=lambda b, **v: torch.stack([v[f"next_{k}"] for k in range(L)], 1),
                     answer_parents=tuple(v.name for v in variables), outputs=tuple(range(L)),
                     predictions=predictions, pseudocode="y_k = the k-th smallest input")


def _sorted(task):
    return lambda b: b.inputs[:, : task.length].sort(1).values


def test_true_hypothesis_holds_and_controls_stay_low(sort_run):
    model, task = sort_run
    dup = Prediction("duplicates", "lists with a repeated value", lambda b, v: b.metadata["n_distinct"] < task.length,
                     "succeed", 0.9)
    card = check_mechanism(model, task, _output_mechanism(task, _sorted(task), predictions=(dup,)), n=400, n_pairs=100,
                           n_random=3)
    assert card.verdict == "holds", card.lines()
    assert card.scrubbing.share["logprob"] > 0.99
    assert max(card.scrubbing.random_locations["logprob"]) < 0.5
    for check in card.interchange:
        assert check.iia > 0.95 and check.n_pairs >= 20
        assert all(x <= 0.3 for x in check.controls.values()), check.controls
    assert card.predictions[0].n_where > 10 and card.predictions[0].accuracy_where > 0.9
    assert set(card.to_dict()) >= {"verdict", "pseudocode", "scrubbing", "interchange", "claims", "seconds"}


def test_wrong_rule_fails_agreement(sort_run):
    model, task = sort_run
    unsorted = lambda b: b.inputs[:, : task.length]  # noqa: E731 - "copies the input in order"
    card = check_mechanism(model, task, _output_mechanism(task, unsorted), n=300, n_pairs=60, n_random=2)
    assert card.verdict == "fails"
    assert card.claims[0].verdict.outcome == "fails" and card.agreement < 0.5


def test_wrong_site_fails_interchange(sort_run):
    model, task = sort_run
    card = check_mechanism(model, task, _output_mechanism(task, _sorted(task), shift=1), n=300, n_pairs=60, n_random=2)
    outcomes = [variable_claim(c).verdict.outcome for c in card.interchange]
    assert "fails" in outcomes
    assert all(c.iia < 0.5 for c in card.interchange)


def test_scrub_keeping_everything_recovers_all_and_nothing_recovers_none(sort_run):
    model, task = sort_run
    batch = task.sample(200, torch.Generator().manual_seed(3))
    graph = ModelGraph.of(model, batch.inputs.shape[1])
    everything = _output_mechanism(task, _sorted(task))
    acts = record(model, batch, mechanism_hooks(graph, [v.site for v in everything.mapped]))
    object.__setattr__(everything, "readout", tuple(writer_locations(graph)))
    g = torch.Generator().manual_seed(0)
    full = scrub(model, graph, everything, batch, everything.values(batch), acts, g, n_random=1)
    assert full.share["logprob"] == pytest.approx(1.0, abs=1e-5)
    nothing = Mechanism("none", "sort", (), answer=lambda b: b.inputs[:, : task.length], answer_parents=(),
                        outputs=tuple(range(task.length)))
    empty = scrub(model, graph, nothing, batch, {}, acts, g, n_random=1)
    assert empty.share["logprob"] == pytest.approx(0.0, abs=1e-6)


def test_agreeing_rows_agree_and_move():
    values = torch.tensor([0, 1, 0, 2, 1, 0, 3, 1])
    rows = agreeing_rows(values, torch.Generator().manual_seed(0))
    assert torch.equal(values[rows], values)
    alone = torch.tensor([(values == v).sum() == 1 for v in values])
    assert torch.equal(rows == torch.arange(len(values)), alone)


def test_uninformative_controls_are_inconclusive_not_failures():
    check = VariableCheck("v", "site", 0.95, {"random_site": 0.6, "random_init": 0.0}, 100, 1.0)
    assert variable_claim(check).verdict.outcome == "inconclusive"
    few = VariableCheck("v", "site", 0.2, {"random_site": 0.0}, 5, 1.0)
    assert variable_claim(few).verdict.outcome == "inconclusive"
    unsolved = VariableCheck("v", "site", 0.2, {"random_site": 0.0}, 100, 0.5)
    assert variable_claim(unsolved).verdict.outcome == "inconclusive"
    metric = {"logprob": 0.0, "accuracy": 1.0}
    flat = Scrubbing(metric, metric, metric, {"logprob": float("nan"), "accuracy": float("nan")},
                     {"logprob": [0.0], "accuracy": [0.0]}, metric, 3, 10)
    assert scrubbing_claim(flat).verdict.outcome == "inconclusive"


def test_hypothesis_is_validated():
    var = lambda name, *parents: Variable(name, lambda b, **kw: b.inputs[:, 0], parents=parents)  # noqa: E731
    with pytest.raises(ValueError, match="cycle"):
        Mechanism("m", "t", (var("a", "b"), var("b", "a")), answer=lambda b, a: a, answer_parents=("a",), outputs=(0,))
    with pytest.raises(ValueError, match="unknown parents"):
        Mechanism("m", "t", (var("a", "zz"),), answer=lambda b, a: a, answer_parents=("a",), outputs=(0,))
    with pytest.raises(ValueError, match="unique"):
        Mechanism("m", "t", (var("a"), var("a")), answer=lambda b, a: a, answer_parents=("a",), outputs=(0,))
    with pytest.raises(ValueError, match="either nodes"):
        Site(nodes=(Node("mlp", 0, position=1),), hook="hook_embed", positions=(1,))
    with pytest.raises(ValueError, match="subspace needs a hook"):
        Site(nodes=(Node("mlp", 0, position=1),), subspace=2)


def test_counterfactual_recomputes_descendants_only():
    a = Variable("a", lambda b: b[:, 0])
    b_ = Variable("b", lambda b: b[:, 1])
    c = Variable("c", lambda b, a, b_: a + b_, parents=("a", "b_"))
    b_ = Variable("b_", lambda b: b[:, 1])
    mech = Mechanism("m", "t", (a, b_, c), answer=lambda batch, c: c, answer_parents=("c",), outputs=(0,))
    x = torch.tensor([[1, 2], [3, 4]])
    values = mech.values(x)
    assert mech.answer_of(x, values)[:, 0].tolist() == [3, 7]
    assert mech.counterfactual(x, values, "a", torch.tensor([10, 10]))[:, 0].tolist() == [12, 14]


def test_bridge_gives_the_same_card(sort_run):
    from interp_rand.model.bridge import to_bridge

    model, task = sort_run
    bridge = to_bridge(model)
    mech = _output_mechanism(task, _sorted(task), hook="blocks.1.hook_resid_pre")
    ours = check_mechanism(model, task, mech, n=200, n_pairs=40, n_random=1)
    theirs = check_mechanism(bridge, task, mech, n=200, n_pairs=40, n_random=1)
    assert [c.iia for c in ours.interchange] == pytest.approx([c.iia for c in theirs.interchange], abs=1e-6)
    assert ours.scrubbing.share["logprob"] == pytest.approx(theirs.scrubbing.share["logprob"], abs=1e-4)
    with pytest.raises(ValueError, match="hook_resid_mid feeds only"):
        check_mechanism(bridge, task, _output_mechanism(task, _sorted(task), hook="blocks.1.hook_resid_mid"), n=50)


def test_per_output_scores_each_output_on_its_own(sort_run):
    """One output wrong: scored per example the algorithm never agrees; per output it agrees on
    the other L-1 outputs, and a per-output mechanism's correct() must give [batch, m]."""
    model, task = sort_run
    L = task.length

    def last_wrong(b):
        s = _sorted(task)(b).clone()
        s[:, -1] = s[:, 0]  # "the largest is the smallest": wrong wherever the list is not constant
        return s

    whole = _output_mechanism(task, last_wrong)
    each = Mechanism(whole.name, whole.task, whole.variables, whole.answer, whole.answer_parents, whole.outputs,
                     pseudocode=whole.pseudocode, per_output=True)
    batch = task.sample(200, torch.Generator().manual_seed(0))
    from circuits.mechanisms.card import _agreement
    g = torch.Generator().manual_seed(1)
    assert _agreement(model, whole, batch, whole.values(batch), g)[0] < 0.1
    assert abs(_agreement(model, each, batch, each.values(batch), g)[0] - (L - 1) / L) < 0.05
    assert each.correct_of(batch, batch.targets[:, batch.answer_positions]).shape == (200, L)
    bad = Mechanism("x", "sort", whole.variables, whole.answer, whole.answer_parents, whole.outputs,
                    correct=lambda b, p: torch.ones(len(b), dtype=torch.bool), per_output=True)
    with pytest.raises(ValueError, match="per output"):
        bad.correct_of(batch, batch.targets[:, batch.answer_positions])
