"""Compositions: a candidate's answer through named intermediate steps. Each composition
computes its primitive's answer (any digit count, either order); ripple and lookahead differ in
structure from four digits on; a step's site is the earliest that holds it near its best (a
partial correlate earlier does not win); and on ``zoo:addition`` the search puts the carry into
place 2 where the hand-written carry mechanism states it (layer-1 attention at ``=``), found with
no hand-written hypothesis."""

import pytest
import torch

from circuits.explain import PRIMITIVES, Frame
from circuits.explain.candidates import Candidate
from circuits.explain.compositions import COMPOSITIONS, compositions_of
from circuits.explain.localise import choose_step_site, composed_mechanism, site_rank, step_sweep
from circuits.graph.nodes import Node
from circuits.mechanisms import Site
from circuits.mechanisms.leads import SiteSweep, SweepMemo, SweepRow
from interp_rand import make_task
from interp_rand.training import load_checkpoint
from probes.controls import random_init_like


def _values(steps, frame):
    values = {f"cue_{k}": frame.current(k) for k in range(frame.n_outputs)}  # the token at each output's position
    for step in steps:
        values[step.name] = step.compute(frame.batch, **{p: values[p] for p in step.parents})
    return values


@pytest.mark.parametrize("n_digits,order", [(1, "msb"), (3, "msb"), (4, "lsb"), (5, "msb")])
def test_each_composition_computes_its_primitives_answer(n_digits, order):
    task = make_task("addition", n_digits=n_digits, answer_order=order)
    batch = task.sample(3000, torch.Generator().manual_seed(n_digits))
    frame = Frame(batch, task)
    compositions = compositions_of("digit_sum")
    assert {c.name for c in compositions} == {"lookahead_carry", "lookahead_carry_written", "ripple_carry"}
    for composition in compositions:
        values = _values(composition.steps(frame), frame)
        answers = torch.stack([values[f"y_{k}"] for k in range(n_digits + 1)], 1)
        assert torch.equal(answers, batch.answer_targets()), composition.name


def test_ripple_and_lookahead_name_different_steps_from_four_digits_on():
    task = make_task("addition", n_digits=4)
    frame = Frame(task.sample(10, torch.Generator().manual_seed(0)), task)
    ripple = {s.name: s.parents for s in COMPOSITIONS.get("ripple_carry").steps(frame)}
    ahead = {s.name: s.parents for s in COMPOSITIONS.get("lookahead_carry").steps(frame)}
    # output 0 is the final carry (place 4): one carry step over T_3 and the carry into place 3
    assert ahead["carry3_0"] == ("class_0", "class_1", "class_2")
    assert ripple["carry3_0"] == ("class_2", "carry2_0") and ripple["carry2_0"] == ("class_1", "carry1_0")
    assert "carry2_0" not in ahead
    # each step is computed by its last reader's position: place 3's class only by the final carry's ('=')
    upto = {s.name: s.upto for s in COMPOSITIONS.get("lookahead_carry").steps(frame)}
    assert upto["class_3"] == int(task.answer_positions()[0]) and upto["class_0"] == int(task.answer_positions()[-2])


def test_the_written_composition_reads_the_final_carry_as_written_and_breaks_off_distribution():
    task = make_task("addition", n_digits=3)
    batch = task.sample(2000, torch.Generator().manual_seed(3))
    frame = Frame(batch, task)
    steps = {s.name: s for s in COMPOSITIONS.get("lookahead_carry_written").steps(frame)}
    assert steps["base_1"].parents == ("pair_2", "cue_1") and steps["pair_2"].reads == (0, 4)  # a2 and b2
    # a wrong final carry written at s2's position moves R by 10: the digit leaves 0..9 (the wrap a model must hold)
    values = _values(list(steps.values()), frame)
    wrong = dict(values, cue_1=1 - values["cue_1"])
    flipped = steps["base_1"].compute(batch, pair_2=wrong["pair_2"], cue_1=wrong["cue_1"])
    assert torch.equal((flipped - values["base_1"]).abs(), torch.full_like(flipped, 10))


def _row(site: Site, iia: float, kind: str = "node") -> SweepRow:
    return SweepRow(site.label, kind, iia, {"random_init": 0.0}, 100, site)


