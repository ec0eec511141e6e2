"""The causal check of a probe: move the activation along the probe's directions and measure
what the model's output does, next to a norm-matched random-direction placebo.

The directions are the probe's *patterns* (activation covariance times its weights, Haufe et
al. 2014), spanning ``U`` (``[d, r]``, ``r <= n_classes - 1``).
``steer``: replace the component of ``x`` in the probe's subspace ``U`` (``[d, r]``) by the
training mean of another class, ``x' = x + U (mu_target - U^T x)`` (binary: the other class;
multi-class: a uniformly drawn other class). ``ablate``: replace it by the mean over all
classes. The placebo adds a random direction of the same norm to each example.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from interp_rand.losses import get_loss_kind
from interp_rand.tasks.base import Batch
from probes.activations import collect_activations, logits_of, seed_offset
from probes.linear_probe import LinearProbe
from probes.variables import VariableLabels

CAUSAL_MODES = ("steer", "ablate")


@dataclass(frozen=True)
class CausalEffect:
    """What moving along a probe's directions did to the model's output.

    Attributes:
        hook, position, instance, mode: where and how it intervened.
        n: examples intervened on (held-out rows).
        changed: fraction whose output (the loss kind's answer: argmax class, or bits for BCE
            tasks) changed.
        placebo_changed: the same for the norm-matched random direction.
        counterfactual: fraction whose output became what the variable's new value implies
            (e.g. the carried digit moved by one); ``None`` where the variable has no such rule.
        placebo_counterfactual: the same for the placebo.
        probe_hit: fraction where the probe itself reads the target class afterwards.
    """

    hook: str
    position: int
    instance: int
    mode: str
    n: int
    changed: float
    placebo_changed: float
    counterfactual: float | None
    placebo_counterfactual: float | None
    probe_hit: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@torch.no_grad()
def causal_check(
    model: nn.Module,
    task,
    batch: Batch,
    probe: LinearProbe,
    variable: VariableLabels,
    train: Tensor,
    generator: torch.Generator,
    mode: str = "steer",
    x_train: Tensor | None = None,
    test_rows: Tensor | None = None,
    clean_logits: Tensor | None = None,
) -> CausalEffect:
    """Intervene along ``probe``'s directions on the held-out rows (``~train``) of ``batch``.

    The class means are taken on the training rows. The output read is the variable's
    ``output_index`` answer position (all answer positions where it has none).
    ``x_train`` (``[n_train, d]``, the probe's activations on the training rows) saves a pass;
    ``test_rows`` (long indices) limits the rows intervened on; ``clean_logits``
    (``[len(test_rows), pos, d_vocab_out]``, the model's logits on them) saves another.
    """
    if mode not in CAUSAL_MODES:
        raise ValueError(f"mode={mode!r} is not allowed; choose from {CAUSAL_MODES}")
    k, pos, hook = probe.instance, probe.position, probe.hook
    labels = variable.labels[:, k]
    n_classes = variable.n_classes
    if x_train is None:
        x_train = collect_activations(model, batch[train], [hook], [pos])[hook][:, 0]  # [n_train, d]
    centred = x_train - x_train.mean(0)
    # the probe's patterns, not its raw weights: least-squares weights point into low-variance
    # directions the model need not read; the patterns are where the classes differ
    U = probe.basis(covariance=centred.T @ centred / max(len(x_train) - 1, 1))  # [d, r]
    coords = x_train @ U  # [n_train, r]
    present = torch.bincount(labels[train], minlength=n_classes) > 0
    class_mean = torch.zeros(n_classes, U.shape[1])
    for c in range(n_classes):
        if present[c]:
            class_mean[c] = coords[labels[train] == c].mean(0)
    overall = coords.mean(0)

    test_idx = (~train).nonzero()[:, 0] if test_rows is None else test_rows
    current = labels[test_idx]
    if n_classes == 2:
        target = 1 - current
    else:
        shift = torch.randint(1, n_classes, (len(test_idx),), generator=generator)
        target = (current + shift) % n_classes
    keep = present[target]  # a class never seen in training has no mean to steer to
    test_idx, current, target = test_idx[keep], current[keep], target[keep]
    if clean_logits is not None:
        clean_logits = clean_logits[keep]
    rows = batch[test_idx]
    goal = class_mean[target] if mode == "steer" else overall.expand(len(test_idx), -1)
    shift_pos = pos + seed_offset(model)
    unit = torch.randn(len(test_idx), U.shape[0], generator=generator)
    unit = unit / unit.norm(dim=-1, keepdim=True)
    seen: dict[str, Tensor] = {}

    def intervene(placebo: bool):
        def hook_fn(act: Tensor, hook) -> Tensor:
            act = act.clone()
            flat = act[:, shift_pos].reshape(len(act), -1)  # [n, d]
            delta = (goal - flat @ U) @ U.T
            if placebo:
                delta = unit * delta.norm(dim=-1, keepdim=True)
            new = flat + delta
            seen["after"] = new
            act[:, shift_pos] = new.view_as(act[:, shift_pos])
            return act

        return [(hook, hook_fn)]

    out_index = None if variable.output_index is None else int(variable.output_index[k])
    positions = batch.answer_positions if out_index is None or out_index < 0 else batch.answer_positions[out_index : out_index + 1]
    kind = get_loss_kind(getattr(task, "loss_kind", "ce"))  # decodes the outputs compared
    if clean_logits is None:
        clean_logits = logits_of(model, rows)
    before = kind.predict(clean_logits[:, positions])
    steered = kind.predict(logits_of(model, rows, intervene(False))[:, positions])
    probe_hit = float((probe.predict(seen["after"]) == target).float().mean())
    placebo = kind.predict(logits_of(model, rows, intervene(True))[:, positions])

    def changed(after: Tensor) -> float:
        return float((after != before).reshape(len(after), -1).any(-1).float().mean())

    cf = pcf = None
    if variable.counterfactual is not None and positions.numel() == 1 and mode == "steer":
        expected = variable.counterfactual(rows, k, target)  # [n]
        cf = float((steered[:, 0] == expected).float().mean())
        pcf = float((placebo[:, 0] == expected).float().mean())
    return CausalEffect(
        hook=hook, position=pos, instance=k, mode=mode, n=len(test_idx),
        changed=changed(steered), placebo_changed=changed(placebo),
        counterfactual=cf, placebo_counterfactual=pcf, probe_hit=probe_hit,
    )


__all__ = ["CAUSAL_MODES", "CausalEffect", "causal_check"]
