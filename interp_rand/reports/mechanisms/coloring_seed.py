"""Colouring's noise (``zoo:coloring-Aq_R``): the rule the 2-block model runs, as a Mechanism.

The model (two blocks of one softmax head, no MLP, attention masked to the cycle) does not
compare noises first, as the classical local-extremum rule does: it **splits the ids into four
classes** and lets a vertex copy a colour from the neighbour it reads. Read off its weights
(``W_E W_V W_O W_U`` of block 0, :func:`dictated_colours`): reading id 6 writes colour 0, id 1
colour 2, ids 2, 5, 8 colour 1 (margins 15-34 logits); ids 0, 3, 4, 7, 9 dictate nothing
strongly. Block 0's QK sets whom a vertex reads (class first, the noise only between equals);
block 1 reads the neighbours' block-0 output through an OV that is about -1.7 times block 0's:
"avoid the colour my neighbour copied" (of two neighbours that copied the same colour, the
higher-noise one yields). The noise otherwise matters only where a vertex read a class-F
neighbour ("weak"): the pair compares noises and takes opposite preference lists.

:data:`PSEUDOCODE` is the whole rule. The module exposes it as plain functions on a batch
(:func:`rule_state`, :func:`rule_colours`), the Mechanism (:func:`mechanism`: per vertex ``v``
the variables ``read_v`` at ``a0.0@v`` and ``blocked_v`` at ``a1.0@v``; outputs all ten
colours; ``correct`` = a proper colouring), and :func:`agreement_over_cycles`, the rule against
the model on every distinct cycle (the task's exhaustive enumeration) with fresh noise.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable
from interp_rand.tasks.coloring import neighbours

RUN = "zoo:coloring-Aq_R"

N_VERTICES = 10
# class of each vertex id (the rows of block 0's OV and QK fall into these four groups)
ONE, SIX, T, F = 0, 1, 2, 3
CLASS_NAMES = ("one", "six", "T", "F")
ID_CLASS = torch.tensor([F, ONE, T, F, F, T, SIX, F, T, F])  # id 1 -> one, 6 -> six, 2,5,8 -> T
# whom a vertex reads: PRIORITY[class of v][class of neighbour], the larger first
PRIORITY = torch.tensor([[0, -1, 2, 1],   # v = 1:  T > F > six
                         [3, 0, 1, 1],    # v = 6:  one > T = F
                         [3, 2, 0, 1],    # v in T: one > six > F > T
                         [2, 2, 1, 1]])   # v in F: one = six > T = F
WEAK = 3  # "dictates no colour"
PREDICTION_CYCLES = 4000  # fresh cycles each prediction is measured on
DICTATES = torch.tensor([2, 0, 1, WEAK])  # the colour a vertex copies from the class it reads
ABOVE_PREFS = torch.tensor([2, 0, 1])     # a weak vertex above its partner's noise
BELOW_PREFS = torch.tensor([1, 0, 2])     # ... below it

PSEUDOCODE = """\
class(id): 1 -> one, 6 -> six, {2,5,8} -> T, {0,3,4,7,9} -> F
1. a0.0 @ v: v reads ONE neighbour p: the higher priority for v's class
       v in F or six: one, six > T, F ;  v in T: one > six > F > T ;  v = 1: T > F > six
   equal priority -> the neighbour with the lower noise (v = 1: the higher)
   t_v = {one: 2, six: 0, T: 1}[class p]     # a0.0's OV copies the colour p's class dictates
   p in F -> v is weak: above_v = noise_v > noise_p        read_v = t_v or (weak, above_v)
2. a1.0 @ v: blocked_v = {t_u : u a strong neighbour of v}  # a1.0's OV ~ -1.7 x a0.0's: avoid it
   v strong and t_v in blocked_v: the one of the two with the higher noise yields (acts weak, above)
3. colour_v = t_v if v is strong (and keeps it), else the first colour not in blocked_v of
       (2, 0, 1) if above_v else (1, 0, 2)                   # the weak pair splits by noise rank"""


# ---------------------------------------------------------------------- the rule on a batch


