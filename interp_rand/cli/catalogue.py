"""What the command line offers, without importing torch: the registered tasks with their
options, the fields of the configs the CLI parses into, the registries' choices (objectives,
discovery methods, metrics, ablations, model kinds, experiment scales), the discovery methods'
descriptions and options (:class:`~interp_rand.registry.Option`, the flags of ``circuit`` and
``compare``), the replayable training-dynamics analyses (``replay``) and the zoo's entries.

``--help``, ``tasks``, ``zoo list`` and argument errors read them from ``catalogue.json``, so
they answer in a fraction of a second instead of the 5-10 s torch and TransformerLens take to
import. The file is generated from the real registries and configs::

    python -m interp_rand.cli.catalogue      # rewrite catalogue.json after changing one of them

and a test checks that it still equals what they say (``generate() == load()``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand.registry import OPTION_TYPES, Option
from interp_rand.validation import Bounds, field_bounds

CATALOGUE_FILE = Path(__file__).with_name("catalogue.json")
# The option types a config field (or a registry entry's option) may have, by name (``X | None``
# adds ``none``).
TYPES = OPTION_TYPES


@dataclass(frozen=True)
class OptionSpec:
    """One config field as a command-line option.

    Attributes:
        name: the field name (``--name-with-dashes`` on the command line).
        type: ``int``, ``float``, ``str`` or ``bool``.
        optional: the field also takes ``None`` (``none`` on the command line).
        default: the field's default.
        doc: its description from the class's ``Attributes:`` docstring section.
        bounds: the field's :class:`~interp_rand.validation.Bounds` as a dict (``bounded``
            fields; ``None`` otherwise): checked while parsing.
    """

    name: str
    type: str
    optional: bool
    default: Any
    doc: str
    bounds: dict[str, Any] | None = None

    def limits(self) -> Bounds:
        """The declared :class:`~interp_rand.validation.Bounds` (none declared: any finite
        number)."""
        return Bounds(**(self.bounds or {}))


def field_docs(cls: type) -> dict[str, str]:
    """``{field: description}`` parsed from a Google-style ``Attributes:`` docstring section;
    a line ``a, b: text`` documents several fields at once."""
    doc = cls.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    body = doc.split("Attributes:", 1)[1]
    docs: dict[str, str] = {}
    current: list[str] = []
    for line in body.splitlines():
        match = re.match(r"^\s{4,8}([a-z_][a-z0-9_, ]*):\s*(.*)$", line)
        if match:
            current = [name.strip() for name in match.group(1).split(",")]
            for name in current:
                docs[name] = match.group(2).strip()
        elif line.strip() and current:
            for name in current:
                docs[name] += " " + line.strip()
        elif not line.strip() and current and docs.get(current[0]):
            current = []
    return docs


def option_specs(cls: type) -> list[OptionSpec]:
    """The init fields of the dataclass ``cls`` as :class:`OptionSpec` s."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    limits = field_bounds(cls)
    specs = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        annotation = hints[field.name]
        args = typing.get_args(annotation)
        optional = type(None) in args
        base = next((a for a in args if a is not type(None)), annotation) if optional else annotation
        kind = next((name for name, t in TYPES.items() if t is base), None)
        if kind is None:
            raise TypeError(f"{cls.__name__}.{field.name}: type {annotation} is not an option type "
                            f"({', '.join(TYPES)}, optionally | None)")
        default = None if field.default is dataclasses.MISSING else field.default
        bounds = limits[field.name].to_dict() if field.name in limits else None
        specs.append(OptionSpec(field.name, kind, optional, default, docs.get(field.name, ""), bounds))
    return specs


