"""A registered probe variable is a mechanism variable: one concept, read two ways.

A probe variable (:mod:`probes.variables`: ``addition.carry_in`` with one instance per answer
digit, ``sort.next`` ...) gives labels ``[batch, k]``; its instances become a family of
:class:`~circuits.mechanisms.Variable` s (one per instance, written once), and where it
declares a counterfactual rule (what the answer becomes when it changes, at its
``output_index``) that rule *is* a one-variable :class:`~circuits.mechanisms.Mechanism`: its
answer is the rule applied to the variable's own value. So the card's interchange, scrubbing
and the decisive experiments run on a probe variable unchanged, and the probes' interchange and
the mechanisms' share one counterfactual-pair search (:func:`probes.interchange.counterfactual_pairs`).

    >>> carry = probe_variables(task, "carry_in", site=lambda k: Site.at("blocks.1.hook_resid_mid", 7 + k, subspace=1))
    >>> mech = probe_mechanism(task, "carry_in", "place 2", site=Site.at("blocks.1.hook_resid_mid", 8, subspace=1))
    >>> check_mechanism(model, task, mech)
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from circuits.mechanisms.hypothesis import Mechanism, Site, Variable
from probes.interchange import variable_outputs
from probes.variables import VariableLabels, variable_labels


def _instance(labels: VariableLabels, instance: int | str) -> int:
    if isinstance(instance, str):
        if instance not in labels.instance_names:
            raise ValueError(f"probe variable {labels.name} has no instance {instance!r}; it has: "
                             f"{', '.join(labels.instance_names)}")
        return labels.instance_names.index(instance)
    if not 0 <= int(instance) < len(labels.instance_names):
        raise ValueError(f"probe variable {labels.name} has instances 0..{len(labels.instance_names) - 1}; "
                         f"got {instance}")
    return int(instance)


def _probe_of(task: Any, name: str) -> VariableLabels:
    """The variable's labels on a one-example batch: its instance names, whether it has a
    counterfactual rule; a variable defined by a model's outputs is refused (a mechanism's
    variables are functions of the input)."""
    try:
        return variable_labels(task, task.sample(1, torch.Generator().manual_seed(0)), name)
    except ValueError as err:
        if "pass model=" in str(err):
            raise ValueError(f"probe variable {task.name}.{name} is defined by a model's outputs; a mechanism "
                             "variable must be a function of the input") from err
        raise


def probe_variables(task: Any, name: str, *, site: Site | Callable[[int], Site | None] | None = None,
                    instances: list[int | str] | None = None) -> tuple[Variable, ...]:
    """The probe variable ``name`` of ``task`` as a family of mechanism variables ``{name}_{k}``,
    one per instance (``instances``: only those, by index or name), each computing column ``k``
    of the probe's labels; ``site`` is one site or a function of the instance index."""
    probe = _probe_of(task, name)
    chosen = [_instance(probe, i) for i in (instances if instances is not None else range(len(probe.instance_names)))]
    return Variable.each(
        name, chosen, lambda batch, k: variable_labels(task, batch, name).labels[:, k], site=site,
        description=lambda k: f"probe variable {probe.name}, {probe.instance_names[k]}")


def probe_mechanism(task: Any, name: str, instance: int | str, *, site: Site | None = None,
                    readout: tuple = ()) -> Mechanism:
    """The one-variable mechanism a probe variable's counterfactual rule states for ``instance``:
    the variable (mapped to ``site``) and the answer at its ``output_index`` given by the rule
    applied to the variable's value."""
    probe = _probe_of(task, name)
    k = _instance(probe, instance)
    output = int(variable_outputs(task, probe, k)[0])
    (variable,) = probe_variables(task, name, site=site, instances=[k])

    def answer(batch: Any, **values: Tensor) -> Tensor:
        return variable_labels(task, batch, name).counterfactual(batch, k, values[variable.name])

    return Mechanism(f"{name}[{probe.instance_names[k]}]", task.name, (variable,), answer=answer,
                     answer_parents=(variable.name,), outputs=(output,), readout=readout,
                     pseudocode=f"{variable.name} = {probe.name} at {probe.instance_names[k]}   # {site.label if site else 'not localised'}\n"
                                f"answer[{output}] = its counterfactual rule applied to {variable.name}")


__all__ = ["probe_mechanism", "probe_variables"]
