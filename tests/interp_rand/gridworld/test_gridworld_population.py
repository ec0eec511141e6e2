"""Population evaluation: the stacked, cached decoder against the hooked model, the vectorised
path against the per-member loop, rollout against its replay through run_with_cache."""

import pytest
import torch

from interp_rand.gridworld.agent import (
    agent_model_config,
    check_fits,
    play,
    replay,
    sample_seeds,
)
from interp_rand.gridworld.config import AgentConfig, GridConfig
from interp_rand.gridworld.environment import treasure_cells
from interp_rand.gridworld.population import (
    ParameterLayout,
    fitness,
    population_returns,
    population_returns_loop,
    tie_break_weight,
)
from interp_rand.gridworld.stacked import StackedAgents
from interp_rand.model import HookedTransformer

GRID = GridConfig(size=3, episode_steps=5)


def make_model(d_mlp=0, seed=0):
    return HookedTransformer(agent_model_config(GRID, AgentConfig(d_model=16, n_heads=2, d_head=8, d_mlp=d_mlp)), seed=seed)


def population(model, n, scale, seed=0):
    layout = ParameterLayout(model)
    noise = torch.randn(n, layout.n_params, generator=torch.Generator().manual_seed(seed))
    return layout, layout.flatten(model)[None] + scale * noise


@pytest.mark.parametrize("d_mlp", [0, 24])
def test_stacked_decoder_matches_hooked_model(d_mlp):
    model = make_model(d_mlp)
    layout, flat = population(model, 3, 0.5)
    params = layout.unflatten(flat)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(3 * 4, 6, GRID.d_obs, generator=g)
    seeds = torch.randn(3 * 4, GRID.d_obs, generator=g)
    decoder = StackedAgents(model.cfg, params, seeds)
    cached = torch.stack([decoder(obs[:, t]) for t in range(6)], dim=1)  # [12, 6, 4]
    for i in range(3):
        member = layout.load(make_model(d_mlp), flat[i])
        expected = member(obs[4 * i : 4 * i + 4], seeds=seeds[4 * i : 4 * i + 4])
        torch.testing.assert_close(cached[4 * i : 4 * i + 4], expected, atol=1e-5, rtol=1e-4)


# Configs the stacked decoder accepts besides the agent's default (pre-LayerNorm, GELU): each
# against the hooked model, member by member.
ACCEPTED = {
    "no LayerNorm, attention only": dict(normalization_type=None),
    "no LayerNorm, ReLU MLP": dict(normalization_type=None, attn_only=False, d_mlp=24, act_fn="relu"),
    "ReLU MLP": dict(attn_only=False, d_mlp=24, act_fn="relu"),
    "gelu_new MLP, other eps": dict(attn_only=False, d_mlp=20, act_fn="gelu_new", eps=1e-3),
    "two layers, three heads of 5": dict(n_layers=2, n_heads=3, d_head=5, attn_only=False, d_mlp=12),
}


def stacked_vs_hooked(cfg, n_members=3, n_runs=4, steps=6, scale=0.2):
    # (with noise 0.5 and no LayerNorm the members' logits reach the thousands, where float32
    # rounding alone differs by ~1e-4 relative; 0.2 keeps them in tens)
    model = HookedTransformer(cfg, seed=2)
    layout, flat = population(model, n_members, scale)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(n_members * n_runs, steps, GRID.d_obs, generator=g)
    seeds = torch.randn(n_members * n_runs, GRID.d_obs, generator=g)
    decoder = StackedAgents(cfg, layout.unflatten(flat), seeds)
    cached = torch.stack([decoder(obs[:, t]) for t in range(steps)], dim=1)
    expected = []
    for i in range(n_members):
        member = layout.load(HookedTransformer(cfg, seed=2), flat[i])
        rows = slice(n_runs * i, n_runs * (i + 1))
        expected.append(member(obs[rows], seeds=seeds[rows]))
    return cached, torch.cat(expected)