def generate() -> dict[str, Any]:
    """The catalogue as the registries and configs say it now (imports torch and all)."""
    from circuits import ABLATION_KINDS, method_names, metric_names
    from circuits.graph.selection import SELECTION_RULES
    from circuits.analyses.planted import PLANTED_MODELS
    from circuits.interventions.metrics import METRICS
    from circuits.methods.discovery import DISCOVERY_METHODS
    from interp_rand import reproduce
    from interp_rand.gridworld import config as gridworld_config
    from interp_rand.model import config as model_config
    from interp_rand.model.config import ModelConfig
    from interp_rand.tasks import task_class, task_names
    from interp_rand.training import TrainConfig, objective_names
    from interp_rand.training.config import SEED_SOURCES
    from interp_rand.zoo.entries import ENTRIES
    from interp_rand.reports.dynamics.replay import DYNAMICS_ANALYSES
    from probes.report import ReportConfig

    def specs(cls: type) -> list[dict[str, Any]]:
        return [dataclasses.asdict(spec) for spec in option_specs(cls)]

    def model_defaults(name: str) -> dict[str, Any]:
        # the task's own model at the task's default options: what `train TASK` builds unless told
        return dataclasses.asdict(task_class(name)().model_config())

    return {
        "tasks": {name: {"description": task_class(name).description, "options": specs(task_class(name)),
                         "model_defaults": model_defaults(name)}
                  for name in task_names()},
        "configs": {cls.__name__: specs(cls) for cls in (TrainConfig, ModelConfig, ReportConfig)},
        "choices": {
            "objective": list(objective_names()),
            "seed_source": list(SEED_SOURCES),
            "attention": model_config.MIXERS.names(),
            "mask": list(model_config.MASK_KINDS),
            "input_kind": list(model_config.INPUT_KINDS),
            "seed_mode": list(model_config.SEED_MODES),
            "positional": list(model_config.POSITIONAL_KINDS),
            "normalization_type": list(model_config.NORMALIZATION_TYPES),
            "act_fn": list(model_config.ACT_FNS),
            "input_mlp_act": list(model_config.ACT_FNS),
            "init": list(model_config.INIT_KINDS),
            "method": list(method_names()),
            "metric": list(metric_names()),
            "ablation": list(ABLATION_KINDS),
            "selection": list(SELECTION_RULES),
            "planted_model": list(PLANTED_MODELS),
            "reproduce_task": list(reproduce.EXPERIMENTS),
            "reproduce_scale": list(dict.fromkeys(s for e in reproduce.EXPERIMENTS.entries() for s in e.value.scales)),
            "gridworld_scale": list(gridworld_config.SCALES),
            "gridworld_variant": list(gridworld_config.VARIANTS),
        },
        "methods": {entry.name: {"description": entry.description,
                                 "options": [option.to_dict() for option in entry.options]}
                    for entry in DISCOVERY_METHODS.entries()},
        "metrics": {entry.name: {"description": entry.description} for entry in METRICS.entries()},
        "dynamics_analyses": {entry.name: {"description": entry.description,
                                           "options": [option.to_dict() for option in entry.options]}
                              for entry in DYNAMICS_ANALYSES.entries()},
        "zoo": [{"name": name, "task": entry.task_name, "variant": entry.variant} for name, entry in ENTRIES.items()],
    }


@functools.cache
def load() -> dict[str, Any]:
    """The stored catalogue (``catalogue.json``)."""
    return json.loads(CATALOGUE_FILE.read_text())


def task_names() -> list[str]:
    """The registered task names, sorted (as ``interp_rand.tasks.task_names()``)."""
    return list(load()["tasks"])


def task_description(name: str) -> str:
    return load()["tasks"][name]["description"]


def task_options(name: str) -> list[OptionSpec]:
    """The options of the task ``name`` (its config fields)."""
    return [OptionSpec(**spec) for spec in load()["tasks"][name]["options"]]


def task_model_defaults(name: str) -> dict[str, Any]:
    """The ``ModelConfig`` fields of task ``name``'s default model (at its default options)."""
    return load()["tasks"][name]["model_defaults"]


def config_options(name: str) -> list[OptionSpec]:
    """The fields of the config class ``name``: ``TrainConfig``, ``ModelConfig``, ``ReportConfig``."""
    return [OptionSpec(**spec) for spec in load()["configs"][name]]


def choices(name: str) -> tuple:
    """A registry's names or a config field's allowed values, e.g. ``choices("method")``."""
    return tuple(load()["choices"][name])


def method_description(name: str) -> str:
    """What the discovery method ``name`` does (its registry description)."""
    return load()["methods"][name]["description"]


def method_options(name: str) -> list[Option]:
    """The options of the discovery method ``name`` (as its registry entry describes them)."""
    return [Option.from_dict(option) for option in load()["methods"][name]["options"]]


def metric_description(name: str) -> str:
    """What the metric ``name`` measures (its registry description)."""
    return load()["metrics"][name]["description"]


def dynamics_analyses() -> dict[str, dict[str, Any]]:
    """The replayable analyses (``interp-rand replay``): name -> ``{"description", "options"}``
    in registration order."""
    return load()["dynamics_analyses"]


def dynamics_options(name: str) -> list[Option]:
    """The options of the replayable analysis ``name``."""
    return [Option.from_dict(option) for option in load()["dynamics_analyses"][name]["options"]]


def zoo_entries() -> list[dict[str, Any]]:
    """The zoo's entries in build order: ``{"name", "task", "variant"}``."""
    return load()["zoo"]


def write(path: Path = CATALOGUE_FILE) -> None:
    path.write_text(json.dumps(generate(), indent=1) + "\n")


if __name__ == "__main__":
    write()
    print(f"wrote {CATALOGUE_FILE}")
