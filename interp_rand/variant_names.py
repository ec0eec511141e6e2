"""The paper's variant names (``A^E_r0``, ``A^q_r0``, ``A^E_R``, ``A^q_R``, ``A^q_R (m=1)``) as
file names: one rule for the folders of ``interp-rand reproduce`` and ``gridworld compare`` and
the zoo's model names (``zoo:recall-Aq_R_m1``).

A foundation of the core (imports nothing of the toolkit): the grid world, the reproduction and
the zoo all name their runs by it.
"""

from __future__ import annotations


def file_label(variant: str) -> str:
    """The paper's variant name as a file name: ``"A^q_R (m=1)"`` -> ``"Aq_R_m1"``."""
    return variant.replace("^", "").replace(" ", "").replace("(", "_").replace(")", "").replace("=", "")


__all__ = ["file_label"]
