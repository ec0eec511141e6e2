"""The interchange test of one variable with its controls, its verdict rule and its claim."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from interp_rand.verdicts import Claim, reaches
from interp_rand.tasks.base import Batch
from probes.activations import check_hooks, collect_activations, logits_of
from probes.controls import random_init_like
from probes.linear_probe import LinearProbe, fit_ridge
from probes.variables import get_variable, variable_labels
from probes.interchange.pairs import interchange_pairs, variable_outputs
from probes.interchange.das import DASConfig, _frozen, iia, random_subspace, train_das


# the verdict rule's thresholds
IIA_HOLDS = 0.9
CONTROL_MAX = 0.3
BASE_ACCURACY_MIN = 0.9


@dataclass(frozen=True)
class InterchangeResult:
    """Interchange-intervention accuracies of one variable instance at one hook and position(s).

    Attributes:
        task, variable, instance, hook, positions, k: what was intervened on, where, and the
            subspace dimension.
        das, probe: IIA of the learned rotation and of the probe's weight directions
            (held-out pairs); probe_pattern: of the probe's patterns (activation covariance
            times its weights, Haufe et al. 2014, as :func:`probes.causal.causal_check` steers).
        random_direction, random_init, control_variable: the controls' IIA (module docstring).
        das_train: the DAS rotation's IIA on its own training pairs.
        base_accuracy: the model's accuracy at the scored answer positions on the test bases,
            without intervention.
        n_train, n_test: pairs; n_control_train, n_control_test: control-variable pairs.
        verdict: ``"holds"``, ``"fails"`` or ``"inconclusive"``; rule: the rule, in words.
    """

    task: str
    variable: str
    instance: str
    hook: str
    positions: tuple[int, ...]
    k: int
    das: float
    probe: float
    random_direction: float
    random_init: float
    control_variable: float
    probe_pattern: float
    das_train: float
    base_accuracy: float
    n_train: int
    n_test: int
    n_control_train: int
    n_control_test: int
    verdict: str
    rule: str

    @property
    def controls(self) -> dict[str, float]:
        return {"random_direction": self.random_direction, "random_init": self.random_init,
                "control_variable": self.control_variable}

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["positions"] = list(self.positions)
        return out


def interchange_claim(text: str, iia: float, controls: dict[str, float], base_accuracy: float,
                      too_few: str = "") -> Claim:
    """The interchange rule (:func:`interp_rand.verdicts.reaches`): holds when ``iia >=
    IIA_HOLDS`` and every control ``<= CONTROL_MAX``; fails when ``iia < IIA_HOLDS``, whatever
    the controls; inconclusive when a control passes the bound on an IIA that reaches it, on a
    model with base accuracy below ``BASE_ACCURACY_MIN`` (it does not solve the task), or
    ``too_few`` pairs. Also the mechanism cards' rule (:mod:`circuits.mechanisms.card`)."""
    return reaches(text, iia, target=IIA_HOLDS, controls=controls, control_max=CONTROL_MAX, value_name="IIA",
                   too_few=too_few, inapplicable="" if base_accuracy >= BASE_ACCURACY_MIN else
                   f"the model answers only {base_accuracy:.3f} of the inputs (below {BASE_ACCURACY_MIN:g})")


VERDICT_RULE = (f"holds when DAS IIA >= {IIA_HOLDS} and every control (random direction, random-init model, "
                f"control variable) <= {CONTROL_MAX}; fails when DAS IIA < {IIA_HOLDS} on a model with base "
                f"accuracy >= {BASE_ACCURACY_MIN}; inconclusive otherwise")


def verdict(das: float, controls: dict[str, float], base_accuracy: float) -> str:
    """The verdict of :func:`interchange_claim` (:data:`VERDICT_RULE`)."""
    return interchange_claim("DAS", das, controls, base_accuracy).verdict.outcome


def _instance_index(names: tuple[str, ...], instance: int | str) -> int:
    if isinstance(instance, str):
        if instance not in names:
            raise ValueError(f"no instance {instance!r}; the variable has: {', '.join(names)}")
        return names.index(instance)
    if not 0 <= instance < len(names):
        raise ValueError(f"instance {instance} must lie in 0..{len(names) - 1}")
    return int(instance)


