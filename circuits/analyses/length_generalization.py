"""Lengths the model never saw: accuracy by length, the extrapolation factor, and where the
model breaks first.

:func:`generalization` runs a model on its task at every length of a range
(:func:`interp_rand.tasks.lengths.at_length`), usually up to 3x the longest it was trained on,
and reports:

- **accuracy by length**: exact match (every answer right) and accuracy per output position;
- **the extrapolation factor**: the longest length ``L`` such that every length from the trained
  maximum up to ``L`` scores exact match >= 0.9 (:data:`THRESHOLD`), divided by the trained
  maximum (1.0: no extrapolation; below 1: the model fails inside its own range);
- **where it breaks**, at the first length past the trained maximum below the threshold, from
  each head's attention at the answer positions, compared with the trained maximum's:

  - *drift*: the head's attention mass per **role** (the position names without their index:
    ``x``, ``SEP``, ``y`` for sort; ``a``, ``+``, ``b``, ``=``, ``s`` for addition) against the
    trained length's, as a total-variation distance (0: the same roles, 1: disjoint);
  - *spread*: the normalised entropy of its pattern (0: one key, 1: uniform over the keys it may
    read) rising.

  The line names the head that moves most past the bars (:data:`DRIFTS`, :data:`SPREADS`); where
  none does, the attention holds by these measures, and the line says so.

Lengths a model cannot run (a learned positional table has ``n_ctx`` rows) are reported as not
run, with the reason, never extrapolated over.

With a mechanism carried to each length (:mod:`circuits.explain.by_length`, filled in by the
report: ``mechanism``), the line also names the first variable whose interchange accuracy falls,
and where none falls and no head moves, says that the mechanism holds and the readout fails.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from interp_rand.display import Displayed, bars_svg
from interp_rand.evaluation import check_model_fits_task, evaluate
from interp_rand.figures.style import head_name
from interp_rand.model.hook_names import hook_name
from interp_rand.seeded_evaluation.forward import model_args
from interp_rand.tasks.lengths import at_length, length_of

#: Exact match at or above which a length counts as solved (D-RASP's and the issue's bar).
THRESHOLD = 0.9
#: A head drifts when its role masses move this far (total variation) from the trained length's.
DRIFTS = 0.25
#: A head spreads when its normalised entropy rises this much over the trained length's.
SPREADS = 0.2


def role_of(position_name: str) -> str:
    """A position's role: its name without the trailing index (``x3`` -> ``x``, ``SEP`` -> ``SEP``)."""
    return re.sub(r"\d+$", "", position_name) or position_name


@dataclass(frozen=True)
class LengthScore:
    """The model at one length: ``exact_match`` and ``per_position`` (``None`` / empty where it
    was not run, ``skipped`` saying why), on ``n`` examples."""

    length: int
    exact_match: float | None
    per_position: list[float]
    n: int
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"length": self.length, "exact_match": self.exact_match, "per_position": self.per_position,
                "n": self.n, "skipped": self.skipped}


@dataclass(frozen=True)
class HeadAttention:
    """Head ``head`` (``a1.2``) at one length, over the answer positions: its mass per role,
    its normalised entropy, and (``drift``) the total-variation distance of its role masses from
    the reference length's (0 at the reference)."""

    head: str
    roles: dict[str, float]
    entropy: float
    drift: float = 0.0

    def top_role(self) -> tuple[str, float]:
        role = max(self.roles, key=self.roles.get)
        return role, self.roles[role]

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head, "roles": {k: round(v, 4) for k, v in self.roles.items()},
                "entropy": round(self.entropy, 4), "drift": round(self.drift, 4)}


