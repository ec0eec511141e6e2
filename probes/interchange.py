"""Interchange interventions for named variables (Geiger et al. 2021; distributed alignment
search, Geiger et al. 2023).

For a registered probe variable (``addition/carry_in`` ...) at one instance (``place 2``) and a
hook and position of the model, take pairs of inputs, a *base* and a *source*, whose variable
differs, and swap the variable's subspace: ``h' = h_b + U U^T (h_s - h_b)`` for an orthonormal
``U`` ``[d, k]``. The **interchange-intervention accuracy** (IIA) is the share of pairs on which
the intervened model gives the answer the variable's *causal model* predicts for the base input
with the source's value of the variable.

Subspaces compared on the same held-out pairs:

- ``probe``: the ridge probe of the variable at that hook and position, fitted on the training
  examples; its weight directions, orthonormalised (:meth:`LinearProbe.basis`); and
  ``probe_pattern``: its patterns (activation covariance times weights, as
  :func:`probes.causal.causal_check` steers along), orthonormalised;
- ``das``: a learned rotation (``torch.nn.utils.parametrizations.orthogonal`` on a ``d x d``
  map), its first ``k`` rotated dimensions swapped, trained with the cross-entropy of the
  intervened logits against the counterfactual targets on the training pairs;
- controls: ``random_direction`` (a random orthonormal ``U`` of the same ``k``),
  ``random_init`` (the same DAS training on a randomly initialised model of the same
  architecture, :func:`probes.controls.random_init_like`) and ``control_variable`` (the same
  DAS training, but the variable replaced by its Hewitt & Liang control labels, a random fixed
  label per input type, with the causal model applied as if they were the variable: can a
  subspace make the model behave as if a variable it does not use had been swapped?).

Every subspace has ``k`` dimensions (default ``n_classes - 1``, the probe's rank; 1 for a
carry). Pairs and splits. The examples are split by input group (:func:`probes.controls.group_split`);
training pairs (for DAS and the probe) and test pairs (every reported IIA) are each drawn inside
one side, so no input is in both. A pair is kept only if the variable differs *and* the
counterfactual answer differs from the base's answer, so that leaving the model alone scores 0.
Control-variable pairs additionally need the control's counterfactual to differ from the real
variable's (the source's real value applied to the base): on such a pair a subspace that swaps
the real variable scores 0, so the control measures faking alone, not the control labels'
chance agreement with the real variable.

Causal models (:data:`CAUSAL_MODELS`, keyed like :data:`probes.variables.PROBE_VARIABLES`) say
which answer positions a variable acts on and what they become. Those registered here are the
variables' own ``counterfactual`` rules (:mod:`probes.task_variables`, their one owner) read at
the variable's ``output_index``. For ``addition/carry_in`` at place ``p``: the answer digit of
place ``p`` becomes ``(a_p + b_p + c_src) % 10`` (at the top place, the carry itself). Only
that digit is scored: a changed carry out of ``p`` would also move the digits above it, but with
the answer written most significant first those are predicted at earlier positions, which an
intervention at ``p``'s position cannot reach.

Verdict (:func:`interchange_claim`, the rule :func:`interp_rand.verdicts.reaches` with these
numbers, which the mechanism cards use too): **holds** when the DAS IIA is >= 0.9 and every control is <= 0.3; **fails** when the
DAS IIA is below 0.9 on a model that answers the base inputs (base accuracy >= 0.9);
**inconclusive** otherwise (a control above 0.3, or a model that does not solve the task).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp_rand.registry import Registry
from interp_rand.verdicts import Claim, reaches
from interp_rand.tasks.base import Batch
from probes.activations import check_hooks, collect_activations, logits_of, seed_offset
from probes.controls import control_labels, group_split, random_init_like
from probes.linear_probe import LinearProbe, fit_ridge
from probes.variables import get_variable, input_groups, variable_labels

# the verdict rule's thresholds
IIA_HOLDS = 0.9
CONTROL_MAX = 0.3
BASE_ACCURACY_MIN = 0.9


# ---------------------------------------------------------------------- causal models


@dataclass(frozen=True)
class CausalModel:
    """How a variable acts on the answer.

    ``counterfactual(task, batch, instance, new) -> [batch, m]`` long: the targets at the
    answer indices ``outputs(task, batch, instance) -> [m]`` (into ``batch.answer_positions``)
    when the variable's ``instance`` takes the row-wise values ``new`` ``[batch]`` on the base
    ``batch``; a negative target marks a row where the variable has no effect (never paired).
    """

    task: str
    variable: str
    description: str
    outputs: Callable[[Any, Batch, int], Tensor]
    counterfactual: Callable[[Any, Batch, int, Tensor], Tensor]


CAUSAL_MODELS: Registry[CausalModel] = Registry("causal model")


def register_causal_model(model: CausalModel) -> CausalModel:
    """Add ``model`` to :data:`CAUSAL_MODELS` under ``(task, variable)``."""
    return CAUSAL_MODELS.register((model.task, model.variable), model, description=model.description)


def from_variable(task_name: str, variable: str, description: str) -> CausalModel:
    """The causal model a probe variable declares: its ``counterfactual`` rule at its
    ``output_index`` (one answer position per instance)."""

    def labels(task, batch: Batch):
        out = variable_labels(task, batch, variable)
        if out.counterfactual is None or out.output_index is None:
            raise ValueError(f"probe variable {task_name}.{variable} declares no counterfactual rule")
        return out

    def outputs(task, batch: Batch, instance: int) -> Tensor:
        index = int(labels(task, batch).output_index[instance])
        if index < 0:
            raise ValueError(f"{task_name}.{variable} acts on every answer position; name one")
        return torch.tensor([index])

    def counterfactual(task, batch: Batch, instance: int, new: Tensor) -> Tensor:
        return labels(task, batch).counterfactual(batch, instance, new)[:, None]

    return CausalModel(task_name, variable, description, outputs, counterfactual)


for _task, _variable, _description in (
    ("addition", "carry_in", "the digit of place p becomes (a_p + b_p + carry) % 10; the top digit is the carry"),
    ("addition", "carry_out", "the digit of place p + 1 becomes (a + b + carry) % 10 there"),
    ("addition", "digit", "the answer digit becomes the new value"),
    ("sort", "next", "the answer at that position becomes the new value"),
):
    register_causal_model(from_variable(_task, _variable, _description))


def get_causal_model(task_name: str, variable: str) -> CausalModel:
    """The causal model of ``task_name``'s ``variable``; an unknown one lists those registered."""
    return CAUSAL_MODELS.get((task_name, variable))


