"""Probe a model for a task's variables at every hook x position, with every control: a
group-held-out split, the control task, the same probes on a randomly initialised model, and
a causal check at each instance's most selective probe.

    >>> results = probe_task(model, task, batch, ProbeConfig(variables=("carry_in",)))
    >>> results[0].selectivity.shape     # [hook, position, instance]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from interp_rand.tasks.base import Batch
from probes.activations import collect_activations, logits_of, residual_hooks
from probes.causal import CAUSAL_MODES, CausalEffect, causal_check
from probes.controls import control_labels, group_split, random_init_like, token_lookup_accuracy
from probes.linear_probe import LinearProbe, probe_accuracy
from probes.variables import VariableLabels, input_groups, task_variables, variable_labels


@dataclass(frozen=True)
class ProbeConfig:
    """What to probe and how.

    Attributes:
        variables: variable names (default: every variable registered for the task).
        hooks: hook points (default: the residual stream at every layer).
        positions: task positions (default: all).
        test_fraction: share of input groups held out for scoring.
        alpha: ridge strength relative to the mean feature variance.
        seed: seeds the split, the control labels and the causal check's draws.
        random_init: also probe a randomly initialised model of the same architecture.
        random_init_seed: its initialisation seed.
        causal: run the causal check at each instance's most selective probe.
        causal_mode: ``"steer"`` or ``"ablate"``.
        causal_layers: ``"best"`` (the most selective hook) or ``"all"`` (every hook, which
            shows at which layer the variable is read; costs three forwards per hook).
        causal_examples: held-out rows used by each causal check.
    """

    variables: tuple[str, ...] | None = None
    hooks: tuple[str, ...] | None = None
    positions: tuple[int, ...] | None = None
    test_fraction: float = 0.2
    alpha: float = 1e-3
    seed: int = 0
    random_init: bool = True
    random_init_seed: int = 12345
    causal: bool = True
    causal_mode: str = "steer"
    causal_layers: str = "best"
    causal_examples: int = 256

    def __post_init__(self) -> None:
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"ProbeConfig.test_fraction={self.test_fraction!r} must lie in (0, 1)")
        if self.alpha <= 0:
            raise ValueError(f"ProbeConfig.alpha={self.alpha!r} must be > 0")
        if self.causal_mode not in CAUSAL_MODES:
            raise ValueError(f"ProbeConfig.causal_mode={self.causal_mode!r} is not allowed; choose from {CAUSAL_MODES}")
        if self.causal_layers not in ("best", "all"):
            raise ValueError(f"ProbeConfig.causal_layers={self.causal_layers!r} is not allowed; choose from ('best', 'all')")
        if self.causal_examples < 1:
            raise ValueError(f"ProbeConfig.causal_examples={self.causal_examples!r} must be >= 1")


@dataclass(frozen=True)
class ProbeResult:
    """Every probe of one variable. Accuracies are on held-out groups, ``[hook, position,
    instance]``; ``selectivity = accuracy - control_accuracy``.

    Attributes:
        task, variable, n_classes, instance_names, hooks: what was probed.
        positions: ``[P]`` long task positions.
        accuracy, control_accuracy: ``[H, P, K]`` for the model.
        random_accuracy, random_control_accuracy: the same for a random-init model (or None).
        majority: ``[K]`` share of the most frequent class among held-out rows.
        n_train, n_test: rows on each side of the split.
        causal: one :class:`CausalEffect` per instance checked.
        token_accuracy: ``[P, K]`` held-out accuracy of a lookup from the input token at each
            position to the label (:func:`~probes.controls.token_lookup_accuracy`), or None.
        leak: ``[P, K]`` bool, the positions where that lookup does as well as the probe
            (:func:`leaks`): the token gives the label, so any network passes the probe there;
            :meth:`rows` never selects them. None: not measured.
    """

    task: str
    variable: str
    n_classes: int
    instance_names: tuple[str, ...]
    hooks: tuple[str, ...]
    positions: Tensor
    accuracy: Tensor
    control_accuracy: Tensor
    random_accuracy: Tensor | None
    random_control_accuracy: Tensor | None
    majority: Tensor
    n_train: int
    n_test: int
    causal: tuple[CausalEffect, ...] = field(default=())
    token_accuracy: Tensor | None = None
    leak: Tensor | None = None

    @property
    def selectivity(self) -> Tensor:
        return self.accuracy - self.control_accuracy

    @property
    def random_selectivity(self) -> Tensor | None:
        if self.random_accuracy is None:
            return None
        return self.random_accuracy - self.random_control_accuracy

    def at(self, hook: str, position: int) -> tuple[int, int]:
        """Indices ``(h, p)`` of a hook name and task position (errors list what exists)."""
        if hook not in self.hooks:
            raise ValueError(f"{hook!r} was not probed; probed hooks: {list(self.hooks)}")
        where = (self.positions == position).nonzero()
        if not len(where):
            raise ValueError(f"position {position} was not probed; probed: {self.positions.tolist()}")
        return self.hooks.index(hook), int(where[0, 0])

    def rows(self) -> list[dict]:
        """One summary per instance, at its most selective (hook, position) among the positions
        that do not leak (:attr:`leak`): what the report table shows. Beside each probe: the
        random-init model's accuracy at the same place and whether the probe beats it
        (``learned``), the input token's own readout there (``token_lookup``), and the leaking
        positions skipped (``leaks_skipped``). Where every position leaks, the row is the best
        leaking one and ``learned`` says so."""
        out = []
        causal = {c.instance: c for c in self.causal}
        for k, name in enumerate(self.instance_names):
            leak = self.leak[:, k] if self.leak is not None else torch.zeros(len(self.positions), dtype=torch.bool)
            every_leaks = bool(leak.all())
            sel = self.selectivity[..., k]
            pick = sel if every_leaks else sel.masked_fill(leak[None, :], -float("inf"))
            h, p = divmod(int(pick.argmax()), sel.shape[1])
            row = {
                "variable": self.variable, "instance": name, "hook": self.hooks[h],
                "position": int(self.positions[p]), "accuracy": float(self.accuracy[h, p, k]),
            }
            if self.random_accuracy is not None:
                rsel = self.random_selectivity[..., k]
                row["random_accuracy"] = float(self.random_accuracy[h, p, k])
                row["learned"] = learned(row["accuracy"], row["random_accuracy"])
            else:
                row["random_accuracy"] = None
                row["learned"] = "unknown: no random-init control (ProbeConfig.random_init=False)"
            row.update(control=float(self.control_accuracy[h, p, k]), selectivity=float(sel[h, p]),
                       majority=float(self.majority[k]))
            if self.random_accuracy is not None:
                row["random_selectivity"] = float(rsel[h, p])
                row["random_best_selectivity"] = float(rsel.max() if every_leaks else
                                                       rsel.masked_fill(leak[None, :], -float("inf")).max())
            if self.token_accuracy is not None:
                row["token_lookup"] = float(self.token_accuracy[p, k])
                row["leaks_skipped"] = ", ".join(f"{int(self.positions[i])} (token {float(self.token_accuracy[i, k]):.2f})"
                                                 for i in leak.nonzero()[:, 0].tolist())
                if every_leaks:
                    row["learned"] = (f"no: the input token gives it at every position (lookup "
                                      f"{row['token_lookup']:.2f} here, probe {row['accuracy']:.2f})")
            if k in causal:
                c = causal[k]
                row.update(causal_hook=c.hook, causal_position=c.position, causal_changed=c.changed,
                           causal_placebo=c.placebo_changed, causal_counterfactual=c.counterfactual)
            out.append(row)
        return out


LEARNED_MARGIN = 0.05  # how far a probe must beat a random-init model at the same place to say it was learned


def learned(accuracy: float, random_accuracy: float) -> str:
    """``"yes"`` when the trained model's probe beats the random-init model's at the same hook
    and position by :data:`LEARNED_MARGIN`, else ``"no: a random-init model reads it as well"``
    (a variable that is already the token at that position, say, is read by any network)."""
    if accuracy >= random_accuracy + LEARNED_MARGIN:
        return "yes"
    return f"no: a random-init model reads it as well ({random_accuracy:.2f} vs {accuracy:.2f})"


LEAK_ABSOLUTE = 0.95  # a lookup from the input token this accurate is a leak, whatever the probe scores
LEAK_MARGIN = 0.03  # ... as is one within this of the best probe at that position (and this above the majority)


def leaks(token_accuracy: Tensor, accuracy: Tensor, majority: Tensor) -> Tensor:
    """``[P, K]`` bool: where the input token gives the label as well as a probe does. A position
    leaks instance ``k`` when the token lookup beats the majority class by :data:`LEAK_MARGIN`
    and either reaches :data:`LEAK_ABSOLUTE` or comes within :data:`LEAK_MARGIN` of the best probe
    at that position (over every hook): there the probe reads the token, not a computation.

    Args:
        token_accuracy: ``[P, K]``; accuracy: ``[H, P, K]`` the probes'; majority: ``[K]``.
    """
    informative = token_accuracy >= majority[None, :] + LEAK_MARGIN
    best_probe = accuracy.max(0).values
    return informative & ((token_accuracy >= LEAK_ABSOLUTE) | (token_accuracy >= best_probe - LEAK_MARGIN))


def _fit_all(model, batch, hooks, positions, label_sets, train, alpha):
    """Accuracies per label set ``[H, P, k]`` and, per hook, the activations and weights."""
    acts = collect_activations(model, batch, list(hooks), positions)
    per_set = [[] for _ in label_sets]
    fitted = {}
    for hook in hooks:
        accs, W, b, mean, slices = probe_accuracy(acts[hook], label_sets, train, alpha)
        for i, acc in enumerate(accs):
            per_set[i].append(acc)
        fitted[hook] = (acts[hook], W, b, mean, slices)
    return [torch.stack(a) for a in per_set], fitted


def probe_task(
    model: nn.Module,
    task,
    batch: Batch,
    config: ProbeConfig = ProbeConfig(),
    random_model: nn.Module | None = None,
    progress: bool = False,
) -> list[ProbeResult]:
    """Probe ``model`` for ``task``'s variables on ``batch``; one result per variable
    (``progress``: name the stages on stderr, :mod:`interp_rand.progress`).

    Raises ``ValueError`` for a variable the task lacks or a hook the model lacks (listing
    what exists)."""
    from interp_rand.progress import bar, note
    from interp_rand.tasks.spec import require_task

    require_task(task, "probe_task")
    names = list(config.variables) if config.variables is not None else task_variables(task)
    if not names:
        raise ValueError(f"task {task.name!r} has no probe variables (register some, or give TaskSpec(variables=))")
    variables: list[VariableLabels] = [variable_labels(task, batch, name, model) for name in names]
    hooks = tuple(config.hooks) if config.hooks is not None else tuple(residual_hooks(model))
    generator = torch.Generator().manual_seed(config.seed)
    train = group_split(input_groups(task, batch), config.test_fraction, generator)
    controls = [control_labels(v.control_types, v.labels, v.n_classes, generator) for v in variables]
    label_sets = []
    for v, c in zip(variables, controls):
        label_sets += [(v.labels, v.n_classes), (c, v.n_classes)]
    positions = None if config.positions is None else torch.tensor(config.positions)
    note(f"probes: fitting {len(label_sets)} label sets at {len(hooks)} hooks", progress)
    accs, fitted = _fit_all(model, batch, hooks, positions, label_sets, train, config.alpha)
    random_accs = None
    if config.random_init:
        note("probes: the same on a random-init model", progress)
        other = random_model if random_model is not None else random_init_like(model, config.random_init_seed)
        random_accs, _ = _fit_all(other, batch, hooks, positions, label_sets, train, config.alpha)
    all_positions = positions if positions is not None else torch.arange(batch.inputs.shape[1])

    results = []
    shown = names if not config.causal else bar(names, desc="probes: causal checks per variable", enabled=progress)
    for i, (name, v) in enumerate(zip(shown, variables)):
        acc, ctrl = accs[2 * i], accs[2 * i + 1]
        test_labels = v.labels[~train]
        majority = torch.stack([
            torch.bincount(test_labels[:, k], minlength=v.n_classes).max() / max(len(test_labels), 1)
            for k in range(test_labels.shape[1])
        ]).float()
        token = token_lookup_accuracy(batch.inputs, all_positions, v.labels, v.n_classes, train)
        leak = leaks(token, acc, majority)
        effects = []
        if config.causal:
            effects = _causal_checks(model, task, batch, v, acc - ctrl, hooks, all_positions,
                                     fitted, 2 * i, train, generator, config, leak)
        results.append(ProbeResult(
            task=task.name, variable=name, n_classes=v.n_classes, instance_names=v.instance_names,
            hooks=hooks, positions=all_positions, accuracy=acc, control_accuracy=ctrl,
            random_accuracy=None if random_accs is None else random_accs[2 * i],
            random_control_accuracy=None if random_accs is None else random_accs[2 * i + 1],
            majority=majority, n_train=int(train.sum()), n_test=int((~train).sum()),
            causal=tuple(effects), token_accuracy=token, leak=leak,
        ))
    return results


def probe_at(fitted, hook: str, p: int, position: int, set_index: int, k: int) -> LinearProbe:
    _, W, b, mean, slices = fitted[hook]
    s = slices[set_index][k]
    return LinearProbe(hook=hook, position=position, instance=k, W=W[p][:, s], b=b[p][s], mean=mean[p])


def _causal_checks(model, task, batch, v, selectivity, hooks, positions, fitted, set_index, train,
                   generator, config: ProbeConfig, leak: Tensor | None = None) -> list[CausalEffect]:
    """At each instance's output position (its most selective position that does not leak,
    where it has none): at the most selective hook, or at every hook."""
    # the causal check scores held-out rows; a subset keeps it cheap
    test_rows = (~train).nonzero()[:, 0][: config.causal_examples]
    with torch.no_grad():
        clean_logits = logits_of(model, batch[test_rows])
    effects = []
    for k in range(len(v.instance_names)):
        if len(torch.unique(v.labels[train, k])) < 2:
            continue  # a constant variable has nothing to steer between
        sel = selectivity[..., k].clone()  # [H, P]
        if v.output_index is not None and int(v.output_index[k]) >= 0:
            # intervene where the variable's answer is computed: its output position
            out_pos = int(batch.answer_positions[int(v.output_index[k])])
            if bool((positions == out_pos).any()):
                sel[:, positions != out_pos] = -float("inf")
        if leak is not None:
            kept = sel.masked_fill(leak[None, :, k], -float("inf"))
            if bool(torch.isfinite(kept).any()):  # where only leaking positions remain, keep them
                sel = kept
        h_best, p = divmod(int(sel.argmax()), sel.shape[1])
        chosen = range(len(hooks)) if config.causal_layers == "all" else [h_best]
        for h in chosen:
            hook = hooks[h]
            probe = probe_at(fitted, hook, p, int(positions[p]), set_index, k)
            x_train = fitted[hook][0][train, p]
            effects.append(causal_check(model, task, batch, probe, v, train, generator, config.causal_mode,
                                        x_train=x_train, test_rows=test_rows,
                                        clean_logits=clean_logits))
    return effects


__all__ = ["LEAK_ABSOLUTE", "LEAK_MARGIN", "ProbeConfig", "ProbeResult", "leaks", "probe_at", "probe_task"]
