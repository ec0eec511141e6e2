"""Choosing between mechanisms: every pair of rival hypotheses put to decisive experiments,
each hypothesis checked whole, and a winner named only when the experiments name it.

    >>> from circuits.mechanisms import compare_mechanisms
    >>> result = compare_mechanisms(model, task, [rank_readout, next_larger], n=1000, seed=0)
    >>> result.winner                  # "sort-rank-readout", or None
    >>> print("\\n".join(result.lines()))

The rule, stated before any number (:mod:`circuits.mechanisms.decisive` states the rule of one
experiment):

- a pair ``(A, B)`` is **decided** for ``A`` when at least one experiment names ``A`` and none
  names ``B``; **split** when some name ``A`` and others ``B`` (the model follows each in part:
  neither is its algorithm); **neither** when the experiments that have enough disagreeing
  outputs name neither; **indistinguishable** when no experiment found ``MIN_DISAGREE``
  disagreeing outputs (then nothing is picked);
- the overall **winner** is the mechanism that wins every pair it is in; otherwise there is none.

Each mechanism's own card (:func:`~circuits.mechanisms.check_mechanism`: agreement, treeified
scrubbing with its whole-output agreement, interchange, predictions) is returned beside the
experiments; a prediction that a rival makes as well (the rival's own answer on the same
inputs is right, or wrong, just as often) is marked as not discriminating.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from circuits.mechanisms.card import MechanismCard, check_mechanism
from circuits.mechanisms.decisive import Experiment, edit_experiments, patch_experiments
from circuits.mechanisms.hypothesis import Mechanism
from interp_rand.display import Displayed, bars_svg

OUTCOMES = ("decided", "split", "neither", "indistinguishable")


@dataclass
class PairResult:
    """The experiments between two mechanisms and what they decide."""

    a: str
    b: str
    experiments: list[Experiment]
    outcome: str
    winner: str | None

    def line(self) -> str:
        n = sum(e.winner is not None for e in self.experiments)
        head = f"{self.a} vs {self.b}: {self.outcome.upper()}"
        head += f" for {self.winner}" if self.winner else ""
        return f"{head} ({n} of {len(self.experiments)} experiments had enough disagreeing outputs)"

    def deciding(self) -> list[Experiment]:
        return [e for e in self.experiments if e.winner not in (None, "neither")]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "outcome": self.outcome, "winner": self.winner,
                "experiments": [e.to_dict() for e in self.experiments]}


def decide(a: str, b: str, experiments: list[Experiment]) -> PairResult:
    """The pair's outcome by the module's rule."""
    named = {e.winner for e in experiments if e.winner is not None}
    if not named:
        return PairResult(a, b, experiments, "indistinguishable", None)
    sides = named - {"neither"}
    if len(sides) == 2:
        return PairResult(a, b, experiments, "split", None)
    if len(sides) == 1:
        return PairResult(a, b, experiments, "decided", sides.pop())
    return PairResult(a, b, experiments, "neither", None)


@dataclass(repr=False)
class Comparison(Displayed):
    """What :func:`compare_mechanisms` found."""

    mechanisms: list[str]
    winner: str | None
    pairs: list[PairResult]
    cards: dict[str, MechanismCard]
    discriminating: dict[str, dict[str, bool | None]]
    seconds: float
    config: dict[str, Any] = field(default_factory=dict)

    def headline(self) -> str:
        if self.winner:
            deciding = [e for p in self.pairs for e in p.deciding() if e.winner == self.winner]
            best = max(deciding, key=lambda e: e.n_disagree)
            return (f"{self.winner} wins over {', '.join(m for m in self.mechanisms if m != self.winner)}: "
                    f"the model follows it on {best.share_a if best.a == self.winner else best.share_b:.3f} of "
                    f"{best.n_disagree} disagreeing outputs ({best.kind} {best.name})")
        outcomes = ", ".join(f"{p.a} vs {p.b} {p.outcome}" for p in self.pairs)
        return f"no winner among {', '.join(self.mechanisms)} ({outcomes})"

    def lines(self) -> list[str]:
        out = [self.headline()]
        for p in self.pairs:
            out.append(p.line())
            out += ["    " + e.line() for e in p.experiments if e.winner is not None]
        for name, card in self.cards.items():
            s = card.scrubbing
            out.append(f"{name}: {card.verdict.upper()}; agreement {card.agreement:.3f}; scrubbing "
                       f"({'treeified' if s.details.get('recursive') else 'one level'}) share "
                       f"{s.share['logprob']:.3f}, whole outputs {s.scrubbed['accuracy']:.3f}")
            for pred, disc in self.discriminating.get(name, {}).items():
                if disc is False:
                    out.append(f"    prediction {pred!r}: a rival predicts the same (not discriminating)")
        out.append(f"{self.seconds:.1f} s")
        return out

    def small_figure(self) -> str | None:
        """Per decisive experiment (one with enough disagreeing outputs), the share of those
        outputs on which the model follows each mechanism."""
        rows = []
        for e in (e for p in self.pairs for e in p.experiments if e.winner is not None):
            rows += [(f"{e.kind} {e.name}", ""), (f"  follows {e.a}", e.share_a), (f"  follows {e.b}", e.share_b)]
        return bars_svg(rows, lo=0.0, hi=1.0, max_rows=9,
                        caption="share of disagreeing outputs the model follows")

    def to_dict(self) -> dict[str, Any]:
        return {"mechanisms": self.mechanisms, "winner": self.winner, "headline": self.headline(),
                "pairs": [p.to_dict() for p in self.pairs], "cards": {k: c.to_dict() for k, c in self.cards.items()},
                "discriminating": self.discriminating, "seconds": self.seconds, "config": self.config}


def _discriminates(task: Any, mech: Mechanism, rivals: list[Mechanism], generator: torch.Generator,
                   batch: Any) -> dict[str, bool | None]:
    """Per prediction of ``mech``: ``False`` when some rival's own answers meet the same bound
    on the same inputs (it predicts the same), ``True`` when none does, ``None`` without inputs."""
    out: dict[str, bool | None] = {}
    for p in mech.predictions:
        inputs = batch if p.inputs is None else p.inputs(task, generator)
        where = p.where(inputs, mech.values(inputs)).bool()
        if not bool(where.any()):
            out[p.name] = None
            continue
        same = False
        for rival in rivals:
            right = rival.correct_of(inputs, rival.answer_of(inputs, rival.values(inputs)), p.outputs)
            right = right.float().mean(1) if right.dim() == 2 else right.float()  # per output: its share
            accuracy = float(right[where].mean())
            same |= accuracy >= p.threshold if p.expect == "succeed" else accuracy <= p.threshold
        out[p.name] = not same
    return out


def compare_mechanisms(model: Any, task: Any, mechanisms: list[Mechanism], *, n: int = 1000, seed: int = 0,
                       cards: bool = True, n_pairs: int = 200, n_random: int = 5,
                       edits: dict[str, Callable[[Any], Any]] | None = None) -> Comparison:
    """Put every pair of ``mechanisms`` (same task outputs) to decisive experiments on ``n``
    inputs drawn by the first mechanism's sampler, check each one whole (``cards``), and name
    the winner by the module's rule.

    Args:
        edits: extra off-distribution edits, ``{name: batch -> edited batch}`` (the edited
            batch's metadata must still describe what each mechanism reads).
    """
    start = time.perf_counter()
    if len(mechanisms) < 2:
        raise ValueError("compare_mechanisms needs at least two mechanisms")
    names = [m.name for m in mechanisms]
    if len(set(names)) != len(names):
        raise ValueError(f"mechanisms to compare need distinct names; got {names}")
    outputs = {m.outputs for m in mechanisms}
    if len(outputs) != 1:
        raise ValueError(f"mechanisms to compare must explain the same outputs; got {sorted(outputs)}")
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    batch = mechanisms[0].sample_batch(task, n, generator)
    pairs = []
    for i, a in enumerate(mechanisms):
        for b in mechanisms[i + 1:]:
            experiments = edit_experiments(model, a, b, batch, edits) + patch_experiments(model, a, b, batch, generator)
            pairs.append(decide(a.name, b.name, experiments))
    wins = {m: all(p.winner == m for p in pairs if m in (p.a, p.b)) for m in names}
    winner = next((m for m, w in wins.items() if w), None)
    checked = {m.name: check_mechanism(model, task, m, n=n, seed=seed, n_pairs=n_pairs, n_random=n_random)
               for m in mechanisms} if cards else {}
    discriminating = {m.name: _discriminates(task, m, [r for r in mechanisms if r is not m], generator, batch)
                      for m in mechanisms}
    return Comparison(names, winner, pairs, checked, discriminating, time.perf_counter() - start,
                      {"n": n, "seed": seed, "n_pairs": n_pairs, "n_random": n_random})


__all__ = ["OUTCOMES", "Comparison", "PairResult", "compare_mechanisms", "decide"]