def rule_reads(batch: Any) -> tuple[Tensor, Tensor]:
    """Step 1 on ``batch``: ``(read [batch, N], partner [batch, N])``: ``read`` is the
    dictated colour 0/1/2 of a strong vertex, ``3 + above`` (3 below, 4 above its partner's
    noise) of a weak one; ``partner`` the neighbour it reads."""
    nbrs = neighbours(batch)  # [b, N, 2]
    noise = batch.seeds[..., 0]
    n = len(noise)
    ids = torch.arange(noise.shape[1]).expand(n, -1)
    cls_v = ID_CLASS[ids]
    pri = PRIORITY[cls_v[..., None].expand_as(nbrs), ID_CLASS[nbrs]]  # [b, N, 2]
    nbr_noise = noise.gather(1, nbrs.flatten(1)).view_as(nbrs)
    first_lower = nbr_noise[..., 0] < nbr_noise[..., 1]
    first_wins_tie = torch.where(ids == 1, ~first_lower, first_lower)
    first = (pri[..., 0] > pri[..., 1]) | ((pri[..., 0] == pri[..., 1]) & first_wins_tie)
    partner = torch.where(first, nbrs[..., 0], nbrs[..., 1])
    t = DICTATES[ID_CLASS[partner]]
    above = noise > noise.gather(1, partner)
    return torch.where(t < WEAK, t, WEAK + above.long()), partner


def blocked_of(batch: Any, reads: Tensor) -> Tensor:
    """Step 2: ``[batch, N]``: bits 0-2, the colours v's strong neighbours copied (bit c =
    colour c); bit 3: v is strong, a neighbour copied the same colour and v's
    noise is the higher of the two: v gives its colour up."""
    nbrs = neighbours(batch)
    t = reads.gather(1, nbrs.flatten(1)).view_as(nbrs)  # [b, N, 2]
    bits = torch.where(t < WEAK, 1 << t.clamp(max=2), torch.zeros_like(t))
    noise = batch.seeds[..., 0]
    nbr_noise = noise.gather(1, nbrs.flatten(1)).view_as(nbrs)
    rival = (t == reads[..., None]) & (reads[..., None] < WEAK) & (nbr_noise < noise[..., None])
    return bits[..., 0] | bits[..., 1] | (rival.any(-1).long() << 3)


def colours_of(reads: Tensor, blocked: Tensor) -> Tensor:
    """Step 3: ``[batch, N]`` colours from ``reads`` and ``blocked`` (same shape)."""
    yields = ((blocked >> 3) & 1).bool() & (reads < WEAK)
    above = (reads == WEAK + 1) | yields  # a yielding vertex takes the "above" list
    prefs = torch.where(above[..., None], ABOVE_PREFS, BELOW_PREFS)  # [b, N, 3]
    free = ((blocked[..., None] >> prefs) & 1) == 0
    chosen = prefs.gather(-1, free.float().argmax(-1, keepdim=True))[..., 0]  # never all blocked (2 nbrs)
    return torch.where((reads < WEAK) & ~yields, reads, chosen)


def rule_state(batch: Any) -> dict[str, Tensor]:
    """Every step of the rule on ``batch``: ``read``, ``partner``, ``blocked``, ``colour`` (``[batch, N]`` each)."""
    reads, partner = rule_reads(batch)
    blocked = blocked_of(batch, reads)
    return {"read": reads, "partner": partner, "blocked": blocked, "colour": colours_of(reads, blocked)}


def rule_colours(batch: Any) -> Tensor:
    """``[batch, N]`` the rule's colour of every vertex."""
    return rule_state(batch)["colour"]


def proper_at(colours: Tensor, batch: Any) -> Tensor:
    """``[batch, N]`` bool: vertex v's colour differs from both neighbours'."""
    nbrs = neighbours(batch)
    return (colours.gather(1, nbrs.flatten(1)).view_as(nbrs) != colours[..., None]).all(-1)


def strong_conflict(batch: Any, state: dict[str, Tensor]) -> Tensor:
    """``[batch, N]`` bool: v is strong and a neighbour copied the same colour (step 2: the
    higher-noise one of the two yields)."""
    nbrs = neighbours(batch)
    r = state["read"]
    rn = r.gather(1, nbrs.flatten(1)).view_as(nbrs)
    return (r < WEAK) & (rn == r[..., None]).any(-1)


# ---------------------------------------------------------------------- checks of the rule


def dictated_colours(model: Any, margin: float = 10.0) -> Tensor:
    """``[N]`` per id: the colour block 0's OV path writes to the vertex that reads it
    (``argmax`` of ``(W_E + W_pos) W_V W_O W_U``), or :data:`WEAK` when its margin over the
    runner-up is below ``margin`` logits. The rule's :data:`DICTATES` o :data:`ID_CLASS` is
    claimed to equal it."""
    attn = model.blocks[0].attn
    rows = (model.embed.W_E + model.pos_embed.W_pos) @ attn.W_V[0] @ attn.W_O[0] @ model.unembed.W_U
    top = rows.detach().topk(2, dim=-1)
    strong = (top.values[:, 0] - top.values[:, 1]) >= margin
    return torch.where(strong, top.indices[:, 0], torch.full_like(top.indices[:, 0], WEAK))


