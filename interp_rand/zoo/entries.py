"""What the zoo holds: one entry per task and variant, each a recipe that ``interp-rand zoo
build`` follows.

- ``sort``, ``addition``: the deterministic algorithmic tasks, at the sizes the case studies
  use (sort: length 5 over 10 values; addition: 3 digits), 2 blocks of width 64 with 4 heads.
- ``recall-*`` (N = 12 pairs) and ``coloring-*`` (10-cycles): every variant of the paper
  (``A^E_r0``, ``A^q_r0``, ``A^E_R``, ``A^q_R``, ``A^q_R (m=1)``) at the task's CPU scale, with
  training seed 0: the same runs as ``interp-rand reproduce TASK`` (``reproduce.variant_runs``),
  so a zoo model is one point of the reproduction.
- ``sort-alibi``, ``addition-digit_offset``: two models of the length study
  (:data:`LENGTH_STUDY`, docs/generalization.md): sort on lists of lengths 2-8 with ALiBi
  positions, addition of 1-5 digits written units first with digit-index positions and Abacus's
  index offset; the models that extrapolate furthest, for ``interp-rand generalization``.
- ``gridworld-*``: the grid-world agents of ``interp-rand gridworld compare --scale cpu``
  (``GRIDWORLD_CPU``: the 5x5 grid, 25 + 25 steps; ERM, the worst-cell objective with m = 10
  seeds, and with m = 1), training seed 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from interp_rand.gridworld.config import GRIDWORLD_CPU, GridworldScale
from interp_rand.gridworld.experiment import compared_variants, variant_label
from interp_rand.reproduce import scale_for, variant_runs
from interp_rand.training.config import TrainConfig
from interp_rand.variant_names import file_label


@dataclass(frozen=True)
class TrainedEntry:
    """A model trained by the toolkit's trainer.

    Attributes:
        name: the zoo name (``zoo:NAME``).
        description: one line for ``interp-rand zoo list``.
        task_name, task_config: the task and its settings.
        model: overrides of the task's default model config.
        train: the training config (``init_from`` unset).
        variant: the paper's variant name for the randomized tasks, else ``None``.
        erm_twin: the zoo name of the ERM model whose weights start this one, or ``None``.
        evaluation: ``"exhaustive"`` (every input), ``"fresh"`` (10,000 fresh inputs) or
            ``"seeded"`` (the paper's metrics over many seeds, as ``reproduce`` measures them).
    """

    name: str
    description: str
    task_name: str
    task_config: dict[str, Any]
    model: dict[str, Any]
    train: TrainConfig
    variant: str | None = None
    erm_twin: str | None = None
    evaluation: str = "fresh"


@dataclass(frozen=True)
class AgentEntry:
    """A grid-world agent trained with PGPE.

    Attributes:
        name, description: as for :class:`TrainedEntry`.
        scale: the grid, agent and PGPE settings.
        variant: the paper's variant name.
    """

    name: str
    description: str
    scale: GridworldScale
    variant: str
    task_name: str = field(default="gridworld", init=False)


ALGORITHMIC_MODEL = {"d_model": 64, "n_layers": 2, "n_heads": 4}
ALGORITHMIC_TRAIN = TrainConfig(steps=3000, batch_size=128, lr=3e-3, warmup_steps=100, eval_every=250,
                                eval_size=2048, checkpoint_every=3000, stop_at_exact_match=0.999, seed=0)
# The length study (examples/length_study.py, docs/generalization.md): one recipe per model, the
# zoo's algorithmic one trained on a range of lengths (TrainConfig.min_length); sort of 2-8 values
# from 0-9 run to 24, addition of 1-5 digits written units first run to 15. A learned table gets
# 48 rows so that every length of the study can run (rows past the trained ones stay untrained).
_SORT_RANGE = ("sort", {"length": 8, "vocab": 10}, dataclasses.replace(
    ALGORITHMIC_TRAIN, steps=4000, checkpoint_every=4000, min_length=2))
_ADDITION_RANGE = ("addition", {"n_digits": 5, "operand_order": "lsb", "answer_order": "lsb"}, dataclasses.replace(
    ALGORITHMIC_TRAIN, steps=4000, checkpoint_every=4000, min_length=1))


def _length_model(name: str, what: str, setting: tuple, positions: dict[str, Any],
                  **train: Any) -> TrainedEntry:
    task_name, task_config, config = setting
    return TrainedEntry(name, what, task_name, task_config, {**ALGORITHMIC_MODEL, **positions},
                        dataclasses.replace(config, **train))


LENGTH_STUDY: dict[str, TrainedEntry] = {e.name: e for e in (
    _length_model("sort-learned", "sort lists of 2-8 values from 0-9, a learned position table", _SORT_RANGE,
                  {"positional": "learned", "n_ctx": 48}),
    _length_model("sort-alibi", "sort lists of 2-8 values from 0-9, ALiBi positions (the length study)", _SORT_RANGE,
                  {"positional": "alibi"}),
    _length_model("addition-learned", "add numbers of 1-5 digits written units first, a learned position table",
                  _ADDITION_RANGE, {"positional": "learned", "n_ctx": 48}),
    _length_model("addition-alibi", "add numbers of 1-5 digits written units first, ALiBi positions",
                  _ADDITION_RANGE, {"positional": "alibi"}),
    _length_model("addition-digit_index", "add numbers of 1-5 digits written units first, digit-index positions",
                  _ADDITION_RANGE, {"positional": "digit_index", "digit_tokens": 10}),
    # the offset spreads training over 3x the index rows: at 4,000 steps it stops short of the bar
    _length_model("addition-digit_offset", "add numbers of 1-5 digits written units first, digit-index positions "
                  "with Abacus's index offset (the length study)", _ADDITION_RANGE,
                  {"positional": "digit_index", "digit_tokens": 10, "digit_offset": 10},
                  steps=10_000, checkpoint_every=10_000),
)}


def _recall_range() -> dict[str, TrainedEntry]:
    """Recall on 4-8 pairs over 16 keys (``n_keys``: the one-hot stays 16 wide, so the model reads
    up to 16 pairs), ERM and the randomized model, at the CPU scale's recipe: how many keys each
    keeps past the pairs it was trained on."""
    out = {}
    for run in variant_runs("recall", scale_for("recall", "cpu"), train_seed=0):
        if run.variant in ("A^E_R", "A^q_R"):
            name = f"recall-keys16-{run.label}"
            out[name] = TrainedEntry(name, f"recall of 4-8 pairs over 16 keys, {VARIANT_HELP[run.variant]}", "recall",
                                     {"n_pairs": 8, "n_keys": 16}, scale_for("recall", "cpu").model_overrides(),
                                     dataclasses.replace(run.config, min_length=4), variant=run.variant,
                                     evaluation="seeded")
    return out


#: the length-study models the zoo ships (each about 400 KB)
LENGTH_STUDY_IN_ZOO = ("sort-alibi", "addition-digit_offset")

VARIANT_HELP = {
    "A^E_r0": "ERM on one fixed seed r0 (deterministic)",
    "A^q_r0": "q-norm on one fixed seed r0",
    "A^E_R": "ERM on fresh seeds (learns to ignore them)",
    "A^q_R": "q-norm, m seeds per step: the randomized model of interest",
    "A^q_R (m=1)": "q-norm with one seed per step (no gain expected)",
}
LENGTH_STUDY.update(_recall_range())  # (after VARIANT_HELP, which names the variants)


def _randomized(task_name: str, task_config: dict[str, Any], setting: str, scale_name: str = "cpu",
                prefix: str = "", variants: tuple[str, ...] | None = None,
                train: dict[str, Any] | None = None) -> list[TrainedEntry]:
    """The zoo entries of a randomized task's variants at ``scale_name`` (``variants``: only
    those; ``train``: overrides of each run's config, named where they are used)."""
    scale = scale_for(task_name, scale_name)
    entries, seen = [], set()
    for run in variant_runs(task_name, scale, train_seed=0):
        if run.label in seen or (variants is not None and run.variant not in variants):
            continue  # colouring's sweep over smaller q: the zoo keeps the main q only
        seen.add(run.label)
        twin = None if run.erm_twin is None else f"{task_name}-{prefix}{run.erm_twin}"
        entries.append(TrainedEntry(
            name=f"{task_name}-{prefix}{run.label}", description=f"{task_name} ({setting}), {VARIANT_HELP[run.variant]}",
            task_name=task_name, task_config=task_config, model=scale.model_overrides(),
            train=dataclasses.replace(run.config, **(train or {})), variant=run.variant, erm_twin=twin,
            evaluation="seeded"))
    return entries


def _agents() -> list[AgentEntry]:
    m, q = GRIDWORLD_CPU.pgpe.m_seeds, GRIDWORLD_CPU.pgpe.tie_break_q
    ties = "" if q is None else f", ties broken by the {q:g}-norm of the cells' losses"
    help_text = {"A^E_R": "ERM (average over treasure cells)",
                 "A^q_R": f"worst treasure cell (q = inf{ties}), m = {m} seeds",
                 "A^q_R (m=1)": f"worst treasure cell{ties}, m = 1 seed"}
    entries = []
    for scale in compared_variants(GRIDWORLD_CPU):
        variant = variant_label(scale, m)
        entries.append(AgentEntry(f"gridworld-{file_label(variant)}", f"5x5 grid world, {help_text[variant]}",
                                  scale, variant))
    return entries


def _all() -> dict[str, TrainedEntry | AgentEntry]:
    entries: list[TrainedEntry | AgentEntry] = [
        TrainedEntry("sort", "sort 5 values from 0-9 (duplicates allowed)", "sort", {"length": 5, "vocab": 10},
                     ALGORITHMIC_MODEL, ALGORITHMIC_TRAIN, evaluation="fresh"),
        TrainedEntry("addition", "3-digit addition, answer most significant digit first", "addition",
                     {"n_digits": 3}, ALGORITHMIC_MODEL, ALGORITHMIC_TRAIN, evaluation="exhaustive"),
        *_randomized("recall", {"n_pairs": 12}, "N = 12 pairs"),
        # N = 14 at the public port's recipe (batch 512, 10k steps): the CPU recipe falls short at
        # N >= 14. One departure: a checkpoint every 1,000 steps (the runs were resumed on a
        # shared machine), which changes nothing the model learns.
        *_randomized("recall", {"n_pairs": 14}, "N = 14 pairs, the port's recipe", "port", "N14-",
                     ("A^E_R", "A^q_R"), {"checkpoint_every": 1000}),
        # N = 16, the same recipe
        *_randomized("recall", {"n_pairs": 16}, "N = 16 pairs, the port's recipe", "port", "N16-", ("A^E_R", "A^q_R"),
                     {"checkpoint_every": 1000}),
        *_randomized("coloring", {"n_vertices": scale_for("coloring", "cpu").n_vertices}, "10-cycles"),
        *(LENGTH_STUDY[name] for name in LENGTH_STUDY_IN_ZOO),
        *_agents(),
    ]
    return {e.name: e for e in entries}


ENTRIES: dict[str, TrainedEntry | AgentEntry] = _all()