# ---------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pairs:
    """Base/source pairs on one split: row indices into the sampled batch, the source's value
    of the variable and the counterfactual targets ``[n, m]`` at ``outputs`` ``[m]``."""

    base: Tensor
    source: Tensor
    new: Tensor
    targets: Tensor
    outputs: Tensor

    def __len__(self) -> int:
        return len(self.base)


def make_pairs(task, batch: Batch, causal: CausalModel, instance: int, values: Tensor, rows: Tensor,
               n_pairs: int, generator: torch.Generator, real: Tensor | None = None,
               tries: int = 16) -> Pairs:
    """Up to ``n_pairs`` base/source pairs among ``rows`` (long indices into ``batch``).

    ``values`` ``[len(batch)]``: the variable's value per example. A pair needs ``values`` to
    differ and the counterfactual (base with the source's value) to differ from the base's
    answer; given ``real`` (the real variable, when ``values`` are control labels), also from
    the counterfactual of the real variable's source value. Each base takes the first of
    ``tries`` random sources that qualifies; bases without one are dropped.
    """
    outputs = causal.outputs(task, batch, instance)
    answer = batch.targets[:, batch.answer_positions[outputs]]  # [n, m]
    base = rows[torch.randperm(len(rows), generator=generator)]
    source = torch.full_like(base, -1)
    targets = torch.full((len(base), len(outputs)), -1, dtype=torch.long)
    sub = batch[base]
    for _ in range(tries):
        open_ = source < 0
        if not bool(open_.any()):
            break
        cand = rows[torch.randint(0, len(rows), (len(base),), generator=generator)]
        cf = causal.counterfactual(task, sub, instance, values[cand])
        ok = (values[cand] != values[base]) & (cf >= 0).all(1) & (cf != answer[base]).any(1)
        if real is not None:
            ok &= (cf != causal.counterfactual(task, sub, instance, real[cand])).any(1)
        take = open_ & ok
        source[take], targets[take] = cand[take], cf[take]
    keep = (source >= 0).nonzero()[:, 0][:n_pairs]
    return Pairs(base[keep], source[keep], values[source[keep]], targets[keep], outputs)


