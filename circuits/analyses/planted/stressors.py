"""Stressors: gated seed readers, each built to break one assumption of a discovery method
(a ReLU off at the corrupted point, a saturated clip, cancelling paths, AND and OR gates)."""

from __future__ import annotations

import torch

from circuits.analyses.planted.base import LOGITS, SEED, PlantedModel, _with_targets, _zeroed, head, mlp
from circuits.analyses.planted.tasks import _wire_xor
from circuits.graph.nodes import Edge
from interp_rand.tasks.base import Batch
from interp_rand.tasks.recall import RecallTask

# The task models (circuits.analyses.planted.tasks) are easy for every method: each edge
# outside the circuit has exactly zero effect and, apart from the decoy, zero gradient. The
# stressors below each break one assumption a method makes. They share one layout, a gated
# seed reader on the recall layout (:func:`_gated_seed_reader`), and one **definition of the
# known edge set**, MIB's: an edge is
# known when it belongs to some *minimal circuit*, a set of edges that alone (in the clean run,
# every other edge patched from the corrupted batch) recovers the behaviour and of which no
# proper part does. On the task models and on ``off-relu`` and ``saturated`` this is also the
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
