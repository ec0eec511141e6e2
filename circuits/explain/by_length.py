"""An explanation carried to other lengths: which step of the mechanism fails first as the
input grows.

:func:`explain` finds the mechanism at the trained length; :func:`mechanism_by_length` restates
it at each other length (:func:`~circuits.explain.localise.relocate`: output ``k``'s answer at the
components found for it, at its own position; outputs past the trained ones at the last
output's components) and measures each variable's interchange accuracy there
(:func:`~circuits.mechanisms.check_mechanism`, on fresh inputs of that length, scored per
output: a variable is judged on the outputs its swap is predicted to move, so that one failing
output does not charge every variable). A variable
*falls* at the first length where its family's mean IIA drops :data:`FALLS` or more below the
trained length's. The length study (:mod:`circuits.analyses.length_generalization`) names the
first to fall; where none does, the mechanism holds and the readout fails.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.explain.localise import Located, relocate
from circuits.explain.search import explain
from circuits.mechanisms import check_mechanism
from interp_rand.tasks.lengths import at_length, length_of
from probes.controls import random_init_like

#: A variable family falls when its mean IIA is this much below the trained length's.
FALLS = 0.1


@dataclass
class MechanismByLength:
    """The mechanism ``name`` (found at ``reference``) at each length: ``iia[length][family]``,
    the mean interchange accuracy of the family's instances (``y``: the answer variables,
    ``read``: what they gather), and ``per_variable[length][variable]``."""

    name: str
    reference: int
    iia: dict[int, dict[str, float]] = field(default_factory=dict)
    per_variable: dict[int, dict[str, float]] = field(default_factory=dict)
    #: each variable's family (``y_5`` -> ``y``), as the mechanism's variables declare it
    family_of: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def first_fall(self) -> tuple[int, str, float, float, str, float] | None:
        """``(length, family, the family's mean IIA at the reference, its mean there, the
        variable that fell, that variable's IIA there)`` at the first length where a variable's
        IIA is :data:`FALLS` or more below its own at the reference (a variable the reference
        length does not have, an output past the trained ones: below its family's mean there);
        the variable that fell most; ``None`` when none does."""
        ref_family, ref_variable = self.iia.get(self.reference, {}), self.per_variable.get(self.reference, {})
        for length in sorted(L for L in self.iia if L != self.reference):
            drops = []
            for name, value in self.per_variable.get(length, {}).items():
                family = self.family_of.get(name, name)
                before = ref_variable.get(name, ref_family.get(family))
                if before is not None and before - value >= FALLS:
                    drops.append((before - value, name, family))
            if drops:
                _, name, family = max(drops)
                return (length, family, ref_family.get(family, float("nan")), self.iia[length].get(family, float("nan")),
                        name, self.per_variable[length][name])
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reference": self.reference, "falls": FALLS,
                "iia": {str(k): v for k, v in self.iia.items()},
                "per_variable": {str(k): v for k, v in self.per_variable.items()}, "family_of": self.family_of,
                "seconds": self.seconds}


def _family_means(per: dict[str, float], families: dict[str, str]) -> dict[str, float]:
    """Each family's mean over its variables' IIA in ``per``."""
    out: dict[str, list[float]] = {}
    for name, value in per.items():
        out.setdefault(families.get(name, name), []).append(value)
    return {f: sum(v) / len(v) for f, v in out.items()}


def mechanism_by_length(model: Any, task: Any, lengths: list[int], *, located: Located | None = None,
                        n: int = 400, n_pairs: int = 100, seed: int = 0, progress: Any = None) -> MechanismByLength:
    """``located`` (default: what :func:`explain` finds at ``task``'s own length, its chosen
    mechanism or the best ranked) checked at the task's own length and at each of ``lengths``."""
    import time

    start = time.perf_counter()
    note = progress or (lambda text: None)
    reference = length_of(task)
    if located is None:
        note(f"explain at the trained length {reference}")
        # the flat mechanism: it is restated at each length per output (compositions are not relocated)
        found = explain(model, task, n=n, seed=seed, max_candidates=2, n_pairs=n_pairs, n_random=2, compose=False)
        name = found.chosen or found.ranked[0]
        located = found.located[name]
    result = MechanismByLength(located.mechanism.name, reference)
    random_model = random_init_like(model, seed=seed + 1)
    for length in [reference] + [L for L in lengths if L != reference]:
        here = at_length(task, length)
        batch = here.sample(n, torch.Generator().manual_seed(seed + length))
        note(f"{located.mechanism.name} at length {length}: interchange per variable")
        # scored per output: each variable judged on the outputs its swap moves, so one output's
        # failure at a longer length is not charged to every variable
        mech = dataclasses.replace(relocate(located, model, here, batch), per_output=True)
        result.family_of.update({v.name: v.family or v.name for v in mech.variables})
        card = check_mechanism(model, here, mech, n=n, seed=seed + length, n_pairs=n_pairs, n_random=1,
                               random_model=random_model, batch=batch, recursive=False)
        per = {c.variable: float(c.iia) for c in card.interchange if c.n_pairs and c.iia == c.iia}
        result.per_variable[length], result.iia[length] = per, _family_means(per, result.family_of)
    result.seconds = time.perf_counter() - start
    return result


__all__ = ["FALLS", "MechanismByLength", "mechanism_by_length"]
