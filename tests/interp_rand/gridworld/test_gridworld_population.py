"""Population evaluation: the population's decoding (the model's fast path vmapped over members,
key/value cache) against each member's hooked forward, the vectorised path against the
per-member loop, rollout against its replay through run_with_cache."""

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
    PopulationPolicy,
    fitness,
    population_returns,
    population_returns_loop,
    tie_break_weight,
)
from interp_rand.model import HookedTransformer

GRID = GridConfig(size=3, episode_steps=5)


def make_model(d_mlp=0, seed=0):
    return HookedTransformer(agent_model_config(GRID, AgentConfig(d_model=16, n_heads=2, d_head=8, d_mlp=d_mlp)), seed=seed)


def population(model, n, scale, seed=0):
    layout = ParameterLayout(model)
    noise = torch.randn(n, layout.n_params, generator=torch.Generator().manual_seed(seed))
    return layout, layout.flatten(model)[None] + scale * noise


def decode_vs_hooked(cfg, n_members=3, n_runs=4, steps=6, scale=0.2):
    """The population's logits decoded one observation at a time (PopulationPolicy: vmap of the
    fast path over members, key/value cache) and each member's hooked forward over the whole
    sequence (its weights loaded into a fresh model)."""
    # (with noise 0.5 and no LayerNorm the members' logits reach the thousands, where float32
    # rounding alone differs by ~1e-4 relative; 0.2 keeps them in tens)
    model = HookedTransformer(cfg, seed=2)
    layout, flat = population(model, n_members, scale)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(n_members * n_runs, steps, GRID.d_obs, generator=g)
    seeds = torch.randn(n_members * n_runs, GRID.d_obs, generator=g)
    policy = PopulationPolicy(model, layout.unflatten(flat), seeds)
    with torch.no_grad():
        decoded = torch.stack([policy(obs[:, t]) for t in range(steps)], dim=1)
        expected = []
        for i in range(n_members):
            member = layout.load(HookedTransformer(cfg, seed=2), flat[i])
            rows = slice(n_runs * i, n_runs * (i + 1))
            expected.append(member(obs[rows], seeds=seeds[rows]))
    return decoded, torch.cat(expected)


@pytest.mark.parametrize("d_mlp", [0, 24])
def test_population_policy_matches_hooked_model(d_mlp):
    decoded, expected = decode_vs_hooked(make_model(d_mlp).cfg, scale=0.5)
    torch.testing.assert_close(decoded, expected, atol=1e-5, rtol=1e-4)
    assert expected.std() > 0.1  # members and steps differ: the comparison is not vacuous


# Configs besides the agent's default (pre-LayerNorm, attention only): each against the hooked
# model, member by member. Unscaled scores and bias-free attention (zero buffers that PGPE's
# flat parameters do not hold), refused by the old hand-written stacked decoder, are covered
# by the fast path, as are sinusoidal positions and linear attention.
CONFIGS = {
    "no LayerNorm, attention only": dict(normalization_type=None),
    "no LayerNorm, ReLU MLP": dict(normalization_type=None, attn_only=False, d_mlp=24, act_fn="relu"),
    "ReLU MLP": dict(attn_only=False, d_mlp=24, act_fn="relu"),
    "gelu_new MLP, other eps": dict(attn_only=False, d_mlp=20, act_fn="gelu_new", eps=1e-3),
    "two layers, three heads of 5": dict(n_layers=2, n_heads=3, d_head=5, attn_only=False, d_mlp=12),
    "unscaled scores": dict(use_attn_scale=False),
    "no attention biases": dict(attn_bias=False, attn_only=False, d_mlp=12),
    "sinusoidal positions": dict(positional="sinusoidal"),
    "linear attention": dict(attention="linear"),
}


@pytest.mark.parametrize("changes", list(CONFIGS.values()), ids=list(CONFIGS))
def test_population_policy_matches_hooked_model_on_other_configs(changes):
    cfg = make_model().cfg.replace(**changes)
    decoded, expected = decode_vs_hooked(cfg)
    torch.testing.assert_close(decoded, expected, atol=1e-5, rtol=1e-4)
    assert expected.std() > 0.1 and expected.abs().max() < 100  # members differ; logits in tens


def test_population_policy_refuses_a_model_it_cannot_decode():
    for changes, message in [(dict(mask="full"), "needs a causal model; this model has mask='full'")]:
        model = HookedTransformer(make_model().cfg.replace(**changes))
        params = {n: p.detach()[None] for n, p in model.named_parameters()}
        with pytest.raises(ValueError, match=message):
            PopulationPolicy(model, params, torch.zeros(2, GRID.d_obs))(torch.zeros(2, GRID.d_obs))
    model = make_model()
    params = {n: p.detach()[None].expand(3, *p.shape) for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match="seeds must be \\[members \\* runs, d_seed\\] for 3 members"):
        PopulationPolicy(model, params, torch.zeros(4, GRID.d_obs))


