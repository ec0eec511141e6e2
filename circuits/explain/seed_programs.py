"""Programs for seeded tasks: named algorithms that read the seed, and their rivals that do not.

A randomized model ``A(x, r)`` answers from its input ``x`` *and* its seed ``r``. A
:class:`SeedProgram` is a candidate algorithm for such a model, stated as plain code on a batch
(inputs and seeds): ``compute(batch, task) -> [batch, K]`` answer ids in the task's decoding
(:func:`circuits.analyses.randomness.answers`: colour ids per vertex; recall's value bits
packed most significant first). ``reads_seed`` says whether its answer can move with the seed;
each program that reads it has a rival of the same shape that does not (the same steps with the
seed replaced by something fixed), so the decisive experiment of :mod:`circuits.explain.seeded`
(does the program's answer move with the seed the way the model's does?) always has a real
rival to reject.

The library (``task`` is the task's registered name):

- ``coloring``: a *seed-chosen priority* (each vertex's noise) broken two ways, the classical
  local-extremum round (:func:`~interp_rand.seeded_evaluation.symmetry_rule.classical_coloring`)
  and a two-round greedy by priority (``c_v = the smallest colour no higher-priority neighbour
  took``, iterated twice: what two message-passing blocks can compute); the same two with the
  vertex ids as the priority (the textbook deterministic way to break symmetry with unique ids);
  and a colour drawn from the noise alone (no coordination). Colours are names: these programs
  are scored up to the best relabelling of their colours (``relabel``; 3! of them for 3 colours).
- ``recall``: ``lookup`` (the queried key's value: the task's own answer, no seed); a
  *seed-chosen hash*, the associative memory with random key codes: each key gets a ``m``-dim
  +-1 code hashed from (seed, key), the answer bit is the sign of ``sum_j <code(q), code(k_j)>
  (2 v_j - 1)`` over the stored pairs, so recall fails where other keys' codes overturn the
  query's (``m`` = 8, 16, 32, 64, each a program); and the same memory with codes hashed from a
  fixed seed (fails as often, never moves with the seed).

A flagship module declares its own algorithm as programs (``seed_programs(task)``,
:mod:`interp_rand.reports.mechanisms`); ``explain`` scores them beside the library's.

A user adds one in a few lines::

    register_seed_program("coloring", "noise_parity", "colour = 2 if the noise's first decimal is odd, else 0",
                          reads_seed=True)(lambda batch, task: 2 * ((batch.seeds[..., 0] * 10).long() % 2))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from interp_rand.registry import Registry
from interp_rand.seeded_evaluation.symmetry_rule import classical_coloring
from interp_rand.tasks.coloring import neighbours

CODE_WIDTHS = (8, 16, 32, 64)  # recall's code-memory programs, one per width (enumerated, not fitted)
FIXED_CODE_SEED = 0  # the seed the fixed-code rival hashes its codes from


@dataclass(frozen=True)
class SeedProgram:
    """A candidate algorithm for a seeded task.

    Attributes:
        task: the task name it applies to (``coloring``, ``recall``).
        name: its name.
        description: what it computes, one line.
        compute: ``(batch, task) -> [batch, K]`` long answer ids (the task's decoding).
        reads_seed: its answer can move with the seed (a program that ignores the seed cannot).
        pseudocode: the algorithm in a few lines (``description`` when empty).
        relabel: its answers are names (colours): scored up to the best relabelling.
        rival_of: the seed-reading program it is the seed-free version of, if any.
        source: ``library``, or the module that declared it.
        mechanism: ``task -> Mechanism`` where the program is also stated with sites (a
            flagship's declaration); explain checks its card.
        applies: ``task -> None`` or why it does not apply to that task's shape.
    """

    task: str
    name: str
    description: str
    compute: Callable[[Any, Any], Tensor]
    reads_seed: bool
    pseudocode: str = ""
    relabel: bool = False
    rival_of: str | None = None
    source: str = "library"
    mechanism: Callable[[Any], Any] | None = None
    applies: Callable[[Any], str | None] = lambda task: None

    def code(self) -> str:
        return self.pseudocode or self.description


SEED_PROGRAMS: Registry[SeedProgram] = Registry("seed program")


def register_seed_program(task: str, name: str, description: str, *, reads_seed: bool, pseudocode: str = "",
                          relabel: bool = False, rival_of: str | None = None):
    """Decorator: register ``fn(batch, task) -> [batch, K]`` as program ``name`` for ``task``
    (``relabel``: its answers are names, e.g. colours, scored up to the best relabelling)."""

    def add(fn: Callable[[Any, Any], Tensor]) -> Callable[[Any, Any], Tensor]:
        program = SeedProgram(task, name, description, fn, reads_seed, pseudocode, relabel, rival_of)
        SEED_PROGRAMS.register(f"{task}/{name}", program, description=description)
        return fn

    return add


def seed_programs_of(task: Any, declared: list[SeedProgram] = ()) -> list[SeedProgram]:
    """The library's programs for ``task`` (by its name) that apply to its shape, then ``declared``
    ones (a flagship's) that apply."""
    name = getattr(task, "name", None)
    found = [SEED_PROGRAMS.get(n) for n in SEED_PROGRAMS.names() if SEED_PROGRAMS.get(n).task == name]
    return [p for p in found + list(declared) if p.applies(task) is None]


# ---------------------------------------------------------------------- colouring


def _ids(batch: Any) -> Tensor:
    """``[batch, N]`` float: each vertex's id as a priority (the seed-free rival's)."""
    n, N = batch.seeds.shape[:2]
    return torch.arange(N, dtype=torch.float32).expand(n, N)


# One round by priority (the classical routine the randomness report compares with): a local
# maximum takes colour 0, a local minimum 1, the rest 2; ``local_extremum(priority, nbrs)``.
local_extremum = classical_coloring


def greedy_rounds(priority: Tensor, nbrs: Tensor, rounds: int = 2, n_colors: int = 3) -> Tensor:
    """``rounds`` rounds of greedy colouring by priority: every vertex starts at colour 0, then
    each round ``c_v = the smallest colour no higher-priority neighbour holds`` (all vertices at
    once). After as many rounds as the longest decreasing chain it is the sequential greedy
    colouring; two rounds are what two message-passing blocks compute."""
    colour = torch.zeros_like(nbrs[..., 0])
    nbr_priority = priority.gather(1, nbrs.flatten(1)).view_as(nbrs)
    higher = nbr_priority > priority[..., None]  # [b, N, 2]
    for _ in range(rounds):
        held = colour.gather(1, nbrs.flatten(1)).view_as(nbrs)
        taken = (torch.nn.functional.one_hot(held, n_colors).bool() & higher[..., None]).any(-2)  # [b, N, colours]
        colour = (~taken).float().argmax(-1)  # the smallest free colour (two neighbours leave one of 3)
    return colour


_PRIORITY_NOTE = {"noise": "p_v = v's noise (the seed)", "id": "p_v = v's id (no seed)"}


def _register_coloring() -> None:
    for source, reads in (("noise", True), ("id", False)):
        def priority(batch: Any, source=source) -> Tensor:
            return batch.seeds[..., 0] if source == "noise" else _ids(batch)

        def named(base: str) -> dict[str, Any]:  # a seed-free version rivals the seed-reading one
            return {"reads_seed": reads, "relabel": True, "rival_of": None if reads else base}

        suffix = "" if reads else "_ids"
        register_seed_program(
            "coloring", "local_extremum" + suffix, f"one round by priority ({_PRIORITY_NOTE[source]}): a local "
            "maximum takes colour 0, a local minimum 1, every other vertex 2", **named("local_extremum"),
            pseudocode=f"{_PRIORITY_NOTE[source]}\ncolour_v = 0 if p_v > both neighbours' p, 1 if below both, else 2",
        )(lambda batch, task, priority=priority: local_extremum(priority(batch), neighbours(batch)))
        register_seed_program(
            "coloring", "greedy_by_priority" + suffix, f"two rounds of greedy colouring by priority "
            f"({_PRIORITY_NOTE[source]})", **named("greedy_by_priority"),
            pseudocode=f"{_PRIORITY_NOTE[source]}; c_v = 0 for every v\nrepeat twice, at every vertex at once:\n"
                       "    c_v = the smallest colour no neighbour u with p_u > p_v holds",
        )(lambda batch, task, priority=priority: greedy_rounds(priority(batch), neighbours(batch), 2,
                                                                int(getattr(task, "n_colors", 3))))

    @register_seed_program("coloring", "noise_colour", "colour_v = floor(n_colors * noise_v): each vertex draws "
                           "its colour from its noise, no coordination", reads_seed=True, relabel=True)
    def _noise_colour(batch: Any, task: Any) -> Tensor:
        k = int(getattr(task, "n_colors", 3))
        return (batch.seeds[..., 0] * k).long().clamp(0, k - 1)


# ---------------------------------------------------------------------- recall

_MASK32 = 0xFFFFFFFF


def _mix32(x: Tensor) -> Tensor:
    """MurmurHash3's 32-bit finaliser on the low 32 bits of ``x`` (int64; the products wrap,
    their low 32 bits are exact)."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * 0x85EBCA6B) & _MASK32
    x = x ^ (x >> 13)
    x = (x * 0xC2B2AE35) & _MASK32
    return x ^ (x >> 16)


def hashed_codes(seed_ids: Tensor, keys: Tensor, width: int) -> Tensor:
    """``[..., width]`` +-1 float: a code per (seed id, key), hashed (no table, any seed width):
    bit ``j`` is the top bit of MurmurHash3's finaliser of ``mix(seed) + key * 65_537 + j * 977``."""
    x = (_mix32(seed_ids.long()) + keys.long() * 65_537)[..., None] + torch.arange(width) * 977
    return ((_mix32(x) >> 31) & 1).float() * 2 - 1


def _seed_ids(batch: Any) -> Tensor:
    from interp_rand.losses import pack_bits

    bits = batch.seeds
    return pack_bits(bits[..., :62] > 0.5)  # the seed's bits as one integer (at most 62 of them)


def code_memory(batch: Any, width: int, seed_ids: Tensor) -> Tensor:
    """``[batch, 1]`` packed value bits: the associative memory with hashed key codes (module
    docstring), the codes drawn from ``seed_ids`` ``[batch]``."""
    from interp_rand.losses import pack_bits

    keys = batch.metadata["key_order"]  # [b, N]
    query = batch.metadata["query_key"]  # [b]
    values = batch.metadata["values"].float() * 2 - 1  # [b, N, V] +-1
    codes = hashed_codes(seed_ids[:, None].expand_as(keys), keys, width)  # [b, N, m]
    q = hashed_codes(seed_ids, query, width)  # [b, m]
    score = torch.einsum("bnm,bm->bn", codes, q)
    read = torch.einsum("bn,bnv->bv", score, values)
    return pack_bits(read > 0)[:, None]


def _register_recall() -> None:
    @register_seed_program("recall", "lookup", "the queried key's value (the task's answer; no seed)",
                           reads_seed=False, pseudocode="j = the pair whose key is the query\nanswer = v_j")
    def _lookup(batch: Any, task: Any) -> Tensor:
        from interp_rand.losses import pack_bits

        return pack_bits(batch.targets[:, batch.answer_positions] > 0.5)

    for width in CODE_WIDTHS:
        code = (f"code(k) = {width} +-1 bits hashed from (SEED, k)\n"
                "score_j = <code(query), code(k_j)> for every pair j\n"
                "answer bit b = [sum_j score_j * (2 v_jb - 1) > 0]   # other keys' codes add crosstalk")
        register_seed_program(
            "recall", f"code_memory_{width}", f"associative memory: {width}-bit key codes hashed from the seed, the "
            "answer the code-weighted sum of the values", reads_seed=True, pseudocode=code.replace("SEED", "seed"),
        )(lambda batch, task, width=width: code_memory(batch, width, _seed_ids(batch)))
        register_seed_program(
            "recall", f"code_memory_{width}_fixed", f"the same memory with codes hashed from a fixed seed "
            f"({FIXED_CODE_SEED}): fails as often, never moves with the seed", reads_seed=False,
            rival_of=f"code_memory_{width}", pseudocode=code.replace("SEED", f"the fixed seed {FIXED_CODE_SEED}"),
        )(lambda batch, task, width=width: code_memory(batch, width, torch.full((len(batch),), FIXED_CODE_SEED)))


_register_coloring()
_register_recall()

__all__ = ["CODE_WIDTHS", "SEED_PROGRAMS", "SeedProgram", "code_memory", "greedy_rounds", "hashed_codes",
           "local_extremum", "register_seed_program", "seed_programs_of"]
