"""``explain(model, task)``: the toolkit finds the algorithm.

The rule, stated before any number:

1. **Candidates** (:mod:`circuits.explain.candidates`): every primitive of the task's families,
   in order and reversed, scored against the model's own answers on ``n`` inputs; those whose
   match accuracy (per output entry) reaches 0.9 are kept (D-RASP's bar), at most
   ``max_candidates`` by match. When none reaches it, the best one is still located and checked,
   and the result says it falls short (a partial mechanism, never a threshold fitted to pass).
2. **Localisation** (:mod:`circuits.explain.localise`): each kept candidate's answer variable is
   searched over the components at each output's position, and the candidate becomes a
   :class:`~circuits.mechanisms.Mechanism`.
3. **Checks**: each mechanism's card (:func:`~circuits.mechanisms.check_mechanism`: agreement,
   treeified causal scrubbing with whole-output agreement, interchange per variable with its
   controls) on fresh draws; candidates are ranked by whole-output agreement under scrubbing,
   then the scrub's log-prob share.
4. **Choice**: with two or more candidates, the decisive experiments
   (:func:`~circuits.mechanisms.compare_mechanisms`: off-distribution edits of each written
   answer token, to each value seen there and to each other token of the input's own source
   (:func:`~circuits.explain.candidates.source_edits`), and patches) name the winner, the
   candidate the model follows against every other; with one, it is the answer. When no experiment separates them
   the result says INDISTINGUISHABLE and names no winner. The verdict is the chosen
   mechanism's card verdict; a failing card lists the claims that fail (where it falls short).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from circuits.explain.candidates import (MATCH_MIN, Scored, enumerate_candidates, match_claim, model_answers,
                                         source_edits)
from circuits.explain.compositions import compositions_of
from circuits.explain.localise import Located, locate, locate_composition
from circuits.explain.seeded import SeededExplanation, explain_seeded
from circuits.mechanisms import Comparison, MechanismCard, check_mechanism, compare_mechanisms
from circuits.mechanisms.leads import SweepMemo
from probes.controls import random_init_like
from interp_rand.display import Displayed


@dataclass(repr=False)
class Explanation(Displayed):
    """What :func:`explain` found."""

    task: str
    candidates: list[Scored]
    located: dict[str, Located]
    cards: dict[str, MechanismCard]
    comparison: Comparison | None
    winner: str | None
    seconds: float
    config: dict[str, Any] = field(default_factory=dict)
    composed: list[str] = field(default_factory=list)  # the chosen candidate's compositions (in located, cards)

    def _scrubbed(self, name: str) -> tuple[float, float]:
        """The ranking by scrubbing: whole outputs kept, then the log-prob share (best first)."""
        s = self.cards[name].scrubbing
        return (-s.scrubbed["accuracy"], -s.share["logprob"])

    def _best(self, names: list[str]) -> list[str]:
        """``names`` best first: a card that holds, then :meth:`_scrubbed`."""
        return sorted(names, key=lambda name: (self.cards[name].verdict != "holds", *self._scrubbed(name)))

    @property
    def ranked(self) -> list[str]:
        """The located candidates (not their compositions), best first by :meth:`_scrubbed`."""
        return sorted((n for n in self.cards if n not in self.composed), key=self._scrubbed)

    @property
    def fits(self) -> bool:
        """Some candidate reached the match bar."""
        return any(s.kept for s in self.candidates)

    @property
    def chosen(self) -> str | None:
        """The winner, or the only located candidate; ``None`` when the experiments could not
        separate two or more."""
        return self.winner or (self.ranked[0] if len(self.ranked) == 1 else None)

    @property
    def stated(self) -> str | None:
        """The mechanism the explanation states: of the chosen candidate and its compositions
        (the same answers through named intermediate steps), the one whose card holds, else
        the one whose scrub keeps the most whole outputs."""
        if self.chosen is None:
            return None
        return self._best([self.chosen] + self.composed)[0]

    @property
    def verdict(self) -> str:
        if self.chosen is None:
            return "indistinguishable"
        return self.cards[self.stated].verdict if self.fits else "fails"

    def headline(self) -> str:
        if self.chosen is None:
            return (f"INDISTINGUISHABLE: {', '.join(self.cards)} match the model and no experiment separates them "
                    f"({self.comparison.headline() if self.comparison else 'not compared'})")
        card, match = self.cards[self.stated], self._match(self.chosen)
        s = card.scrubbing
        text = (f"{self.verdict.upper()}: {self.stated} (match {match:.3f}, D-RASP's bar {MATCH_MIN}); treeified "
                f"scrubbing keeps whole outputs on {s.scrubbed['accuracy']:.3f}, log-prob share {s.share['logprob']:.3f}")
        if not self.fits:
            text = f"no candidate reaches match {MATCH_MIN}; best partial: " + text
        if self.comparison is not None and self.winner:
            text += f"; {self.comparison.headline()}"
        return text

    def _match(self, name: str) -> float:
        return next(s.match for s in self.candidates if s.candidate.name == name)

    def pseudocode(self) -> str:
        return self.located[self.stated].mechanism.pseudocode if self.chosen else ""

    def claims(self) -> list[Any]:
        """The chosen candidate's match (D-RASP's bar), then the stated mechanism's card's claims
        (none when the experiments chose none)."""
        if self.chosen is None:
            return []
        return [match_claim(self.chosen, self._match(self.chosen))] + self.cards[self.stated].claims

    def shortfall(self) -> list[str]:
        """The stated mechanism's claims that do not hold (where it falls short)."""
        if self.chosen is None:
            return []
        return [c.line() for c in self.cards[self.stated].claims if not c.verdict.holds]

    def lines(self) -> list[str]:
        out = [self.headline(), "", "algorithm:", self.pseudocode() or "(none chosen)", "",
               f"candidates ({len(self.candidates)}, match = share of output entries equal to the model's answer):"]
        out += ["  " + s.line() for s in self.candidates[:12]]
        if len(self.candidates) > 12:
            out.append(f"  ... {len(self.candidates) - 12} more below match {self.candidates[12].match:.3f}")
        for name in self.ranked:
            card = self.cards[name]
            s = card.scrubbing
            out.append(f"{name}: {card.verdict.upper()}; scrubbing whole outputs {s.scrubbed['accuracy']:.3f}, share "
                       f"{s.share['logprob']:.3f}; IIA " + ", ".join(f"{c.variable} {c.iia:.2f}" for c in card.interchange
                                                                   if c.n_pairs))
            out += ["    " + line for line in self.located[name].sweep_lines()]
        if self.composed:
            out.append(f"compositions of {self.chosen} (the same answers through named intermediate steps, each step's "
                       "site searched; each checked whole, the treeified scrub recomputing every step from its "
                       "parents' sites):")
            for name in self._best([self.chosen] + self.composed):
                card = self.cards[name]
                s = card.scrubbing
                out.append(f"  {name}: {card.verdict.upper()}; scrubbing whole outputs {s.scrubbed['accuracy']:.3f}, "
                           f"share {s.share['logprob']:.3f}; {len(card.failing())} of {len(card.claims)} claims fail"
                           + ("  <- stated" if name == self.stated else ""))
            for name in self.composed:
                out += [f"    {name} " + line for line in self.located[name].sweep_lines()]
        if self.comparison is not None:
            out += ["decisive experiments:"] + ["  " + line for line in self.comparison.lines()[1:-1]]
        short = self.shortfall()
        if short:
            out += ["where it falls short:"] + ["  " + line for line in short]
        out.append(f"{self.seconds:.0f} s")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "headline": self.headline(), "verdict": self.verdict, "chosen": self.chosen,
                "stated": self.stated, "composed": self.composed, "winner": self.winner, "pseudocode": self.pseudocode(),
                "candidates": [s.to_dict() for s in self.candidates],
                "located": {k: {"variables": v.mechanism.describe(), "sweeps": v.sweep_lines()}
                            for k, v in self.located.items()},
                "cards": {k: c.to_dict() for k, c in self.cards.items()},
                "comparison": None if self.comparison is None else self.comparison.to_dict(),
                "shortfall": self.shortfall(), "claims": [c.to_dict() for c in self.claims()],
                "seconds": self.seconds, "config": self.config}


