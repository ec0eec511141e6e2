"""``explain``: the toolkit finds the algorithm a model runs, with no hand-written hypothesis.

Candidates are built from a library of primitives (:mod:`circuits.explain.primitives`), kept
when they agree with the model (:mod:`circuits.explain.candidates`), located by a site search
(:mod:`circuits.explain.localise`), checked whole and separated by decisive experiments
(:mod:`circuits.explain.search`). A seeded task (recall's bits, a colouring) is explained by
programs that read the seed or ignore it (:mod:`circuits.explain.seed_programs`), chosen by the
seed experiment: does the program's answer move with the seed as the model's does
(:mod:`circuits.explain.seeded`)::

    >>> from circuits.explain import explain
    >>> found = explain(model, task)            # any model speaking the TL hook names, any sort-like task
    >>> print("\\n".join(found.lines()))         # the verdict, the algorithm, candidates, experiments

Layer: above :mod:`circuits.mechanisms` (it builds and checks mechanisms), below :mod:`circuits.draw`.
"""

from circuits.explain.candidates import MATCH_MIN, Candidate, Scored, enumerate_candidates
from circuits.explain.localise import Located, locate, pseudocode
from circuits.explain.primitives import PRIMITIVES, Frame, Primitive, families, primitives_of, register_primitive
from circuits.explain.search import Explanation, explain
from circuits.explain.seed_programs import SEED_PROGRAMS, SeedProgram, register_seed_program
from circuits.explain.seeded import ProgramScore, SeededExplanation, explain_seeded

__all__ = ["Candidate", "Explanation", "Frame", "Located", "MATCH_MIN", "PRIMITIVES", "Primitive", "ProgramScore",
           "SEED_PROGRAMS", "Scored", "SeedProgram", "SeededExplanation", "enumerate_candidates", "explain",
           "explain_seeded", "families", "locate", "primitives_of", "pseudocode", "register_primitive",
           "register_seed_program"]
