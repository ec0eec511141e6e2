"""Recall's seed (``zoo:recall-Aq_R``): which keys a seed stores, as a rule on the seed bits.

The model (N = 12 pairs, 10 seed bits, two 1-head linear-attention blocks of width 5) reads
every token together with the seed through the input MLP, and at the query position both heads
retrieve the queried value by linear attention (score = q·k, no softmax): the output there is
the queried pair's value plus the other pairs' values weighted by their scores. The seed moves
the key codes, so it decides which keys interfere. The hypothesis states S(seed), the keys it
stores, by one seed bit per key (:data:`RULE`: key ``k`` is stored iff bit ``b(k)`` equals
``v(k)``), read off the training half of the seeds (:func:`derive_rule`, the bit whose value
changes the key's recall rate most) and tested on the held-out half (:func:`seed_split`):

- predictions (:func:`mechanism`): the model recalls the query when it is in S(seed) and fails
  when it is not, on held-out seeds;
- the seed-bit intervention (:func:`flip_intervention`): flipping bit ``b(q)`` moves the
  queried key ``q`` into or out of S; the share of rows that move as predicted, with the seed
  flipped everywhere, only at the query token's seed entry (``Node("seed", position=N)``,
  ``hook_seed_embed``), only at the pairs' tokens (the queried pair's own, the others'),
  against flipping another bit.

The model has no seed token (``seed_mode="append"``, ``cfg.seed_offset == 0``): residual
positions are the task's positions, the query at ``N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable
from interp_rand.losses import pack_bits

RUN = "zoo:recall-Aq_R"

# Which seeds are held out: a fixed random half of the 1,024 (generator seed below); the rule
# is read off the other half.
SPLIT_SEED = 0
# RULE[k] = (b, v): key k is stored iff seed bit b (0 = the first, most significant) equals v.
# Read off the training seeds by derive_rule(model, task, seed_split(task)[0], n=120_000,
# generator=torch.Generator().manual_seed(0)) (the notes give the command and its output).
RULE: tuple[tuple[int, int], ...] = (
    (5, 0), (8, 1), (2, 1), (6, 0), (5, 1), (1, 1), (2, 0), (9, 1), (0, 0), (8, 0), (6, 0), (2, 0),
)
# Predictions and the intervention look at this many held-out inputs by default.
N_PREDICT = 4000

PSEUDOCODE = """\
for each position p: e_p = input_mlp([one_hot(key_p), value_p, seed])   # the seed shifts every key code
at the query N (key q):                                                 # linear attention, no softmax
    r0 = sum_j (q0(e_N) . k0(e_j)) v0(e_j)                               # a0.0 @ N
    r1 = sum_j (q1(x_N) . k1(x_j)) v1(x_j)                               # a1.0 @ N (x = e + a0.0 out)
    answer bits = r0 + r1 > 0  = value of q, plus interference from keys whose codes overlap q's
S(seed) = {k : seed[b(k)] == v(k)}        # RULE, one bit per key; b(k) acts on pair k's own write,
                                           # the seed's entry (input_mlp) at k's position