@torch.no_grad()
def agreement_over_cycles(model: Any, task: Any, draws: int = 1, seed: int = 0, chunk: int = 20000,
                          n_cycles: int | None = None) -> dict[str, Any]:
    """The rule against the model's argmax colours on every distinct cycle of the task
    (:meth:`~interp_rand.tasks.coloring.ColoringTask.exhaustive`, 181,440 for N = 10), each
    with ``draws`` fresh Uniform noise draws: vertex agreement, whole-cycle agreement, two
    controls (``noise_shuffled``: the rule on the same cycle with another row's noise, what the
    ids alone explain; ``cycle_shuffled``: the rule's colours of another cycle and noise,
    chance), the agreement where the rule says v is strong / weak, and the shortfall located:
    ``per_class`` the vertex agreement for each id class (:data:`CLASS_NAMES`), strong and weak
    apart (``{class: {"all", "strong", "weak", "weak_share"}}``). ``n_cycles``: only the first
    that many cycles (``None``: all)."""
    from interp_rand.seeded_evaluation.forward import logits_of

    cycles = task.exhaustive()[:n_cycles]
    g = torch.Generator().manual_seed(seed)
    parts: dict[str, list[Tensor]] = {"same": [], "noise_shuffled": [], "cycle_shuffled": [], "strong": []}
    for _ in range(draws):
        for start in range(0, len(cycles), chunk):
            sub = cycles[torch.arange(start, min(start + chunk, len(cycles)))]
            sub = task.with_seeds(sub, task.sample_seeds(len(sub), g))
            colour = logits_of(model, sub).argmax(-1)
            state = rule_state(sub)
            perm = torch.randperm(len(sub), generator=g)
            other_noise = rule_colours(task.with_seeds(sub, sub.seeds[perm]))
            parts["same"].append(state["colour"] == colour)
            parts["noise_shuffled"].append(other_noise == colour)
            parts["cycle_shuffled"].append(state["colour"][perm] == colour)
            parts["strong"].append(state["read"] < WEAK)
    same, noise_shuffled, cycle_shuffled, strong = (torch.cat(parts[k]) for k in parts)
    cls = ID_CLASS[torch.arange(same.shape[1])].expand_as(same)

    def share(mask: Tensor) -> float:
        return float(same[mask].float().mean()) if bool(mask.any()) else float("nan")

    per_class = {name: {"all": share(cls == c), "strong": share((cls == c) & strong),
                        "weak": share((cls == c) & ~strong), "weak_share": float((~strong[cls == c]).float().mean())}
                 for c, name in enumerate(CLASS_NAMES)}
    return {"vertices": float(same.float().mean()), "cycles": float(same.all(1).float().mean()),
            "per_class": per_class,
            "noise_shuffled": float(noise_shuffled.float().mean()),
            "cycle_shuffled": float(cycle_shuffled.float().mean()), "strong": float(same[strong].float().mean()),
            "weak": float(same[~strong].float().mean()), "strong_share": float(strong.float().mean()),
            "n_cycles": len(cycles), "draws": draws}


# ---------------------------------------------------------------------- the Mechanism


def _rule_variables(N: int, view: Any = None, read_note: str = "", block_note: str = "") -> tuple[list[Variable], Any]:
    """The rule's variables (``read_v`` at block 0's head at ``v``, ``blocked_v`` at block 1's)
    and its answer, computed on ``view(batch)`` (``None``: the batch itself; the id rival passes
    :func:`ids_for_noise`); the notes end the variables' descriptions."""
    view = view or (lambda batch: batch)
    reads = [f"read_{v}" for v in range(N)]
    blocks = [f"blocked_{v}" for v in range(N)]
    variables = list(Variable.each(
        "read", range(N), lambda batch, v: rule_reads(view(batch))[0][:, v],
        site=lambda v: Site.of(Node("head", 0, 0, position=v)),
        description=lambda v: f"vertex {v}: the colour it copies from the neighbour it reads (0-2), "
                              f"or weak below/above {read_note}"))
    variables += Variable.each(
        "blocked", range(N),
        lambda batch, v, **parents: blocked_of(view(batch), torch.stack([parents[name] for name in reads], 1))[:, v],
        parents=tuple(reads), site=lambda v: Site.of(Node("head", 1, 0, position=v)),
        description=lambda v: f"vertex {v}: bitmask of the colours its strong neighbours copied "
                              f"(+8: it yields {block_note})")

    def answer(batch: Any, **values: Tensor) -> Tensor:
        return colours_of(torch.stack([values[name] for name in reads], 1),
                          torch.stack([values[name] for name in blocks], 1))

    return variables, answer


