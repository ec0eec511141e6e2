"""The grid-world agent: our hooked transformer with the seed as its own first token, rolled
out autoregressively with the environment's answers fed back, actions by argmax.

Sequence layout (``n_ctx = 1 + 2 * episode_steps``)::

    position 0      the seed token: a Normal vector of token width (``d_seed = d_obs``)
    position 1 + t  observation t: [one_hot(x), one_hot(y), reward] of the cell step t-1
                    reached and the reward it paid (observation 0: the start cell, reward 0).
                    The treasure's cell is thus in the token whose reward is ``treasure_reward``;
                    the reset to the start after an episode is not a token of its own (the
                    agent can tell from that reward, or from the position once episode 1 runs
                    out of steps).

The logits at observation ``t`` choose action ``t``. All randomness comes from the seed token.
A :class:`Rollout` keeps every input, so :func:`replay` runs it through ``run_with_cache``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor
from transformer_lens import ActivationCache

from interp_rand.gridworld import environment as env
from interp_rand.gridworld.config import AgentConfig, GridConfig
from interp_rand.model.config import ModelConfig
from interp_rand.model.fast import DecodeCache, FastForward
from interp_rand.model.transformer import HookedTransformer

# (inputs [n, t, d_obs], seeds [n, d_seed]) -> logits [n, t, 4]
LogitsFn = Callable[[Tensor, Tensor], Tensor]


def agent_model_config(grid: GridConfig, agent: AgentConfig) -> ModelConfig:
    """The agent's :class:`ModelConfig`: vector inputs of width ``d_obs``, a seed token of the
    same width, causal attention over the whole run, 4 action logits."""
    return ModelConfig(
        d_model=agent.d_model, n_layers=agent.n_layers, n_heads=agent.n_heads, d_head=agent.d_head,
        n_ctx=1 + grid.total_steps, d_input=grid.d_obs, d_vocab_out=len(env.ACTION_NAMES),
        input_kind="vectors", mask="causal", d_seed=grid.d_obs, seed_mode="token",
        attn_only=agent.d_mlp == 0, d_mlp=agent.d_mlp or None, positional="learned",
    )


def check_fits(grid: GridConfig, cfg: ModelConfig) -> None:
    """``ValueError`` unless a model with ``cfg`` can play runs on ``grid``."""
    need = 1 + grid.total_steps
    if cfg.n_ctx < need:
        raise ValueError(
            f"model context n_ctx={cfg.n_ctx} is too small for the episode: a run on this grid has "
            f"2 x {grid.episode_steps} steps plus the seed token, so n_ctx must be >= {need}"
        )
    if cfg.input_kind != "vectors" or cfg.d_input != grid.d_obs or cfg.d_vocab_out != len(env.ACTION_NAMES):
        raise ValueError(
            f"model does not fit a {grid.size}x{grid.size} grid: needs vector inputs of width "
            f"d_input={grid.d_obs} and d_vocab_out=4; got input_kind={cfg.input_kind!r}, "
            f"d_input={cfg.d_input}, d_vocab_out={cfg.d_vocab_out}"
        )
    if cfg.d_seed != grid.d_obs or cfg.seed_mode != "token":
        raise ValueError(
            f"the agent needs its seed as its own token of width {grid.d_obs}; got d_seed={cfg.d_seed}, "
            f"seed_mode={cfg.seed_mode!r}"
        )


def sample_seeds(grid: GridConfig, m: int, generator: torch.Generator) -> Tensor:
    """``[m, d_obs]`` fresh seeds: standard Normal vectors of token width."""
    return torch.randn(m, grid.d_obs, generator=generator)


def cell_seed_grid(cells: Tensor, seeds: Tensor) -> tuple[Tensor, Tensor]:
    """Every (treasure cell, seed) pair, cell-major (run ``c * m + j``: cell ``c``, seed ``j``):
    ``treasure [C * m, 2]`` and ``seeds [C * m, d_seed]``. The one grid of runs behind
    population fitness and agent evaluation."""
    n_cells, m = cells.shape[0], seeds.shape[0]
    return cells.repeat_interleave(m, dim=0), seeds.repeat(n_cells, 1)


@dataclass(frozen=True)
class Rollout:
    """``n`` finished runs.

    Attributes:
        inputs: ``[n, T, d_obs]`` the observation tokens the model read (``T = 2 *
            episode_steps``; after a run ended its tokens are filler, read by nothing that counts).
        seeds: ``[n, d_seed]``.
        treasure: ``[n, 2]``.
        actions: ``[n, T]`` long, the argmax action at each observation.
        rewards: ``[n, T]`` float (0 after the run ended).
        moved_to: ``[n, T, 2]`` long, the cell each step reached.
        episode: ``[n, T]`` long, the episode each step belonged to (2: the run had ended).
    """

    inputs: Tensor
    seeds: Tensor
    treasure: Tensor
    actions: Tensor
    rewards: Tensor
    moved_to: Tensor
    episode: Tensor

    @property
    def returns(self) -> Tensor:
        """``[n]`` accumulated reward over both episodes."""
        return self.rewards.sum(1)


class Policy(Protocol):
    """Plays ``n`` runs from their seeds: called once per step with the newest observation."""

    def __call__(self, obs: Tensor) -> Tensor:
        """``obs: [n, d_obs]`` -> ``[n, 4]`` logits at that observation's position."""
        ...