@dataclass(frozen=True)
class Split:
    """The pairs of one interchange analysis: ``train`` ``[n]`` bool (the examples of the
    training side), real-variable pairs on each side and control-variable pairs on each side."""

    train: Tensor
    train_pairs: Pairs
    test_pairs: Pairs
    control_train: Pairs
    control_test: Pairs


def interchange_pairs(task, batch: Batch, variable: str, instance: int, n_pairs: int, test_fraction: float,
                      generator: torch.Generator) -> Split:
    """Split ``batch`` by input group (:func:`group_split`, ``test_fraction`` of the groups
    held out) and draw at most ``n_pairs`` pairs of the variable and of its control labels
    (:func:`control_labels`) on each side (:func:`make_pairs`)."""
    causal = get_causal_model(task.name, variable)
    labels = variable_labels(task, batch, variable)
    values = labels.labels[:, instance]
    train = group_split(input_groups(task, batch), test_fraction, generator)
    train_rows, test_rows = train.nonzero()[:, 0], (~train).nonzero()[:, 0]
    control = control_labels(labels.control_types, labels.labels, labels.n_classes, generator)[:, instance]
    return Split(
        train=train,
        train_pairs=make_pairs(task, batch, causal, instance, values, train_rows, n_pairs, generator),
        test_pairs=make_pairs(task, batch, causal, instance, values, test_rows, n_pairs, generator),
        control_train=make_pairs(task, batch, causal, instance, control, train_rows, n_pairs, generator, real=values),
        control_test=make_pairs(task, batch, causal, instance, control, test_rows, n_pairs, generator, real=values),
    )


# ---------------------------------------------------------------------- interventions


def _positions(model: nn.Module, positions: list[int]) -> Tensor:
    return torch.tensor(positions) + seed_offset(model)


def swap_hook(U: Tensor, source_acts: Tensor, positions: Tensor):
    """A TransformerLens hook function: at ``positions`` set ``h <- h + U U^T (h_s - h)``
    (``source_acts`` ``[n, P, d]``, the source's activations there; a hook with more than three
    dims, e.g. ``hook_z``, is flattened to ``d`` and back)."""

    def hook_fn(act: Tensor, hook=None) -> Tensor:
        act = act.clone()
        here = act[:, positions]
        flat = here.reshape(len(act), len(positions), -1)
        new = flat + ((source_acts - flat) @ U) @ U.T
        act[:, positions] = new.reshape(here.shape)
        return act

    return hook_fn


def intervened_logits(model: nn.Module, batch: Batch, hook: str, positions: list[int], U: Tensor,
                      source_acts: Tensor) -> Tensor:
    """``[n, pos, d_vocab_out]`` logits of ``batch`` with the ``U`` subspace at ``hook`` and
    ``positions`` taken from ``source_acts`` ``[n, P, d]``."""
    return logits_of(model, batch, [(hook, swap_hook(U, source_acts, _positions(model, positions)))])