def mechanism(task: Any, n_vertices: int | None = None) -> Mechanism:
    """The rule as a :class:`~circuits.mechanisms.Mechanism` for ``task`` (a colouring task):
    per vertex ``v`` (token ``v``, no seed token: the noise is added to each vertex's
    residual, ``seed_mode="add"``), ``read_v`` at block 0's head output at ``v`` and
    ``blocked_v`` at block 1's; the answer is all ``N`` colours."""
    N = int(n_vertices or task.n_vertices)
    if N != N_VERTICES or getattr(task, "n_colors", 3) != 3:
        raise ValueError(f"the coloring-seed mechanism is read off a 10-vertex 3-colour model; got "
                         f"n_vertices={N}, n_colors={getattr(task, 'n_colors', None)}")
    variables, answer = _rule_variables(N, read_note="its partner's noise (3/4)",
                                        block_note="its own copied colour")

    def correct(batch: Any, predicted: Tensor) -> Tensor:
        return proper_at(predicted, batch)  # [batch, N]: a proper colouring at each vertex

    def rule_proper(batch: Any, values: dict[str, Tensor]) -> Tensor:
        return proper_at(answer(batch, **values), batch).all(1)

    def conflict(batch: Any, values: dict[str, Tensor]) -> Tensor:
        r = torch.stack([values[f"read_{v}"] for v in range(N)], 1)
        return strong_conflict(batch, {"read": r}).any(1)

    held_out = lambda task, generator: task.sample(PREDICTION_CYCLES, generator)  # noqa: E731 - fresh cycles
    predictions = (
        Prediction("cycles the rule colours properly",
                   "where every step of the rule leaves no clash, the model (which runs it) colours the cycle",
                   rule_proper, "succeed", 0.9, inputs=held_out),
        Prediction("copy conflicts",
                   "two neighbours copy the same colour from opposite sides (T F F T); block 1 makes the "
                   "higher-noise one yield, so the model still colours these cycles",
                   conflict, "succeed", 0.9, inputs=held_out),
    )
    return Mechanism(name="coloring-seed", task="coloring", variables=tuple(variables), answer=answer,
                     answer_parents=tuple(v.name for v in variables), outputs=tuple(range(N)), predictions=predictions,
                     pseudocode=PSEUDOCODE, correct=correct, per_output=True)


SHORTFALL_CYCLES = 20000  # distinct cycles (of 181,440) the shortfall line is measured on


def shortfall(model: Any, task: Any) -> str:
    """Where the rule falls short, in one line measured on the model
    (:func:`agreement_over_cycles` on the first :data:`SHORTFALL_CYCLES` distinct cycles): the
    vertices that copy a colour against the weak ones, whose colour the noise split sets, per id
    class."""
    found = agreement_over_cycles(model, task, n_cycles=SHORTFALL_CYCLES)
    weak = [found["per_class"][name]["weak"] for name in CLASS_NAMES]
    strong = [found["per_class"][name]["strong"] for name in CLASS_NAMES]
    return (f"step 3, the weak vertices' noise split: the rule is the model on {found['weak']:.2f} of weak vertices "
            f"({min(weak):.2f}-{max(weak):.2f} per id class) against {found['strong']:.2f} of those that copy a colour "
            f"({min(strong):.2f}-{max(strong):.2f}), so on whole colourings of {found['cycles']:.2f} of cycles "
            f"({found['n_cycles']:,} cycles measured)")


def load() -> tuple[Any, Any]:
    """``(model, task)`` of :data:`RUN`."""
    from interp_rand.training import load_checkpoint
    from interp_rand.run_names import resolve_run

    ck = load_checkpoint(resolve_run(RUN))
    return ck.model().eval(), ck.spec.make_task()



# ---------------------------------------------------------------------- rivals
# A plausible, different algorithm for the same colours, stated as a Mechanism with the
# flagship's ``outputs`` (all ten colours, scored per vertex) so a comparison can look for
# inputs where the two part.

IDS_PSEUDOCODE = """\
the noise is ignored: the same id classes and copy table, symmetry broken by the unique ids
1. a0.0 @ v: v reads the neighbour of higher priority (PRIORITY by class, as the rule);
   equal priority -> the lower id (v = 1: the higher); t_v = DICTATES[class p]
   p in F -> v is weak: above_v = id_v > id_p
2. a1.0 @ v: blocked_v = {t_u : u a strong neighbour}; of two that copied the same colour, the higher id yields
3. colour_v = t_v if strong and kept, else the first free colour of (2, 0, 1) if above_v else (1, 0, 2)"""