claim: recall of q succeeds iff q in S(seed); flipping seed[b(q)] moves q into/out of S"""


def seed_split(task: Any) -> tuple[Tensor, Tensor]:
    """Indices into ``task.all_seeds()``: the training half (the rule is read there) and the
    held-out half (predictions and the intervention are measured there)."""
    n = 2**task.seed_bits
    order = torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED))
    return order[: n // 2].sort().values, order[n // 2:].sort().values


def check_rule(rule: tuple[tuple[int, int], ...], task: Any) -> None:
    if len(rule) != task.n_pairs or any(not 0 <= b < task.seed_bits or v not in (0, 1) for b, v in rule):
        raise ValueError(f"a rule is one (bit in 0..{task.seed_bits - 1}, value 0/1) per key ({task.n_pairs} keys); "
                         f"got {rule}")


def in_stored_set(seeds: Tensor, keys: Tensor, rule: tuple[tuple[int, int], ...] = RULE) -> Tensor:
    """``[n]`` bool: is key ``keys[i]`` in S(``seeds[i]``) by ``rule`` (``seeds [n, bits]`` 0/1)."""
    bit = torch.tensor([b for b, _ in rule])[keys]
    value = torch.tensor([v for _, v in rule])[keys]
    return seeds.round().long().gather(1, bit[:, None])[:, 0] == value


def stored_set(seed: Tensor, rule: tuple[tuple[int, int], ...] = RULE) -> list[int]:
    """The keys S(``seed``) holds (``seed [bits]``), ascending."""
    keys = torch.arange(len(rule))
    return keys[in_stored_set(seed[None].expand(len(rule), -1), keys, rule)].tolist()


def held_out_batch(task: Any, n: int, generator: torch.Generator, seed_rows: Tensor | None = None) -> Any:
    """``n`` task inputs, each under a uniform seed from ``seed_rows`` (default: the held-out half)."""
    rows = seed_split(task)[1] if seed_rows is None else seed_rows
    batch = task.sample(n, generator)
    pick = rows[torch.randint(0, len(rows), (n,), generator=generator)]
    return task.with_seeds(batch, task.all_seeds()[pick])


@torch.no_grad()
def recalled(model: Any, batch: Any, hooks: list | None = None) -> Tensor:
    """``[n]`` bool: every value bit at the query right."""
    with model.hooks(fwd_hooks=hooks or []):
        logits = run_model(model, batch)[:, batch.answer_positions[0]]
    return ((logits > 0) == batch.targets[:, batch.answer_positions[0]].bool()).all(-1)


@torch.no_grad()
def derive_rule(model: Any, task: Any, seed_rows: Tensor, n: int, generator: torch.Generator
                ) -> tuple[tuple[tuple[int, int], ...], Tensor]:
    """Per key, the (bit, value) whose value raises the key's recall rate most, over ``n``
    random inputs under seeds from ``seed_rows``; also the ``[N, bits]`` rate gaps
    ``rate(bit = 1) - rate(bit = 0)`` (the rule takes the largest ``|gap|``)."""
    batch = held_out_batch(task, n, generator, seed_rows)
    ok = torch.cat([recalled(model, batch[i:i + 8192]) for i in range(0, n, 8192)]).double()
    keys, bits = batch.metadata["query_key"], batch.seeds.round().long()
    gaps = torch.zeros(task.n_pairs, task.seed_bits, dtype=torch.double)
    for k in range(task.n_pairs):
        mine = keys == k
        for b in range(task.seed_bits):
            on = mine & (bits[:, b] == 1)
            off = mine & (bits[:, b] == 0)
            gaps[k, b] = ok[on].mean() - ok[off].mean()
    best = gaps.abs().argmax(1)
    rule = tuple((int(b), int(gaps[k, b] > 0)) for k, b in enumerate(best))
    return rule, gaps


def _value_code(batch: Any, key: Tensor) -> Tensor:
    """The packed value bits of the pair holding ``key`` (``[n]``)."""
    meta = batch.metadata
    where = (meta["key_order"] == key[:, None]).long().argmax(1)
    return pack_bits(meta["values"][torch.arange(len(key)), where] > 0)


def mechanism(task: Any, rule: tuple[tuple[int, int], ...] = RULE, retrieved_at: tuple[Node, ...] | None = None,
              n_predict: int = N_PREDICT) -> Mechanism:
    """The hypothesis for ``task`` (a ``RecallTask``; ``rule`` and ``retrieved_at`` are there to
    test variants: the default heads are a0.0 and a1.0 at the query)."""
    check_rule(rule, task)
    N = task.n_pairs
    heads = retrieved_at or (Node("head", 0, 0, position=N), Node("head", 1, 0, position=N))
    query_key = Variable("query_key", lambda b: b.metadata["query_key"], site=Site.of(Node("embed", position=N)),
                         description="which key the query token asks for (its embedding)")
    stored = Variable("stored", lambda b, query_key: in_stored_set(b.seeds, query_key, rule).long(),
                      parents=("query_key",),
                      description="query_key in S(seed) by the one-bit-per-key rule (tested by the predictions and "
                                  "the seed-bit intervention, not by interchange: the answer does not read it)")
    # declared an input: the heads read every pair's key and value code, which the hypothesis
    # does not name; recomputed from query_key alone, a treeified scrub resamples those codes and
    # keeps 0.02 of the log-prob (measured), so the retrieval is not computed from the query
    # token alone; naming the codes is the key-code mechanism's work
    retrieved = Variable("retrieved", lambda b, query_key: _value_code(b, query_key), parents=("query_key",),
                         site=Site.of(*heads), input=True,
                         description="the queried pair's value, read by linear attention")

    def held_out(t: Any, g: torch.Generator) -> Any:
        return held_out_batch(t, n_predict, g)

    predictions = (
        Prediction("the query in S(seed), held-out seeds", "the rule says the seed stores the queried key",
                   lambda b, v: v["stored"].bool(), "succeed", 0.9, held_out),
        Prediction("the query outside S(seed), held-out seeds", "the rule says the seed does not store it",
                   lambda b, v: ~v["stored"].bool(), "fail", 0.5, held_out),
    )
    return Mechanism(
        "recall-seed", "recall", (query_key, stored, retrieved),
        answer=lambda b, retrieved: retrieved, answer_parents=("retrieved",), outputs=(0,),
        predictions=predictions, pseudocode=PSEUDOCODE,
    )


# ---------------------------------------------------------------------- the seed-bit intervention
FLIP_SITES = ("everywhere", "query token", "pair tokens", "queried pair's token", "other pairs' tokens")


@dataclass
class FlipResult:
    """What flipping one seed bit per row did to the recall of the queried key.

    ``moved_in`` / ``moved_out``: rows the rule moves into / out of S, with the recall rate
    before and after the flip; ``changed``: share of rows whose recall changes; ``as_predicted``:
    among those, the share that change the way the rule says (into S: now recalled; out: now
    failed); ``predicted_share``: the share of all rows that end as the rule says (recalled iff
    the key is now in S)."""

    site: str
    bit: str
    n_in: int
    n_out: int
    in_before: float
    in_after: float
    out_before: float
    out_after: float
    changed: float
    as_predicted: float
    predicted_share: float

    def line(self) -> str:
        return (f"flip {self.bit} at {self.site}: into S {self.in_before:.3f} -> {self.in_after:.3f} recalled "
                f"({self.n_in}), out of S {self.out_before:.3f} -> {self.out_after:.3f} ({self.n_out}); "
                f"{self.changed:.3f} of rows change, {self.as_predicted:.3f} of those as predicted; "
                f"{self.predicted_share:.3f} end as predicted")


def _seed_hook(flipped_embed: Tensor, where: Tensor):
    """Replace ``hook_seed_embed`` by the flipped run's where ``where [batch, pos]`` is true."""
    def hook(value: Tensor, hook: Any) -> Tensor:
        return torch.where(where[..., None], flipped_embed.to(value.dtype), value)
    return hook