def diverging_runs(n_members=3, n_runs=8, steps=6, seed=0):
    """Runs sharing prefixes: runs 0-3 and 4-7 of a member share a seed (members differ), and
    run r follows its seed's observations until step r % 4 + 1, then observations of its own."""
    g = torch.Generator().manual_seed(seed)
    seeds = torch.randn(n_members, 2, GRID.d_obs, generator=g).repeat_interleave(n_runs // 2, 1)
    shared = torch.randn(n_members, 2, steps, GRID.d_obs, generator=g).repeat_interleave(n_runs // 2, 1)
    own = torch.randn(n_members, n_runs, steps, GRID.d_obs, generator=g)
    split = torch.arange(n_runs) % 4 + 1  # run r diverges at step split[r]
    obs = torch.where((torch.arange(steps)[None, :] >= split[:, None])[None, :, :, None], own, shared)
    return seeds.flatten(0, 1), obs.flatten(0, 1)


def test_shared_prefixes_decode_the_same_logits_as_every_run():
    model = make_model(24)
    layout, flat = population(model, 3, 0.5)
    params = layout.unflatten(flat)
    seeds, obs = diverging_runs()
    shared, every = PopulationPolicy(model, params, seeds), PopulationPolicy(model, params, seeds, share_prefixes=False)
    widths = []
    with torch.no_grad():
        decoded = []
        for t in range(obs.shape[1]):
            decoded.append(shared(obs[:, t]))
            widths.append(shared.width)
        decoded = torch.stack(decoded, 1)
        each = torch.stack([every(obs[:, t]) for t in range(obs.shape[1])], 1)
        hooked = torch.cat([layout.load(make_model(24), flat[i])(obs[8 * i : 8 * i + 8], seeds=seeds[8 * i : 8 * i + 8])
                            for i in range(3)])
    # 2 seeds, then each step one more run of each seed leaves its group: 2, 4, 6, 8, 8 groups
    assert widths == [2, 4, 6, 8, 8, 8]
    torch.testing.assert_close(decoded, each, atol=1e-5, rtol=1e-4)  # float rounding of other batch shapes
    torch.testing.assert_close(decoded, hooked, atol=1e-5, rtol=1e-4)
    assert hooked.std() > 0.1


def test_split_groups_keeps_numbers_and_survives_hash_collisions(monkeypatch):
    from interp_rand.gridworld import population as pop

    # member 0: groups 0 (values 1, 2, 1) and 1; member 1: group 0, and 1 (values 4, 4, 6);
    # member 2: a single group that does not split
    group = torch.tensor([[0, 0, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]])
    values = torch.tensor([[1.0, 2.0, 1.0, 5.0], [3.0, 4.0, 4.0, 6.0], [7.0, 7.0, 7.0, 7.0]])[..., None]

    def check(new, parents, children):
        # the runs are grouped by (group, value); an unsplit group keeps its number, a split
        # one keeps it for one part and numbers the other after the member's groups (2 here)
        assert new[0, 0] == new[0, 2] != new[0, 1] and {int(new[0, 0]), int(new[0, 1])} == {0, 2}
        assert new[0, 3] == 1 and new[1, 0] == 0 and new[1, 1] == new[1, 2] != new[1, 3]
        assert {int(new[1, 1]), int(new[1, 3])} == {1, 2} and new[2].tolist() == [0, 0, 0, 0]
        assert parents.tolist() == [[0, 0], [1, 1]] and children.tolist() == [[0, 2], [1, 2]]

    check(*pop._split_groups(group, values))
    # exact bits: float64 values that float32 would merge stay apart
    close = torch.tensor([[[1.0], [1.0 + 1e-12]]], dtype=torch.float64)
    assert sorted(pop._split_groups(torch.zeros(1, 2, dtype=torch.long), close)[0][0].tolist()) == [0, 1]
    # every row hashing alike: the exact row comparison must still tell them apart
    monkeypatch.setattr(pop, "_row_hash", lambda columns: torch.zeros(columns.shape[0], dtype=torch.long))
    check(*pop._split_groups(group, values))


def test_gridworld_has_no_forward_of_its_own():
    # the population's forward is the model's fast path (FastForward under vmap): the old
    # hand-written stacked decoder is gone, and the policy calls FastForward
    import importlib.util

    from interp_rand.model.fast import FastForward

    assert importlib.util.find_spec("interp_rand.gridworld.stacked") is None
    model = make_model()
    layout, flat = population(model, 2, 0.3)
    policy = PopulationPolicy(model, layout.unflatten(flat), torch.zeros(4, GRID.d_obs))
    assert type(policy.module.fast) is FastForward and policy.module.model is model


def test_vectorised_population_equals_per_member_loop():
    model = make_model()
    layout, flat = population(model, 6, 0.3)
    cells = treasure_cells(GRID)
    seeds = sample_seeds(GRID, 3, torch.Generator().manual_seed(2))
    fast = population_returns(model, layout, flat, GRID, cells, seeds)
    unshared = population_returns(model, layout, flat, GRID, cells, seeds, share_prefixes=False)
    vmapped = population_returns(model, layout, flat, GRID, cells, seeds, cached=False)
    chunked = population_returns(model, layout, flat, GRID, cells, seeds, max_runs=2 * 8 * 3)
    loop = population_returns_loop(model, layout, flat, GRID, cells, seeds)
    assert fast.shape == (6, 8, 3)
    assert torch.equal(fast, loop) and torch.equal(vmapped, loop) and torch.equal(chunked, loop)
    assert torch.equal(unshared, loop)
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
