"""The task protocol: what every task gives the trainer, the evaluator and the analyses.

A task is a frozen config dataclass plus methods that turn a ``torch.Generator`` into
batches. Everything position-dependent (where the answers are, which metadata belongs to
which answer) lives in the :class:`Batch`, and everything else a task-specific analysis needs
(position names, token labels, capabilities, its experiment's scales and the paper's values)
on the task, so trainers and analyses never special-case a task by name.

Layout convention for sequence tasks: the model reads ``inputs[:, p]`` and is asked for
``targets[:, p]`` (the next token) wherever ``loss_mask[:, p]`` is true. Answer positions are
the same for every example of a task, so ``Batch.answer_positions`` indexes them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import torch

from interp_rand.batch import Batch, PairBatch  # the data of the protocol, imported from here too
from interp_rand.registry import Registry

if TYPE_CHECKING:
    from interp_rand.model.config import ModelConfig


@runtime_checkable
class Task(Protocol):
    """What a task provides. Implementations are frozen dataclasses holding their config.

    Class attributes:
        name: the registry name (``interp-rand tasks`` lists them).
        description: one line for ``--help`` and ``interp-rand tasks``.
        loss_kind: ``"ce"`` (cross-entropy over ``d_vocab_out`` classes) or ``"bce"`` (one
            binary logit per output unit); the default objective reads it.
        capabilities: optional, what the task offers beyond this protocol for the analyses that
            fit only some tasks (see :data:`CAPABILITIES`, :func:`has_capability`).
        experiment: optional (randomized tasks), the task's paper experiment: its scales,
            sweep, evaluation size and the paper's values
            (:class:`~interp_rand.tasks.randomized.Experiment`, read by
            :mod:`interp_rand.reproduce` and the zoo).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    loss_kind: ClassVar[str]

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field and the allowed values if the config is bad."""
        ...

    def model_config(self, **overrides: Any) -> "ModelConfig":
        """The default model for this task (vocab sizes and context filled in), with overrides."""
        ...

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` fresh training/evaluation examples drawn with ``generator``."""
        ...

    def corrupt(self, batch: Batch, generator: torch.Generator) -> PairBatch:
        """Clean/corrupted pairs for patching (the task's minimal meaningful edit)."""
        ...

    def config_dict(self) -> dict[str, Any]:
        """JSON-serialisable config (``dataclasses.asdict``)."""
        ...

    def position_names(self) -> list[str]:
        """One short name per model input position (``n_ctx`` of them), for figure axes:
        ``x0 .. SEP y0 ..`` (sort), ``a2 a1 a0 + b2 .. = s3 ..`` (addition)."""
        ...

    def token_labels(self, batch: Batch, row: int) -> list[str]:
        """Per input position of example ``row``: its name and what it holds (``x3: 7``)."""
        ...


# ----------------------------------------------------------------------------- capabilities
# What a task offers beyond the protocol, for the analyses that fit only some tasks (the carry
# and sort case studies, the stored-set map, symmetry breaking). A task lists its capabilities
# in a ``capabilities: ClassVar[frozenset[str]]`` class attribute; an analysis asks
# :func:`has_capability` (or :func:`require_capability`) for the one it needs instead of testing
# the task's name, so a new task with the same structure gets the analysis by declaring it.

CARRIES = "carries"
"""Multi-digit addition with carries (:class:`~interp_rand.tasks.addition.AdditionTask`):
``n_digits``, metadata ``carry_in``/``carry_out``/``cascade_len`` per answer digit,
``sample_with_cascade(n, generator, min_len)`` and ``exhaustive()``; the carry case study."""

SORTED_OUTPUT = "sorted_output"
"""The answer is the input list in ascending order (:class:`~interp_rand.tasks.sort.SortTask`):
``length``, ``vocab``, metadata ``rank``/``is_duplicate``/``answer_is_duplicate``/``n_distinct``;
the sort case study."""

