"""The paper's objective: the q-norm over seed-averaged losses, with m seeds shared by the batch.

Per step: n inputs and m seeds drawn once and shared by all inputs (redrawn every step);
``l_i = mean_j loss(x_i, r_j)`` and ``L = (mean_i l_i^q)^(1/q)``, computed stably as
``max_i l_i * (mean_i (l_i / max_i l_i)^q)^(1/q)``. Averaging over seeds *before* the power is
what rewards a model for using its seed: an input that fails for some seeds costs less than one
that fails for all. q = 1 is the mean (ERM over m shared seeds); q = inf is the worst input.
"""

from __future__ import annotations

from typing import ClassVar

import einops
import torch
from torch import Tensor, nn

from interp_rand.losses import answer_loss
from interp_rand.seeded_evaluation import expand_over_seeds
from interp_rand.tasks.base import Batch, Task
from interp_rand.training.config import TrainConfig
from interp_rand.training.objectives import register_objective


def q_norm(losses: Tensor, q: float) -> Tensor:
    """``(mean_i losses_i^q)^(1/q)`` of non-negative ``losses [n]``, stable for large q.

    >>> q_norm(torch.tensor([1.0, 3.0]), 1.0)
    tensor(2.)
    >>> q_norm(torch.tensor([1.0, 3.0]), float("inf"))
    tensor(3.)
    """
    top = losses.max()
    if q == float("inf"):
        return top
    if top <= 0:
        return top  # every loss is 0; also avoids 0/0
    return top * (losses / top).pow(q).mean().pow(1.0 / q)


@register_objective
class QNorm:
    """q-norm over inputs of the loss averaged over ``m_seeds`` shared seeds."""

    name: ClassVar[str] = "qnorm"
    description: ClassVar[str] = "q-norm over inputs of the loss averaged over m seeds shared by the batch"

    def __init__(self, config: TrainConfig) -> None:
        self.q = config.q
        self.q_ramp_steps = config.q_ramp_steps
        self.m = config.m_seeds
        self.seed_source = config.seed_source

    def check(self, task: Task) -> None:
        """``ValueError`` unless ``task`` has a seed channel (the q-norm is over seeds)."""
        if not hasattr(task, "sample_seeds"):
            raise ValueError(
                f"objective 'qnorm' needs a task with a seed channel; task {task.name!r} has none "
                "(use objective 'erm')"
            )

    def seeds(self, task: Task, generator: torch.Generator) -> Tensor:
        """``[m, *seed_shape]``: fresh seeds, or ``r0`` once (m copies of it would be identical)."""
        self.check(task)
        if self.seed_source == "fixed":
            return task.fixed_seed()[None]
        return task.sample_seeds(self.m, generator)

    def per_input_losses(self, model: nn.Module, task: Task, batch: Batch, seeds: Tensor) -> Tensor:
        """``[n, m]`` answer loss of every input under every shared seed."""
        expanded = expand_over_seeds(batch, seeds)  # rows ordered input-major: i * m + j
        if hasattr(model, "forward_over_seeds"):
            # the same logits, computed without repeating each input m times
            logits = model.forward_over_seeds(batch.inputs, seeds, batch.attention_mask).flatten(0, 1)
        else:
            logits = model(expanded.inputs, **expanded.model_kwargs())
        losses = answer_loss(logits, expanded, task.loss_kind)
        return einops.rearrange(losses, "(n m) -> n m", n=len(batch))

    def q_at(self, step: int) -> float:
        """The exponent at ``step``: ``q ** (step / q_ramp_steps)`` during the ramp, then ``q``."""
        if self.q_ramp_steps == 0 or step >= self.q_ramp_steps or self.q == float("inf"):
            return self.q
        return self.q ** (step / self.q_ramp_steps)

    def __call__(
        self, model: nn.Module, task: Task, batch: Batch, generator: torch.Generator, step: int = 0
    ) -> Tensor:
        losses = self.per_input_losses(model, task, batch, self.seeds(task, generator))
        return q_norm(losses.mean(dim=1), self.q_at(step))
