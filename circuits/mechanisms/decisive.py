"""Decisive experiments: interventions where two mechanisms predict different answers, and
which of the two the model follows there.

Two hypotheses that agree on the task's data cannot be told apart by agreement, and often not
by interchange or scrubbing either (each maps its variables to sites that do hold the right
values). They differ off the data, or under interventions one of them calls irrelevant. For a
pair ``(A, B)`` of :class:`~circuits.mechanisms.Mechanism` s with the same outputs, this module
designs those experiments and measures the model there:

- **edits** (off-distribution inputs, found by enumeration): each teacher-forced answer token
  the input already holds (a *written* token: an input position whose token is the target of
  the position before it) set to every value seen at that position in the data; the edited
  input keeps its metadata (the operands are unchanged, only a written token is wrong), and
  each mechanism computes its answer on it from its own variables;
- **patches** (interchange, and a site one maps and the other calls irrelevant): each mapped
  variable's site of either mechanism, taken whole from another example. A mechanism's
  prediction is its counterfactual answer with every one of its variables whose site the patch
  covers set to the source's value (descendants recomputed); a mechanism naming nothing there
  predicts the base's own answer (causal scrubbing's reading of an unnamed location). A patch
  that covers only part of another variable's site is *ambiguous* for that mechanism and is
  skipped.

Each experiment is scored on the (input, output) entries where the two predictions differ: the
share where the model's answer is ``A``'s, ``B``'s, or neither. The rule (stated before any
number): an experiment with fewer than ``MIN_DISAGREE`` such entries decides nothing; otherwise
it names ``A`` when the model takes ``A``'s answer on at least ``FOLLOW_MIN`` of them and the
95% Wilson interval of that share lies wholly above the interval of ``B``'s share (symmetric for
``B``), and ``neither`` when neither mechanism reaches ``FOLLOW_MIN``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from circuits.graph.model_graph import ModelGraph
from circuits.mechanisms.hypothesis import Mechanism, Site, Values
from circuits.mechanisms.patching import Patch, answer_logits, derangement, patched_answers, record, site_hooks

MIN_DISAGREE = 20
FOLLOW_MIN = 0.5
# Edited rows per written position at most (the batch's first rows, each with every value seen at
# the position): a 150-token vocabulary would make 149 edits of every input (the zoo's 10-token
# tasks make 9,000 and are not cut). Run in chunks.
MAX_EDITED_ROWS = 10_000
EDIT_CHUNK = 4096
# Written positions edited at most (evenly spaced, the first and the last among them): a long
# answer (30 outputs) made 29 experiments of each edit kind, each alike.
MAX_EDIT_POSITIONS = 10
Z95 = 1.959964


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (``(0, 1)`` when ``n == 0``)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Experiment:
    """One decisive experiment between mechanisms ``a`` and ``b``.

    Attributes:
        kind: ``"edit"`` (an off-distribution input) or ``"patch"`` (an activation swap).
        name: what was done (``written token @8 set to each value``, ``patch a0.0@7 + ...``).
        a, b: the mechanisms' names.
        n_inputs: inputs (or patched pairs) run.
        n_disagree: (input, output) entries where the two predictions differ.
        follows_a, follows_b: entries where the model's answer is ``a``'s / ``b``'s.
        winner: ``a``'s or ``b``'s name, ``"neither"``, or ``None`` (too few entries).
        reason: why, in words.
    """

    kind: str
    name: str
    a: str
    b: str
    n_inputs: int
    n_disagree: int
    follows_a: int
    follows_b: int
    winner: str | None
    reason: str

    @property
    def share_a(self) -> float:
        return self.follows_a / self.n_disagree if self.n_disagree else float("nan")

    @property
    def share_b(self) -> float:
        return self.follows_b / self.n_disagree if self.n_disagree else float("nan")

    def line(self) -> str:
        who = self.winner or "undecided"
        return (f"{self.kind} {self.name}: {self.n_disagree} disagreeing outputs; model follows {self.a} "
                f"{self.share_a:.3f}, {self.b} {self.share_b:.3f} -> {who} ({self.reason})")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "share_a": self.share_a, "share_b": self.share_b}


def judge(kind: str, name: str, a: str, b: str, n_inputs: int, model_answer: Tensor, answer_a: Tensor,
          answer_b: Tensor) -> Experiment:
    """Score one experiment by the module's rule (answers ``[n, outputs]``)."""
    differ = answer_a != answer_b
    n = int(differ.sum())
    k_a = int(((model_answer == answer_a) & differ).sum())
    k_b = int(((model_answer == answer_b) & differ).sum())
    if n < MIN_DISAGREE:
        return Experiment(kind, name, a, b, n_inputs, n, k_a, k_b, None,
                          f"fewer than {MIN_DISAGREE} disagreeing outputs")
    (lo_a, hi_a), (lo_b, hi_b) = wilson(k_a, n), wilson(k_b, n)
    if k_a / n >= FOLLOW_MIN and lo_a > hi_b:
        return Experiment(kind, name, a, b, n_inputs, n, k_a, k_b, a, f"{a}'s share interval {lo_a:.3f}-{hi_a:.3f}")
    if k_b / n >= FOLLOW_MIN and lo_b > hi_a:
        return Experiment(kind, name, a, b, n_inputs, n, k_a, k_b, b, f"{b}'s share interval {lo_b:.3f}-{hi_b:.3f}")
    return Experiment(kind, name, a, b, n_inputs, n, k_a, k_b, "neither",
                      f"neither reaches {FOLLOW_MIN:g} of the disagreeing outputs")


