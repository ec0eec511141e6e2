"""Defaults shared across the toolkit, one owner each."""

from __future__ import annotations

# The seed of the data a command samples when the user names none (``--seed`` of
# ``interp-rand eval``, ``circuit``, ``compare`` and ``randomness``) and of the zoo's
# fresh evaluation inputs (``interp_rand.zoo.build``). Other seeds of the toolkit (a
# reproduction's evaluation seed, the demo's) are their own facts, named where they are used.
DEFAULT_SEED = 20_261_130

__all__ = ["DEFAULT_SEED"]