def explain(model: Any, task: Any, *, n: int = 1000, seed: int = 0, families: list[str] | None = None,
            max_candidates: int = 3, n_pairs: int = 200, n_random: int = 5, compose: bool = True,
            declared: list | tuple = (), seed_source: str = "fresh", progress: Any = None
            ) -> Explanation | SeededExplanation:
    """Find the algorithm ``model`` runs on ``task`` (the module's rule): candidates from the
    primitive library (``families``: only those; default the task's own, else all), located by
    search, checked whole and separated by decisive experiments; then (``compose``) the chosen
    candidate's compositions located step by step and checked. ``progress(text)`` is told each
    step. A seeded task whose answers are not tokens (recall's bits, a colouring) goes to
    :func:`~circuits.explain.seeded.explain_seeded`: programs that read the seed or not, put to
    the seed experiment (``declared``: a flagship's programs, scored beside the library's;
    ``seed_source="fixed"``: a model trained at the task's one seed r0, scored there)."""
    start = time.perf_counter()
    if getattr(task, "loss_kind", "ce") != "ce":
        if families:
            raise ValueError(f"--families chooses among the token primitives; task {getattr(task, 'name', task)!r} "
                             f"answers with loss_kind {task.loss_kind!r} and is explained by its seed programs")
        return explain_seeded(model, task, n=n, seed=seed, declared=list(declared), n_pairs=n_pairs,
                              n_random=n_random, seed_source=seed_source, progress=progress)
    note = progress or (lambda text: None)
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    batch = task.sample(n, generator)
    note(f"scoring the primitive library's candidates on {n} inputs")
    scored = enumerate_candidates(model, task, batch, families, model_answers(model, batch))
    if not scored:
        raise ValueError(f"no primitive of the library applies to task {getattr(task, 'name', task)!r}")
    kept = [s for s in scored if s.kept][:max_candidates] or scored[:1]
    random_model = random_init_like(model, seed=seed + 1)
    memo = SweepMemo(model, random_model, batch)  # every sweep of the search: one recording, no sweep twice
    located, cards = {}, {}
    for s in kept:
        note(f"locating {s.candidate.name} (match {s.match:.3f}): a site sweep per output")
        found = locate(model, task, s.candidate, batch, n_pairs=n_pairs, seed=seed, random_model=random_model,
                       memo=memo)
        located[s.candidate.name] = found
        note(f"checking {s.candidate.name}: interchange, treeified scrubbing")
        cards[s.candidate.name] = check_mechanism(model, task, found.mechanism, n=n, seed=seed + 1, n_pairs=n_pairs,
                                                  n_random=n_random, random_model=random_model)
    comparison = None
    if len(located) >= 2:
        note(f"decisive experiments between {', '.join(located)}")
        comparison = compare_mechanisms(model, task, [v.mechanism for v in located.values()], n=n, seed=seed + 2,
                                        cards=False, edits=source_edits(task, batch))
    found = Explanation(getattr(task, "name", "task"), scored, located, cards, comparison,
                        comparison.winner if comparison is not None else None, 0.0,
                        {"n": n, "seed": seed, "families": families, "max_candidates": max_candidates,
                         "n_pairs": n_pairs, "n_random": n_random, "compose": compose})
    chosen = found.chosen
    if compose and chosen is not None and not located[chosen].candidate.reverse:
        for composition in compositions_of(located[chosen].candidate.primitive.name):
            note(f"locating {chosen} as {composition.name}: a site sweep per step")
            here = locate_composition(model, task, located[chosen].candidate, composition, batch, n_pairs=n_pairs,
                                      seed=seed, random_model=random_model, memo=memo)
            note(f"checking {here.name}: interchange per step, treeified scrubbing")
            located[here.name] = here
            cards[here.name] = check_mechanism(model, task, here.mechanism, n=n, seed=seed + 1, n_pairs=n_pairs,
                                               n_random=n_random, random_model=random_model)
            found.composed.append(here.name)
    found.seconds = time.perf_counter() - start
    return found


__all__ = ["Explanation", "explain"]
