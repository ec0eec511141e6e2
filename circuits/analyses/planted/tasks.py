"""Planted circuits on the tasks' own layouts: sort, addition, recall and the seed reader
(each builder's docstring states its mechanism and its known edges)."""

from __future__ import annotations

import torch

from circuits.analyses.planted.base import (EMBED, INPUT_MLP, LOGITS, SEED, PlantedModel, _with_targets, _zeroed,
                                            head, mlp)
from circuits.graph.nodes import Edge
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.addition import AdditionTask
from interp_rand.tasks.base import Batch
from interp_rand.tasks.recall import RecallTask
from interp_rand.tasks.sort import SortTask

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