@contextlib.contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """The model in eval mode with no parameter gradients, restored on exit."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    was_training = model.training
    model.eval()
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)


def _source_acts(model: nn.Module, batch: Batch, hook: str, positions: list[int]) -> Tensor:
    return collect_activations(model, batch, [hook], positions)[hook]  # [n, P, d]


@torch.no_grad()
def iia(model: nn.Module, batch: Batch, pairs: Pairs, hook: str, positions: list[int], U: Tensor,
        batch_size: int = 1024) -> float:
    """Interchange-intervention accuracy of subspace ``U`` on ``pairs``: the share whose answers
    at ``pairs.outputs`` all equal the counterfactual targets."""
    if not len(pairs):
        return float("nan")
    hits = []
    for start in range(0, len(pairs), batch_size):
        part = slice(start, start + batch_size)
        base, src = batch[pairs.base[part]], batch[pairs.source[part]]
        logits = intervened_logits(model, base, hook, positions, U, _source_acts(model, src, hook, positions))
        pred = logits[:, base.answer_positions[pairs.outputs]].argmax(-1)
        hits.append((pred == pairs.targets[part]).all(1))
    return float(torch.cat(hits).float().mean())


def random_subspace(d: int, k: int, generator: torch.Generator) -> Tensor:
    """``[d, k]`` uniformly random orthonormal columns (QR of a Gaussian matrix, signs fixed)."""
    q, r = torch.linalg.qr(torch.randn(d, k, generator=generator))
    return q * torch.sign(torch.diagonal(r))[None, :]


@dataclass(frozen=True)
class DASConfig:
    """Training of the DAS rotation: ``steps`` Adam steps at ``lr`` on minibatches of
    ``batch_size`` training pairs (passes over the pairs in random order)."""

    steps: int = 400
    batch_size: int = 128
    lr: float = 1e-2

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(f"DASConfig needs steps >= 1, batch_size >= 1 and lr > 0; got {self}")


def train_das(model: nn.Module, batch: Batch, pairs: Pairs, hook: str, positions: list[int], k: int,
              generator: torch.Generator, config: DASConfig = DASConfig()) -> Tensor:
    """Learn an orthogonal ``d x d`` rotation whose first ``k`` dimensions, swapped from the
    source, give the counterfactual answers of ``pairs``; returns ``U`` ``[d, k]`` (those
    dimensions in the model's basis). The model's own weights are not changed."""
    if not len(pairs):
        raise ValueError("DAS needs at least one training pair")
    with _frozen(model):
        src_all = _source_acts(model, batch[pairs.source], hook, positions)
        d = src_all.shape[-1]
        rotation = nn.Linear(d, d, bias=False)
        with torch.no_grad():
            rotation.weight.copy_(random_subspace(d, d, generator))
        nn.utils.parametrizations.orthogonal(rotation)
        optimiser = torch.optim.Adam(rotation.parameters(), lr=config.lr)
        bases = batch[pairs.base]
        out_pos = bases.answer_positions[pairs.outputs]
        order, start = torch.randperm(len(pairs), generator=generator), 0
        for _ in range(config.steps):
            if start >= len(pairs):
                order, start = torch.randperm(len(pairs), generator=generator), 0
            idx = order[start:start + config.batch_size]
            start += config.batch_size
            U = rotation.weight[:, :k]
            logits = intervened_logits(model, bases[idx], hook, positions, U, src_all[idx])
            loss = F.cross_entropy(logits[:, out_pos].reshape(-1, logits.shape[-1]),
                                   pairs.targets[idx].reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        return rotation.weight[:, :k].detach().clone()


# ---------------------------------------------------------------------- the analysis


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
    name, ``"place 2"``), at ``hook`` and ``positions`` (default: the answer position its causal
    model scores), for the probe, DAS and each control (see the module docstring).

    ``n_examples`` are sampled (or ``batch`` given) and split by input group; at most
    ``n_pairs`` pairs are drawn on each side. ``k`` (default ``n_classes - 1``) is the subspace
    dimension of DAS and the random direction (the probe's is its rank, at most
    ``n_classes - 1``). ``random_model`` replaces :func:`random_init_like` ``(model)``. Every draw
    comes from ``seed``.
    """
    check_hooks(model, [hook])
    causal = get_causal_model(task.name, variable)
    if get_variable(task.name, variable).needs_model:
        raise ValueError(f"{task.name}.{variable} is defined by the model's outputs; interchange needs an input variable")
    gen = torch.Generator().manual_seed(seed)
    batch = task.sample(n_examples, gen) if batch is None else batch
    labels = variable_labels(task, batch, variable)
    j = _instance_index(labels.instance_names, instance)
    values = labels.labels[:, j]
    outputs = causal.outputs(task, batch, j)
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


__all__ = [
    "CAUSAL_MODELS",
    "CausalModel",
    "DASConfig",
    "InterchangeResult",
    "Pairs",
    "Split",
    "VERDICT_RULE",
    "from_variable",
    "get_causal_model",
    "iia",
    "interchange_accuracy",
    "interchange_claim",
    "interchange_pairs",
    "make_pairs",
    "random_subspace",
    "register_causal_model",
    "swap_hook",
    "train_das",
    "verdict",
]
