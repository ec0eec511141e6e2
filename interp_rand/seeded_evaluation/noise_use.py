"""Where a colouring model uses its noise, and whether that is where a noise-free model fails.

Symmetry breaking needs randomness only where the ids cannot break the symmetry. A randomized
model (``A^q_R``) should therefore let its noise decide a vertex's colour on some vertices and
not others; an ERM model that ignores its noise colours every cycle by the ids alone and must
fail somewhere. :func:`noise_use` measures both on the same cycles:

- a vertex is **noise-decided** for the randomized model when its colour changes between
  ``n_noise`` fresh noise draws on the same cycle;
- a vertex is **in conflict** for the noise-free model when its colour equals a neighbour's.

It reports how often the randomized model's noise decides a vertex where the noise-free model
is in conflict, against where it is not (the hypothesis: far more often), and the reverse
conditional; per id class (``classes``, e.g. the rule's four), the share of noise-decided
vertices and of conflicts. Every number is a share of vertices in [0, 1] (NaN over an empty
set).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from interp_rand.display import Displayed


@dataclass(repr=False)
class NoiseUse(Displayed):
    """What :func:`noise_use` measured (module docstring)."""

    n_cycles: int
    n_noise: int
    decided: float
    conflict: float
    decided_where_conflict: float
    decided_elsewhere: float
    conflict_where_decided: float
    conflict_elsewhere: float
    per_class: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        out = [f"{self.n_cycles} cycles x {self.n_noise} noise draws: the noise decides {self.decided:.3f} of the "
               f"randomized model's vertices; the noise-free model is in conflict at {self.conflict:.3f}",
               f"where the noise-free model is in conflict, the randomized model's noise decides "
               f"{self.decided_where_conflict:.3f} of vertices (elsewhere {self.decided_elsewhere:.3f}); where the "
               f"noise decides, the noise-free model is in conflict at {self.conflict_where_decided:.3f} "
               f"(elsewhere {self.conflict_elsewhere:.3f})"]
        out += [f"  id class {name}: noise-decided {row['decided']:.3f}, noise-free conflicts {row['conflict']:.3f} "
                f"({row['share']:.2f} of vertices)" for name, row in self.per_class.items()]
        return out


def _share(mask: Tensor, where: Tensor) -> float:
    return float(mask[where].float().mean()) if bool(where.any()) else float("nan")


@torch.no_grad()
def noise_use(randomized: Any, noise_free: Any, task: Any, *, n_cycles: int = 4000, n_noise: int = 16,
              seed: int = 0, classes: Tensor | None = None, class_names: tuple[str, ...] = ()) -> NoiseUse:
    """The randomized model's noise-decided vertices against the noise-free model's conflicts on
    ``n_cycles`` random cycles (``classes``: ``[N]`` the id class of each vertex id, named by
    ``class_names``)."""
    from interp_rand.seeded_evaluation.forward import logits_of
    from interp_rand.tasks.coloring import coloring_correct

    generator = torch.Generator().manual_seed(seed)
    cycles = task.sample(n_cycles, generator)
    colours = torch.stack([logits_of(randomized, task.with_seeds(cycles, task.sample_seeds(n_cycles, generator)))
                           .argmax(-1) for _ in range(n_noise)])  # [K, n, N]
    decided = (colours != colours[:1]).any(0)  # [n, N]
    plain = logits_of(noise_free, task.with_seeds(cycles, task.sample_seeds(n_cycles, generator)))
    conflict = ~coloring_correct(plain, cycles)  # the task's own judge: a neighbour has the same colour
    every = torch.ones_like(decided)
    per_class: dict[str, dict[str, float]] = {}
    if classes is not None:
        vertex_class = classes[torch.arange(decided.shape[1])].expand_as(decided)
        for c, name in enumerate(class_names or [str(c) for c in range(int(classes.max()) + 1)]):
            where = vertex_class == c
            per_class[name] = {"decided": _share(decided, where), "conflict": _share(conflict, where),
                               "share": float(where.float().mean())}
    return NoiseUse(n_cycles, n_noise, _share(decided, every), _share(conflict, every),
                    _share(decided, conflict), _share(decided, ~conflict), _share(conflict, decided),
                    _share(conflict, ~decided), per_class)


__all__ = ["NoiseUse", "noise_use"]
