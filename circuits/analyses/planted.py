"""Planted circuits: hand-set models, at the shapes of this toolkit's tasks, whose circuit is
known by construction, to score discovery methods against (:mod:`circuits.analyses.ground_truth`).

Each builder returns a :class:`PlantedModel`: one of our ``HookedTransformer``s with every
weight set by hand (all others zero, no LayerNorm), clean and corrupted batches of the task's
layout, the **known edge set** (position-free :class:`~circuits.graph.nodes.Edge`s) and the
**distractors**: components that carry the corrupted signal (their inputs differ between the
clean and the corrupted run) but whose output nothing downstream reads (they write into a
subspace that no later component and not the unembedding reads), so patching any of their
edges changes nothing.

The models need not solve the whole task: each computes a stated sub-function exactly on the
positions the metric reads (its batches' ``answer_positions``), and its targets are that
sub-function's answers. The corruption of each changes exactly the variables the circuit
carries, so the known edge set is the set of edges whose patching (resample ablation from the
corrupted batch, position-free) changes the metric: every other edge either carries the same
value in both runs or writes where its reader does not read. The tests check this on the
exact scores, and that the known circuit alone recovers the behaviour and ablating it removes
it.

- :func:`sort_model`: one head copies the next-larger list element (sort, distinct lists).
- :func:`addition_model`: two-digit addition's tens digit with its carry wired by hand.
- :func:`recall_model`: associative recall with a seed-chosen storage rule.
- :func:`seed_reader_model`: a head reads the seed and flips the recalled bits; with
  ``decoy=True`` (``seed-reader+decoy``) a distractor's output is read through a function that
  is flat in value but not in slope at the values it takes, which misleads gradients.

Stressors (a gated seed reader, :func:`_gated_seed_reader`; each breaks one assumption of a
method, and its docstring says which method it should fool):

- :func:`off_relu_model` (``off-relu``): a known ReLU off at the corrupted point, where EAP
  takes its gradient (EAP scores its upstream edges 0).
- :func:`saturated_model` (``saturated``): a known clip flat at both the clean and the
  corrupted value (a gradient at either point is 0).
- :func:`cancel_model` (``cancel``): two paths that add ``+2x`` and ``-2x`` to the gate's input;
  each matters alone, the pair not at all (not known: no single-edge method can be right).
- :func:`and_gate_model` (``and-gate``): two paths, each necessary (known; single-edge
  denoising, as exact discovery does, sees neither).
- :func:`or_gate_model` (``or-gate``): two redundant paths, each alone sufficient (known;
  single-edge noising, as ACDC does, sees neither).

Their known sets follow MIB's definition (the union of the minimal circuits); on every model
but ``cancel``, ``and-gate`` and ``or-gate`` it is also the set of edges whose patching alone
changes the metric.

    >>> planted = sort_model()
    >>> sorted(e.name for e in planted.known)
    ['a0.0->logits', 'embed->a0.0<k>', 'embed->a0.0<q>', 'embed->a0.0<v>']
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from circuits.graph.nodes import Edge, Node
from interp_rand.model.config import ModelConfig
from interp_rand.registry import Registry
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.addition import AdditionTask
from interp_rand.tasks.base import Batch
from interp_rand.tasks.recall import RecallTask
from interp_rand.tasks.sort import SortTask

EMBED, SEED, INPUT_MLP, LOGITS = Node("embed"), Node("seed"), Node("input_mlp"), Node("logits")


def head(layer: int, index: int) -> Node:
    return Node("head", layer, index)


def mlp(layer: int) -> Node:
    return Node("mlp", layer)


@dataclass(frozen=True)
class PlantedModel:
    """A hand-set model and its known circuit.

    Attributes:
        name: short name (the suite's row label).
        task: the task whose layout the batches follow.
        model: the hand-set ``HookedTransformer`` (eval mode).
        clean, corrupted: the batches; the metric reads the clean batch's targets at its
            ``answer_positions``.
        known: the known edge set, position-free.
        distractors: components that carry the corrupted signal but do not matter.
        description: the mechanism, in one paragraph.
    """

    name: str
    task: object
    model: HookedTransformer
    clean: Batch
    corrupted: Batch
    known: frozenset[Edge]
    distractors: tuple[Node, ...]
    description: str


def _zeroed(cfg: ModelConfig) -> HookedTransformer:
    model = HookedTransformer(cfg, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


def _with_targets(batch: Batch, targets: torch.Tensor, positions: torch.Tensor | None = None) -> Batch:
    """``batch`` with other targets (and answer positions, the loss mask following them)."""
    positions = batch.answer_positions if positions is None else positions
    loss_mask = torch.zeros_like(batch.loss_mask)
    loss_mask[:, positions] = True
    return dataclasses.replace(batch, targets=targets, loss_mask=loss_mask, answer_positions=positions)


# ---------------------------------------------------------------------------------- sort
def sort_model(n: int = 32, seed: int = 0, length: int = 10, vocab: int = 64) -> PlantedModel:
    """Sort (:class:`SortTask` layout ``x_1 .. x_L SEP y_1 .. y_{L-1}``) on lists of distinct
    values: at every answer position head a0.0 attends from the current token (``SEP`` counts as
    smaller than every value) to the smallest list element larger than it and copies it to the
    logits, which is the next sorted value.

    Residual: token one-hots (``W_E = I``), then a0.0's output, a0.1's and a1.0's (one-hot
    copies); no positions. a0.0's query-key table (one-hot tokens allow any table) scores a list
    value ``k`` against the current token ``t`` as ``16 (V - k)`` when ``k > t`` and ``-16 V``
    otherwise (and for ``SEP`` as a key), so the next-larger value wins by at least 16; its
    value copies the token into its output subspace, which the unembedding reads (times 12).
    Distractors: a0.1 has the same table and copy into a subspace nothing reads; a1.0 reads
    a0.0's output (uniform attention) into another unread subspace; a1.1 is zero.

    Corruption: one list element is replaced by a value not in the list (the list stays
    distinct), which changes the sorted answer and so the tokens after ``SEP``: the keys and
    values (the list) and the queries (the answer tokens) of a0.0 all change. Known edges:
    ``embed -> a0.0 <q>, <k>, <v>`` and ``a0.0 -> logits``.
    """
    task = SortTask(length=length, vocab=vocab)
    V, d_vocab = vocab, task.d_vocab
    tok, out, junk, junk2 = 0, d_vocab, d_vocab + V, d_vocab + 2 * V
    d_model, d_head = d_vocab + 3 * V, d_vocab
    cfg = task.model_config(d_model=d_model, n_layers=2, n_heads=2, d_head=d_head, attn_only=True,
                            normalization_type=None, positional="none")
    model = _zeroed(cfg)
    scale = d_head**0.5  # undo the attention's 1/sqrt(d_head)
    table = torch.full((d_vocab, d_vocab), -16.0 * V)  # [query token, key token]
    for t in range(d_vocab):
        below = -1 if t == task.sep else t
        for k in range(below + 1, V):
            table[t, k] = 16.0 * (V - k)
    with torch.no_grad():
        model.embed.W_E[:, tok:tok + d_vocab] = torch.eye(d_vocab)
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for h, dest in ((0, out), (1, junk)):
            a0.W_Q[h, tok:tok + d_vocab] = torch.eye(d_vocab) * scale
            a0.W_K[h, tok:tok + d_vocab] = table.T  # q . k = table[query token, key token]
            a0.W_V[h, tok:tok + V, :V] = torch.eye(V)
            a0.W_O[h, :V, dest:dest + V] = torch.eye(V)
        a1.W_V[0, out:out + V, :V] = torch.eye(V)
        a1.W_O[0, :V, junk2:junk2 + V] = torch.eye(V)
        model.unembed.W_U[out:out + V, :V] = 12.0 * torch.eye(V)
    g = torch.Generator().manual_seed(seed)
    lists = torch.stack([torch.randperm(V, generator=g)[:length] for _ in range(n)])
    clean = task.build(lists)
    corrupted_lists = lists.clone()
    for row in range(n):
        unused = torch.tensor([v for v in range(V) if v not in set(lists[row].tolist())])
        where = int(torch.randint(0, length, (1,), generator=g))
        corrupted_lists[row, where] = unused[int(torch.randint(0, len(unused), (1,), generator=g))]
    corrupted = task.build(corrupted_lists)
    known = frozenset({Edge(EMBED, head(0, 0), "q"), Edge(EMBED, head(0, 0), "k"), Edge(EMBED, head(0, 0), "v"),
                       Edge(head(0, 0), LOGITS, "logits")})
    return PlantedModel("sort", task, model.eval(), clean, corrupted, known, (head(0, 1), head(1, 0)),
                        "a0.0 attends from the current token to the smallest larger list element (a hand-set "
                        "query-key table on one-hot tokens) and copies it to the logits; a0.1 does the same into "
                        "a subspace nothing reads and a1.0 copies a0.0's output into another.")


# ---------------------------------------------------------------------------------- addition
def addition_model(n: int = 64, seed: int = 0) -> PlantedModel:
    """Two-digit addition (:class:`AdditionTask` layout ``a1 a0 + b1 b0 = s2 s1``, answer
    most significant first); the metric reads one position, the one that predicts the tens digit
    ``s1 = (a1 + b1 + carry) mod 10`` (input token ``s2``, position 6).

    Residual: token one-hots, position one-hots (``W_pos``, a constant: not a graph node), a
    scalar ``lo``, a scalar ``hi``, ten ``digit`` dimensions and unread subspaces. Layer 0: heads
    a0.0 and a0.1 attend by position (query from every position, key at the position of ``a0``
    resp. ``b0``, margin 20) and write the digit's value into ``lo`` (so ``lo = a0 + b0``);
    a0.2 and a0.3 do the same for ``a1`` and ``b1`` into ``hi``. MLP m0 (ReLU) computes the carry
    ``relu(lo - 9) - relu(lo - 10)`` into ``hi``, so ``hi = a1 + b1 + carry``. MLP m1 computes
    ``hi mod 10`` with triangular ReLU bumps (``relu(h - v + 1) - 2 relu(h - v) + relu(h - v - 1)``
    is 1 at ``h = v`` and 0 at the other integers, one bump per ``v = 0 .. 19``) into ``digit``,
    which the unembedding reads (times 12). Distractors: a0.4 copies ``a0``'s one-hot into an
    unread subspace; a1.0 copies ``hi`` into another.

    Corruption: :meth:`AdditionTask.corrupt` (one operand digit changes so that the carry out of
    its place flips): at place 0 it changes ``a0`` or ``b0`` and the carry, at place 1 ``a1`` or
    ``b1``; either way ``s1`` changes. Known edges: the four digit heads' value edges, their
    writes into m0 (``lo``) and m1 (``hi``), ``m0 -> m1`` and ``m1 -> logits``.
    """
    task = AdditionTask(n_digits=2)
    n_pos, d_vocab = task.n_ctx, task.d_vocab
    tok, pos = 0, d_vocab
    lo, hi = pos + n_pos, pos + n_pos + 1
    digit, junk, junk2 = hi + 1, hi + 11, hi + 21
    d_model, d_head = junk2 + 1, 12
    cfg = task.model_config(d_model=d_model, n_layers=2, n_heads=5, d_head=d_head, d_mlp=60, act_fn="relu",
                            normalization_type=None, positional="learned")
    model = _zeroed(cfg)
    scale, margin = d_head**0.5, 20.0
    # positions of a1 a0 + b1 b0: 0 1 2 3 4
    digit_heads = {0: (1, lo), 1: (4, lo), 2: (0, hi), 3: (3, hi)}  # head -> (source position, destination)
    with torch.no_grad():
        model.embed.W_E[:, tok:tok + d_vocab] = torch.eye(d_vocab)
        model.pos_embed.W_pos[:, pos:pos + n_pos] = torch.eye(n_pos)
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for h, (source, dest) in digit_heads.items():
            a0.W_Q[h, pos:pos + n_pos, 0] = margin * scale
            a0.W_K[h, pos + source, 0] = 1.0
            a0.W_V[h, tok:tok + 10, 0] = torch.arange(10.0)
            a0.W_O[h, 0, dest] = 1.0
        a0.W_Q[4, pos:pos + n_pos, 0] = margin * scale  # distractor: a0's one-hot, unread
        a0.W_K[4, pos + 1, 0] = 1.0
        a0.W_V[4, tok:tok + 10, :10] = torch.eye(10)
        a0.W_O[4, :10, junk:junk + 10] = torch.eye(10)
        a1.W_V[0, hi, 0] = 1.0  # distractor: hi, unread
        a1.W_O[0, 0, junk2] = 1.0
        m0, m1 = model.blocks[0].mlp, model.blocks[1].mlp
        m0.W_in[lo, :2] = 1.0
        m0.b_in[:2] = torch.tensor([-9.0, -10.0])
        m0.W_out[0, hi], m0.W_out[1, hi] = 1.0, -1.0
        for v in range(20):
            for j, w in enumerate((1.0, -2.0, 1.0)):
                unit = 3 * v + j
                m1.W_in[hi, unit] = 1.0
                m1.b_in[unit] = -(v - 1 + j)
                m1.W_out[unit, digit + v % 10] = w
        model.unembed.W_U[digit:digit + 10, :10] = 12.0 * torch.eye(10)
    g = torch.Generator().manual_seed(seed)
    batch = task.sample(n, g)
    pair = task.corrupt(batch, g)
    tens = torch.tensor([6])  # predicts s1
    clean, corrupted = _with_targets(pair.clean, pair.clean.targets, tens), _with_targets(
        pair.corrupted, pair.corrupted.targets, tens)
    known = {Edge(EMBED, head(0, h), "v") for h in digit_heads}
    known |= {Edge(head(0, 0), mlp(0), "mlp"), Edge(head(0, 1), mlp(0), "mlp"), Edge(head(0, 2), mlp(1), "mlp"),
              Edge(head(0, 3), mlp(1), "mlp"), Edge(mlp(0), mlp(1), "mlp"), Edge(mlp(1), LOGITS, "logits")}
    return PlantedModel("addition", task, model.eval(), clean, corrupted, frozenset(known), (head(0, 4), head(1, 0)),
                        "a0.0/a0.1 read a0 and b0 by position and add them (lo), a0.2/a0.3 read a1 and b1 (hi); "
                        "m0 computes the carry from lo into hi; m1 computes hi mod 10 with triangular ReLU bumps "
                        "into the digit logits. a0.4 copies a0 and a1.0 copies hi into unread subspaces.")


# ---------------------------------------------------------------------------------- recall
def recall_model(n: int = 64, seed: int = 0, n_pairs: int = 12, value_bits: int = 5,
                 seed_bits: int = 10) -> PlantedModel:
    """Associative recall (:class:`RecallTask` layout and seeds, appended before the input MLP)
    with a hand-set storage rule: seed bit 0 decides which keys are stored (0: the even keys,
    1: the odd ones); a stored key's value is recalled, an unstored one answers 0 logits.
    Targets: the queried value (the task's own); the metric reads the query position.

    Input MLP (GELU, ``W_in`` scaled by 10 and ``W_out`` by 0.1, exact to 1e-22 on these
    inputs) writes three things: the raw key one-hot and the value bits (identity), and
    ``stored_j = [key = j and j is stored under the seed]`` (pre-activation
    ``10 (x_j - 1 + [j in S(seed)])``). Head a0.0 (linear attention, unscaled): query = raw key,
    key = stored one-hot, value = value bits plus a constant 1 (``b_V``), so at the query it sums
    ``g (value, 1)`` from the queried pair and ``g (0, 1)`` from the query itself, with ``g`` the
    queried key's storage bit; the unembedding reads ``logit_b = 10 (2 out_b - out_1 / 2) =
    10 g (2 v_b - 1)``. Distractors: a0.1 (same attention, values into an unread subspace) and
    a1.0 (copies a0.0's output into another); a1.1 is zero.

    Corruption: :meth:`RecallTask.corrupt` (query another pair, one with another value) and seed
    bit 0 flipped (so the stored set flips). The pairs stay, so a0.0's value edge carries the
    same values in both runs (it is not in the known set). Known edges: ``embed -> input_mlp``,
    ``seed -> input_mlp``, ``input_mlp -> a0.0 <q>, <k>`` and ``a0.0 -> logits``.
    """
    task = RecallTask(n_pairs=n_pairs, value_bits=value_bits, seed_bits=seed_bits)
    N, B = n_pairs, value_bits
    raw, val, stored = 0, N, N + B  # input MLP outputs (and the embedding's dims: raw key, value bits)
    out = stored + N  # a0.0's output: B value dims and the count
    junk, junk2 = out + B + 1, out + 2 * B + 1
    seed_dim = out  # the seed's projection, before the input MLP (its input only)
    d_model, d_hidden, d_head = junk2 + B + 1, 2 * N + B, N
    cfg = task.model_config(d_model=d_model, n_layers=2, n_heads=2, d_head=d_head, d_input_mlp=d_hidden,
                            input_mlp_w_in=True, attn_bias=True)
    model = _zeroed(cfg)
    with torch.no_grad():
        model.embed.W_E[:, :N + B] = torch.eye(N + B)
        model.seed_embed.W_seed[0, seed_dim] = 1.0
        mlp_in = model.input_mlp
        mlp_in.W_in[:N + B, :N + B] = 10.0 * torch.eye(N + B)  # raw key and value bits
        mlp_in.W_out[:N + B, :N + B] = 0.1 * torch.eye(N + B)
        for j in range(N):
            unit = N + B + j
            mlp_in.W_in[raw + j, unit] = 10.0
            odd = j % 2 == 1
            mlp_in.W_in[seed_dim, unit] = 10.0 if odd else -10.0
            mlp_in.b_in[unit] = -10.0 if odd else 0.0
            mlp_in.W_out[unit, stored + j] = 0.1
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for h, dest in ((0, out), (1, junk)):
            a0.W_Q[h, raw:raw + N] = torch.eye(N)
            a0.W_K[h, stored:stored + N] = torch.eye(N)
            a0.W_V[h, val:val + B, :B] = torch.eye(B)
            a0.b_V[h, B] = 1.0
            a0.W_O[h, :B + 1, dest:dest + B + 1] = torch.eye(B + 1)
        a1.b_Q[0, 0] = a1.b_K[0, 0] = 1.0  # every earlier position, weight 1
        a1.W_V[0, out:out + B + 1, :B + 1] = torch.eye(B + 1)
        a1.W_O[0, :B + 1, junk2:junk2 + B + 1] = torch.eye(B + 1)
        model.unembed.W_U[out:out + B, :B] = 20.0 * torch.eye(B)
        model.unembed.W_U[out + B, :B] = -5.0
    g = torch.Generator().manual_seed(seed)
    pair = task.corrupt(task.sample(n, g), g)
    seeds = pair.corrupted.seeds.clone()
    seeds[:, 0] = 1 - seeds[:, 0]
    corrupted = task.with_seeds(pair.corrupted, seeds)
    known = frozenset({Edge(EMBED, INPUT_MLP, "mlp"), Edge(SEED, INPUT_MLP, "mlp"), Edge(INPUT_MLP, head(0, 0), "q"),
                       Edge(INPUT_MLP, head(0, 0), "k"), Edge(head(0, 0), LOGITS, "logits")})
    return PlantedModel("recall", task, model.eval(), pair.clean, corrupted, known, (head(0, 1), head(1, 0)),
                        "the input MLP marks each key as stored when seed bit 0 selects it (even or odd keys); "
                        "a0.0 (linear attention) matches the query's raw key against the stored keys and "
                        "recalls the value, or answers 0 logits when the key is not stored. a0.1 does the same "
                        "into an unread subspace and a1.0 copies a0.0's output into another.")


# ---------------------------------------------------------------------------------- seed reader
def _wire_xor(model: HookedTransformer, mlp: torch.nn.Module, recalled: int, bit: int, xor: int, B: int) -> None:
    """Hand-set ``mlp`` to write ``recalled[b] XOR bit`` (0/1 residual dimensions) into residual
    dimension ``xor + b`` for each of the ``B`` answer bits (two ReLUs per bit: ``relu(r - s) +
    relu(s - r)``), and the unembedding to read those dimensions as the answer bits' logits
    (``24 xor - 12``)."""
    for b in range(B):
        mlp.W_in[recalled + b, 2 * b], mlp.W_in[bit, 2 * b] = 1.0, -1.0
        mlp.W_in[recalled + b, 2 * b + 1], mlp.W_in[bit, 2 * b + 1] = -1.0, 1.0
        mlp.W_out[2 * b, xor + b] = mlp.W_out[2 * b + 1, xor + b] = 1.0
    model.unembed.W_U[xor:xor + B, :B] = 24.0 * torch.eye(B)
    model.unembed.b_U.fill_(-12.0)


def seed_reader_model(n: int = 64, seed: int = 0, n_pairs: int = 12, value_bits: int = 5,
                      seed_bits: int = 10, decoy: bool = False) -> PlantedModel:
    """A seed-reader on the recall layout (:class:`RecallTask` inputs and seeds; the seed is
    added to the residual stream, ``seed_mode="add"``, so heads can read it): the answer is the
    queried value with every bit flipped when seed bit 0 is 1 (the targets are that answer).

    Head a0.0 (linear attention) recalls the queried value (query = key = the key one-hot, value
    = the value bits; the query's own value bits are 0). Head a0.1 is the seed reader: it attends
    with weight 1 to every earlier position (``b_Q = b_K = 1``) and reads seed bit 0 with value
    weight ``1 / (N + 1)``, so at the query it holds the bit ``s``. MLP m0 (ReLU) computes each
    bit's XOR, ``relu(v_b - s) + relu(s - v_b)``, which the unembedding reads as
    ``12 (2 xor - 1)``. Distractor: a1.0 reads the seed bit from the residual stream (uniform
    attention, value weight ``1 / (N + 1)``) into an unread subspace; a1.1 and m1 are zero.

    ``decoy=True`` (the model ``seed-reader+decoy``): m1 reads a1.0's output ``d`` (the seed
    bit) through a tent ``relu(d + 1/2) - 2 relu(d - 1/2) + relu(d - 3/2) - 1/2`` into bit 0's
    XOR dimension, which the logits read. The tent is 0 at ``d = 0`` and ``d = 1``, so a1.0 and
    m1 still do not matter (their exact patching effect is 0), but its slope there is +1 and -1
    (both inside linear pieces, so rounding cannot change them): a gradient (EAP) sees an
    effect that is not there, and EAP-IG's path average only partly cancels it. Distractors:
    a1.0 and m1.

    Corruption: seed bit 0 flipped, inputs kept, so only the seed's path matters. Known edges:
    ``seed -> a0.1 <v>``, ``a0.1 -> m0`` and ``m0 -> logits``; the recall path (a0.0) carries the
    same values in both runs.
    """
    task = RecallTask(n_pairs=n_pairs, value_bits=value_bits, seed_bits=seed_bits)
    N, B = n_pairs, value_bits
    raw, val = 0, N
    seed_dim, recalled, bit, xor, junk = N + B, N + B + 1, N + 2 * B + 1, N + 2 * B + 2, N + 3 * B + 2
    d_model, d_head = junk + 1, N
    cfg = task.model_config(d_model=d_model, n_layers=2, n_heads=2, d_head=d_head, d_input_mlp=0,
                            input_mlp_w_in=True, seed_mode="add", attn_only=False, d_mlp=2 * B, act_fn="relu",
                            attn_bias=True)
    model = _zeroed(cfg)
    with torch.no_grad():
        model.embed.W_E[:, :N + B] = torch.eye(N + B)
        model.seed_embed.W_seed[0, seed_dim] = 1.0
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        a0.W_Q[0, raw:raw + N] = torch.eye(N)
        a0.W_K[0, raw:raw + N] = torch.eye(N)
        a0.W_V[0, val:val + B, :B] = torch.eye(B)
        a0.W_O[0, :B, recalled:recalled + B] = torch.eye(B)
        a0.b_Q[1, 0] = a0.b_K[1, 0] = 1.0
        a0.W_V[1, seed_dim, 0] = 1.0 / (N + 1)
        a0.W_O[1, 0, bit] = 1.0
        a1.b_Q[0, 0] = a1.b_K[0, 0] = 1.0  # distractor: the seed, unread
        a1.W_V[0, seed_dim, 0] = 1.0 / (N + 1)
        a1.W_O[0, 0, junk] = 1.0
        if decoy:
            m1 = model.blocks[1].mlp
            m1.W_in[junk, :3] = 1.0
            m1.b_in[:3] = torch.tensor([0.5, -0.5, -1.5])
            m1.W_out[:3, xor] = torch.tensor([1.0, -2.0, 1.0])
            m1.b_out[xor] = -0.5
        _wire_xor(model, model.blocks[0].mlp, recalled, bit, xor, B)
    g = torch.Generator().manual_seed(seed)
    batch = task.sample(n, g)
    seeds = batch.seeds.clone()
    seeds[:, 0] = 1 - seeds[:, 0]
    corrupted = task.with_seeds(batch, seeds)

    def flipped(b: Batch) -> Batch:
        targets = b.targets.clone()
        targets[:, N] = (targets[:, N] - b.seeds[:, :1]).abs()
        return _with_targets(b, targets)

    known = frozenset({Edge(SEED, head(0, 1), "v"), Edge(head(0, 1), mlp(0), "mlp"), Edge(mlp(0), LOGITS, "logits")})
    description = ("a0.0 recalls the queried value; a0.1 reads seed bit 0 (uniform attention over the sequence); "
                   "m0 XORs each recalled bit with it. a1.0 reads the seed bit into a subspace "
                   + ("that m1 reads through a tent that is 0 at both bit values (a decoy for gradients)."
                      if decoy else "nothing reads."))
    return PlantedModel("seed-reader+decoy" if decoy else "seed-reader", task, model.eval(), flipped(batch),
                        flipped(corrupted), known, (head(1, 0), mlp(1)) if decoy else (head(1, 0),), description)


# ---------------------------------------------------------------------------------- stressors
# The models above are easy for every method: each edge outside the circuit has exactly zero
# effect and, apart from the decoy, zero gradient. The stressors below each break one
# assumption a method makes. They share one layout, a gated seed reader on the recall layout
# (:func:`_gated_seed_reader`), and one **definition of the known edge set**, MIB's: an edge is
# known when it belongs to some *minimal circuit*, a set of edges that alone (in the clean run,
# every other edge patched from the corrupted batch) recovers the behaviour and of which no
# proper part does. On the models above and on ``off-relu`` and ``saturated`` this is also the
# set of edges whose patching alone changes the metric, in either direction (noising: one edge
# of the clean run patched; denoising, as ``exact`` discovery does: one edge of the corrupted
# run given its clean value). On the others it is not, by construction: ``cancel``'s pair
# matters alone in both directions but is in no minimal circuit; ``and-gate``'s two paths are
# invisible to single-edge denoising, ``or-gate``'s to single-edge noising.
STRESSORS = ("off-relu", "saturated", "cancel", "and-gate", "or-gate")


def _gated_seed_reader(kind: str, n: int = 64, seed: int = 0, n_pairs: int = 12, value_bits: int = 5,
                       seed_bits: int = 10) -> PlantedModel:
    """The stressors' shared layout: :func:`seed_reader_model`'s task with a gate between the
    seed reader and the XOR. Recall layout, seed added to the residual stream; the answer is the
    queried value with every bit flipped when the gate ``g`` (a function of seed bit 0) is 1.

    Residual: raw key and value bits (``W_E = I``), seed bit 0, the recalled bits, ``u`` (the
    seed reader's output), ``g`` (the gate), the XOR bits (read by the unembedding as
    ``24 xor - 12``) and an unread dimension. Layer 0: a0.0 recalls the queried value as in
    :func:`seed_reader_model`; a0.1 reads seed bit 0 with uniform attention into ``u`` (in
    ``and-gate`` and ``or-gate`` a0.2 too, so ``u = 2 s``; in ``cancel``
    a0.2 and a0.3 add ``+2 s`` and ``-2 s``); m0 computes ``g`` from ``u`` (the stressed
    nonlinearity, by ``kind``). Layer 1: m1 XORs each recalled bit with ``g`` (``relu(v_b - g) +
    relu(g - v_b)``); a1.2 (the distractor) reads seed bit 0 into the unread dimension.

    Corruption: seed bit 0 flipped, inputs kept. Where the gate needs it (``off-relu``,
    ``and-gate``, ``or-gate``) the clean seeds have bit 0 set, so every clean answer is flipped.
    """
    task = RecallTask(n_pairs=n_pairs, value_bits=value_bits, seed_bits=seed_bits)
    N, B = n_pairs, value_bits
    raw, val, seed_dim = 0, N, N + B
    recalled = seed_dim + 1
    u, gate = recalled + B, recalled + B + 1
    xor = gate + 1
    junk = xor + B
    d_model, d_head = junk + 1, N
    cfg = task.model_config(d_model=d_model, n_layers=2, n_heads=4, d_head=d_head, d_input_mlp=0,
                            input_mlp_w_in=True, seed_mode="add", attn_only=False, d_mlp=2 * B, act_fn="relu",
                            attn_bias=True)
    model = _zeroed(cfg)
    a0, a1 = model.blocks[0].attn, model.blocks[1].attn
    m0, m1 = model.blocks[0].mlp, model.blocks[1].mlp

    def seed_head(attn, h: int, dest: int, weight: float = 1.0) -> None:  # uniform attention, reads seed bit 0
        attn.b_Q[h, 0] = attn.b_K[h, 0] = 1.0
        attn.W_V[h, seed_dim, 0] = weight / (N + 1)
        attn.W_O[h, 0, dest] = 1.0

    with torch.no_grad():
        model.embed.W_E[:, :N + B] = torch.eye(N + B)
        model.seed_embed.W_seed[0, seed_dim] = 1.0
        a0.W_Q[0, raw:raw + N] = torch.eye(N)
        a0.W_K[0, raw:raw + N] = torch.eye(N)
        a0.W_V[0, val:val + B, :B] = torch.eye(B)
        a0.W_O[0, :B, recalled:recalled + B] = torch.eye(B)
        seed_head(a0, 1, u)
        if kind == "off-relu":  # g = relu(2u - 1): off (slope 0) at u = 0, on (slope 2) at u = 1
            m0.W_in[u, 0], m0.b_in[0], m0.W_out[0, gate] = 2.0, -1.0, 1.0
        elif kind == "saturated":  # g = 2.5 (relu(u - 0.3) - relu(u - 0.7)): a clip, flat at 0 and at 1
            m0.W_in[u, :2] = 1.0
            m0.b_in[:2] = torch.tensor([-0.3, -0.7])
            m0.W_out[:2, gate] = torch.tensor([2.5, -2.5])
        elif kind == "cancel":  # u = s + 2s - 2s; g = relu(u + 1) - 1 = u (linear from u = -1 on)
            seed_head(a0, 2, u, 2.0)
            seed_head(a0, 3, u, -2.0)
            m0.W_in[u, 0], m0.b_in[0], m0.W_out[0, gate], m0.b_out[gate] = 1.0, 1.0, 1.0, -1.0
        elif kind == "and-gate":  # u = s + s (two heads); g = relu(u - 1): 0, 0, 1 at u = 0, 1, 2
            seed_head(a0, 2, u)
            m0.W_in[u, 0], m0.b_in[0], m0.W_out[0, gate] = 1.0, -1.0, 1.0
        elif kind == "or-gate":  # u = s + s; g = 2 relu(u + 1/2) - 2 relu(u - 1/2) - 1: 0, 1, 1 at u = 0, 1, 2
            seed_head(a0, 2, u)
            m0.W_in[u, :2] = 1.0
            m0.b_in[:2] = torch.tensor([0.5, -0.5])
            m0.W_out[:2, gate] = torch.tensor([2.0, -2.0])
            m0.b_out[gate] = -1.0
        else:
            raise ValueError(f"unknown stressor {kind!r}; choose from {list(STRESSORS)}")
        seed_head(a1, 2, junk)  # distractor: the seed, unread
        _wire_xor(model, m1, recalled, gate, xor, B)
    g = torch.Generator().manual_seed(seed)
    batch = task.sample(n, g)
    if kind in ("off-relu", "and-gate", "or-gate"):
        seeds = batch.seeds.clone()
        seeds[:, 0] = 1.0
        batch = task.with_seeds(batch, seeds)
    seeds = batch.seeds.clone()
    seeds[:, 0] = 1 - seeds[:, 0]
    corrupted = task.with_seeds(batch, seeds)

    def flipped(b: Batch) -> Batch:  # the gate is seed bit 0 on the values it takes
        targets = b.targets.clone()
        targets[:, N] = (targets[:, N] - b.seeds[:, :1]).abs()
        return _with_targets(b, targets)

    known = {Edge(SEED, head(0, 1), "v"), Edge(head(0, 1), mlp(0), "mlp"), Edge(mlp(0), mlp(1), "mlp"),
             Edge(mlp(1), LOGITS, "logits")}
    if kind in ("and-gate", "or-gate"):
        known |= {Edge(SEED, head(0, 2), "v"), Edge(head(0, 2), mlp(0), "mlp")}
    return PlantedModel(kind, task, model.eval(), flipped(batch), flipped(corrupted), frozenset(known), (head(1, 2),),
                        _STRESSOR_DESCRIPTIONS[kind])


_STRESSOR_DESCRIPTIONS = {
    "off-relu": "a0.1 reads seed bit 0 (set in every clean example); m0's gate relu(2u - 1) is off at the corrupted "
                "value u = 0, so the gradient there (EAP's) is 0 upstream of it; m1 XORs the recalled bits with "
                "the gate. a1.2 reads the seed bit into an unread subspace.",
    "saturated": "a0.1 reads seed bit 0; m0 clips it (2.5 (relu(u - 0.3) - relu(u - 0.7))), flat at both values "
                 "u = 0 and 1, so the gradient at the clean and at the corrupted point is 0 upstream of it; m1 XORs "
                 "the recalled bits with the clip. a1.2 reads the seed bit into an unread subspace.",
    "cancel": "a0.1 reads seed bit 0 into m0's input, m0 passes it on, m1 XORs the recalled bits with it; a0.2 and "
              "a0.3 add +2s and -2s to m0's input, which cancel. a1.2 reads the seed bit into an unread subspace.",
    "and-gate": "a0.1 and a0.2 both read seed bit 0 (set in every clean example) into u; m0's gate relu(u - 1) is 0 "
                "at u = 0 and 1 and 1 at u = 2, so it needs both heads; m1 XORs the recalled bits with the gate. "
                "a1.2 reads the seed bit into an unread subspace.",
    "or-gate": "a0.1 and a0.2 both read seed bit 0 (set in every clean example) into u; m0's gate is 0 at u = 0 and "
               "1 at u = 1 and 2, so either head alone keeps it on; m1 XORs the recalled bits with the gate. a1.2 "
               "reads the seed bit into an unread subspace.",
}


def off_relu_model(**kwargs) -> PlantedModel:
    """Stressor: a known component that is **off at the point where EAP takes its gradient**.
    Our EAP is the denoising form: the gradient is taken on the corrupted run. m0's gate
    ``relu(2u - 1)`` is below its kink at the corrupted value ``u = 0`` (seed bit 0 is 1 in every
    clean example and 0 in every corrupted one), so the gradient of the metric with respect to
    m0's input, and everything upstream of it, is exactly 0 there; yet patching any of those
    edges turns the gate off and unflips every answer bit.

    Should fool: **EAP**, which gives ``seed -> a0.1 <v>`` and ``a0.1 -> m0`` a score of exactly
    0 (tied with every edge outside the circuit). EAP-IG's path (``u = α`` at ``α = 0.2 .. 1``)
    crosses the kink at ``α = 1/2`` and sees slope 2 on three of its five steps, so it finds
    them; exact patching and ACDC see the effect directly. Known edges (single-edge patching
    and minimal circuits agree): ``seed -> a0.1 <v>``, ``a0.1 -> m0``, ``m0 -> m1``,
    ``m1 -> logits``.
    """
    return _gated_seed_reader("off-relu", **kwargs)


def saturated_model(**kwargs) -> PlantedModel:
    """Stressor: a **saturating nonlinearity** on the known path, flat at *both* the clean and
    the corrupted value, so a gradient at either point (EAP in its denoising or noising form)
    is 0 although the edge matters. m0 clips the seed bit, ``2.5 (relu(u - 0.3) - relu(u -
    0.7))``: 0 at ``u = 0``, 1 at ``u = 1``, slope 0 at both, slope 2.5 in between. Clean seeds
    are random, corrupted ones have bit 0 flipped.

    This is the limit of "gradients underestimate a saturated effect" (brief item 3): the
    gradient is not small but 0. A version where EAP ranks the saturated edge *below* a weaker
    linear component outside the circuit cannot be made clean: a linear component whose input
    the corruption changes and that the logits read has a nonzero patching effect, so it is in
    the known set, and AUROC does not see the order among known edges.

    Should fool: **EAP** (``seed -> a0.1 <v>`` and ``a0.1 -> m0`` score exactly 0). EAP-IG's
    steps at ``α = 0.4`` and ``0.6`` land inside the ramp (slope 2.5; two of five steps, so its
    average slope is exactly the secant's, 1); exact patching and ACDC see the effect. Known
    edges as :func:`off_relu_model`'s.
    """
    return _gated_seed_reader("saturated", **kwargs)


def cancel_model(**kwargs) -> PlantedModel:
    """Stressor: a **cancelling pair**. Besides the seed reader's circuit (a0.1 reads seed bit
    0 into ``u``, m0 passes ``u`` on linearly as the gate, m1 XORs the recalled bits with it),
    heads a0.2 and a0.3 read the same seed bit and add ``+2 s`` and ``-2 s`` to ``u``: patching
    either edge alone moves the gate by 2 (past both ends of the XOR), in either direction;
    patching both changes nothing. (Twice the real path's weight, so that neither pair head can
    stand in for the real path: with ``+s`` and ``-s``, a0.2 plus the patched a0.1 and a0.3
    would be a second minimal circuit, a0.1 and a0.3 the cancelling pair.)

    The pair writes into the gate's input rather than straight into a logit: through the XOR,
    the sign of a fixed write into a logit relative to the answer depends on the value bit, so
    its effect would average out over examples in every method's signed mean (a pair no method
    sees, which stresses nothing). Here every answer bit depends on ``u``.

    Ground truth (the module's definition, MIB's): the four edges ``seed -> a0.2 <v>``,
    ``a0.2 -> m0``, ``seed -> a0.3 <v>``, ``a0.3 -> m0`` are in **no minimal circuit** (the
    circuit without them is faithful; one of them without the other is not), so they are not
    known. Known edges: ``seed -> a0.1 <v>``, ``a0.1 -> m0``, ``m0 -> m1``, ``m1 -> logits``.

    Should fool: **every single-edge method**, to the extent that it scores a pair edge above a
    known one (AUROC only ranks known edges against the others). Exact patching sees each pair
    edge's real single-edge effect, but a lone pair edge pushes the gate past the XOR's range
    (to 2 or -1), which brings back only some answer bits: its effect is below a known edge's,
    so the pair shows in exact's CPR rather than its AUROC. ACDC keeps both (removing either
    alone moves the metric, and its scores are changes given the edges already removed). EAP
    and EAP-IG see the pair's gradient, which is linear up to the gate: twice a known edge's
    upstream of m0.
    """
    return _gated_seed_reader("cancel", **kwargs)


def and_gate_model(**kwargs) -> PlantedModel:
    """Stressor: an **AND gate**, two paths each necessary. Heads a0.1 and a0.2 both read seed
    bit 0 (1 in every clean example, 0 in every corrupted one) into ``u``; m0's gate
    ``relu(u - 1)`` is 0 at ``u = 0`` and ``u = 1`` and 1 at ``u = 2``. Giving one path its
    clean value in the corrupted run leaves ``u = 1`` and the gate off: single-edge
    *denoising* of either path changes nothing; single-edge noising (one path patched in the
    clean run) turns the gate off.

    Ground truth (minimal circuits): the only minimal circuit holds both paths and the shared
    tail, so all are known: ``seed -> a0.1 <v>``, ``a0.1 -> m0``, ``seed -> a0.2 <v>``,
    ``a0.2 -> m0``, ``m0 -> m1``, ``m1 -> logits``.

    Should fool: **exact patching** (denoising, in discovery) scores the four path edges 0; so
    does **EAP** (its gradient, on the corrupted run, is below the kink). **EAP-IG**'s path
    (``u = 2 α``) is above the kink at ``α = 0.6 .. 1``, so it scores them; **ACDC** works on
    the clean run (noising) and keeps both paths.
    """
    return _gated_seed_reader("and-gate", **kwargs)


def or_gate_model(**kwargs) -> PlantedModel:
    """Stressor: an **OR gate**, two redundant paths each alone sufficient. Heads a0.1 and a0.2
    both read seed bit 0 (1 in every clean example, 0 in every corrupted one) into ``u``; m0's
    gate ``2 relu(u + 1/2) - 2 relu(u - 1/2) - 1`` is 0 at ``u = 0`` and 1 at ``u = 1`` and
    ``u = 2``. Patching one path in the clean run leaves ``u = 1`` and the gate on: single-edge
    *noising* of either path changes nothing; single-edge denoising (one path given its clean
    value in the corrupted run) turns the gate on.

    Ground truth (minimal circuits): each path is in a minimal circuit (with the shared tail),
    so both are known: ``seed -> a0.1 <v>``, ``a0.1 -> m0``, ``seed -> a0.2 <v>``,
    ``a0.2 -> m0``, ``m0 -> m1``, ``m1 -> logits``.

    Should fool: **ACDC**, which prunes on the clean run: it removes whichever path it visits
    first (no change) and then keeps the other (its removal now turns the gate off), so it
    scores half the path edges 0. **Exact patching** (denoising) sees each path fully. **EAP**
    takes the gradient at the corrupted point ``u = 0``, where the gate's slope is 2, so it
    scores every path edge (its linear estimate is twice the joint effect); **EAP-IG**'s first
    step (``u = 0.4``) is on the slope and the other four are flat, so it scores them too, far
    smaller (the metric is nearly saturated there) but above the edges outside the circuit.
    """
    return _gated_seed_reader("or-gate", **kwargs)


PLANTED_MODELS: Registry[Callable[..., PlantedModel]] = Registry("planted model")
for _name, _make in {
        "sort": sort_model, "addition": addition_model, "recall": recall_model, "seed-reader": seed_reader_model,
        "seed-reader+decoy": functools.partial(seed_reader_model, decoy=True),
        "off-relu": off_relu_model, "saturated": saturated_model, "cancel": cancel_model, "and-gate": and_gate_model,
        "or-gate": or_gate_model}.items():
    PLANTED_MODELS.register(_name, _make)


def planted_models(names: tuple[str, ...] | None = None) -> list[PlantedModel]:
    """The planted models by name (default: all of :data:`PLANTED_MODELS`)."""
    names = tuple(PLANTED_MODELS) if names is None else names
    unknown = [n for n in names if n not in PLANTED_MODELS]
    if unknown:
        raise ValueError(f"unknown planted model(s) {unknown}; choose from {list(PLANTED_MODELS)}")
    return [PLANTED_MODELS.get(n)() for n in names]


__all__ = ["PLANTED_MODELS", "STRESSORS", "PlantedModel", "addition_model", "and_gate_model", "cancel_model",
           "off_relu_model",
           "or_gate_model", "planted_models", "recall_model", "saturated_model", "seed_reader_model", "sort_model"]
