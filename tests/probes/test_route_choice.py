"""What the seed chooses in a grid-world agent: the seed directions found from the agent's own
derivatives choose its first move far better than random directions; the rival "a hyperplane
cut of the seed" is rejected on the randomized agent; the seed swap itself is exact (the whole
seed swapped gives the source's route); ERM's routes share a near-fixed segment that the
randomized agent's do not; the report and the command write a page that leads with the verdict."""

import json

import pytest
import torch

from interp_rand.cli.main import main
from interp_rand.gridworld.checkpoint import load_agent
from interp_rand.gridworld.evaluation import evaluate_agent
from probes.route_choice import decision_subspace, rank_of, route_choice


@pytest.fixture(scope="module")
def choices():
    out = {}
    for name in ("gridworld-Aq_R", "gridworld-AE_R"):
        ckpt = load_agent(f"zoo:{name}")
        model, grid = ckpt.model(), ckpt.scale.grid
        out[name] = route_choice(model, grid, evaluate_agent(model, grid, 8), name, n_seeds=300, n_pairs=150)
    return out


def test_the_decision_subspace_is_the_fewest_directions_holding_the_share():
    basis = torch.linalg.qr(torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64))[0]
    gram = basis @ torch.diag(torch.tensor([10.0, 5.0, 4.0, 0.5, 0.3, 0.2], dtype=torch.float64)) @ basis.T
    directions, shares = decision_subspace(gram)
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1) < 1e-6
    # shares 0.5, 0.25, 0.2, 0.025, 0.015, 0.01: 0.9 needs three, 0.96 four, 0.98 five
    assert (rank_of(shares, 0.9), rank_of(shares, 0.96), rank_of(shares, 0.98)) == (3, 4, 5)
    # the top direction is the gram's largest eigenvector (up to sign)
    assert abs(float(directions[:, 0].double() @ basis[:, 0].double())) > 0.999


def test_the_seed_directions_choose_the_first_move_and_the_hyperplane_rival_is_rejected(choices):
    q = choices["gridworld-Aq_R"]
    assert q.iia_first >= q.iia_first_random + 0.3  # found directions vs a random subspace of the same size
    assert q.rank_first < q.d_seed
    rival = q.rivals[0]
    assert rival.verdict.outcome == "fails" and q.hyperplane_agreement < q.constant_rule
    # swapping the whole seed gives the source's route: the swap is exact (the curve's last point)
    assert q.route_curve[-1] == 1.0 and all(0 <= v <= 1 for v in q.route_curve)


def test_erm_follows_a_near_fixed_route_where_the_randomized_agent_spreads(choices):
    def extremes(choice):
        rates = [v for y, row in enumerate(choice.visit_rate) for x, v in enumerate(row) if (x, y) != (0, 0)]
        return min(rates), max(rates)

    q_low, q_high = extremes(choices["gridworld-Aq_R"])
    e_low, e_high = extremes(choices["gridworld-AE_R"])
    assert e_high >= 0.95 and q_high < 0.95  # cells on ERM's route whatever the seed; none for A^q_R
    assert choices["gridworld-Aq_R"].n_distinct_routes > choices["gridworld-AE_R"].n_distinct_routes


def test_seeds_that_all_take_one_first_move_leave_that_claim_inconclusive():
    ckpt = load_agent("zoo:gridworld-AE_R")  # its first move is 'up' for 97% of seeds
    model, grid = ckpt.model(), ckpt.scale.grid
    choice = route_choice(model, grid, evaluate_agent(model, grid, 4), "erm", n_seeds=8, n_pairs=20, seed=3)
    assert choice.n_first_pairs == 0 and choice.n_pairs > 0  # 8 seeds, one first move, several routes
    assert choice.claims[0].verdict.outcome == "inconclusive" and choice.route_curve[-1] == 1.0


def test_gridworld_eval_with_compare_writes_the_route_page(tmp_path, capsys):
    out = tmp_path / "gw"
    assert main(["gridworld", "eval", "zoo:gridworld-Aq_R", "--seeds", "4", "--route-seeds", "40",
                 "--compare", "zoo:gridworld-AE_R", "--out", str(out)]) == 0
    data = json.loads((out / "route.json").read_text())
    assert list(data["agents"]) == ["zoo:gridworld-Aq_R", "zoo:gridworld-AE_R"]
    assert data["verdict"] == data["agents"]["zoo:gridworld-Aq_R"]["verdict"] and len(data["claims"]) == 2
    assert data["finding"].startswith("zoo:gridworld-Aq_R: the seed chooses") and "ERM twin" in data["finding"]
    main_agent = data["agents"]["zoo:gridworld-Aq_R"]  # a card that does not hold says where it falls short
    assert (data["shortfall"] is None) == (data["verdict"] == "holds")
    if data["shortfall"]:
        assert data["shortfall"].startswith("the route needs") and f"more than the {main_agent['rank_first']}" in data["shortfall"]
    page = (out / "route.html").read_text()
    verdict = data["agents"]["zoo:gridworld-Aq_R"]["verdict"].upper()
    assert page.index(verdict) < page.index("share of seeds whose exploration route")  # the verdict leads
    assert "worst" in page and "zoo:gridworld-AE_R" in page
    assert main(["gridworld", "eval", "zoo:gridworld-Aq_R", "--compare", "zoo:nope",
                 "--out", str(tmp_path / "x")]) == 2
    assert "no zoo model 'nope'" in capsys.readouterr().err and not (tmp_path / "x").exists()