@torch.no_grad()
def flip_intervention(model: Any, task: Any, n: int, generator: torch.Generator,
                      rule: tuple[tuple[int, int], ...] = RULE) -> list[FlipResult]:
    """Flip, per held-out row, the queried key's rule bit ``b(q)`` (and, as the control, a
    uniform other bit, scored as if it were ``b(q)`` with the same value), seen by the whole
    model, only by the query token's seed entry (``hook_seed_embed`` at ``N``), only by the
    pairs' tokens, only by the queried pair's own token or only by the other pairs' tokens; one
    :class:`FlipResult` per (bit, site)."""
    check_rule(rule, task)
    N = task.n_pairs
    batch = held_out_batch(task, n, generator)
    keys = batch.metadata["query_key"]
    rule_bit = torch.tensor([b for b, _ in rule])[keys]
    other = (rule_bit + torch.randint(1, task.seed_bits, (n,), generator=generator)) % task.seed_bits
    before = recalled(model, batch)
    position = torch.arange(N + 1).expand(n, -1)
    own = position == batch.metadata["query_index"][:, None]
    sites = {"everywhere": position >= 0, "query token": position == N, "pair tokens": position < N,
             "queried pair's token": own, "other pairs' tokens": (position < N) & ~own}
    results = []
    for label, bit in (("b(q)", rule_bit), ("another bit (control)", other)):
        seeds = batch.seeds.clone()
        rows = torch.arange(n)
        seeds[rows, bit] = 1 - seeds[rows, bit]
        flipped = task.with_seeds(batch, seeds)
        # in S after the flip, scored as if ``bit`` decided q with the rule's value
        value = torch.tensor([v for _, v in rule])[keys]
        now_in = seeds.round().long()[rows, bit] == value
        acts: dict[str, Tensor] = {}

        def grab(v: Tensor, hook: Any) -> Tensor:
            acts["seed"] = v.detach().clone()
            return v

        with model.hooks(fwd_hooks=[("hook_seed_embed", grab)]):
            run_model(model, flipped)
        for site in FLIP_SITES:
            after = recalled(model, batch, [("hook_seed_embed", _seed_hook(acts["seed"], sites[site]))])
            change = after != before
            right = change & (after == now_in)
            results.append(FlipResult(
                site, label, int(now_in.sum()), int((~now_in).sum()),
                float(before[now_in].float().mean()), float(after[now_in].float().mean()),
                float(before[~now_in].float().mean()), float(after[~now_in].float().mean()),
                float(change.float().mean()), float(right.sum() / change.sum().clamp(min=1)),
                float((after == now_in).float().mean())))
    return results



