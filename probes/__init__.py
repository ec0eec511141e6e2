"""Probes: activations → linear probes with controls, captum attribution, attention analysis.

Not built yet (see the project's probes issue). It will import ``interp_rand``'s core and work
on any model that speaks the TransformerLens hook-name protocol.
"""

__all__: list[str] = []