# ---------------------------------------------------------------------- edits


def written_positions(batch: Any) -> list[int]:
    """Input positions holding a teacher-forced answer: the token at ``p`` is the target of
    ``p - 1`` (an answer position) on every example (token inputs only)."""
    if batch.inputs.dim() != 2 or batch.targets.dim() != 2:
        return []
    answers = set(batch.answer_positions.tolist())
    width = batch.inputs.shape[1]
    return [p for p in range(1, width) if p - 1 in answers
            and bool((batch.inputs[:, p] == batch.targets[:, p - 1]).all())]


def edited_positions(batch: Any) -> list[int]:
    """The written positions the edit experiments use: :func:`written_positions`, at most
    :data:`MAX_EDIT_POSITIONS` of them evenly spaced."""
    written = written_positions(batch)
    if len(written) <= MAX_EDIT_POSITIONS:
        return written
    picks = torch.linspace(0, len(written) - 1, MAX_EDIT_POSITIONS).round().long().tolist()
    return [written[i] for i in dict.fromkeys(picks)]


def written_edits(batch: Any, position: int) -> Any:
    """Every row of ``batch`` with the token at ``position`` set to each other value seen there;
    metadata (operands, lists) unchanged; ``metadata["edited_from"]`` the row it came from."""
    values = torch.unique(batch.inputs[:, position])
    n, k = len(batch), len(values)
    return set_token(batch, position, torch.arange(n).repeat_interleave(k), values.repeat(n))


def set_token(batch: Any, position: int, rows: Tensor, new: Tensor) -> Any:
    """The rows ``rows`` of ``batch`` (grouped by row) with the token at ``position`` set to
    ``new`` (one value per entry of ``rows``), where that changes it; metadata unchanged but
    ``metadata["edited_from"]``, the row each came from."""
    keep = batch.inputs[rows, position] != new
    rows, new = rows[keep], new[keep]
    edited = batch[rows]
    inputs = edited.inputs.clone()
    inputs[:, position] = new
    return dataclasses.replace(edited, inputs=inputs, metadata={**edited.metadata, "edited_from": rows})