@dataclass(repr=False)
class Generalization(Displayed):
    """What :func:`generalization` measured (module docstring)."""

    task: str
    scheme: str
    trained: tuple[int, int]
    scores: list[LengthScore]
    attention: dict[int, list[HeadAttention]] = field(default_factory=dict)
    reference: int | None = None
    threshold: float = THRESHOLD
    #: the mechanism checked at each length (:class:`circuits.explain.by_length.MechanismByLength`:
    #: ``iia[length][family]``, ``first_fall()``), filled by the layer that explains; ``None``: not measured
    mechanism: Any = None
    #: why the mechanism was not measured, when it was asked for and could not be
    mechanism_skipped: str | None = None

    def small_figure(self) -> str | None:
        """Exact match by length as bars, the threshold dashed, the trained lengths marked."""
        lo, hi = self.trained
        rows = [(f"length {s.length}" + (" (trained)" if lo <= s.length <= hi else ""), s.exact_match)
                for s in sorted(self.scores, key=lambda s: s.length)]
        return bars_svg(rows, lo=0.0, hi=1.0, threshold=self.threshold, max_rows=24,
                        caption=f"exact match by length; dashed: {self.threshold:g}")

    # ------------------------------------------------------------------ the numbers
    def score_at(self, length: int) -> LengthScore | None:
        return next((s for s in self.scores if s.length == length), None)

    def longest_solved(self) -> int | None:
        """The longest length ``L`` >= the trained maximum such that every length run from the
        trained maximum to ``L`` scores >= the threshold; ``None`` when the trained maximum does
        not (or was not run)."""
        top = self.trained[1]
        best = None
        for s in sorted(self.scores, key=lambda s: s.length):
            if s.length < top:
                continue
            if s.exact_match is None or s.exact_match < self.threshold:
                break
            best = s.length
        return best

    def extrapolation_factor(self) -> float:
        """:meth:`longest_solved` over the trained maximum; 0.0 when the trained maximum itself
        is below the threshold."""
        solved = self.longest_solved()
        return 0.0 if solved is None else solved / self.trained[1]

    def breaks_at(self) -> int | None:
        """The first length run past the trained maximum below the threshold (``None``: none)."""
        top = self.trained[1]
        return next((s.length for s in sorted(self.scores, key=lambda s: s.length)
                     if s.length > top and s.exact_match is not None and s.exact_match < self.threshold), None)

    def first_failing_output(self, length: int) -> tuple[int, float] | None:
        """The first output position below the threshold at ``length`` and its accuracy."""
        s = self.score_at(length)
        if s is None or not s.per_position:
            return None
        return next(((k, a) for k, a in enumerate(s.per_position) if a < self.threshold), None)

    def breaking_step(self) -> str:
        """One line: where the model breaks first and which head's attention moves there."""
        at = self.breaks_at()
        top = self.trained[1]
        own = self.score_at(top)
        if own is not None and own.exact_match is not None and own.exact_match < self.threshold:
            return (f"below {self.threshold:g} at its own trained maximum, length {top} (exact match "
                    f"{own.exact_match:.2f}): it has not learned its own lengths, so nothing past them is asked")
        past = sorted((s for s in self.scores if s.length > top), key=lambda s: s.length)
        stopped = next((s for s in past if s.exact_match is None), None)
        if stopped is not None and (at is None or stopped.length < at):
            return f"cannot run past length {stopped.length - 1}: {stopped.skipped}"
        if at is None:
            run = [s.length for s in self.scores if s.exact_match is not None]
            return (f"does not break up to length {max(run)}" if run else "nothing was run")
        heads = self.attention.get(at) or []
        reference = {h.head: h for h in self.attention.get(self.reference, [])}
        output = self.first_failing_output(at)
        where = f" (first failing output: position {output[0]}, accuracy {output[1]:.2f})" if output else ""
        s = self.score_at(at)
        start = f"breaks at length {at} (exact match {s.exact_match:.2f}){where}"
        fall = self.mechanism.first_fall() if self.mechanism is not None else None
        variable = ""
        if fall is not None:
            length, family, before, after, worst, lowest = fall
            variable = (f"; variable {worst} of {self.mechanism.name} falls first (IIA {lowest:.2f} at length {length}; "
                        f"its family {family}_k {before:.2f} at length {self.mechanism.reference} -> {after:.2f})")
        elif self.mechanism is not None:
            variable = (f"; every variable of {self.mechanism.name} keeps its IIA (within 0.1 of length "
                        f"{self.mechanism.reference}'s up to length {max(self.mechanism.iia)})")
        if not heads or not reference:
            return start + variable + "; attention not measured"
        moved = []
        for h in heads:
            ref = reference.get(h.head)
            if ref is None:
                continue
            spread = h.entropy - ref.entropy
            if h.drift >= DRIFTS or spread >= SPREADS:
                moved.append((max(h.drift / DRIFTS, spread / SPREADS), h, ref, spread))
        if not moved:
            worst = max(heads, key=lambda h: h.drift)
            rise = max(heads, key=lambda h: h.entropy - reference.get(h.head, h).entropy)
            held = (f"no head's attention drifts (largest drift {worst.head}, {worst.drift:.2f}) or spreads (largest "
                    f"entropy rise {rise.head}, {rise.entropy - reference.get(rise.head, rise).entropy:+.2f})")
            if fall is None and self.mechanism is not None:
                return f"{start}{variable}; {held}: the mechanism holds and the readout fails"
            if fall is None:
                return f"{start}: {held}: the attention holds by these measures and the readout after it fails"
            return f"{start}{variable}; {held}"
        _, h, ref, spread = max(moved, key=lambda m: m[0])
        role, mass = ref.top_role()
        what = []
        if h.drift >= DRIFTS:
            what.append(f"moves off {role} ({mass:.2f} at length {self.reference} -> {h.roles.get(role, 0.0):.2f}; "
                        f"drift {h.drift:.2f})")
        if spread >= SPREADS:
            what.append(f"spreads (entropy {ref.entropy:.2f} -> {h.entropy:.2f})")
        return f"{start}{variable}; head {h.head}'s attention " + " and ".join(what)

    # ------------------------------------------------------------------ display
    def headline(self) -> str:
        factor = self.extrapolation_factor()
        solved = self.longest_solved()
        top = self.trained[1]
        if solved is None:
            return (f"{self.task} ({self.scheme}): below {self.threshold:g} exact match at its own trained maximum, "
                    f"length {top}: extrapolation factor 0")
        return (f"{self.task} ({self.scheme}): exact match >= {self.threshold:g} up to length {solved}, "
                f"{factor:.2f}x the trained maximum {top}; {self.breaking_step()}")

    def lines(self) -> list[str]:
        lo, hi = self.trained
        out = [self.headline(), f"trained on lengths {lo}-{hi}; extrapolation factor {self.extrapolation_factor():.2f}",
               "length  exact  per output position"]
        for s in sorted(self.scores, key=lambda s: s.length):
            mark = "*" if lo <= s.length <= hi else " "
            if s.exact_match is None:
                out.append(f"{s.length:>5}{mark}   -    not run: {s.skipped}")
                continue
            per = " ".join(f"{a:.2f}" for a in s.per_position[:24]) + (" ..." if len(s.per_position) > 24 else "")
            out.append(f"{s.length:>5}{mark} {s.exact_match:6.3f}  {per}")
        out.append("(* trained lengths)")
        if self.mechanism_skipped:
            out.append(f"mechanism by length: not measured ({self.mechanism_skipped})")
        if self.mechanism is not None and self.mechanism.iia:
            families = sorted({f for v in self.mechanism.iia.values() for f in v})
            out.append(f"interchange accuracy of {self.mechanism.name}'s variables by length (mean over outputs):")
            out.append("length  " + "  ".join(f"{f:>6}" for f in families))
            for length in sorted(self.mechanism.iia):
                row = self.mechanism.iia[length]
                out.append(f"{length:>6}  " + "  ".join(f"{row[f]:6.2f}" if f in row else "     -" for f in families))
        at = self.breaks_at()
        if at is not None and self.attention.get(at):
            out.append(f"attention at the answers, length {self.reference} -> {at} (role masses, entropy, drift):")
            reference = {h.head: h for h in self.attention.get(self.reference, [])}
            for h in sorted(self.attention[at], key=lambda h: -h.drift):
                ref = reference.get(h.head)
                role, mass = ref.top_role() if ref else h.top_role()
                out.append(f"  {h.head}: {role} {mass:.2f} -> {h.roles.get(role, 0.0):.2f}; entropy "
                           f"{ref.entropy if ref else float('nan'):.2f} -> {h.entropy:.2f}; drift {h.drift:.2f}")
        return out

    def text(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "scheme": self.scheme, "trained": list(self.trained), "threshold": self.threshold,
                "extrapolation_factor": self.extrapolation_factor(), "longest_solved": self.longest_solved(),
                "breaks_at": self.breaks_at(), "breaking_step": self.breaking_step(), "reference": self.reference,
                "scores": [s.to_dict() for s in self.scores],
                "attention": {str(k): [h.to_dict() for h in v] for k, v in self.attention.items()},
                "mechanism": None if self.mechanism is None else self.mechanism.to_dict(),
                "mechanism_skipped": self.mechanism_skipped}


# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def head_attention(model: nn.Module, task: Any, batch: Any) -> list[HeadAttention]:
    """Every head's attention at ``batch``'s answer positions: mass per role and normalised
    entropy (drift 0: compare with :func:`with_drift`); none for a model whose attention is not
    softmax (recall's linear attention: its pattern is no distribution)."""
    from interp_rand.model.mixer import capability_hook

    cfg = model.cfg
    if getattr(cfg, "attention", "softmax") != "softmax":
        return []  # a linear attention's pattern is not a distribution: no role masses, no entropy
    offset = int(getattr(cfg, "seed_offset", 0))
    hooks = {(layer, capability_hook(model, layer, "pattern")) for layer in range(cfg.n_layers)}
    hooks = {(layer, name) for layer, name in hooks if name is not None}
    if not hooks:
        return []
    args, kwargs = model_args(model, batch)
    _, cache = model.run_with_cache(*args, **kwargs, names_filter=lambda n: n in {h for _, h in hooks})
    roles = ["seed"] * offset + [role_of(p) for p in task.position_names()]
    queries = batch.answer_positions.to(torch.long) + offset
    out = []
    for layer, name in sorted(hooks):
        pattern = cache[name][:, :, queries].double()  # [batch, head, query, key]
        n_keys = pattern.shape[-1]
        allowed = (pattern > 0).sum(-1).clamp(min=1).double()  # keys each query reads
        for head in range(cfg.n_heads):
            p = pattern[:, head]
            entropy = -(p.clamp(min=1e-12).log() * p).sum(-1)
            norm = torch.where(allowed[:, head] > 1, entropy / allowed[:, head].log(), torch.zeros_like(entropy))
            masses: dict[str, float] = {}
            for key in range(n_keys):
                role = roles[key] if key < len(roles) else "?"
                masses[role] = masses.get(role, 0.0) + float(p[..., key].mean())
            total = sum(masses.values()) or 1.0
            out.append(HeadAttention(head_name(layer, head), {r: m / total for r, m in masses.items()},
                                     float(norm.mean())))
    return out


