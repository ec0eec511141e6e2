"""Leads when a hypothesis fails (circuits.mechanisms.leads), on the zoo's sort and addition
models: the site sweep finds where a variable is held (and not where it is not), and the scrub
restorers point at the component a broken hypothesis left out."""

import dataclasses
import math

import pytest
import torch

from circuits.graph.nodes import Node
from circuits.mechanisms import Site
from circuits.mechanisms.leads import Restorer, SiteSweep, residual_hooks, scrub_restorers, site_sweep
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