def ids_for_noise(batch: Any) -> Any:
    """``batch`` with each vertex's noise replaced by its id's rank, ``(v + 0.5) / N``: every
    comparison of two noises in the rule becomes a comparison of the two ids."""
    from interp_rand.tasks.randomized import replace_seeds

    n, N = batch.seeds.shape[:2]
    ranks = (torch.arange(N, dtype=batch.seeds.dtype, device=batch.seeds.device) + 0.5) / N
    return replace_seeds(batch, ranks[None, :, None].expand(n, N, 1), (N, 1))


def id_rule_colours(batch: Any) -> Tensor:
    """``[batch, N]`` the ids-only rival's colours (the rule with every noise comparison made on the ids)."""
    return rule_colours(ids_for_noise(batch))


def rivals(task: Any, n_vertices: int | None = None) -> dict[str, Mechanism]:
    """Rivals of :func:`mechanism` on ``task``, by name:

    - ``coloring-ids`` (the noise is ignored: a deterministic algorithm on the unique ids, the
      textbook way to break symmetry on a graph with ids; the same classes, copy table and
      sites as the rule, with every noise comparison, whom to read on a tie, weak above/below,
      who yields, made on the ids instead). Where the rule never consults the noise the two
      agree; where it does, the rival says the answer cannot move with the noise."""
    N = int(n_vertices or task.n_vertices)
    if N != N_VERTICES or getattr(task, "n_colors", 3) != 3:
        raise ValueError(f"the coloring-seed rivals are stated for the 10-vertex 3-colour model; got "
                         f"n_vertices={N}, n_colors={getattr(task, 'n_colors', None)}")
    variables, answer = _rule_variables(N, ids_for_noise, read_note="that neighbour's id (3/4); ties by id, not noise",
                                        block_note="its copied colour, to the lower id")

    def rival_proper(batch: Any, values: dict[str, Tensor]) -> Tensor:
        return proper_at(answer(batch, **values), batch).all(1)

    held_out = lambda task, generator: task.sample(PREDICTION_CYCLES, generator)  # noqa: E731 - fresh cycles
    ids = Mechanism(
        name="coloring-ids", task="coloring", variables=tuple(variables), answer=answer,
        answer_parents=tuple(v.name for v in variables), outputs=tuple(range(N)),
        predictions=(Prediction("cycles the ids-only rule colours properly",
                                "the model runs the ids-only rule, so where it leaves no clash the model colours "
                                "the cycle", rival_proper, "succeed", 0.9, inputs=held_out),),
        pseudocode=IDS_PSEUDOCODE, correct=lambda batch, predicted: proper_at(predicted, batch), per_output=True)
    return {ids.name: ids}



# ---------------------------------------------------------------------- declared to explain


def _applies(task: Any) -> str | None:
    if getattr(task, "n_vertices", None) != N_VERTICES or getattr(task, "n_colors", 3) != 3:
        return f"read off a {N_VERTICES}-vertex 3-colour model"
    return None


def seed_programs(task: Any) -> list[Any]:
    """The rule and its ids-only rival as :class:`~circuits.explain.seed_programs.SeedProgram` s,
    for ``explain`` to score beside the library's (its colours are the model's own: no relabelling)."""
    from circuits.explain.seed_programs import SeedProgram

    return [SeedProgram("coloring", "id_classes_noise_split", "the id-class copy rule, weak pairs split by their noise "
                        f"(read off {RUN}'s weights)", lambda batch, task: rule_colours(batch), True, PSEUDOCODE,
                        source=__name__, mechanism=mechanism, applies=_applies),
            SeedProgram("coloring", "id_classes_ids_split", "the same rule with every noise comparison made on the ids "
                        "(no seed)", lambda batch, task: id_rule_colours(batch), False, IDS_PSEUDOCODE,
                        rival_of="id_classes_noise_split", source=__name__,
                        mechanism=lambda task: rivals(task)["coloring-ids"], applies=_applies)]


__all__ = ["ABOVE_PREFS", "BELOW_PREFS", "CLASS_NAMES", "DICTATES", "ID_CLASS", "PRIORITY", "PSEUDOCODE", "RUN",
           "agreement_over_cycles", "blocked_of", "colours_of", "dictated_colours", "load", "mechanism", "shortfall",
           "proper_at", "rule_colours", "rule_reads", "rule_state", "strong_conflict"]
__all__ += ["IDS_PSEUDOCODE", "id_rule_colours", "ids_for_noise", "rivals", "seed_programs"]
