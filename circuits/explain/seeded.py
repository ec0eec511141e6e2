"""``explain`` on a seeded task: which program, reading the seed or not, the model runs.

A randomized model answers from its input and its seed; the question that sets it apart from a
deterministic one is *how its answer moves with the seed*. The rule, stated before any number:

1. **Programs** (:mod:`circuits.explain.seed_programs`: the library's for the task, and those a
   flagship declares) are scored against the model's own answers on ``n`` inputs under their
   seeds: match (per answer entry; D-RASP's bar 0.9 keeps a program), exact (whole inputs) and
   task accuracy. A program whose answers are names (colours) is scored under the relabelling
   of its colours that agrees best (fixed then, and used below).
2. **The seed experiment** (:func:`seed_following`), the decisive one between a program that
   reads the seed and its rival that does not: the same inputs under a fresh seed ``s'``. Where
   the model's answer moved (``M(x, s') != M(x, s)``), does the program give the model's new
   answer (``P(C(x, s') = M(x, s') | moved)``, *follows*)? Its control is the program under a
   third, unrelated seed ``s''`` (``P(C(x, s'') = M(x, s') | moved)``): what it gets without
   tracking the seed. A program *follows the seed* when follows exceeds its control by
   :data:`FOLLOW_MARGIN` on at least :data:`MIN_MOVED` moved entries; a program that ignores the
   seed scores exactly its control, so it never does.
3. **Choice.** The model *uses its seed* when its answer moves on at least
   :data:`USES_SEED` of entries (and on :data:`MIN_MOVED`). Then a program must follow the seed
   to explain it; otherwise any kept program may. The chosen program is the best match among
   those eligible and kept; where it is also stated with sites (a flagship's declaration) its
   card (:func:`~circuits.mechanisms.check_mechanism`) is checked, and the verdict is the card's.
   Where none is eligible, the best partial program is named (the best match among the
   seed-followers when the model uses its seed, else overall) with where it falls short;
   never a threshold fitted to pass.
4. **Where the seed acts**: seed-resample patching of every node
   (:func:`~circuits.analyses.randomness.randomness_usage`), the nodes whose patch carries the
   most of the whole seed resample's effect, so that the program's seed steps have components.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from circuits.analyses.randomness import answers, randomness_usage
from circuits.explain.candidates import MATCH_MIN, match_claim
from circuits.explain.seed_programs import SeedProgram, seed_programs_of
from circuits.graph.architecture import run_model
from interp_rand.display import Displayed
from interp_rand.verdicts import Claim, exceeds

FOLLOW_MARGIN = 0.1  # follows must exceed its third-seed control by this
MIN_MOVED = 20  # moved entries needed to measure following at all
# The model's answer moves with the seed on at least this share of entries: it uses its seed. A model trained
# without seed use still moves at its borderline inputs (the zoo's ERM twins: 0.001 colouring, 0.009 recall;
# their randomized models 0.21 and 0.30): below this, a program need not follow the seed.
USES_SEED = 0.05
ROUTE_EXAMPLES = 256  # inputs of the seed-resample patching
ROUTE_TOP = 4  # nodes named in the route
SEED_SOURCES = ("fresh", "fixed")  # a model trained on fresh seeds, or at the task's one seed r0


@dataclass(frozen=True)
class ProgramScore:
    """One program against the model: match, and the seed experiment."""

    program: SeedProgram
    match: float
    exact: float
    task_accuracy: float
    relabelling: list[int] | None
    moves: float  # P(the program's answer changes when the seed is redrawn)
    follows: float | None  # P(C(x, s') = M(x, s') | the model's answer moved); None: nothing moved
    control: float | None  # P(C(x, s'') = M(x, s') | moved)
    n_moved: int

    @property
    def kept(self) -> bool:
        return self.match >= MATCH_MIN

    @property
    def follows_seed(self) -> bool:
        return self.seed_claim().verdict.holds

    def match_claim(self) -> Claim:
        return match_claim(self.program.name, self.match)

    def seed_claim(self) -> Claim:
        """Where a fresh seed moved the model's answer, the program gives the new one, beyond
        itself under an unrelated seed (module docstring, step 2)."""
        few = (f"only {self.n_moved} moved entries (< {MIN_MOVED}): nothing to follow"
               if self.n_moved < MIN_MOVED else "")
        return exceeds(f"{self.program.name} gives the model's new answer where a fresh seed moved it",
                       None if few else self.follows, self.control, control_label="the program under an unrelated seed",
                       margin=FOLLOW_MARGIN, ratio=1.0, unavailable=few)

    def seed_line(self) -> str:
        if self.follows is None:
            return "the model's answer never moved: nothing to follow"
        verdict = "follows the seed" if self.follows_seed else "does not follow the seed"
        return (f"{verdict}: gives the model's new answer on {self.follows:.3f} of {self.n_moved} moved entries "
                f"(under an unrelated seed {self.control:.3f}); its own answer moves on {self.moves:.3f}")

    def line(self) -> str:
        seed = "reads seed" if self.program.reads_seed else "no seed   "
        follows = "-" if self.follows is None else f"{self.follows:.3f}/{self.control:.3f}"
        return (f"{self.program.name:<30} {seed} match {self.match:.3f}  exact {self.exact:.3f}  task "
                f"{self.task_accuracy:.3f}  follows/control {follows}  {'kept' if self.kept else '-'}")

    def to_dict(self) -> dict[str, Any]:
        p = self.program
        return {"program": p.name, "reads_seed": p.reads_seed, "source": p.source, "description": p.description,
                "rival_of": p.rival_of, "match": self.match, "exact": self.exact, "task_accuracy": self.task_accuracy,
                "relabelling": self.relabelling, "moves": self.moves, "follows": self.follows, "control": self.control,
                "n_moved": self.n_moved, "kept": self.kept, "follows_seed": self.follows_seed}


def _relabelled(answers_: Tensor, relabelling: list[int] | None) -> Tensor:
    return answers_ if relabelling is None else torch.tensor(relabelling)[answers_]


def _best_relabelling(model_answers: Tensor, program_answers: Tensor, n_labels: int) -> list[int]:
    from interp_rand.seeded_evaluation.symmetry_rule import best_relabelling

    return best_relabelling(model_answers, program_answers, n_labels)[1]


def _task_correct(task: Any, batch: Any, ids: Tensor) -> Tensor:
    """``[batch, K]`` bool: the answer ids right for the task, by its loss kind: the target's id,
    or, for a kind judged without one target (a colouring), its own ``correct`` of the ids as
    one-hot logits."""
    from interp_rand.losses import get_loss_kind

    kind = get_loss_kind(task.loss_kind)
    target = kind.target_ids(batch)
    if target is not None:
        return ids == target
    return kind.correct(torch.nn.functional.one_hot(ids, int(ids.max()) + 1).float(), batch)


@torch.no_grad()
def model_ids(model: Any, task: Any, batch: Any) -> Tensor:
    """``[batch, K]`` the model's decoded answers (argmax class, or packed bits)."""
    return answers(run_model(model, batch), batch.answer_positions, task.loss_kind)