def edit_experiments(model: Any, a: Mechanism, b: Mechanism, batch: Any,
                     extra: dict[str, Callable[[Any], Any]] | None = None) -> list[Experiment]:
    """One experiment per written position (and per ``extra`` edit: ``{name: batch -> edited
    batch}``), on the inputs of ``batch``."""
    outputs = torch.tensor(a.outputs)
    edits = {f"written token @{p} set to each value seen there": (lambda bt, p=p: written_edits(bt, p))
             for p in edited_positions(batch)}
    edits.update(extra or {})
    out = []
    for name, edit in edits.items():
        edited = edit(batch)
        if len(edited) > MAX_EDITED_ROWS:  # the first inputs' edits, every value each (rows are grouped by input)
            edited = edited[torch.arange(MAX_EDITED_ROWS)]
        if not len(edited):
            continue
        with torch.no_grad():
            model_answer = torch.cat([answer_logits(model, edited[torch.arange(i, min(i + EDIT_CHUNK, len(edited)))],
                                                    outputs).argmax(-1) for i in range(0, len(edited), EDIT_CHUNK)])
        out.append(judge("edit", name, a.name, b.name, len(edited), model_answer,
                         a.answer_of(edited, a.values(edited)), b.answer_of(edited, b.values(edited))))
    return out


# ---------------------------------------------------------------------- patches


def _covers(patched: Site, site: Site) -> str:
    """``"all"`` when a whole-site patch of ``patched`` replaces ``site`` entirely, ``"part"``
    when it replaces some of it, ``"none"`` when nothing."""
    if patched.nodes and site.nodes:
        shared = set(patched.nodes) & set(site.nodes)
        return "all" if shared == set(site.nodes) else ("part" if shared else "none")
    if patched.hook is not None and patched.hook == site.hook:
        shared = set(patched.positions) & set(site.positions)
        return "all" if shared == set(site.positions) else ("part" if shared else "none")
    return "none"


def patch_prediction(mech: Mechanism, patched: Site, batch: Any, source: Tensor, values: Values | None = None,
                     source_values: Values | None = None) -> Tensor | None:
    """``mech``'s answer on ``batch`` with ``patched`` taken from rows ``source``: the variables
    the patch covers take the source's values; ``None`` when it covers a site only in part.
    ``values``, ``source_values``: ``mech.values`` of ``batch`` and of ``batch[source]``, when
    the caller has them (a sweep over many sites computes them once)."""
    covered = []
    for v in mech.mapped:
        how = _covers(patched, v.site)
        if how == "part":
            return None
        if how == "all":
            covered.append(v.name)
    values = mech.values(batch) if values is None else values
    if not covered:
        return mech.answer_of(batch, values)
    source_values = mech.values(batch[source]) if source_values is None else source_values
    keep = set.intersection(*(set(mech._upstream(name)) for name in covered))  # neither covered nor below
    overrides = {**{k: values[k] for k in keep}, **{name: source_values[name] for name in covered}}
    return mech.answer_of(batch, mech.values(batch, overrides))


def patch_experiments(model: Any, a: Mechanism, b: Mechanism, batch: Any, generator: torch.Generator) -> list[Experiment]:
    """One experiment per distinct site mapped by ``a`` or ``b``: the site (whole: a subspace
    site's hook at its positions) taken from a random other example."""
    graph = ModelGraph.of(model, batch.inputs.shape[1])
    sites: dict[str, Site] = {}
    for mech in (a, b):
        for v in mech.mapped:
            whole = Site(nodes=v.site.nodes) if v.site.nodes else Site(hook=v.site.hook, positions=v.site.positions)
            sites.setdefault(whole.label, whole)
    acts = record(model, batch, site_hooks(list(sites.values())))
    outputs = torch.tensor(a.outputs)
    base = torch.arange(len(batch))
    source = derangement(len(batch), generator)
    known = {m.name: (m.values(batch), m.values(batch[source])) for m in (a, b)}  # once, not once a site
    out = []
    for label, site in sites.items():
        pred_a, pred_b = (patch_prediction(m, site, batch, source, *known[m.name]) for m in (a, b))
        if pred_a is None or pred_b is None:
            continue
        logits = patched_answers(model, graph, batch, base, acts, [Patch(site, source)], outputs)
        out.append(judge("patch", f"{label} from another input", a.name, b.name, len(batch), logits.argmax(-1),
                         pred_a, pred_b))
    return out


__all__ = ["FOLLOW_MIN", "MIN_DISAGREE", "Experiment", "edit_experiments", "judge", "patch_experiments",
           "edited_positions", "patch_prediction", "set_token", "wilson", "written_edits", "written_positions"]