# seeds [n, d_seed] -> a Policy for those n runs
PolicyFactory = Callable[[Tensor], Policy]


class RecomputePolicy:
    """A :class:`Policy` from a full forward function: each step re-reads the whole prefix
    (the causal model's earlier logits do not change as tokens are appended, so only the
    newest position's are used). Simple and exact; :class:`CachedPolicy` is the fast path."""

    def __init__(self, logits_fn: LogitsFn, seeds: Tensor):
        self.logits_fn = logits_fn
        self.seeds = seeds
        self.history: list[Tensor] = []

    def __call__(self, obs: Tensor) -> Tensor:
        self.history.append(obs)
        return self.logits_fn(torch.stack(self.history, dim=1), self.seeds)[:, -1]


class CachedPolicy:
    """A :class:`Policy` of one model through its fast path
    (:class:`~interp_rand.model.fast.FastForward`): each step reads only the newest token and
    the key/value cache (:class:`~interp_rand.model.fast.DecodeCache`) of the earlier ones.
    :class:`~interp_rand.gridworld.population.PopulationPolicy` is the same for a population."""

    def __init__(self, model: HookedTransformer, seeds: Tensor):
        self.fast = FastForward(model)
        self.seeds = seeds
        self.cache = DecodeCache.empty(model.cfg, seeds.shape[0], device=seeds.device)

    def __call__(self, obs: Tensor) -> Tensor:
        return self.fast(obs[:, None], seeds=self.seeds, cache=self.cache)[:, -1]


@torch.no_grad()
def rollout(make_policy: PolicyFactory, grid: GridConfig, treasure: Tensor, seeds: Tensor) -> Rollout:
    """Play ``n`` runs: ``treasure: [n, 2]``, ``seeds: [n, d_seed]``; ``make_policy(seeds)``
    gives the :class:`Policy` (one model, or a whole population, see
    :mod:`interp_rand.gridworld.population`)."""
    n_steps = grid.total_steps
    state = env.reset(grid, treasure)
    n = treasure.shape[0]
    if seeds.shape != (n, grid.d_obs):
        raise ValueError(f"seeds must be [n={n}, d_seed={grid.d_obs}]; got {tuple(seeds.shape)}")
    device = treasure.device  # everything lives where the treasure cells were given
    inputs = torch.zeros(n, n_steps, grid.d_obs, device=device)
    actions = torch.zeros(n, n_steps, dtype=torch.long, device=device)
    rewards = torch.zeros(n, n_steps, device=device)
    moved_to = torch.zeros(n, n_steps, 2, dtype=torch.long, device=device)
    episode = torch.full((n, n_steps), 2, dtype=torch.long, device=device)
    obs = env.observe(grid, state.pos, torch.zeros(n, device=device))
    policy = make_policy(seeds)
    for t in range(n_steps):
        inputs[:, t] = obs
        if not bool(state.active.any()):
            inputs[:, t + 1 :] = obs[:, None]  # every run is over: pad, the model need not run
            moved_to[:, t:] = moved_to[:, t - 1 : t]
            break
        actions[:, t] = policy(obs).argmax(-1)
        episode[:, t] = state.episode
        state, rewards[:, t], moved_to[:, t] = env.step(grid, state, actions[:, t])
        obs = env.observe(grid, moved_to[:, t], rewards[:, t])
    return Rollout(inputs=inputs, seeds=seeds, treasure=treasure, actions=actions, rewards=rewards,
                   moved_to=moved_to, episode=episode)


def model_logits_fn(model: HookedTransformer) -> LogitsFn:
    return lambda inputs, seeds: model(inputs, seeds=seeds)


def replay(model: HookedTransformer, run: Rollout) -> tuple[Tensor, ActivationCache]:
    """Run a finished rollout through ``model.run_with_cache`` in one forward pass.

    Returns ``(logits [n, T, 4], cache)``; on the steps that counted, ``logits.argmax(-1)``
    equals ``run.actions`` (the causal model sees the same prefix as during the rollout).
    """
    with torch.no_grad():
        return model.run_with_cache(run.inputs, seeds=run.seeds)


def play(model: HookedTransformer, grid: GridConfig, treasure: Tensor, seeds: Tensor,
         cached: bool = True) -> Rollout:
    """:func:`rollout` of one model: by default through its fast path with a key/value cache
    (:class:`CachedPolicy`), with ``cached=False`` through the hooked model itself (each step
    re-reads the prefix)."""
    check_fits(grid, model.cfg)
    if not cached:
        return rollout(lambda s: RecomputePolicy(model_logits_fn(model), s), grid, treasure, seeds)
    return rollout(lambda s: CachedPolicy(model, s), grid, treasure, seeds)


__all__ = ["CachedPolicy", "Policy", "PolicyFactory", "RecomputePolicy", "Rollout", "agent_model_config", "cell_seed_grid", "check_fits",
           "model_logits_fn", "play", "replay",
           "rollout", "sample_seeds"]
