"""Circuits: hooks → ablation → patching → discovery → graph → layout → draw, compare.

Not built yet (see the project's circuits issue). It will import ``interp_rand``'s core and work
on any model that speaks the TransformerLens hook-name protocol.
"""

__all__: list[str] = []