# ---------------------------------------------------------------------- rivals
# Plausible, different algorithms for the same answer, stated as Mechanisms with the flagship's
# ``outputs`` so a comparison can look for inputs where they part. The flagship's answer is the
# queried value on every input (``stored`` is tested by its predictions, not read by its answer),
# so "the seed is ignored and recall always succeeds" would give the flagship's answers exactly:
# no input could tell the two apart. Each rival therefore says what the model answers when
# recall fails, and says it without the seed (no seed site).

# The queried pair's weight in the uniform-interference rival, against 1 for every other pair:
# the smallest even weight whose predicted failures (0.15 of held-out inputs at N = 12) do not
# exceed the model's (0.19); weight 4 predicts 0.46, 8 predicts 0.03.
INTERFERENCE_WEIGHT = 6
# The recency rival's memory: the last K pairs (recall distance < K) are kept.
MEMORY_PAIRS = 10

INTERFERENCE_PSEUDOCODE = """\
the seed is ignored: every key code is fixed, every other pair leaks into the query alike
at the query N (key q), per value bit j:                       # a0.0 @ N + a1.0 @ N, no seed site
    bit_j = [ W * (2 value_q[j] - 1) + sum_{i != q} (2 value_i[j] - 1) > 0 ]   # W = INTERFERENCE_WEIGHT
claim: recall fails exactly where the other pairs' bits outvote the queried one (the input, not the seed)"""

RECENCY_PSEUDOCODE = """\
the seed is ignored: linear attention's fixed-size state keeps the last K pairs (K = MEMORY_PAIRS)
distance = N - 1 - query_index
answer = value_q if distance < K                               # a0.0 @ N + a1.0 @ N
         else per bit the majority of the last K values (ties 0)  # the older pair was overwritten
claim: which keys are stored depends on where the queried pair sits, not on the seed"""


