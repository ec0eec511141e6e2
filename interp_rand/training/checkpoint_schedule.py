"""Which training steps write a checkpoint: ``TrainConfig.checkpoint_schedule``.

- ``"every"``: every ``checkpoint_every`` steps (and the last step); pruning keeps the newest
  ``keep_checkpoints``. The trainer's default, for runs that only need their final model.
- ``"log:N"``: N checkpoints for training dynamics, dense early and log-spaced after: step 1,
  then consecutive steps while a log-spaced grid would step by less than one, then
  geometrically spaced steps up to ``steps`` (always included). Each next step is chosen so
  that the remaining checkpoints cover the remaining steps with one common ratio, so the set
  has exactly ``min(N, steps)`` strictly increasing steps. ``log:50`` of 3000 steps is
  1, 2, ..., 10, 12, 14, 16, 18, 21, 24, ..., 1965, 2263, 2606, 3000.
- ``"even:N"``: N evenly spaced steps ending at ``steps`` (``round(i * steps / N)``).

A run with a ``log:`` or ``even:`` schedule keeps every checkpoint it writes (``keep_checkpoints``
does not prune them: :func:`keeps_all`), so a replay over the run
(:mod:`interp_rand.reports.dynamics.replay`) sees every scheduled step. The schedule depends
on ``steps``: a resumed run whose ``steps`` grows continues on the schedule of its new length.

Light to import (no torch): :class:`~interp_rand.training.config.TrainConfig` validates its
field with :func:`parse_schedule`.
"""

from __future__ import annotations

import functools
import re

#: The schedule kinds, with what they mean (error messages list them).
SCHEDULE_KINDS = {
    "every": "a checkpoint every checkpoint_every steps, the newest keep_checkpoints kept",
    "log:N": "N checkpoints, dense early then log-spaced up to the last step, all kept",
    "even:N": "N evenly spaced checkpoints ending at the last step, all kept",
}
_SPEC = re.compile(r"^(log|even):(\d+)$")


def _allowed() -> str:
    return "; ".join(f"{kind!r} ({meaning})" for kind, meaning in SCHEDULE_KINDS.items())


def parse_schedule(spec: str) -> tuple[str, int | None]:
    """``("every", None)``, ``("log", N)`` or ``("even", N)`` for a schedule spec; a bad spec
    raises ``ValueError`` naming it and what is allowed."""
    if not isinstance(spec, str):
        raise ValueError(f"checkpoint_schedule={spec!r} must be a string; allowed: {_allowed()}")
    if spec == "every":
        return "every", None
    match = _SPEC.match(spec.strip())
    if match is None:
        raise ValueError(f"checkpoint_schedule={spec!r} is not a schedule; allowed: {_allowed()}")
    count = int(match.group(2))
    if count < 2:
        raise ValueError(f"checkpoint_schedule={spec!r}: N must be >= 2 (the first checkpoint and the last); "
                         f"allowed: {_allowed()}")
    return match.group(1), count


def keeps_all(spec: str) -> bool:
    """Does a run with this schedule keep every checkpoint it writes (no pruning)?"""
    return parse_schedule(spec)[0] != "every"


@functools.lru_cache(maxsize=64)
def scheduled_steps(spec: str, steps: int, checkpoint_every: int = 1) -> tuple[int, ...]:
    """The steps (1-based, strictly increasing, ending at ``steps``) at which a run of
    ``steps`` steps writes a checkpoint under ``spec`` (``checkpoint_every``: the ``every``
    schedule's period). A run stopped early (``stop_at_exact_match``, a signal) also writes one
    at the step it stops."""
    kind, count = parse_schedule(spec)
    if steps < 1:
        raise ValueError(f"steps={steps!r} must be >= 1")
    if kind == "every":
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every={checkpoint_every!r} must be >= 1")
        return tuple(sorted(set(range(checkpoint_every, steps + 1, checkpoint_every)) | {steps}))
    n = min(count, steps)
    if kind == "even":
        return tuple(sorted({max(1, round(i * steps / n)) for i in range(1, n + 1)}))
    points = [1]
    while len(points) < n:
        remaining = n - len(points)
        prev = points[-1]
        ratio = (steps / prev) ** (1.0 / remaining)
        nxt = max(prev + 1, round(prev * ratio))
        points.append(min(nxt, steps - (remaining - 1)))
    if n == 1:  # a one-step run: its only step
        points = [steps]
    return tuple(points)


def is_checkpoint_step(config, step: int) -> bool:
    """Does the run of ``config`` (a :class:`~interp_rand.training.config.TrainConfig`) write
    a checkpoint after step ``step`` (1-based)? The trainer's question."""
    if config.checkpoint_schedule == "every":
        return step % config.checkpoint_every == 0 or step == config.steps
    return step in _step_set(config.checkpoint_schedule, config.steps)


@functools.lru_cache(maxsize=64)
def _step_set(spec: str, steps: int) -> frozenset[int]:
    return frozenset(scheduled_steps(spec, steps))


__all__ = ["SCHEDULE_KINDS", "is_checkpoint_step", "keeps_all", "parse_schedule", "scheduled_steps"]