@torch.no_grad()
def seed_following(model: Any, task: Any, program: SeedProgram, batch: Any, generator: torch.Generator,
                   model_answers: Tensor | None = None, redrawn: tuple[Any, Any, Tensor] | None = None) -> ProgramScore:
    """Score ``program`` on ``batch`` and put it to the seed experiment (module docstring).
    ``redrawn``: ``(batch under s', batch under s'', the model's answers under s')``, shared by
    every program of one search (drawn from ``generator`` when absent)."""
    model_answers = model_ids(model, task, batch) if model_answers is None else model_answers
    if redrawn is None:
        redrawn = redraw(model, task, batch, generator)
    second, third, moved_answers = redrawn
    own = program.compute(batch, task).long()
    relabelling = (_best_relabelling(model_answers, own, int(getattr(task, "n_colors", 3)))
                   if program.relabel else None)
    own = _relabelled(own, relabelling)
    same = own == model_answers
    after = _relabelled(program.compute(second, task).long(), relabelling)
    unrelated = _relabelled(program.compute(third, task).long(), relabelling)
    moved = moved_answers != model_answers
    n_moved = int(moved.sum())
    follows = float((after == moved_answers)[moved].float().mean()) if n_moved else None
    control = float((unrelated == moved_answers)[moved].float().mean()) if n_moved else None
    return ProgramScore(program, float(same.float().mean()), float(same.all(1).float().mean()),
                        float(_task_correct(task, batch, own).float().mean()), relabelling,
                        float((after != own).float().mean()), follows, control, n_moved)


