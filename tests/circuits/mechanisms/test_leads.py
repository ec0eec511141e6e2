"""Leads when a hypothesis fails (circuits.mechanisms.leads), on the zoo's sort and addition
models: the site sweep finds where a variable is held (and not where it is not), and the scrub
restorers point at the component a broken hypothesis left out."""

import dataclasses
import math

import pytest
import torch

from circuits.graph.nodes import Node
from circuits.mechanisms import Site
from circuits.graph.model_graph import ModelGraph
from circuits.mechanisms import leads
from circuits.mechanisms.leads import (Restorer, SiteSweep, SweepMemo, answers_read, residual_hooks, scrub_restorers,
                                       site_sweep)
from probes.controls import random_init_like
from probes.interchange import DASConfig
from interp_rand.reports.mechanisms import carry, sorting
from interp_rand.run_names import resolve_run
from interp_rand.training import load_checkpoint


def _zoo(name):
    ck = load_checkpoint(resolve_run(name))
    return ck.model().eval(), ck.spec.make_task()


@pytest.fixture(scope="module")
def sort_run():
    model, task = _zoo("zoo:sort")
    return model, task, sorting.mechanism(task, n_lists=10)


def _moved(mech, name, site):
    """``mech`` with variable ``name`` claimed at ``site`` instead."""
    variables = tuple(dataclasses.replace(v, site=site) if v.name == name else v for v in mech.variables)
    return dataclasses.replace(mech, variables=variables)


def test_sweep_ranks_the_true_site_of_y2_first_and_an_input_component_low(sort_run):
    model, task, mech = sort_run
    sweep = site_sweep(model, task, mech, "y_2", n=300, n_pairs=80, hooks=())
    assert isinstance(sweep, SiteSweep) and sweep.claimed == "m0@7"
    assert len(sweep.rows) == 110 and all(r.kind == "node" for r in sweep.rows)  # every component x position
    assert sweep.n_pairs >= 60
    top3 = sweep.best(3)
    assert any(r.label == "m0@7" for r in top3) or all(r.site.nodes[0].position == 7 for r in top3), sweep.lines()
    assert all(r.site.nodes[0].position == 7 for r in sweep.best(2)), sweep.lines()
    assert sweep.rows[0].iia > 0.9 and sweep.rows[0].controls["random_init"] < 0.1
    margins = [r.margin for r in sweep.rows]
    assert margins == sorted(margins, reverse=True)
    # a random head or MLP at an input position (0-4) cannot hold the order statistic written at 7
    g = torch.Generator().manual_seed(1)
    inputs = [r for r in sweep.rows if r.kind == "node" and r.site.nodes[0].kind != "embed"
              and r.site.nodes[0].position < task.length]
    pick = inputs[int(torch.randint(len(inputs), (1,), generator=g))]
    assert pick.iia < 0.05 and sweep.rank_of(pick.label) > 10, (pick, sweep.lines())
    assert sweep.rows[0].margin - pick.margin > 0.8
    out = sweep.to_dict()
    assert out["variable"] == "y_2" and len(out["rows"]) == 110 and set(out["rows"][0]) >= {"site", "iia", "controls"}
    lines = sweep.lines(5)
    assert "m0@7" in "\n".join(lines) and any("*" in line and "m0@7" in line for line in lines)


def test_sweep_subspace_candidates_find_the_carry_layer():
    """c2@s2 (the carry into place 2 at the position predicting s2): a 1-dim DAS subspace of
    blocks.1.hook_resid_mid @ 8 holds it; the same hook at b1 (5), or before layer-1
    attention gathers it (resid_pre @ 8), does not, and random directions there do nothing."""
    model, task = _zoo("zoo:addition")
    mech = carry.mechanism(task, predictions=False)
    sweep = site_sweep(model, task, mech, "c2@s2", n=500, n_pairs=120, positions=(5, 8),
                       hooks=("blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid"))
    das = {r.label: r for r in sweep.rows if r.kind == "das"}
    assert len(das) == 4 and sweep.n_train_pairs > 50
    claimed = das["blocks.1.hook_resid_mid@8 [das k=1]"]
    assert sweep.claimed == claimed.label and sweep.rank_of(claimed.label) == 1, sweep.lines()
    assert claimed.iia > 0.8 and set(claimed.controls) == {"random_init", "random_direction"}
    assert claimed.controls["random_direction"] < 0.1 and claimed.controls["random_init"] < 0.1
    assert das["blocks.1.hook_resid_mid@5 [das k=1]"].iia < 0.2
    assert das["blocks.1.hook_resid_pre@8 [das k=1]"].iia < claimed.iia - 0.5
    assert all(r.site.positions[0] in (5, 8) for r in das.values())
    assert all(r.site.nodes[0].position in (5, 8) for r in sweep.rows if r.kind == "node")


