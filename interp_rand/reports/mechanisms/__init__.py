"""The flagship mechanisms shipped on the zoo, one module each, and the registry naming them.

A flagship module exposes ``RUN`` (the zoo run it explains), ``PSEUDOCODE`` and
``mechanism(task) -> Mechanism`` (:mod:`circuits.mechanisms`), and may expose ``rivals(task)``
(the decisive experiments' other mechanisms), ``shortfall(model, task)`` (where it falls
short, one measured line, asked for when its card does not hold) and ``seed_programs(task)``
(its algorithm as programs ``explain`` scores beside its library's, :func:`declared_programs`). Adding one is a module and
one line below. :func:`interp_rand.reports.mechanism.mechanism_report` checks one on its run.

    >>> from interp_rand.reports.mechanisms import FLAGSHIPS, flagship
    >>> flagship("carry").mechanism(task)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from interp_rand.registry import Registry


@dataclass(frozen=True)
class Flagship:
    """A shipped mechanism: its module (imported on use) and the task of the runs it reads."""

    module: str
    task: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


FLAGSHIPS: Registry[Flagship] = Registry("mechanism")
for _name, _file, _task, _description in (
    ("carry", "carry", "addition", "carry propagation in 3-digit addition (zoo:addition)"),
    ("sort", "sorting", "sort", "how zoo:sort finds the next element"),
    ("recall-seed", "recall_seed", "recall", "the keys recall stores under a seed (zoo:recall-Aq_R)"),
    ("coloring-seed", "coloring_seed", "coloring", "how the colouring model turns its noise into colours (zoo:coloring-Aq_R)"),
):
    FLAGSHIPS.register(_name, Flagship(f"{__name__}.{_file}", _task), description=_description)


def flagship(name: str) -> ModuleType:
    """The module of flagship mechanism ``name``; an unknown name lists those shipped."""
    return FLAGSHIPS.get(name).load()


def declared_programs(task: object) -> list:
    """The seed programs the flagships of ``task``'s kind declare (a module's ``seed_programs(task)``),
    for :func:`circuits.explain.explain` to score beside its library's."""
    kind = getattr(task, "name", None)
    out: list = []
    for name in FLAGSHIPS.names():
        entry = FLAGSHIPS.get(name)
        module = entry.load() if entry.task == kind else None
        if hasattr(module, "seed_programs"):
            out += module.seed_programs(task)
    return out


__all__ = ["FLAGSHIPS", "Flagship", "declared_programs", "flagship"]
