"""One hypothesis type: a variable written once for all its instances (:meth:`Variable.each`),
a registered probe variable read as a mechanism variable and its counterfactual rule as a
one-variable mechanism, and one counterfactual-pair search under both."""

import pytest
import torch

import probes  # noqa: F401  (registers the variables)
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Site, Variable, probe_mechanism, probe_variables
from circuits.mechanisms.interchange import variable_pairs
from interp_rand import make_task
from probes.interchange import interchange_pairs
from probes.variables import variable_labels


def test_a_family_is_written_once_and_each_instance_keeps_its_own_parents_and_site():
    hist = Variable.each("hist", range(3), lambda b, i: b[:, i], site=lambda i: Site.of(Node("mlp", 0, position=i)))
    y = Variable.each("y", range(3), lambda b, i, **p: p[f"hist_{i}"] * 10 + i, parents=lambda i: (f"hist_{i}",),
                      description=lambda i: f"step {i}")
    mech = Mechanism("m", "t", hist + y, answer=lambda b, **v: torch.stack([v[f"y_{i}"] for i in range(3)], 1),
                     answer_parents=tuple(v.name for v in y), outputs=(0, 1, 2))
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert mech.answer_of(x, mech.values(x)).tolist() == [[10, 21, 32], [40, 51, 62]]
    assert [v.name for v in mech.family("y")] == ["y_0", "y_1", "y_2"]
    assert [v.instance for v in mech.family("hist")] == [0, 1, 2]
    assert mech.variable("y_2").parents == ("hist_2",) and mech.variable("y_2").description == "step 2"
    assert mech.variable("hist_1").site.nodes == (Node("mlp", 0, position=1),)
    with pytest.raises(KeyError, match="no variable family 'z'"):
        mech.family("z")


def test_a_probe_variable_is_a_mechanism_variable_and_its_rule_a_mechanism():
    task = make_task("addition", n_digits=3)
    batch = task.sample(3000, torch.Generator().manual_seed(0))
    labels = variable_labels(task, batch, "carry_in")
    family = probe_variables(task, "carry_in", site=lambda k: Site.at("blocks.1.hook_resid_mid", 7 + k, subspace=1))
    assert [v.name for v in family] == [f"carry_in_{k}" for k in range(4)]
    assert family[1].site.positions == (8,) and "place 2" in family[1].description
    assert torch.equal(family[2].compute(batch), labels.labels[:, 2])

    mech = probe_mechanism(task, "carry_in", "place 2")
    values = mech.values(batch)
    # the rule applied to the variable's own value is the task's answer at that digit
    assert mech.outputs == (1,)
    assert torch.equal(mech.answer_of(batch, values)[:, 0], batch.answer_targets()[:, 1])
    # one pair search: the mechanism's pairs are the probe rule's counterfactuals, and the
    # probes' interchange pairs obey the same rule
    pairs = variable_pairs(mech, batch, values, "carry_in_1", torch.arange(len(batch)), 200,
                           torch.Generator().manual_seed(1))
    assert len(pairs) == 200
    expected = labels.counterfactual(batch[pairs.base], 1, labels.labels[pairs.source, 1])
    assert torch.equal(pairs.targets[:, 0], expected)
    assert bool((pairs.targets[:, 0] != batch.answer_targets()[pairs.base, 1]).all())
    split = interchange_pairs(task, batch, "carry_in", 1, 200, 0.5, torch.Generator().manual_seed(1))
    assert torch.equal(split.test_pairs.targets[:, 0],
                       labels.counterfactual(batch[split.test_pairs.base], 1, split.test_pairs.new))


def test_probe_variables_that_cannot_be_mechanisms_are_refused_with_the_reason():
    sort = make_task("sort", length=4, vocab=8)
    assert len(probe_variables(sort, "rank")) == 4  # labels only: a variable, no rule
    with pytest.raises(ValueError, match="no counterfactual rule"):
        probe_mechanism(sort, "rank", 0)
    with pytest.raises(ValueError, match="has no instance 'place 9'"):
        probe_mechanism(make_task("addition", n_digits=3), "carry_in", "place 9")
    recall = make_task("recall", n_pairs=4)
    with pytest.raises(ValueError, match="defined by a model's outputs"):
        probe_variables(recall, "key_stored")
