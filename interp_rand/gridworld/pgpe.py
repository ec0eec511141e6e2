"""Training the grid-world agent with evotorch's PGPE against the exact worst treasure cell.

Each generation draws ``m`` seeds shared by every member and every cell; a member's fitness is
the worst cell's seed-averaged return (``variant="worst"``, q = inf; with
``PGPEConfig.tie_break_q`` its ties broken by a small q-norm term, see
:func:`~interp_rand.gridworld.population.fitness`) or the average over cells (``"erm"``),
computed for the whole population at once by
:func:`~interp_rand.gridworld.population.population_returns`. With ``num_actors`` the
population is split over Ray actors (evotorch's own parallelisation); the generation's seeds
are pushed to every actor, so the remote fitness equals the local one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from evotorch import Problem, SolutionBatch
from evotorch.algorithms import PGPE
from torch import Tensor

from interp_rand.gridworld.agent import agent_model_config, sample_seeds
from interp_rand.gridworld.config import GridConfig, GridworldScale
from interp_rand.gridworld.environment import treasure_cells
from interp_rand.gridworld.population import (
    ParameterLayout,
    fitness,
    population_returns,
)
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer

class GridworldProblem(Problem):
    """Maximise the grid-world fitness of flat agent weight vectors (vectorised evaluation).

    Args:
        grid, model_config, variant: the environment, the agent's architecture, ``worst``/``erm``.
        tie_break_q: see ``PGPEConfig.tie_break_q`` (``None``: the exact worst cell).
        num_actors: Ray actors evaluating pieces of the population (``None``: all local).
        max_runs: runs stepped together per chunk (see ``population_returns``).
        seed: evotorch's generator (the PGPE sampler).
        device: where the population and the rollouts live (``"cpu"``, ``"cuda"``).
    """

    def __init__(self, grid: GridConfig, model_config: ModelConfig, variant: str,
                 num_actors: int | str | None = None, max_runs: int = 32_768, seed: int = 0,
                 device: str = "cpu", tie_break_q: float | None = None):
        self.grid = grid
        self.variant = variant
        self.tie_break_q = tie_break_q
        self.max_runs = max_runs
        self.model = HookedTransformer(model_config, seed=seed).eval().to(device)
        self.layout = ParameterLayout(self.model)
        self.cells = treasure_cells(grid).to(device)
        self.generation_seeds: Tensor | None = None
        super().__init__("max", solution_length=self.layout.n_params, initial_bounds=(-0.1, 0.1),
                         dtype=torch.float32, num_actors=num_actors, seed=seed, device=device)

    def set_generation_seeds(self, seeds: Tensor) -> None:
        """``[m, d_seed]`` the seeds every member is evaluated on next, here and on every actor."""
        self._parallelize()  # creates the actors (once) if this problem has any
        self.generation_seeds = seeds.to(self.device).clone()
        if self.actors:
            import ray

            ray.get([a.call.remote("_store_seeds", [self.generation_seeds], {}) for a in self.actors])

    def _store_seeds(self, seeds: Tensor) -> None:
        self.generation_seeds = seeds

    def seed(self, value: int) -> None:
        # evotorch 0.6.1's EvaluationActor calls ``problem.seed(...)`` on problems that have
        # their own generator, but Problem only defines ``manual_seed``.
        self.manual_seed(value)

    def _prepare(self) -> None:
        if self.is_remote:
            torch.set_num_threads(1)  # an actor is one CPU of the cluster's budget

    def _evaluate_batch(self, batch: SolutionBatch) -> None:
        if self.generation_seeds is None:
            raise RuntimeError("call set_generation_seeds(seeds) before evaluating")
        returns = population_returns(self.model, self.layout, batch.values, self.grid, self.cells,
                                     self.generation_seeds, max_runs=self.max_runs)
        # Stored above the floor: PGPE subtracts the population mean, so an offset changes
        # nothing, and the float32 evals keep the tie-break's small differences near 0 rather
        # than near the floor -50 (where float32's step is 4e-6).
        evals = fitness(returns, self.variant, self.grid, self.tie_break_q) - self.grid.floor
        batch.set_evals(evals.to(batch.values.dtype))


@dataclass(frozen=True)
class TrainedAgent:
    """The result of :func:`train_agent`.

    Attributes:
        model: the agent with PGPE's final centre as weights (eval mode).
        stdev: ``[n_params]`` the final search std.
        history: per logged generation ``{"generation", "mean_eval", "center_fitness",
            "center_worst_cell", "center_average"}`` (in return units, on that generation's seeds).
    """

    model: HookedTransformer
    stdev: Tensor
    history: list[dict[str, Any]]


def train_agent(
    scale: GridworldScale,
    num_actors: int | str | None = None,
    log_every: int = 10,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    max_runs: int = 32_768,
    device: str = "cpu",
) -> TrainedAgent:
    """Train one agent with PGPE at ``scale`` (variant, m, ... in ``scale.pgpe``).

    ``num_actors`` spreads each generation over Ray actors (connect first with
    :func:`interp_rand.job_runner.connect_ray`, or evotorch starts a local Ray instance).
    Deterministic for a given ``scale.pgpe.seed`` when run locally. ``device`` places the population and the rollouts
    (e.g. ``"cuda"`` for the paper scale); the returned agent is on the CPU.
    """
    grid, cfg = scale.grid, scale.pgpe
    model_config = agent_model_config(grid, scale.agent)
    problem = GridworldProblem(grid, model_config, cfg.variant, num_actors=num_actors,
                               max_runs=max_runs, seed=cfg.seed, device=device, tie_break_q=cfg.tie_break_q)
    searcher = PGPE(
        problem, popsize=cfg.popsize, center_learning_rate=cfg.center_lr, stdev_learning_rate=cfg.stdev_lr,
        stdev_init=cfg.stdev_init, optimizer=cfg.optimizer, ranking_method=cfg.ranking,
        center_init=problem.layout.flatten(problem.model),
    )
    generator = torch.Generator().manual_seed(cfg.seed + 1)
    history: list[dict[str, Any]] = []
    try:
        for generation in range(1, cfg.generations + 1):
            seeds = sample_seeds(grid, cfg.m_seeds, generator)
            problem.set_generation_seeds(seeds)
            searcher.step()
            if generation % log_every == 0 or generation == cfg.generations:
                center = searcher.status["center"].detach().clone()
                returns = population_returns(problem.model, problem.layout, center[None], grid,
                                             problem.cells, seeds)
                entry = {"generation": generation,
                         "mean_eval": float(searcher.status["mean_eval"]) + grid.floor,  # evals are above the floor
                         "center_fitness": float(fitness(returns, cfg.variant, grid, cfg.tie_break_q)[0]),
                         "center_worst_cell": float(returns.mean(-1).min()),
                         "center_average": float(returns.mean())}
                history.append(entry)
                if on_log is not None:
                    on_log(entry)
    finally:
        if problem.actors:
            problem.kill_actors()
    center = searcher.status["center"].detach().cpu()
    model = problem.layout.load(HookedTransformer(model_config), center).eval()
    return TrainedAgent(model=model, stdev=searcher.status["stdev"].detach().cpu().clone(), history=history)


__all__ = ["GridworldProblem", "TrainedAgent", "train_agent"]
