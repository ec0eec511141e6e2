"""Which seed bits decide which keys a recall model stores, and through which nodes.

Recall's seed is a ``B``-bit vector shared by every token, and all ``2**B`` seeds can be
enumerated, so a stored-set matrix over every seed (:func:`probes.stored_set.stored_matrix`,
``stored [n_inputs, n_seeds, N]``) already holds every single-bit flip: the seed with bit ``j``
flipped is another row of the matrix.

- :func:`bit_flip_effect`: the **bit x key-position effect map**: for bit ``j`` and key
  position ``p``, the fraction of (input, seed) pairs whose storage of ``p`` changes when bit
  ``j`` alone is flipped (input and other bits fixed). A model that ignores its seed scores 0
  everywhere; a random-init model of the same architecture is the control for "uses the seed
  by accident".
- :func:`bit_flip_routes`: for the cells a flip changes, the node the flip acts through: the
  flip is re-run with the flipped seed seen by one node only, i.e. that node's activation is
  patched from the flipped run into the unflipped one (:func:`~circuits.interventions.ablation.replaced_nodes`).
  Nodes: the seed's entry at each task position (the input MLP at position ``p``, which reads
  the seed appended to token ``p``; the seed embedding itself where there is no input MLP),
  and every head. ``recovered`` is the share of the flip's storage changes the one-node patch
  reproduces; ``spurious`` the change rate it causes on cells the full flip leaves unchanged
  (patches are not additive, so shares need not sum to 1).

    >>> effect = bit_flip_effect(stored, task.all_seeds())
    >>> routes = bit_flip_routes(model, task, key_order, values, stored, task.all_seeds(),
    ...                          bits=effect.strongest[:2], generator=g)
    >>> routes.by_role[0]   # {"queried pair": .., "query token": .., "other pairs": .., "a0.0": ..}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import replaced_nodes
from circuits.graph.architecture import run_model
from circuits.graph.model_graph import ModelGraph
from circuits.graph.nodes import Node
from circuits.graph.writers import capture_hooks
from interp_rand.losses import BITS


def flip_partners(seeds: Tensor) -> Tensor:
    """``[n_bits, n_seeds]`` long: the row of ``seeds [n_seeds, n_bits]`` (0/1) that differs
    from row ``s`` in bit ``j`` only; ``ValueError`` unless every such seed is present."""
    bits = seeds.round().long()
    n_seeds, n_bits = bits.shape
    if not ((bits == 0) | (bits == 1)).all() or n_bits > 62:
        raise ValueError("seeds must be 0/1 vectors of at most 62 bits")
    powers = 2 ** torch.arange(n_bits - 1, -1, -1)
    code = (bits * powers).sum(-1)  # [seeds] the seed as an integer, most significant bit first
    lookup = {int(c): i for i, c in enumerate(code)}
    partners = torch.empty(n_bits, n_seeds, dtype=torch.long)
    for j in range(n_bits):
        flipped = (code ^ int(powers[j])).tolist()
        missing = [f for f in flipped if f not in lookup]
        if missing:
            raise ValueError(f"seeds lack the bit-{j} flip of {len(missing)} seed(s); pass every seed (task.all_seeds())")
        partners[j] = torch.tensor([lookup[f] for f in flipped])
    return partners


@dataclass(frozen=True)
class BitFlipEffect:
    """Bit x key-position effect map (module docstring).

    Attributes:
        effect: ``[n_bits, N]`` fraction of (input, seed) whose storage of position ``p``
            changes when bit ``j`` is flipped.
        per_bit: ``[n_bits]`` the map's mean over positions.
        strongest: bit indices, strongest first.
        max_effect, mean_effect: the map's largest cell and its mean.
        n_inputs, n_seeds: the matrix's shape.
    """

    effect: list[list[float]]
    per_bit: list[float]
    strongest: list[int]
    max_effect: float
    mean_effect: float
    n_inputs: int
    n_seeds: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _changes(stored: Tensor, partners: Tensor) -> Tensor:
    """``[n_bits, n_inputs, n_seeds, N]`` bool: storage changes under each single-bit flip."""
    return torch.stack([stored != stored[:, row] for row in partners])


def bit_flip_effect(stored: Tensor, seeds: Tensor) -> BitFlipEffect:
    """The bit x position map of ``stored [n_inputs, n_seeds, N]`` over ``seeds [n_seeds, n_bits]``."""
    if stored.dim() != 3 or stored.shape[1] != len(seeds):
        raise ValueError(f"stored must be [n_inputs, n_seeds={len(seeds)}, N]; got {tuple(stored.shape)}")
    effect = _changes(stored.bool(), flip_partners(seeds)).double().mean((1, 2))  # [bits, N]
    per_bit = effect.mean(-1)
    return BitFlipEffect(
        effect=effect.mul(1e4).round().div(1e4).tolist(),
        per_bit=per_bit.tolist(),
        strongest=per_bit.argsort(descending=True).tolist(),
        max_effect=float(effect.max()),
        mean_effect=float(effect.mean()),
        n_inputs=stored.shape[0],
        n_seeds=stored.shape[1],
    )


@dataclass(frozen=True)
class BitFlipRoutes:
    """Through which node a seed-bit flip changes what is stored (module docstring).

    Attributes:
        bits: the bits examined.
        nodes: names of the patched nodes (``input_mlp@p`` or ``seed@p`` per task position,
            the same entry node at every position, then the heads).
        recovered: per bit ``{node: share of the flip's storage changes the one-node patch
            reproduces}``; the all-positions entry node reproduces all of them when the seed
            reaches the model only there.
        spurious: per bit ``{node: change rate of the patch on cells the flip leaves alone}``.
        by_role: per bit, the entry nodes grouped by the role of their position for each cell:
            ``queried pair`` (the queried key's own token), ``query token``, ``other pairs``
            (mean over the other pairs' positions), then each head.
        n_changed, n_unchanged: per bit, the cells of each kind used (at most ``n_rows`` each).
    """

    bits: list[int]
    nodes: list[str]
    recovered: list[dict[str, float]]
    spurious: list[dict[str, float]]
    by_role: list[dict[str, float]]
    n_changed: list[int]
    n_unchanged: list[int]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def entry_nodes(model: Any, n_pos: int) -> tuple[Node, list[Node], list[Node]]:
    """The seed's entry node (all positions), it at each task position, and every head."""
    graph = ModelGraph.of(model, n_pos)
    entry = Node("input_mlp") if graph.arch.has_input_mlp and graph.arch.seed_append else Node("seed")
    offset = graph.arch.seed_offset
    heads = [node for node in graph.writers if node.kind == "head"]
    return entry, [entry.at(p + offset) for p in range(n_pos)], heads


def _sample(cells: Tensor, n: int, generator: torch.Generator) -> Tensor:
    """Up to ``n`` rows of ``cells [k, 3]``, uniformly without replacement."""
    if len(cells) <= n:
        return cells
    return cells[torch.randperm(len(cells), generator=generator)[:n]]


@torch.no_grad()
def _stored_by(model: Any, batch: Any, values: Tensor, query: Tensor) -> Tensor:
    logits = run_model(model, batch)[:, batch.answer_positions[0]]  # [rows, value_bits]
    target = values[torch.arange(len(query)), query]
    return BITS.correct(logits, target)  # every value bit right


@torch.no_grad()
def bit_flip_routes(
    model: Any,
    task: Any,
    key_order: Tensor,
    values: Tensor,
    stored: Tensor,
    seeds: Tensor,
    bits: list[int],
    *,
    generator: torch.Generator,
    n_rows: int = 512,
) -> BitFlipRoutes:
    """Node shares of the storage changes of flipping each of ``bits`` (module docstring).

    Args:
        key_order, values: the inputs of ``stored`` (``RecallTask.build``'s arguments).
        stored: ``[n_inputs, n_seeds, N]`` from :func:`probes.stored_set.stored_matrix`.
        seeds: ``[n_seeds, n_bits]``, every flip of every row present (``task.all_seeds()``).
        n_rows: at most this many changed and this many unchanged cells per bit.
    """
    partners = flip_partners(seeds)
    n_pos = task.n_ctx
    N = key_order.shape[1]
    entry, per_position, heads = entry_nodes(model, n_pos)
    nodes = per_position + [entry] + heads
    graph = ModelGraph.of(model, n_pos)
    recovered, spurious, by_role, n_changed, n_unchanged = [], [], [], [], []
    for bit in bits:
        change = stored.bool() != stored.bool()[:, partners[bit]]  # [inputs, seeds, N]
        picked = [_sample(change.nonzero(), n_rows, generator), _sample((~change).nonzero(), n_rows, generator)]
        outcome: list[dict[str, Tensor]] = []
        for cells in picked:
            if not len(cells):  # the flip changes nothing (or everything): nothing to patch
                outcome.append({name: torch.zeros(0, dtype=torch.bool) for name in ["full flip"] + [n.name for n in nodes]})
                continue
            i, s, p = cells.unbind(-1)
            clean = task.build(key_order[i], values[i], p, seeds[s])
            flipped = task.with_seeds(clean, seeds[partners[bit, s]])
            base = _stored_by(model, clean, values[i], p)
            acts: dict[str, Tensor] = {}
            with model.hooks(fwd_hooks=capture_hooks(graph, acts)):
                full = _stored_by(model, flipped, values[i], p)
            rows = {"full flip": full != base}
            for node in nodes:
                with replaced_nodes(model, [node], acts):
                    rows[node.name] = _stored_by(model, clean, values[i], p) != base
            outcome.append(rows)
        changed, unchanged = outcome
        p_changed = picked[0][:, 2]
        recovered.append({k: float(v.double().mean()) if len(v) else 0.0 for k, v in changed.items()})
        spurious.append({k: float(v.double().mean()) if len(v) else 0.0 for k, v in unchanged.items()})
        if len(p_changed):
            at = torch.stack([changed[node.name] for node in per_position]).double()  # [n_pos, rows]
            rows = torch.arange(len(p_changed))
            own = at[p_changed, rows]
            pair_total = at[:N].sum(0) - own
            role = {"queried pair": float(own.mean()), "query token": float(at[N:].mean()),
                    "other pairs": float((pair_total / (N - 1)).mean())}
        else:
            role = {"queried pair": 0.0, "query token": 0.0, "other pairs": 0.0}
        role |= {head.name: recovered[-1][head.name] for head in heads}
        by_role.append(role)
        n_changed.append(len(picked[0]))
        n_unchanged.append(len(picked[1]))
    return BitFlipRoutes(list(map(int, bits)), ["full flip"] + [n.name for n in nodes], recovered, spurious,
                         by_role, n_changed, n_unchanged)


__all__ = ["BitFlipEffect", "BitFlipRoutes", "bit_flip_effect", "bit_flip_routes", "entry_nodes", "flip_partners"]
