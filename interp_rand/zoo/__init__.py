"""The zoo: small trained models of every task and variant, shipped with the package.

Analyse real trained models without training first. Every command and loader that takes a
run directory also takes ``zoo:NAME``::

    interp-rand zoo list                              # what is there, with each model's figures
    interp-rand case-study carry zoo:addition --out carry
    interp-rand randomness zoo:coloring-Aq_R --compare zoo:coloring-AE_R --out rand

    from interp_rand import zoo
    model = zoo.load("addition").model()              # a training Checkpoint
    agent = zoo.load("gridworld-Aq_R").model()        # grid-world entries load as an AgentCheckpoint

The models are produced by one command from this repository, ``interp-rand --threads 1 zoo
build`` (``make zoo``), following the recipes in :mod:`interp_rand.zoo.entries`; each holds its
final weights (no optimiser state), its training curve and ``zoo.json``, the model card with
its recipe and measured evaluation.
"""

from __future__ import annotations

import json
from typing import Any

# where the zoo lives and what ``zoo:NAME`` means: facts of the run names, below the checkpoint
# loaders that read them (this package builds and describes the models, above the trainer)
from interp_rand.run_names import (
    CARD_FILE,
    PREFIX,
    ZOO_DIR,
    installed,
    resolve_run,
    zoo_name,
    zoo_path,
)


def card(name: str) -> dict[str, Any]:
    """The model card (``zoo.json``) of the zoo model ``name``."""
    return json.loads((zoo_path(name) / CARD_FILE).read_text())


def headline(card: dict[str, Any]) -> str:
    """A model card's measured figures in one line (``interp-rand zoo list``)."""
    m = card["metrics"]
    if "exact_match" in m:
        return f"exact match {m['exact_match']:.4f} on {m['evaluated_on']}"
    if "n_seeds" in m:
        return (f"average {m['average']:.3f}, worst-5% {m['worst_5pct']:.2f} "
                f"({m['n_inputs']} inputs x {m['n_seeds']} seeds)")
    return f"average return {m['average']:.3f}, worst-5% {m['worst_5pct']:.3f}, {m['n_distinct_routes']} routes"


def load(name: str):
    """The zoo model ``name``: a :class:`~interp_rand.training.checkpoint.Checkpoint`, or an
    :class:`~interp_rand.gridworld.checkpoint.AgentCheckpoint` for the grid-world agents; both
    give the model by ``.model()`` and hold ``path``, ``step`` and ``metrics``."""
    from interp_rand.tasks import task_names

    if card(name)["task"] not in task_names():  # not the trainer's: a PGPE agent
        from interp_rand.gridworld.checkpoint import load_agent

        return load_agent(PREFIX + name)
    from interp_rand.training.checkpoint import load_checkpoint

    return load_checkpoint(PREFIX + name)


__all__ = ["CARD_FILE", "PREFIX", "ZOO_DIR", "card", "headline", "installed", "load", "resolve_run", "zoo_name", "zoo_path"]
