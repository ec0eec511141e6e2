"""The coloring-seed mechanism on zoo:coloring-Aq_R: the rule is read off the weights, agrees
with the model on most vertices (below the issue's 0.9: the finding), scrubbing keeps the
model's behaviour, and wrong variants (layers swapped, the classical local-extremum rule) fail."""

import dataclasses

import pytest
import torch

from circuits.graph.nodes import Node
from circuits.mechanisms import Site, check_mechanism
from interp_rand.reports.mechanisms import coloring_seed as cs
from interp_rand.seeded_evaluation.forward import logits_of
from interp_rand.seeded_evaluation.symmetry_rule import classical_coloring
from interp_rand.tasks.coloring import neighbours

SMALL = dict(n=240, n_pairs=60, n_random=2, seed=0)


@pytest.fixture(scope="module")
def run():
    return cs.load()


def test_the_colour_table_is_block_0s_ov(run):
    model, _ = run
    assert cs.dictated_colours(model).tolist() == cs.DICTATES[cs.ID_CLASS].tolist()


def test_rule_agrees_on_most_vertices_and_beats_its_controls(run):
    model, task = run
    batch = task.sample(3000, torch.Generator().manual_seed(5))
    with torch.no_grad():
        colour = logits_of(model, batch).argmax(-1)
    state = cs.rule_state(batch)
    agree = float((state["colour"] == colour).float().mean())
    other_noise = cs.rule_colours(task.with_seeds(batch, batch.seeds.roll(1, 0)))
    classical = classical_coloring(batch.seeds[..., 0], neighbours(batch))
    assert 0.86 < agree < 0.9  # the finding: close to, not at, the 0.9
    assert float((other_noise == colour).float().mean()) < agree - 0.08  # the noise steps matter
    assert float((classical == colour).float().mean()) < 0.5  # not the local-extremum rule (0.395 under its best relabelling)
    strong = state["read"] < cs.WEAK
    assert float((state["colour"] == colour)[strong].float().mean()) > 0.95  # the copied colours are the model's
    conflict = cs.strong_conflict(batch, state)  # two neighbours copied the same colour: one yields
    assert conflict.sum() > 100
    yielded = float((state["colour"] == colour)[conflict].float().mean())
    both_keep = float((state["read"] == colour)[conflict].float().mean())
    assert yielded > 0.7 and yielded > both_keep + 0.15


def test_the_shortfall_is_located_in_the_weak_vertices_noise_step_in_every_id_class(run):
    """Over the first 20,000 distinct cycles: the rule's copied colours are the model's in every id
    class (strong vertices), and its shortfall lies in the weak vertices' noise comparison, in
    every class alike (not in one id class's table)."""
    model, task = run
    found = cs.agreement_over_cycles(model, task, n_cycles=20000)
    assert found["cycles"] < 0.5 < found["vertices"]  # whole colourings: far from the 0.9 bar
    for name in cs.CLASS_NAMES:
        part = found["per_class"][name]
        assert part["strong"] > 0.95 and part["weak"] < 0.85, (name, part)
        assert 0 < part["weak_share"] < 1


def test_card_scrubbing_holds_and_swapped_layers_fail(run):
    model, task = run
    mech = cs.mechanism(task)
    card = check_mechanism(model, task, mech, **SMALL)
    assert card.claims[0].verdict.outcome == "fails" and 0.85 < card.agreement < 0.9 and card.chance_agreement < 0.5
    share = card.scrubbing.share["logprob"]
    assert share > 0.85 and share > card.scrubbing.control_mean("logprob") + 0.2
    swapped = tuple(dataclasses.replace(v, site=Site.of(Node("head", 1 - v.site.nodes[0].layer, 0,
                                                             position=v.site.nodes[0].position)))
                    for v in mech.variables)
    wrong = check_mechanism(model, task, dataclasses.replace(mech, variables=swapped, predictions=()), **SMALL)
    assert wrong.scrubbing.share["logprob"] < 0.6 and wrong.claims[1].verdict.outcome == "fails"
    right_iia = sum(c.iia for c in card.interchange) / len(card.interchange)
    wrong_iia = sum(c.iia for c in wrong.interchange) / len(wrong.interchange)
    assert right_iia > wrong_iia + 0.2


def test_mechanism_refuses_other_tasks(run):
    _, task = run
    with pytest.raises(ValueError, match="10-vertex"):
        cs.mechanism(dataclasses.replace(task, n_vertices=8))


def test_the_shortfall_line_names_the_weak_vertices_step(run, monkeypatch):
    """The one-line shortfall the case study and the demo show is agreement_over_cycles' located
    numbers (here on fewer cycles): the weak vertices below those that copy a colour."""
    import re

    monkeypatch.setattr(cs, "SHORTFALL_CYCLES", 5000)
    line = cs.shortfall(*run)
    weak, strong = (float(x) for x in re.search(r"model on ([\d.]+) of weak vertices .* against ([\d.]+) of those", line).groups())
    assert line.startswith("step 3") and weak < strong - 0.1 and "5,000 cycles measured" in line