@pytest.mark.parametrize("changes", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_stacked_decoder_matches_hooked_model_on_other_accepted_configs(changes):
    cfg = make_model().cfg.replace(**changes)
    cached, expected = stacked_vs_hooked(cfg)
    torch.testing.assert_close(cached, expected, atol=1e-5, rtol=1e-4)
    assert expected.std() > 0.1 and expected.abs().max() < 100  # members differ; logits in tens


@pytest.mark.parametrize("changes, named", [
    (dict(use_attn_scale=False), "use_attn_scale"),
    (dict(attn_bias=False), "attn_bias"),
    (dict(positional="sinusoidal"), "positional"),
    (dict(attention="linear"), "attention"),
])
def test_stacked_decoder_refuses_what_it_does_not_implement(changes, named):
    cfg = make_model().cfg.replace(**changes)
    model = HookedTransformer(cfg)
    params = {n: p[None] for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match=f"stacked decoding supports the agent model.*got {{'{named}'"):
        StackedAgents(cfg, params, torch.zeros(1, GRID.d_obs))


def test_stacked_decoder_uses_the_models_layer_norm_and_activations():
    # one LayerNorm and one activation table: the decoder's are the model's
    from interp_rand.gridworld import stacked
    from interp_rand.model import layer_norm, mlp

    assert stacked.layer_norm is layer_norm.layer_norm and stacked.ACTIVATIONS is mlp.ACTIVATIONS
    x, w, b = torch.randn(2, 5, 8), torch.randn(8), torch.randn(8)
    module = layer_norm.LayerNorm(make_model().cfg.replace(d_model=8, n_heads=2, d_head=4))
    with torch.no_grad():
        module.w.copy_(w), module.b.copy_(b)
    assert torch.equal(module(x), layer_norm.layer_norm(x, w, b, module.eps))


def test_vectorised_population_equals_per_member_loop():
    model = make_model()
    layout, flat = population(model, 6, 0.3)
    cells = treasure_cells(GRID)
    seeds = sample_seeds(GRID, 3, torch.Generator().manual_seed(2))
    fast = population_returns(model, layout, flat, GRID, cells, seeds)
    vmapped = population_returns(model, layout, flat, GRID, cells, seeds, cached=False)
    chunked = population_returns(model, layout, flat, GRID, cells, seeds, max_runs=2 * 8 * 3)
    loop = population_returns_loop(model, layout, flat, GRID, cells, seeds)
    assert fast.shape == (6, 8, 3)
    assert torch.equal(fast, loop) and torch.equal(vmapped, loop) and torch.equal(chunked, loop)
    assert len(set(fitness(loop, "erm").tolist())) > 1  # members differ: the test is not vacuous


def test_fitness_takes_seed_average_before_worst_cell():
    returns = torch.tensor([[[-10.0, 0.0], [-4.0, -6.0]],   # member 0: cell means -5, -5
                            [[-9.0, -9.0], [0.0, 0.0]]])    # member 1: cell means -9, 0
    assert fitness(returns, "worst").tolist() == [-5.0, -9.0]
    assert fitness(returns, "erm").tolist() == [-5.0, -4.5]
    with pytest.raises(ValueError, match="variant='q2'"):
        fitness(returns, "q2")


def test_tie_break_separates_a_population_tied_at_the_floor():
    # every member's worst cell is the floor (a cell no seed reaches), but they differ elsewhere
    grid = GridConfig(size=3, episode_steps=5)
    returns = torch.full((3, grid.n_cells, 4), grid.floor)
    returns[1, 0] = -3.0                 # member 1 finds cell 0 under every seed
    returns[2, 0, :1] = -3.0             # member 2 under one seed of four
    assert fitness(returns, "worst").unique().tolist() == [grid.floor]  # the exact worst cell ties
    for q in (1, 4, 50):
        broken = fitness(returns, "worst", grid, tie_break_q=q)
        assert broken[1] > broken[2] > broken[0]  # no longer constant, and in the right order
        assert (broken <= grid.floor).all() and (broken >= grid.floor - tie_break_weight(4)).all()
    with pytest.raises(ValueError, match="needs the grid"):
        fitness(returns, "worst", tie_break_q=4)
    with pytest.raises(ValueError, match="integer GridConfig.treasure_reward"):
        fitness(returns, "worst", GridConfig(size=3, episode_steps=5, treasure_reward=0.5), tie_break_q=4)
    # ERM ignores the tie-break
    assert torch.equal(fitness(returns, "erm", grid, tie_break_q=4), fitness(returns, "erm"))


@pytest.mark.parametrize("m", [1, 3, 10])
@pytest.mark.parametrize("q", [1, 4, 50])
def test_a_better_worst_cell_always_outweighs_the_tie_break(m, q):
    grid = GridConfig(size=3, episode_steps=5)  # integer returns in [floor, 2 * treasure_reward]
    best = 2 * grid.treasure_reward
    # the extreme pair: one step better worst cell with every other cell as bad as that allows,
    # against the floor worst cell with every other cell at the best return
    better = torch.full((1, grid.n_cells, m), grid.floor)
    better[0, :, 0] += 1.0  # each cell's seed average is floor + 1/m
    worse = torch.full((1, grid.n_cells, m), best)
    worse[0, 0] = grid.floor
    pair = fitness(torch.cat([better, worse]), "worst", grid, tie_break_q=q)
    assert pair[0] > pair[1]
    assert pair[0] - pair[1] >= 1 / m - tie_break_weight(m) - 1e-9
    # random integer returns: the order of the fitness agrees with the exact worst cell's
    # wherever the worst cells differ
    generator = torch.Generator().manual_seed(m * 100 + q)
    returns = torch.randint(int(grid.floor), int(best) + 1, (64, grid.n_cells, m), generator=generator).float()
    returns[::2, :2] = grid.floor  # half the members: ties at the floor
    worst, broken = fitness(returns, "worst"), fitness(returns, "worst", grid, tie_break_q=q)
    differ = worst[:, None] > worst[None, :]
    assert differ.any() and (broken[:, None] > broken[None, :])[differ].all()
    assert ((broken - worst).abs() <= tie_break_weight(m) + 1e-9).all()


def test_rollout_replays_through_run_with_cache():
    model = make_model(seed=3)
    layout, flat = population(model, 1, 1.0, seed=3)
    layout.load(model, flat[0])
    cells = treasure_cells(GRID)
    seeds = sample_seeds(GRID, 4, torch.Generator().manual_seed(4))
    treasure, run_seeds = cells.repeat_interleave(4, 0), seeds.repeat(8, 1)
    run = play(model, GRID, treasure, run_seeds)
    slow = play(model, GRID, treasure, run_seeds, cached=False)
    assert torch.equal(run.actions[run.episode < 2], slow.actions[slow.episode < 2])
    assert torch.equal(run.returns, slow.returns)
    logits, cache = replay(model, run)
    counted = run.episode < 2
    assert torch.equal(logits.argmax(-1)[counted], run.actions[counted])
    assert cache["blocks.0.attn.hook_pattern"].shape == (32, 2, 1 + GRID.total_steps, 1 + GRID.total_steps)
    assert cache["hook_seed"].shape == (32, 1, GRID.d_obs)


def test_model_that_does_not_fit_the_grid():
    small = make_model().cfg.replace(n_ctx=5)
    with pytest.raises(ValueError, match="n_ctx=5 is too small for the episode"):
        check_fits(GRID, small)
    with pytest.raises(ValueError, match="d_input=7"):
        check_fits(GridConfig(size=4, episode_steps=6), make_model().cfg.replace(n_ctx=13))


def test_layout_round_trip():
    model = make_model()
    layout = ParameterLayout(model)
    flat = layout.flatten(model)
    assert flat.shape == (layout.n_params,) == (sum(p.numel() for p in model.parameters()),)
    assert torch.equal(layout.unflatten(flat)["unembed.W_U"], model.unembed.W_U)
    with pytest.raises(ValueError, match=f"must have {layout.n_params} entries"):
        layout.unflatten(flat[:-1])