def _position_of(batch: Any, key: Tensor) -> Tensor:
    """``[n]`` the position of the pair holding ``key`` (``[n]``)."""
    return (batch.metadata["key_order"] == key[:, None]).long().argmax(1)


def interference_code(batch: Any, weight: int = INTERFERENCE_WEIGHT, query_key: Tensor | None = None) -> Tensor:
    """``[n]`` the packed answer of the uniform-interference rival: per value bit, the sign of
    ``weight`` votes for the queried pair's bit against one vote per other pair (ties: the
    queried bit); ``query_key`` (``[n]``, default the batch's): the key asked for."""
    meta = batch.metadata
    key = meta["query_key"] if query_key is None else query_key
    votes = 2 * meta["values"] - 1  # [n, N, V] +-1
    rows = torch.arange(len(votes), device=votes.device)
    own = votes[rows, _position_of(batch, key)]  # [n, V]
    total = weight * own + votes.sum(1) - own
    return pack_bits(torch.where(total == 0, own > 0, total > 0))


def kept_majority_code(batch: Any, memory: int = MEMORY_PAIRS) -> Tensor:
    """``[n]`` the packed per-bit majority of the last ``memory`` pairs' values (ties 0): what
    the recency rival answers for a pair the state no longer holds."""
    values = batch.metadata["values"]
    return pack_bits(2 * values[:, values.shape[1] - memory:].sum(1) > memory)


def recency_code(batch: Any, memory: int = MEMORY_PAIRS) -> Tensor:
    """``[n]`` the packed answer of the recency rival: the queried value when it is among the
    last ``memory`` pairs, else :func:`kept_majority_code`."""
    meta = batch.metadata
    values, query_index = meta["values"], meta["query_index"]
    rows = torch.arange(len(values), device=values.device)
    kept = values.shape[1] - 1 - query_index < memory
    return torch.where(kept, pack_bits(values[rows, query_index] > 0), kept_majority_code(batch, memory))


SHORTFALL_INPUTS, SHORTFALL_SEEDS = 300, 16  # the key-code study the shortfall line is measured on


def shortfall(model: Any, task: Any) -> str | None:
    """Where S(seed) falls short, in one line measured on the model: recall is decided by
    collisions of key codes, not by a stored set (:func:`circuits.analyses.recall_codes.code_study`
    on :data:`SHORTFALL_INPUTS` inputs under :data:`SHORTFALL_SEEDS` seeds; the full account:
    ``interp-rand randomness RUN --compare ERM_TWIN``). ``None`` for a model the key-code split
    does not fit (softmax attention, normalisation or MLPs)."""
    from circuits.analyses.recall_codes import check_architecture, code_study

    try:
        check_architecture(model)
    except ValueError:
        return None
    codes = code_study(model, task, n_inputs=SHORTFALL_INPUTS, n_seeds=SHORTFALL_SEEDS)
    moved = codes.details["transplant_any"]
    return (f"no stored set: recall fails where other pairs' key codes collide with the query's (crosstalk AUC "
            f"{codes.interference_auc:.2f}, the signal alone {codes.signal_auc:.2f}), and another seed's codes alone "
            f"rescue {moved['all_codes']:.2f} of failing recalls, its values {moved['values']:.2f} "
            f"({SHORTFALL_INPUTS} inputs x {SHORTFALL_SEEDS} seeds; the account: interp-rand randomness)")