KEY_VALUE_RECALL = "key_value_recall"
"""Key/value pairs then a query (:class:`~interp_rand.tasks.recall.RecallTask`): ``n_pairs``,
``build(key_order, values, query_index, seeds)``, metadata ``key_order``/``values``/
``query_index``/``query_key``, and seeds that ``all_seeds()`` enumerates; the stored-set map."""

CYCLE_NEIGHBOURS = "cycle_neighbours"
"""Each position is a vertex of a cycle that sees only its two neighbours, with a noise value
of its own as seed (:class:`~interp_rand.tasks.coloring.ColoringTask`): metadata ``order``/
``ring_position``, seeds ``[batch, N, 1]``; the symmetry-breaking analyses."""

CAPABILITIES = (CARRIES, SORTED_OUTPUT, KEY_VALUE_RECALL, CYCLE_NEIGHBOURS)


def has_capability(task: Any, capability: str) -> bool:
    """Does ``task`` (a task or a task class) declare ``capability`` (one of
    :data:`CAPABILITIES`) in its ``capabilities``? Unknown capability names raise ``ValueError``."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown task capability {capability!r}; known: {', '.join(CAPABILITIES)}")
    return capability in getattr(task, "capabilities", frozenset())


def require_capability(task: Any, capability: str, analysis: str) -> None:
    """Raise ``ValueError`` unless ``task`` has ``capability``: ``"{analysis} needs a task with
    {capability} (registered: recall); got 'sort'"``."""
    if not has_capability(task, capability):
        raise ValueError(f"{analysis} needs a task with {capability} (registered: "
                         f"{', '.join(tasks_with(capability)) or 'none'}); got {getattr(task, 'name', task)!r}")


def tasks_with(capability: str) -> list[str]:
    """The registered task names whose task declares ``capability``, sorted."""
    return [name for name in task_names() if has_capability(TASKS.get(name), capability)]


def token_model_config(n_ctx: int, d_vocab: int, overrides: dict[str, Any]) -> "ModelConfig":
    """The default model of a token task (sort, addition): a small 2-layer causal softmax
    transformer (width 128, 4 heads) over ``d_vocab`` tokens and ``n_ctx`` positions; the user's
    ``overrides`` win."""
    defaults: dict[str, Any] = dict(d_model=128, n_layers=2, n_heads=4, n_ctx=n_ctx, d_vocab=d_vocab,
                                    d_vocab_out=d_vocab, input_kind="tokens", attention="softmax", mask="causal")
    return model_config_from(defaults, overrides)


def model_config_from(defaults: dict[str, Any], overrides: dict[str, Any]) -> "ModelConfig":
    """A task's default model with the user's ``overrides`` applied, built once so derived
    fields (``d_head``, ``d_mlp``) follow an overridden ``d_model``; unknown fields are named."""
    # Imported here so that importing the task registry stays light.
    from interp_rand.model.config import ModelConfig

    allowed = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ValueError(f"ModelConfig has no field(s) {unknown}; allowed: {sorted(allowed)}")
    return ModelConfig(**{**defaults, **overrides})


TASKS: Registry[type] = Registry("task", sort=True)


def register_task(cls: type) -> type:
    """Class decorator: add a task class to :data:`TASKS` under ``cls.name`` (a second class
    under a taken name is refused)."""
    return TASKS.register(cls.name, cls, description=getattr(cls, "description", ""))


def task_names() -> list[str]:
    """Registered task names, sorted."""
    return TASKS.names()


def task_class(name: str) -> type:
    """The task class registered under ``name``; unknown names list what exists."""
    return TASKS.get(name)


def make_task(name: str, **config: Any) -> Task:
    """Build and validate a registered task from its config fields."""
    cls = task_class(name)
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ValueError(
            f"task {name!r} has no option(s) {unknown}; allowed: {sorted(allowed)}"
        )
    task = cls(**config)
    task.validate()
    return task