def with_drift(heads: list[HeadAttention], reference: list[HeadAttention]) -> list[HeadAttention]:
    """``heads`` with their drift from ``reference`` (the same heads at the trained length)."""
    ref = {h.head: h for h in reference}
    out = []
    for h in heads:
        r = ref.get(h.head)
        if r is None:
            out.append(h)
            continue
        roles = set(h.roles) | set(r.roles)
        tv = 0.5 * sum(abs(h.roles.get(k, 0.0) - r.roles.get(k, 0.0)) for k in roles)
        out.append(HeadAttention(h.head, h.roles, h.entropy, tv))
    return out


def generalization(model: nn.Module, task: Any, lengths: range | list[int] | None = None, *,
                   trained: tuple[int, int] | None = None, n: int = 512, n_attention: int = 128, seed: int = 0,
                   progress: bool = False) -> Generalization:
    """``model`` on ``task`` at every length of ``lengths`` (default: the trained minimum to 3x
    the trained maximum); ``trained``: the (shortest, longest) length it was trained on (default:
    the task's own length, both). ``n`` examples per length for accuracy, ``n_attention`` for
    the heads' attention at each length."""
    from interp_rand import progress as bars

    own = length_of(task)
    trained = (own, own) if trained is None else (int(trained[0]), int(trained[1]))
    lengths = list(range(trained[0], 3 * trained[1] + 1) if lengths is None else lengths)
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be positive; got {lengths[:5]}")
    cfg = getattr(model, "cfg", None)
    scheme = str(getattr(cfg, "positional", getattr(cfg, "positional_embedding_type", "?")))
    was_training = model.training
    model.eval()
    scores = []
    try:
        for length in bars.bar(lengths, desc="accuracy by length", enabled=progress):
            try:
                at = at_length(task, length)  # (a length the task cannot take is refused: recall's keys)
                check_model_fits_task(model, at)
            except ValueError as err:
                scores.append(LengthScore(length, None, [], 0, skipped=str(err).split(": ", 1)[-1]))
                continue
            batch = at.sample(n, torch.Generator().manual_seed(seed + length))
            result = evaluate(model, at, batch)
            scores.append(LengthScore(length, float(result.exact_match), [float(a) for a in result.per_position], n))
        found = Generalization(getattr(task, "name", "task"), scheme, trained, scores)
        reference = trained[1]
        attention: dict[int, list[HeadAttention]] = {}
        run = [s.length for s in scores if s.exact_match is not None]
        if reference in run:
            g = torch.Generator().manual_seed(seed + 10_000)
            ref_task = at_length(task, reference)
            attention[reference] = head_attention(model, ref_task, ref_task.sample(n_attention, g))
            for length in bars.bar([r for r in run if r != reference], desc="attention by length", enabled=progress):
                here = at_length(task, length)
                attention[length] = with_drift(head_attention(model, here, here.sample(n_attention, g)),
                                               attention[reference])
    finally:
        model.train(was_training)
    found.attention, found.reference = attention, reference
    return found


__all__ = ["DRIFTS", "SPREADS", "THRESHOLD", "Generalization", "HeadAttention", "LengthScore", "generalization",
           "head_attention", "role_of", "with_drift"]