def redraw(model: Any, task: Any, batch: Any, generator: torch.Generator) -> tuple[Any, Any, Tensor]:
    """``batch`` under a fresh seed ``s'`` and under another ``s''``, and the model's answers under ``s'``."""
    second = task.with_seeds(batch, task.sample_seeds(len(batch), generator))
    third = task.with_seeds(batch, task.sample_seeds(len(batch), generator))
    return second, third, model_ids(model, task, second)


@dataclass(repr=False)
class SeededExplanation(Displayed):
    """What :func:`explain_seeded` found."""

    task: str
    scores: list[ProgramScore]
    model_moves: float  # P(the model's answer changes when the seed is redrawn), per entry
    n_moved: int
    route: list[tuple[str, float]]  # (node, share of the whole seed resample's effect), largest first
    route_reference: float  # the whole seed resample's mean total variation
    cards: dict[str, Any]  # program name -> MechanismCard (declared programs with sites)
    seconds: float
    mechanisms: dict[str, Any] = field(default_factory=dict)  # program name -> the Mechanism its card checked
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_seed(self) -> bool:
        return self.model_moves >= USES_SEED and self.n_moved >= MIN_MOVED

    def eligible(self, score: ProgramScore) -> bool:
        return score.kept and (score.follows_seed or not self.uses_seed)

    @property
    def fits(self) -> bool:
        return any(self.eligible(s) for s in self.scores)

    @property
    def chosen(self) -> str | None:
        """The best match among the eligible programs; else the best partial one (the best
        seed-follower when the model uses its seed, else the best match)."""
        eligible = [s for s in self.scores if self.eligible(s)]
        if eligible:
            return eligible[0].program.name
        followers = [s for s in self.scores if s.follows_seed] if self.uses_seed else []
        pool = followers or self.scores
        return pool[0].program.name if pool else None

    stated = chosen  # the report's name for it

    def score(self, name: str) -> ProgramScore:
        return next(s for s in self.scores if s.program.name == name)

    @property
    def verdict(self) -> str:
        if not self.fits:
            return "fails"
        card = self.cards.get(self.chosen)
        return card.verdict if card is not None else "holds"

    def seed_sentence(self) -> str:
        if self.config.get("seed_source") == "fixed":
            return ("a fixed-seed model (trained at the task's one seed r0): scored at r0, the seed never redrawn, "
                    "so a program need not read it")
        if not self.uses_seed:
            return (f"the model's answer moves with the seed on {self.model_moves:.3f} of entries "
                    f"({self.n_moved} of them): it does not use its seed, and a program need not read it")
        return (f"the model's answer moves with the seed on {self.model_moves:.3f} of entries ({self.n_moved}): a "
                "program must follow it")

    def headline(self) -> str:
        if self.chosen is None:
            return "no program of the library applies"
        s = self.score(self.chosen)
        text = (f"{self.verdict.upper()}: {s.program.name} (match {s.match:.3f}, D-RASP's bar {MATCH_MIN}; "
                f"{'reads the seed' if s.program.reads_seed else 'reads no seed'}); {self.seed_sentence()}")
        if self.uses_seed:
            text += f"; it {s.seed_line()}"
        if not self.fits:
            lack = "both matches the model and follows its seed as it does" if self.uses_seed else \
                f"matches the model (bar {MATCH_MIN})"
            text = f"no program {lack}; best partial: " + text
        return text

    def rejected(self) -> list[str]:
        """Each other program and the experiment that rejected it."""
        out = []
        for s in self.scores:
            if s.program.name == self.chosen:
                continue
            why = []
            if not s.kept:
                why.append(f"match {s.match:.3f} < {MATCH_MIN}")
            if self.uses_seed and not s.follows_seed:
                why.append("reads no seed, so it " + s.seed_line() if not s.program.reads_seed else s.seed_line())
            if not why:
                why.append(f"matches less ({s.match:.3f})")
            out.append(f"{s.program.name}: " + "; ".join(why))
        return out

    def claims(self) -> list[Claim]:
        """The chosen program's claims: its match, the seed experiment (when the model uses its
        seed), and its card's where it has one."""
        if self.chosen is None:
            return []
        s = self.score(self.chosen)
        card = self.cards.get(self.chosen)
        return [s.match_claim()] + ([s.seed_claim()] if self.uses_seed else []) + (card.claims if card else [])

    def shortfall(self) -> list[str]:
        if self.chosen is None:
            return []
        s = self.score(self.chosen)
        out = []
        if not s.kept:
            out.append(f"match {s.match:.3f} < {MATCH_MIN}: the program is the model on {s.exact:.3f} of whole inputs")
        if self.uses_seed and not s.follows_seed:
            out.append(s.seed_line())
        card = self.cards.get(self.chosen)
        if card is not None:
            out += [c.line() for c in card.failing()]
        return out

    def route_line(self) -> str:
        if not self.route:
            return "where the seed acts: (not measured)"
        return ("where the seed acts (seed-resample patching of one node at a time, share of the whole resample's "
                f"effect, TV {self.route_reference:.3f}): " + ", ".join(f"{n} {v:.2f}" for n, v in self.route))

    def pseudocode(self) -> str:
        if self.chosen is None:
            return ""
        return self.score(self.chosen).program.code() + "\n# " + self.route_line()

    def lines(self) -> list[str]:
        out = [self.headline(), "", "algorithm:", self.pseudocode() or "(none)", "",
               f"programs ({len(self.scores)}; match = share of answer entries equal to the model's; follows/control = "
               "the seed experiment):"]
        out += ["  " + s.line() for s in self.scores]
        out += ["rivals and the experiments that rejected them:"] + ["  " + line for line in self.rejected()]
        for name, card in self.cards.items():
            out.append(f"{name}'s card: {card.headline()}")
        short = self.shortfall()
        if short:
            out += ["where it falls short:"] + ["  " + line for line in short]
        out.append(f"{self.seconds:.0f} s")
        return out

    def bars(self) -> list[tuple[str, float | str | None]]:
        """Rows for a bar chart: each program's match, then the seed experiment (follows beside its control)."""
        rows: list[tuple[str, float | str | None]] = [("match with the model (bar 0.9)", "")]
        rows += [(s.program.name, s.match) for s in self.scores[:5]]
        if self.n_moved:
            rows.append((f"the seed experiment: the model's new answer, {self.n_moved} moved entries", ""))
            for s in self.scores[:4]:
                rows += [(f"{s.program.name} under s'", s.follows), ("  under an unrelated seed", s.control)]
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "kind": "seeded", "headline": self.headline(), "verdict": self.verdict,
                "chosen": self.chosen, "stated": self.chosen, "pseudocode": self.pseudocode(),
                "uses_seed": self.uses_seed, "model_moves": self.model_moves, "n_moved": self.n_moved,
                "programs": [s.to_dict() for s in self.scores], "rejected": self.rejected(),
                "route": [{"node": n, "share": v} for n, v in self.route], "route_reference": self.route_reference,
                "cards": {k: c.to_dict() for k, c in self.cards.items()}, "shortfall": self.shortfall(),
                "claims": [c.to_dict() for c in self.claims()],
                "seconds": self.seconds, "config": self.config}


