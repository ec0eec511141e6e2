"""A mechanism: the high-level algorithm a model is claimed to run, as an object that runs.

A :class:`Mechanism` is a small causal graph of named :class:`Variable` s. Each variable is
computed from the input batch (and its seeds) and from its parent variables by a plain Python
function, and is *mapped* to where the model is claimed to hold it: a :class:`Site`, i.e.
components × residual positions (:class:`~circuits.graph.nodes.Node` s), or one hook at some
positions, optionally a subspace of it. The task's answer at the mechanism's ``outputs`` is a
function of the variables. That is the whole hypothesis: a reader can run the pseudocode in
their head, and :func:`circuits.mechanisms.check_mechanism` tests every step of it.

    >>> carry = Variable("carry_2", lambda batch: ..., site=Site.of(Node("mlp", 0, position=7)))
    >>> mech = Mechanism("carry", task="addition", variables=(carry, ...), answer=..., outputs=(2,))
    >>> values = mech.values(batch)                   # every variable on a batch, [batch] each
    >>> mech.answer_of(batch, values)                 # [batch, len(outputs)] the algorithm's answer

Conventions (the same as the rest of ``circuits``):

- variable values are ``[batch]`` tensors of discrete values (long or bool; floats are compared
  exactly), one value per example. A variable with instances (one per digit, per vertex) is
  written once, :meth:`Variable.each`, and becomes one :class:`Variable` per instance
  (``carry_1``, ``carry_2`` ...) that remembers its family; a registered probe variable is one
  too (:func:`circuits.mechanisms.probe_variables`);
- ``Node`` positions are residual-stream positions (a seed token, where the model has one,
  is position 0 and shifts the task's positions by one); a :class:`Site` with a raw ``hook``
  names the hook's own position axis;
- ``outputs`` index ``batch.answer_positions``: the answers the mechanism explains; the model's
  answer there is the argmax of its logits at those positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from circuits.graph.nodes import Node
from interp_rand.losses import pack_bits

Values = dict[str, Tensor]

EXPECTATIONS = ("succeed", "fail")


@dataclass(frozen=True)
class Site:
    """Where the model holds a variable.

    Either ``nodes``: component outputs at residual positions (a head's ``hook_z`` row, an MLP's
    output, the embedding or the seed channel at a position), replaced whole; or ``hook`` +
    ``positions``: one hook's activation at those positions (e.g. ``blocks.1.hook_resid_pre``),
    replaced whole or, with ``subspace``, only inside a subspace: an ``int`` k fits a k-dim
    distributed-alignment (DAS) rotation on training pairs, a ``[d, k]`` tensor is a given
    orthonormal basis (a probe direction).
    """

    nodes: tuple[Node, ...] = ()
    hook: str | None = None
    positions: tuple[int, ...] = ()
    subspace: int | Tensor | None = None

    def __post_init__(self) -> None:
        if bool(self.nodes) == (self.hook is not None):
            raise ValueError("a Site names either nodes (components at positions) or a hook with positions, not both")
        if self.nodes and any(n.position is None or n.kind == "logits" for n in self.nodes):
            raise ValueError("a Site's nodes must be writers (embed, seed, input_mlp, head, mlp) at one position each")
        if self.hook is not None and not self.positions:
            raise ValueError(f"Site(hook={self.hook!r}) needs positions")
        if self.subspace is not None and self.hook is None:
            raise ValueError("a subspace needs a hook site (a residual-stream hook), not nodes")
        if isinstance(self.subspace, int) and self.subspace < 1:
            raise ValueError(f"Site.subspace={self.subspace} must be >= 1 dimensions")

    @classmethod
    def of(cls, *nodes: Node) -> "Site":
        return cls(nodes=tuple(nodes))

    @classmethod
    def at(cls, hook: str, *positions: int, subspace: int | Tensor | None = None) -> "Site":
        return cls(hook=hook, positions=tuple(positions), subspace=subspace)

    @property
    def size(self) -> int:
        """How many locations the site covers (nodes, or hook positions): what a random control
        of the same size draws."""
        return len(self.nodes) if self.nodes else len(self.positions)

    @property
    def label(self) -> str:
        """``a0.1@7 + m0@7`` or ``blocks.1.hook_resid_pre@7 [das k=1]``."""
        if self.nodes:
            return " + ".join(n.name for n in self.nodes)
        sub = "" if self.subspace is None else (
            f" [das k={self.subspace}]" if isinstance(self.subspace, int) else f" [basis k={self.subspace.shape[1]}]")
        return f"{self.hook}@{','.join(map(str, self.positions))}{sub}"


@dataclass(frozen=True)
class Variable:
    """One step of the algorithm.

    Attributes:
        name: unique within the mechanism.
        compute: ``compute(batch, **parents) -> [batch]``: the variable's value from the input
            batch and its parents' values (keyword arguments named after them).
        parents: names of the variables ``compute`` reads.
        site: where the model holds it (``None``: an abstract step the hypothesis does not
            localise; it is still part of the algorithm and of the predicted answer).
        description: one line in words (what the card and the drawing print).
        input: the hypothesis declares the site a function of the input that it does not
            decompose (a treeified scrub takes an agreeing example's clean value there instead
            of recomputing it from the parents' sites); a mapped variable without mapped
            ancestors is an input anyway.
    """

    name: str
    compute: Callable[..., Tensor]
    parents: tuple[str, ...] = ()
    site: Site | None = None
    description: str = ""
    input: bool = False
    family: str = ""
    instance: Any = None

    @classmethod
    def each(cls, name: str, instances: Any, compute: Callable[..., Tensor], *, parents: Any = (),
             site: Any = None, description: Any = "", input: bool = False) -> tuple["Variable", ...]:
        """One variable per instance ``i`` of ``instances``, named ``{name}_{i}``, written once:
        ``compute(batch, i, **parents)``; ``parents``, ``site`` and ``description`` are either
        the same for every instance or functions of ``i`` (``parents`` may name other families'
        instances: ``lambda i: (f"hist_{i}",)``). Each keeps ``family=name`` and ``instance=i``.

            >>> Variable.each("max", range(4), lambda b, i: b.inputs[:, : i + 1].max(1).values,
            ...               site=lambda i: Site.of(Node("mlp", 0, position=i)))
        """

        def at(value: Any, i: Any) -> Any:
            return value(i) if callable(value) else value

        def bind(i: Any) -> Callable[..., Tensor]:
            return lambda batch, **p: compute(batch, i, **p)

        return tuple(cls(f"{name}_{i}", bind(i), tuple(at(parents, i)), at(site, i), at(description, i), input,
                         family=name, instance=i) for i in instances)


@dataclass(frozen=True)
class Prediction:
    """A claim the mechanism makes about where the model succeeds or fails.

    Attributes:
        name: short name (``long cascades``).
        description: the reasoning, one line (why the mechanism expects it).
        where: ``where(batch, values) -> [batch]`` bool: the inputs the prediction is about.
        expect: ``"succeed"`` (accuracy there >= ``threshold``) or ``"fail"`` (<= ``threshold``).
        threshold: the accuracy bound the expectation is held to.
        inputs: ``inputs(task, generator) -> Batch``: where to look (an enumeration or a
            search); ``None``: the card's evaluation batch.
        outputs: the outputs the prediction is about (indices into the mechanism's
            ``outputs``); the model is judged right on an input when it is right at every one
            of them, so one changed output in nine is not diluted by the eight the prediction
            says nothing about (``None``: every output).
    """

    name: str
    description: str
    where: Callable[[Any, Values], Tensor]
    expect: str
    threshold: float
    inputs: Callable[[Any, torch.Generator], Any] | None = None
    outputs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.expect not in EXPECTATIONS:
            raise ValueError(f"Prediction.expect={self.expect!r} is not allowed; choose from {EXPECTATIONS}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"Prediction.threshold={self.threshold} must be an accuracy in [0, 1]")


@dataclass(frozen=True)
class Mechanism:
    """A hypothesis: variables, the answer computed from them, and where the model holds each.

    Attributes:
        name: the mechanism's name (``carry``).
        task: the task name it is about (``addition``).
        variables: the steps, in any order (checked acyclic).
        answer: ``answer(batch, **values) -> [batch, len(outputs)]`` long: the algorithm's answer
            at ``outputs`` from the variables named in ``answer_parents``.
        answer_parents: the variables ``answer`` reads.
        outputs: indices into ``batch.answer_positions`` the mechanism explains.
        readout: components the hypothesis says compute the answer from its variables (they
            run on the intervened activations during causal scrubbing; every other component
            not in a site is resampled).
        predictions: what the mechanism says about where the model fails or succeeds.
        pseudocode: the algorithm in a few lines, each step naming its components.
        sample: ``sample(task, n, generator) -> Batch``: the inputs the checks use (``None``:
            ``task.sample``).
        correct: ``correct(batch, predicted [batch, len(outputs)]) -> [batch]`` bool: is a
            model's answer right (``None``: equal to the targets at every output; a task whose
            answers are not unique, e.g. a colouring, says what right means); with
            ``per_output``, ``[batch, len(outputs)]`` bool, right at each output. Bit answers
            (float targets) are compared as packed bit patterns, as the checks read them.
        per_output: score agreement, interchange and correctness per output, not per example:
            agreement is the share of (example, output) entries where the algorithm's answer
            is the model's; an interchange pair scores the outputs whose counterfactual
            answer differs from the base's (the outputs the swap is predicted to move). For
            mechanisms with many outputs each explained by a few variables (a colour per
            vertex), where "every output right at once" would charge each variable with the
            others' misses.
    """

    name: str
    task: str
    variables: tuple[Variable, ...]
    answer: Callable[..., Tensor]
    answer_parents: tuple[str, ...]
    outputs: tuple[int, ...]
    readout: tuple[Node, ...] = ()
    predictions: tuple[Prediction, ...] = ()
    pseudocode: str = ""
    sample: Callable[[Any, int, torch.Generator], Any] | None = None
    correct: Callable[[Any, Tensor], Tensor] | None = None
    per_output: bool = False
    _order: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [v.name for v in self.variables]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"mechanism {self.name!r}: variable names must be unique; repeated: {dup}")
        known = set(names)
        for v in self.variables:
            missing = [p for p in v.parents if p not in known]
            if missing:
                raise ValueError(f"mechanism {self.name!r}: variable {v.name!r} reads unknown parents {missing}")
        missing = [p for p in self.answer_parents if p not in known]
        if missing:
            raise ValueError(f"mechanism {self.name!r}: the answer reads unknown variables {missing}")
        if not self.outputs:
            raise ValueError(f"mechanism {self.name!r} explains no outputs (outputs=())")
        if any(n.position is None for n in self.readout):
            raise ValueError(f"mechanism {self.name!r}: readout nodes need positions")
        object.__setattr__(self, "_order", _topological(self.name, self.variables))

    # ------------------------------------------------------------------ the algorithm
    def variable(self, name: str) -> Variable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(f"mechanism {self.name!r} has no variable {name!r}; it has {[v.name for v in self.variables]}")

    def family(self, name: str) -> list[Variable]:
        """The instances of the family ``name`` (:meth:`Variable.each`), in declaration order."""
        out = [v for v in self.variables if v.family == name]
        if not out:
            families = sorted({v.family for v in self.variables if v.family})
            raise KeyError(f"mechanism {self.name!r} has no variable family {name!r}; it has {families}")
        return out

    @property
    def mapped(self) -> list[Variable]:
        """The variables with a site, in topological order."""
        return [self.variable(n) for n in self._order if self.variable(n).site is not None]

    def values(self, batch: Any, overrides: Values | None = None) -> Values:
        """Every variable on ``batch`` in topological order; a variable in ``overrides`` takes
        the given value instead of its own (and its descendants are recomputed from it)."""
        overrides = overrides or {}
        out: Values = {}
        for name in self._order:
            if name in overrides:
                out[name] = overrides[name]
                continue
            v = self.variable(name)
            value = v.compute(batch, **{p: out[p] for p in v.parents})
            out[name] = _check_value(self.name, name, value, len(batch))
        return out

    def answer_of(self, batch: Any, values: Values) -> Tensor:
        """``[batch, len(outputs)]`` the algorithm's answer from ``values``."""
        out = self.answer(batch, **{p: values[p] for p in self.answer_parents})
        if out.dim() == 1 and len(self.outputs) == 1:
            out = out[:, None]
        if tuple(out.shape) != (len(batch), len(self.outputs)):
            raise ValueError(f"mechanism {self.name!r}: answer must be [batch, {len(self.outputs)}]; got {tuple(out.shape)}")
        return out.long()

    def counterfactual(self, batch: Any, values: Values, name: str, new: Tensor) -> Tensor:
        """The algorithm's answer when ``name`` takes the row-wise values ``new`` and everything
        downstream of it is recomputed."""
        return self.answer_of(batch, self.values(batch, {name: new, **{k: values[k] for k in self._upstream(name)}}))

    def mapped_parents(self, names: tuple[str, ...] | list[str]) -> list[str]:
        """The nearest mapped ancestors of ``names`` (looking through unmapped variables): the
        sites a treeified scrub sets before the model computes what reads them. A mapped name
        stands for itself."""
        out: list[str] = []
        stack = list(names)
        while stack:
            name = stack.pop(0)
            v = self.variable(name)
            if v.site is not None:
                if name not in out:
                    out.append(name)
            else:
                stack.extend(v.parents)
        return out

    def is_input(self, name: str) -> bool:
        """A mapped variable the hypothesis reads off the input: declared so, or without a mapped
        ancestor (its site takes an agreeing example's clean value in a treeified scrub)."""
        v = self.variable(name)
        return v.input or not self.mapped_parents(list(v.parents))

    def _upstream(self, name: str) -> list[str]:
        """Variables that are neither ``name`` nor its descendants (they keep their values)."""
        down = {name}
        for n in self._order:
            if any(p in down for p in self.variable(n).parents):
                down.add(n)
        return [n for n in self._order if n not in down]

    def correct_of(self, batch: Any, predicted: Tensor, only: tuple[int, ...] | None = None) -> Tensor:
        """``[batch]`` bool: is ``predicted`` (``[batch, len(outputs)]``) right on each example
        (``[batch, len(outputs)]``, at each output, with ``per_output``); ``only``: judged at
        those outputs alone (indices into ``outputs``), ``[batch]`` bool."""
        if self.correct is not None:
            out = self.correct(batch, predicted).bool()
        else:
            targets = batch.targets[:, batch.answer_positions[torch.tensor(self.outputs)]]
            if targets.dtype.is_floating_point:  # bit answers [batch, m, V]: their packed ids
                targets = pack_bits(targets > 0.5)
            out = predicted == targets
        if only is not None:
            if out.dim() != 2:
                raise ValueError(f"mechanism {self.name!r}: correct() gives one value an example, so a prediction "
                                 "cannot be judged at some outputs only")
            return out[:, list(only)].all(1)
        if out.dim() == 2:
            return out if self.per_output else out.all(1)
        if self.per_output:
            raise ValueError(f"mechanism {self.name!r} scores per output: correct() must give [batch, "
                             f"{len(self.outputs)}] bool; got {tuple(out.shape)}")
        return out

    def sample_batch(self, task: Any, n: int, generator: torch.Generator) -> Any:
        return (self.sample or (lambda t, k, g: t.sample(k, g)))(task, n, generator)

    def roles(self, component: Node) -> list[str]:
        """What the hypothesis says ``component`` (a head or MLP, at any position) does: the
        variables whose site names it (a family once, as ``hist_*``) and ``readout``; ``[]``:
        the hypothesis calls it irrelevant."""
        same = lambda n: (n.kind, n.layer, n.head) == (component.kind, component.layer, component.head)  # noqa: E731
        out: list[str] = []
        for v in self.variables:
            if v.site is not None and any(same(n) for n in v.site.nodes):
                role = f"{v.family}_*" if v.family else v.name
                if role not in out:
                    out.append(role)
        if any(same(n) for n in self.readout):
            out.append("readout")
        return out

    def describe(self) -> list[str]:
        """One line per variable: ``name <- parents : site — description``."""
        lines = []
        for n in self._order:
            v = self.variable(n)
            parents = ", ".join(v.parents) if v.parents else "input"
            site = v.site.label if v.site is not None else "(not localised)"
            lines.append(f"{n} <- {parents} : {site}" + (f" — {v.description}" if v.description else ""))
        return lines


def _check_value(mechanism: str, name: str, value: Any, n: int) -> Tensor:
    if not isinstance(value, Tensor) or value.dim() != 1 or value.shape[0] != n:
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"mechanism {mechanism!r}: variable {name!r} must compute a [batch={n}] tensor; got {shape}")
    return value


def _topological(mechanism: str, variables: tuple[Variable, ...]) -> tuple[str, ...]:
    by_name = {v.name: v for v in variables}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ValueError(f"mechanism {mechanism!r}: variables form a cycle: {' -> '.join(path + (name,))}")
        state[name] = 1
        for p in by_name[name].parents:
            visit(p, path + (name,))
        state[name] = 2
        order.append(name)

    for v in variables:
        visit(v.name, ())
    return tuple(order)


__all__ = ["EXPECTATIONS", "Mechanism", "Prediction", "Site", "Values", "Variable"]