def rivals(task: Any, weight: int = INTERFERENCE_WEIGHT, memory: int = MEMORY_PAIRS,
           n_predict: int = N_PREDICT) -> dict[str, Mechanism]:
    """Rivals of :func:`mechanism` on ``task`` (a ``RecallTask``), by name. Both ignore the seed
    (no seed site) and answer the queried value where recall succeeds, as the flagship does;
    they differ on where, and how, it fails:

    - ``recall-uniform-interference`` (the flagship's own readout with the seed taken out: every
      other pair leaks into the query with the same weight, so failures are fixed by the input's
      values);
    - ``recall-recency`` (the fixed-size state keeps the last ``memory`` pairs: the stored set
      is decided by the queried pair's position)."""
    N = task.n_pairs
    if not 1 <= memory <= N:
        raise ValueError(f"memory={memory} must be in 1..{N} pairs")
    if weight < 1:
        raise ValueError(f"weight={weight} must be >= 1")
    heads = Site.of(Node("head", 0, 0, position=N), Node("head", 1, 0, position=N))

    def query_key() -> Variable:
        return Variable("query_key", lambda b: b.metadata["query_key"], site=Site.of(Node("embed", position=N)),
                        description="which key the query token asks for (its embedding)")

    def held_out(t: Any, g: torch.Generator) -> Any:
        return held_out_batch(t, n_predict, g)

    def differs(b: Any, v: dict[str, Tensor]) -> Tensor:
        return v["answer"] != v["retrieved"]

    interference = Mechanism(
        "recall-uniform-interference", "recall",
        (query_key(),
         Variable("retrieved", lambda b, query_key: _value_code(b, query_key), parents=("query_key",),
                  description="the queried pair's value (the answer where the queried pair outvotes the others)"),
         Variable("answer", lambda b, query_key: interference_code(b, weight, query_key), parents=("query_key",),
                  site=heads,
                  description=f"per bit, the queried pair's {weight} votes against one per other pair: the "
                              "heads' sum with every key code alike (the seed ignored)")),
        answer=lambda b, answer: answer, answer_parents=("answer",), outputs=(0,),
        predictions=(Prediction("the other pairs outvote the queried value",
                                "the uniform sum flips a bit there, whatever the seed", differs, "fail", 0.5,
                                held_out),),
        pseudocode=INTERFERENCE_PSEUDOCODE.replace("W = INTERFERENCE_WEIGHT", f"W = {weight}"),
    )
    recency = Mechanism(
        "recall-recency", "recall",
        (query_key(),
         Variable("distance", lambda b, query_key: N - 1 - _position_of(b, query_key), parents=("query_key",),
                  description="how many pairs came after the queried one (its position, not localised)"),
         Variable("retrieved", lambda b, query_key: _value_code(b, query_key), parents=("query_key",),
                  description="the queried pair's value"),
         Variable("answer", lambda b, distance, retrieved: torch.where(distance < memory, retrieved,
                                                                       kept_majority_code(b, memory)),
                  parents=("distance", "retrieved"), site=heads,
                  description=f"the queried value if it is among the last {memory} pairs, else their "
                              "per-bit majority")),
        answer=lambda b, answer: answer, answer_parents=("answer",), outputs=(0,),
        predictions=(Prediction(f"the queried pair older than the last {memory}",
                                "the state no longer holds it, whatever the seed",
                                lambda b, v: v["distance"] >= memory, "fail", 0.5, held_out),
                     Prediction(f"the queried pair among the last {memory}", "the state holds it",
                                lambda b, v: v["distance"] < memory, "succeed", 0.9, held_out)),
        pseudocode=RECENCY_PSEUDOCODE.replace("K = MEMORY_PAIRS", f"K = {memory}"),
    )
    return {m.name: m for m in (interference, recency)}


__all__ = ["shortfall", "FLIP_SITES", "FlipResult", "N_PREDICT", "PSEUDOCODE", "RULE", "RUN", "check_rule", "derive_rule",
           "flip_intervention", "held_out_batch", "in_stored_set", "mechanism", "recalled", "seed_split",
           "stored_set"]
__all__ += ["INTERFERENCE_PSEUDOCODE", "INTERFERENCE_WEIGHT", "MEMORY_PAIRS", "RECENCY_PSEUDOCODE",
            "interference_code", "kept_majority_code", "recency_code", "rivals"]