def test_a_step_sits_at_the_earliest_site_that_holds_it_near_its_best():
    heads7 = Site.of(*(Node("head", 1, h, position=7) for h in range(4)))
    early = Site.at("blocks.1.hook_resid_pre", 5, subspace=1)  # before layer 1: earlier than its heads
    mid = Site.at("blocks.1.hook_resid_mid", 7, subspace=1)
    assert site_rank(early) < site_rank(heads7) < site_rank(mid)

    def sweep(*rows):
        return SiteSweep("m", "carry", None, sorted(rows, key=lambda r: -r.iia), 100, 100, 0.0)

    # a correlate earlier that holds only in part (0.91 against 1.00) does not displace the best
    assert choose_step_site(sweep(_row(heads7, 1.0), _row(mid, 0.99, "das"), _row(early, 0.91, "das"))) == heads7
    # within 0.05 of the best, the earliest wins (where the value is computed, not carried on)
    assert choose_step_site(sweep(_row(mid, 1.0, "das"), _row(heads7, 0.97))) == heads7
    # nothing holds: the best by margin, a subspace or the components at one position
    assert choose_step_site(sweep(_row(mid, 0.7, "das"), _row(heads7, 0.6))) == mid
    m5, m7 = Node("mlp", 0, position=5), Node("mlp", 1, position=7)
    assert choose_step_site(sweep(_row(Site.of(m5), 0.6), _row(Site.of(m7), 0.55))) == Site.of(m5)
    # in the stream: the latest hook that holds it near its best, a whole hook too; components never
    whole = Site.at("blocks.1.hook_resid_pre", 6)
    early = Site.at("blocks.0.hook_resid_mid", 6)
    rows = (_row(early, 0.98, "hook"), _row(whole, 0.96, "hook"), _row(Site.of(m5), 0.99))
    assert choose_step_site(sweep(*rows), stream=True) == whole
    assert choose_step_site(sweep(_row(early, 0.5, "hook"), _row(Site.of(m5), 0.7)), stream=True) == early
    assert choose_step_site(sweep(_row(Site.of(m5), 0.7)), stream=True) is None


def test_on_zoo_addition_the_search_finds_the_carry_into_place_2_in_layer_1_attention_at_equals():
    ckpt = load_checkpoint("zoo:addition")
    model, task = ckpt.model().eval(), ckpt.spec.make_task()
    batch = task.sample(500, torch.Generator().manual_seed(0))
    composition = COMPOSITIONS.get("lookahead_carry")
    mech = composed_mechanism(composition, Candidate(PRIMITIVES.get("digit_sum")), model, task, batch, {})
    equals = int(task.answer_positions()[0])  # '=' predicts the final carry s3
    sweep, stream = step_sweep(model, task, mech, "carry2_0", batch, list(range(equals + 1)), n_pairs=120, seed=0,
                               random_model=random_init_like(model, seed=1))
    assert not stream  # computed from its parents: components may hold it
    site = choose_step_site(sweep)
    # the hand-written carry mechanism: c2 gathered by layer-1 attention at '=' (resid_mid.1 @ 7)
    layers = {n.layer for n in site.nodes} if site.nodes else {int(site.hook.split(".")[1])}
    positions = {n.position for n in site.nodes} if site.nodes else set(site.positions)
    assert layers == {1} and positions == {equals}, site.label
    best = sweep.rows[0]
    assert best.iia >= 0.9 and best.controls["random_init"] <= 0.2
    # the rival "the carry is formed at an operand position and only copied" (a ripple at b1 / b0):
    # no site there holds it as well (the best one reads only part of it)
    def where(row):
        return row.site.nodes[0].position if row.site.nodes else row.site.positions[0]
    assert max(r.iia for r in sweep.rows if where(r) < equals) < best.iia - 0.05


def test_a_step_two_compositions_share_is_swept_once_and_its_rows_are_the_ones_a_sweep_of_its_own_finds():
    """explain's SweepMemo: ripple_carry's carry into place 2 for s3 is lookahead_carry's (the same
    value, the same counterfactual answers, hence, with the same seed, the same pairs), so the
    second composition's sweep of it is the first one's rows, equal to the rows a sweep of its
    own computes. (explain sweeps a composition's i-th step with seed + i, so there the steps
    shared are the carry classes, first in both.)"""
    ckpt = load_checkpoint("zoo:addition")
    model, task = ckpt.model().eval(), ckpt.spec.make_task()
    batch = task.sample(300, torch.Generator().manual_seed(0))
    candidate, random_model = Candidate(PRIMITIVES.get("digit_sum")), random_init_like(model, seed=1)
    ahead, ripple = (composed_mechanism(COMPOSITIONS.get(name), candidate, model, task, batch, {})
                     for name in ("lookahead_carry", "ripple_carry"))
    memo = SweepMemo(model, random_model, batch)
    positions = list(range(int(task.answer_positions()[0]) + 1))
    kw = dict(n_pairs=60, seed=0, random_model=random_model)
    first, _ = step_sweep(model, task, ahead, "carry2_0", batch, positions, memo=memo, **kw)
    shared, _ = step_sweep(model, task, ripple, "carry2_0", batch, positions, memo=memo, **kw)
    own, _ = step_sweep(model, task, ripple, "carry2_0", batch, positions, **kw)
    assert memo.reused == 1 and len(memo.sweeps) == 1

    def table(sweep):
        return [(r.label, r.kind, r.iia, r.controls) for r in sweep.rows]

    assert table(shared) == table(own) == table(first) and shared.mechanism == ripple.name
    # a step whose pairs differ (the carry into place 1, only ripple's) is swept
    step_sweep(model, task, ripple, "carry1_0", batch, positions, memo=memo, **kw)
    assert memo.reused == 1 and len(memo.sweeps) == 2