def test_the_sweep_skips_the_sites_no_answer_reads_and_its_table_is_the_unpruned_one(monkeypatch):
    """PRUNE_UNREAD: on zoo:addition (2 layers, answers at 7-10), layer 1's components and its
    resid_mid / resid_post at b1 (5) reach no answer, so they are not patched (nor fitted), and
    every row, theirs included, is the one the unpruned sweep computes; at s2's position (8), an
    answer's, nothing is skipped, nor before layer 1 anywhere."""
    model, task = _zoo("zoo:addition")
    mech = carry.mechanism(task, predictions=False)
    graph = ModelGraph.of(model, task.n_ctx)
    answers = frozenset(range(7, 11))
    unread = {s.label for s in [Site.of(Node("head", 1, h, position=5)) for h in range(4)] +
              [Site.of(Node("mlp", 1, position=5)), Site.at("blocks.1.hook_resid_mid", 5),
               Site.at("blocks.1.hook_resid_post", 5)] if not answers_read(graph, s, answers)}
    assert len(unread) == 7
    for read in (Site.of(Node("head", 1, 0, position=8)), Site.of(Node("mlp", 0, position=5)),
                 Site.of(Node("embed", position=5)), Site.at("blocks.1.hook_resid_pre", 5),
                 Site.at("blocks.1.hook_resid_post", 8),
                 Site.of(Node("head", 1, 0, position=5), Node("mlp", 0, position=5))):
        assert answers_read(graph, read, answers), read.label
    calls = {"patched": 0, "fits": 0}
    accuracy_on, das_basis = leads.accuracy_on, leads._das_basis

    def counted(*args, **kw):
        calls["patched"] += 1
        return accuracy_on(*args, **kw)

    def fitted(*args, **kw):
        calls["fits"] += 1
        return das_basis(*args, **kw)

    monkeypatch.setattr(leads, "accuracy_on", counted)
    monkeypatch.setattr(leads, "_das_basis", fitted)
    random_model = random_init_like(model, seed=1)
    kw = dict(n=300, n_pairs=60, positions=(5, 8), hooks=("blocks.1.hook_resid_mid", "blocks.1.hook_resid_post"),
              das=DASConfig(steps=5, batch_size=32, lr=2e-2), groups=True, whole=True, random_model=random_model)
    pruned = site_sweep(model, task, mech, "c2@s2", **kw)
    skipped = dict(calls)
    monkeypatch.setattr(leads, "PRUNE_UNREAD", False)
    calls.update(patched=0, fits=0)
    full = site_sweep(model, task, mech, "c2@s2", **kw)
    # 26 component sites (a1.* among them) and 4 hook sites whole and in a subspace at 2 positions
    assert calls == {"patched": 2 * 26 + 2 * 4 + 3 * 4, "fits": 4}
    # at b1: 6 components (a1.0-3, a1.*, m1) and resid_mid.1 / resid_post.1 unpatched; one unpatched run per model
    assert skipped == {"patched": calls["patched"] - 2 * 6 - 2 * 2 - 3 * 2 + 2, "fits": 2}

    def table(sweep):
        return [(r.label, r.kind, r.iia, r.controls, r.n_pairs) for r in sweep.rows]

    assert table(pruned) == table(full)
    assert {r.label for r in full.rows if r.kind == "node" and r.site.nodes[0].position == 5
            and r.site.nodes[0].layer == 1} == {"a1.0@5", "a1.1@5", "a1.2@5", "a1.3@5", "a1.*@5", "m1@5"}


def test_a_memo_records_once_and_answers_a_sweep_of_the_same_pairs_from_the_first():
    model, task = _zoo("zoo:addition")
    mech = carry.mechanism(task, predictions=False)
    batch = task.sample(300, torch.Generator().manual_seed(0))
    random_model = random_init_like(model, seed=1)
    memo = SweepMemo(model, random_model, batch)
    kw = dict(batch=batch, n_pairs=60, positions=(8,), hooks=(), random_model=random_model)
    first = site_sweep(model, task, mech, "c2@s2", memo=memo, **kw)
    again = site_sweep(model, task, _moved(mech, "c2@s2", None), "c2@s2", memo=memo, **kw)
    other_seed = site_sweep(model, task, mech, "c2@s2", memo=memo, **dict(kw, seed=1))  # other pairs: swept
    assert memo.reused == 1 and len(memo.sweeps) == 2 and set(memo.acts) == {id(model), id(random_model)}
    plain = site_sweep(model, task, mech, "c2@s2", **kw)
    def table(sweep):
        return [(r.label, r.iia, r.controls) for r in sweep.rows]

    assert table(first) == table(plain) == table(again)
    assert again.claimed is None and first.claimed is not None and other_seed.rows
    with pytest.raises(ValueError, match="memo"):
        site_sweep(model, task, mech, "c2@s2", memo=memo, **dict(kw, batch=task.sample(50, torch.Generator())))


def test_residual_hooks_default():
    model, _ = _zoo("zoo:sort")
    assert residual_hooks(model) == ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_mid", "blocks.1.hook_resid_pre",
                                     "blocks.1.hook_resid_mid", "blocks.1.hook_resid_post"]


def test_scrub_restorers_point_at_the_site_a_broken_hypothesis_moved(sort_run):
    model, task, mech = sort_run
    # y_2 claimed at MLP 0 @ 2 (an input position) instead of @ 7: m0@7 is now resampled
    broken = _moved(mech, "y_2", Site.of(Node("mlp", 0, position=2)))
    everything = scrub_restorers(model, task, broken, n=300, top=None)
    leads = everything[:5]
    assert len(leads) == 5 and all(isinstance(r, Restorer) for r in leads)
    assert leads[0].node.position == 7, leads
    assert leads[0].location == "m0@7"
    assert leads[0].share_gained > 0.1 and leads[0].accuracy_gained > 0.5, leads[0]
    assert leads[0].share_gained > 5 * max(r.share_gained for r in leads[1:])
    gains = [r.share_gained for r in everything]
    assert gains == sorted(gains, reverse=True)
    assert set(leads[0].to_dict()) == {"location", "share_gained", "accuracy_gained", "share", "accuracy"}
    # the hypothesis's own locations are never leads
    named = {n.name for v in broken.mapped for n in v.site.nodes} | {n.name for n in broken.readout}
    assert not named & {r.location for r in everything} and len(everything) == 110 - len(named)
    # the true hypothesis leaves nothing to restore
    true = scrub_restorers(model, task, mech, n=300, top=3)
    assert len(true) == 3
    assert all(not math.isnan(r.share_gained) and r.share_gained < 0.05 for r in true), true
    assert true[0].share > 0.95