def interchange_accuracy(
    model: nn.Module,
    task,
    variable: str,
    hook: str,
    instance: int | str,
    positions: int | list[int] | None = None,
    *,
    n_examples: int = 4000,
    n_pairs: int = 1000,
    test_fraction: float = 0.5,
    k: int | None = None,
    das: DASConfig = DASConfig(),
    random_model: nn.Module | None = None,
    batch: Batch | None = None,
    seed: int = 0,
) -> InterchangeResult:
    """Interchange-intervention accuracy of ``task``'s ``variable`` at ``instance`` (index or
    name, ``"place 2"``), at ``hook`` and ``positions`` (default: the answer position its
    counterfactual rule scores), for the probe, DAS and each control (see the module docstring).

    ``n_examples`` are sampled (or ``batch`` given) and split by input group; at most
    ``n_pairs`` pairs are drawn on each side. ``k`` (default ``n_classes - 1``) is the subspace
    dimension of DAS and the random direction (the probe's is its rank, at most
    ``n_classes - 1``). ``random_model`` replaces :func:`random_init_like` ``(model)``. Every draw
    comes from ``seed``.
    """
    check_hooks(model, [hook])
    if get_variable(task.name, variable).needs_model:
        raise ValueError(f"{task.name}.{variable} is defined by the model's outputs; interchange needs an input variable")
    gen = torch.Generator().manual_seed(seed)
    batch = task.sample(n_examples, gen) if batch is None else batch
    labels = variable_labels(task, batch, variable)
    j = _instance_index(labels.instance_names, instance)
    values = labels.labels[:, j]
    outputs = variable_outputs(task, labels, j)
    if positions is None:
        positions = [int(p) for p in batch.answer_positions[outputs]]
    positions = [int(positions)] if isinstance(positions, int) else [int(p) for p in positions]
    k = labels.n_classes - 1 if k is None else int(k)

    split = interchange_pairs(task, batch, variable, j, n_pairs, test_fraction, gen)
    train, tr, te, ctr, cte = split.train, split.train_pairs, split.test_pairs, split.control_train, split.control_test

    with _frozen(model):
        # the probe: ridge on the training examples at the (first) intervened position
        x = collect_activations(model, batch, [hook], positions[:1])[hook]  # [n, 1, d]
        onehot = F.one_hot(values, labels.n_classes).float()
        W, b, mean = fit_ridge(x, onehot, train)
        probe = LinearProbe(hook, positions[0], j, W[0], b[0], mean[0])
        xt = x[train, 0] - x[train, 0].mean(0)
        probe_U = probe.basis()
        pattern_U = probe.basis(covariance=xt.T @ xt / max(len(xt) - 1, 1))
        d = x.shape[-1]
        U_das = train_das(model, batch, tr, hook, positions, k, gen, das)
        U_rand = random_subspace(d, k, gen)
        U_ctrl = train_das(model, batch, ctr, hook, positions, k, gen, das) if len(ctr) else None
        with torch.no_grad():
            base = batch[te.base]
            pred = logits_of(model, base)[:, base.answer_positions[outputs]].argmax(-1)
            base_accuracy = float((pred == base.targets[:, base.answer_positions[outputs]]).all(1).float().mean())
        scores = {
            "das": iia(model, batch, te, hook, positions, U_das),
            "das_train": iia(model, batch, tr, hook, positions, U_das),
            "probe": iia(model, batch, te, hook, positions, probe_U),
            "probe_pattern": iia(model, batch, te, hook, positions, pattern_U),
            "random_direction": iia(model, batch, te, hook, positions, U_rand),
            "control_variable": iia(model, batch, cte, hook, positions, U_ctrl) if U_ctrl is not None else float("nan"),
        }
    fresh = random_init_like(model) if random_model is None else random_model
    with _frozen(fresh):
        U_fresh = train_das(fresh, batch, tr, hook, positions, k, gen, das)
        scores["random_init"] = iia(fresh, batch, te, hook, positions, U_fresh)
    controls = {name: scores[name] for name in ("random_direction", "random_init", "control_variable")}
    return InterchangeResult(
        task=task.name, variable=variable, instance=labels.instance_names[j], hook=hook,
        positions=tuple(positions), k=k, das=scores["das"], probe=scores["probe"],
        random_direction=scores["random_direction"], random_init=scores["random_init"],
        control_variable=scores["control_variable"], probe_pattern=scores["probe_pattern"], das_train=scores["das_train"],
        base_accuracy=base_accuracy, n_train=len(tr), n_test=len(te), n_control_train=len(ctr),
        n_control_test=len(cte), verdict=verdict(scores["das"], controls, base_accuracy), rule=VERDICT_RULE,
    )
