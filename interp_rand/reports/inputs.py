"""What every analysis of a trained run starts from, in one call: load the run (a run folder
or ``zoo:NAME``), make its task, sample ``n`` examples with a seeded generator, give a model
trained on the fixed seed r0 its r0 (as in training) and, if asked, draw clean/corrupted pairs.

    >>> inputs = load_run_inputs("zoo:sort", n=256, seed=0, pairs="task")
    >>> inputs.model, inputs.task, inputs.pairs.clean, inputs.pairs.corrupted
    >>> inputs = analysis_inputs(None, 256, 0, model=model, task=spec)   # a model of your own

:func:`analysis_inputs` is the one entry of the reports: a run, or a model with its task (a
registered task or a :class:`~interp_rand.tasks.spec.TaskSpec`).
Light to import (torch is imported on first use), so the command line can read :data:`PAIRS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the kinds of clean/corrupted pairs: the task's own corruption, or the same inputs under fresh seeds
PAIRS = ("task", "seed")


@dataclass
class RunInputs:
    """Attributes:
    ckpt: the run's newest :class:`~interp_rand.training.checkpoint.Checkpoint` (``None`` for a
        model given directly).
    model: its model (eval mode); task: its task.
    batch: the sampled examples (seeds replaced by r0 for a fixed-seed run).
    pairs: clean/corrupted pairs drawn from ``batch`` (None unless asked for).
    generator: the generator after the draws, for whatever the caller draws next.
    """

    ckpt: Any
    model: Any
    task: Any
    batch: Any
    pairs: Any
    generator: Any  # torch.Generator
    source: str = ""  # what the reports name as the model's origin: the checkpoint or "model"

    @property
    def task_name(self) -> str:
        return self.task.name


def make_pairs(kind: str, model: Any, task: Any, batch: Any, generator: Any) -> Any:
    """Clean/corrupted pairs of ``kind`` (:data:`PAIRS`): ``task`` the task's own corruption (a
    minimal input edit that changes the answer), ``seed`` the same inputs under fresh seeds with
    the model's own answers as targets (:func:`circuits.analyses.randomness.seed_pairs`)."""
    if kind == "seed":
        from circuits.analyses.randomness import seed_pairs

        return seed_pairs(model, task, batch, generator)
    if kind != "task":
        raise ValueError(f"pairs={kind!r}: expected one of {PAIRS}")
    return task.corrupt(batch, generator)


def load_run_inputs(run: str | Path, n: int, seed: int, pairs: str | None = "task", *,
                    task: str | None = None, check_architecture: bool = False) -> RunInputs:
    """Load ``run``, sample ``n`` examples of its task with ``torch.Generator().manual_seed(seed)``
    (a fixed-seed run's seeds set to r0) and draw ``pairs`` of that kind from them with the same
    generator (``None``: no pairs). ``task``: the expected task name (an error otherwise);
    ``check_architecture``: refuse, naming the run, a model whose architecture circuits cannot
    read."""
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run, task=task)
    model = ckpt.model().eval()
    inputs = _sampled(model, ckpt.spec.make_task(), n, seed, pairs, ckpt.spec.train_config.seed_source, str(run),
                      check_architecture)
    inputs.ckpt, inputs.source = ckpt, str(ckpt.path)
    return inputs


def model_and_task(run: str | Path | None, model: Any, task: Any, what: str,
                   expected_task: str | None = None) -> tuple[Any, Any, str]:
    """``(model in eval mode, task, label)`` of ``run`` (a run folder or ``zoo:NAME``, of
    ``expected_task`` when given) or of the given ``model`` and its ``task``; what ``what``
    needs is said in one line when neither is given, or a model comes without its task."""
    from interp_rand.run_names import run_label
    from interp_rand.training.checkpoint import load_checkpoint

    if model is None:
        if run is None:
            raise ValueError(f"{what} needs a run (a run folder or zoo:NAME) or a model and a task")
        ckpt = load_checkpoint(run, task=expected_task)
        return ckpt.model().eval(), ckpt.spec.make_task(), run_label(run)
    if task is None:
        raise ValueError(f"{what}(model=...) needs task=... too (the batches and answer positions)")
    return model.eval(), task, "(model given)" if run is None else str(run)


def analysis_inputs(run: str | Path | None, n: int, seed: int, pairs: str | None = "task", *, model: Any = None,
                    task: Any = None, seed_source: str = "fresh", what: str = "this report",
                    check_architecture: bool = False, expected_task: str | None = None) -> RunInputs:
    """:func:`load_run_inputs` of ``run``, or the same for ``model`` and its ``task`` (a task
    instance or a :class:`~interp_rand.tasks.spec.TaskSpec`; ``seed_source="fixed"``: the model
    was trained on the task's r0 alone). Exactly one of ``run`` and ``model``; a model without a
    task is refused in one line naming what ``what`` needs."""
    from interp_rand.tasks.spec import require_task

    if (run is None) == (model is None):
        raise ValueError(f"{what} takes a run or a model (with its task), not {'both' if run is not None else 'neither'}")
    if run is not None:
        return load_run_inputs(run, n, seed, pairs, task=expected_task, check_architecture=check_architecture)
    require_task(task, what)
    return _sampled(model.eval(), task, n, seed, pairs, seed_source, "model", check_architecture)


def _sampled(model: Any, made: Any, n: int, seed: int, pairs: str | None, seed_source: str, label: str,
             check_architecture: bool) -> RunInputs:
    import torch

    from interp_rand.training import TrainConfig
    from interp_rand.training.objectives import fixed_seeds_if_asked

    run = label
    if check_architecture:
        from circuits import architecture

        try:
            architecture(model)
        except ValueError as err:
            raise ValueError(f"{run}: {err}") from None
    generator = torch.Generator().manual_seed(seed)
    batch = fixed_seeds_if_asked(made, made.sample(n, generator), TrainConfig(seed_source=seed_source))
    drawn = None if pairs is None else make_pairs(pairs, model, made, batch, generator)
    return RunInputs(None, model, made, batch, drawn, generator, label)


__all__ = ["PAIRS", "RunInputs", "analysis_inputs", "load_run_inputs", "make_pairs", "model_and_task"]