def seed_route(model: Any, task: Any, batch: Any, seed: int) -> tuple[list[tuple[str, float]], float]:
    """The nodes through which the seed acts (module docstring, step 4): ``([(node, share)], reference)``."""
    usage = randomness_usage(model, batch[torch.arange(min(ROUTE_EXAMPLES, len(batch)))], task.loss_kind,
                             n_resamples=1, seed=seed)
    # the seed's own node is the whole resample (share 1 by construction): the route starts after it
    shares = [(name, share) for name, share in usage.share.items() if share is not None and name != "seed"]
    shares.sort(key=lambda item: -item[1])
    return shares[:ROUTE_TOP], usage.reference


def explain_seeded(model: Any, task: Any, *, n: int = 1000, seed: int = 0, declared: list[SeedProgram] = (),
                   n_pairs: int = 200, n_random: int = 5, route: bool = True, seed_source: str = "fresh",
                   progress: Any = None) -> SeededExplanation:
    """The module's rule on ``model`` and seeded ``task`` (``declared``: a flagship's programs,
    scored beside the library's; ``route=False``: skip step 4, for a model without the toolkit's
    hooks). ``seed_source="fixed"``: a deterministic variant trained at the task's one seed
    ``r0``: the programs are scored at ``r0`` and the seed is never redrawn (another seed is
    outside what the model was trained on), so there is no seed experiment and no seed route."""
    if seed_source not in SEED_SOURCES:
        raise ValueError(f"seed_source={seed_source!r} is not allowed; choose from {SEED_SOURCES}")
    from circuits.mechanisms import check_mechanism

    start = time.perf_counter()
    note = progress or (lambda text: None)
    programs = seed_programs_of(task, declared)
    if not programs:
        raise ValueError(f"no seed program of the library applies to task {getattr(task, 'name', task)!r}; "
                         "register one with circuits.explain.seed_programs.register_seed_program")
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    batch = task.sample(n, generator)
    fixed = seed_source == "fixed"
    if fixed:  # every example at r0; "redrawn" to r0 again, so nothing moves and no program is asked to follow
        r0 = task.fixed_seed()
        batch = task.with_seeds(batch, r0.expand(len(batch), *r0.shape))
    mine = model_ids(model, task, batch)
    redrawn = (batch, batch, mine) if fixed else redraw(model, task, batch, generator)
    moved = redrawn[2] != mine
    note(f"scoring {len(programs)} programs and the seed experiment on {n} inputs")
    scores = [seed_following(model, task, p, batch, generator, mine, redrawn) for p in programs]
    scores.sort(key=lambda s: (-s.match, -s.exact, s.program.name))
    nodes, reference = [], 0.0
    if route and not fixed:
        note("seed-resample patching of every node: where the seed acts")
        nodes, reference = seed_route(model, task, batch, seed)
    found = SeededExplanation(getattr(task, "name", "task"), scores, float(moved.float().mean()), int(moved.sum()),
                              nodes, reference, cards={}, seconds=0.0,
                              config={"n": n, "seed": seed, "n_pairs": n_pairs, "n_random": n_random,
                                      "seed_source": seed_source})
    chosen = found.chosen
    program = found.score(chosen).program if chosen else None
    if program is not None and program.mechanism is not None:
        note(f"checking {chosen}'s card: interchange, treeified scrubbing")
        found.mechanisms[chosen] = program.mechanism(task)
        found.cards[chosen] = check_mechanism(model, task, found.mechanisms[chosen], n=n, seed=seed + 1,
                                              n_pairs=n_pairs, n_random=n_random)
    found.seconds = time.perf_counter() - start
    return found


__all__ = ["FOLLOW_MARGIN", "MIN_MOVED", "ProgramScore", "SeededExplanation", "USES_SEED", "explain_seeded",
           "redraw", "seed_following", "seed_route"]
