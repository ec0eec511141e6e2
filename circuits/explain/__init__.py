"""``explain``: the toolkit finds the algorithm a model runs, with no hand-written hypothesis.

Candidates are built from a library of primitives (:mod:`circuits.explain.primitives`), kept
when they agree with the model (:mod:`circuits.explain.candidates`), located by a site search
(:mod:`circuits.explain.localise`), checked whole and separated by decisive experiments
(:mod:`circuits.explain.search`)::

    >>> from circuits.explain import explain
    >>> found = explain(model, task)            # any model speaking the TL hook names, any sort-like task
    >>> print("\\n".join(found.lines()))         # the verdict, the algorithm, candidates, experiments

Layer: above :mod:`circuits.mechanisms` (it builds and checks mechanisms), below :mod:`circuits.draw`.
"""

from circuits.explain.candidates import MATCH_MIN, Candidate, Scored, enumerate_candidates
from circuits.explain.localise import Located, locate, pseudocode
from circuits.explain.primitives import PRIMITIVES, Frame, Primitive, families, primitives_of, register_primitive
from circuits.explain.search import Explanation, explain

__all__ = ["Candidate", "Explanation", "Frame", "Located", "MATCH_MIN", "PRIMITIVES", "Primitive", "Scored",
           "enumerate_candidates", "explain", "families", "locate", "primitives_of", "pseudocode",
           "register_primitive"]
