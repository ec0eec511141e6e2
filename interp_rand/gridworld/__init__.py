"""Grid-world exploration (the paper's task 3): a batched torch environment, the seeded agent,
population evaluation vectorised over PGPE members, training with evotorch's PGPE against the
exact worst treasure cell (locally or on a Ray cluster), and evaluation."""

from interp_rand.gridworld.agent import (
    Rollout,
    agent_model_config,
    play,
    replay,
    rollout,
    sample_seeds,
)
from interp_rand.gridworld.checkpoint import load_agent, save_agent
from interp_rand.gridworld.config import (
    GRIDWORLD_CPU,
    GRIDWORLD_PAPER,
    AgentConfig,
    GridConfig,
    GridworldScale,
    PGPEConfig,
    scale_named,
)
from interp_rand.gridworld.environment import treasure_cells
from interp_rand.gridworld.evaluation import AgentEvaluation, evaluate_agent
from interp_rand.gridworld.pgpe import (
    GridworldProblem,
    TrainedAgent,
    train_agent,
)
from interp_rand.gridworld.population import (
    ParameterLayout,
    fitness,
    population_returns,
)

__all__ = [
    "GRIDWORLD_CPU",
    "GRIDWORLD_PAPER",
    "AgentConfig",
    "AgentEvaluation",
    "GridConfig",
    "GridworldProblem",
    "GridworldScale",
    "PGPEConfig",
    "ParameterLayout",
    "Rollout",
    "TrainedAgent",
    "agent_model_config",
    "evaluate_agent",
    "fitness",
    "load_agent",
    "play",
    "population_returns",
    "replay",
    "rollout",
    "sample_seeds",
    "save_agent",
    "scale_named",
    "train_agent",
    "treasure_cells",
]
