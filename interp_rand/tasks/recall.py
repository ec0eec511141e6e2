"""Associative recall under a memory limit (the paper's task 1).

``N`` key/value pairs, then a query; the model must output the queried key's value bits.
Every token is a real vector of width ``N + value_bits``::

    position 0 .. N-1   [one_hot(key_i) (N), value_i bits (value_bits)]   keys: a random
                                                                          permutation of 0..N-1
                                                                          (key_order="identity":
                                                                          key i at position i)
    position N          [one_hot(query key),  zeros (value_bits)]          query: one of the keys

The only answer position is the query (``N``); its target is the queried pair's value bits
(binary cross-entropy, ``loss_kind="bce"``). The **recall distance** of an example is
``N - 1 - query_index``: how many pairs came after the queried one.

Seeds: one ``seed_bits``-bit Bernoulli(1/2) vector per example, seen at every position (the paper
concatenates it to every token; our model does so with ``seed_mode="append"`` before the input
MLP), so only ``2**seed_bits`` seeds exist and :meth:`RecallTask.all_seeds` enumerates them.

Two conventions are fields, stored with every run and left out of ``config_dict`` at their
defaults (so runs written before they existed read, and hash, as before): ``key_order`` (the
toolkit permutes the keys; the paper's public JAX port puts key ``i`` at position ``i``) and
``r0``, the fixed seed of the deterministic variants (the toolkit's own draw, given bits, or
``"unknown"``: a fixed-seed model whose seed is not known is refused, never run at another).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from interp_rand.losses import bit_patterns
from interp_rand.tasks.base import KEY_VALUE_RECALL, Batch, PairBatch, model_config_from, register_task
from interp_rand.tasks.randomized import Experiment, ExperimentScale, first_seed, replace_seeds

if TYPE_CHECKING:
    from interp_rand.model.config import ModelConfig

MAX_PAIRS = 64
# The residual width of the paper's recall model (the port's ``embed_dim = 8 * 5``).
RECALL_WIDTH = 40
# all_seeds() materialises 2**seed_bits rows; beyond this the seeds are not "enumerable".
MAX_ENUMERABLE_SEED_BITS = 16
# ``key_order``: a uniform permutation of the keys per example, or key i at position i (the port)
KEY_ORDERS = ("permuted", "identity")
# ``r0``: the toolkit's own fixed seed (:func:`first_seed`), the bits as a 0/1 string, or not known
R0_TOOLKIT, R0_UNKNOWN = "toolkit", "unknown"
# The convention fields and their defaults (left out of ``config_dict`` at these values).
CONVENTION_DEFAULTS = {"key_order": "permuted", "r0": R0_TOOLKIT, "n_keys": None}


from interp_rand.validation import is_int as _is_int


def _is_integer(t: Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def _rows_are_distinct_keys(t: Tensor, n_keys: int) -> bool:
    """Is every row of ``t: [batch, N]`` ``N`` distinct keys of ``0 .. n_keys-1`` (with
    ``n_keys = N``: a permutation of ``0 .. N-1``)?"""
    if not t.numel():
        return True
    ordered = t.sort(1).values
    return bool(ordered.min() >= 0 and ordered.max() < n_keys and (ordered[:, 1:] != ordered[:, :-1]).all())


@dataclass(frozen=True)
class RecallScale(ExperimentScale):
    """One named training scale of the recall experiments (the sweep over ``N`` and the
    optimiser settings). Field names shared with ``TrainConfig`` mean the same there.

    Attributes:
        n_pairs: the task sizes ``N`` swept.
        d_model: the model width (the paper's 40; also the input MLP's width).
        (and the optimiser settings and seed budget of :class:`ExperimentScale`)
    """

    n_pairs: tuple[int, ...]
    d_model: int

    def model_overrides(self) -> dict[str, Any]:
        return {"d_model": self.d_model}


# The paper and the public port: Adam (beta 0.9/0.95, eps 1e-5, no weight decay), batch 512,
# clip 1, lr warmed up linearly to 3e-3 then cosine-annealed to 3e-4, m = 30 seeds shared by the
# batch, q = 100 from the first step, from scratch, 100 evaluation seeds; the port trains 10k
# steps with 333 warm-up steps.
RECALL_PAPER = RecallScale(
    n_pairs=(8, 10, 11, 12, 14, 16, 20),
    d_model=RECALL_WIDTH,
    steps=10_000,
    batch_size=512,
    lr=3e-3,
    warmup_steps=333,
    min_lr_ratio=0.1,
    weight_decay=0.0,
    beta1=0.9,
    beta2=0.95,
    adam_eps=1e-5,
    grad_clip=1.0,
    m_seeds=30,
    q=100.0,
    eval_seeds=100,
)

# CPU scale: the paper's model, objective and optimiser; two departures, both for time:
# batch 128 instead of 512 and 6k steps instead of 10k (the q-norm's gradient reaches only the
# worst inputs of each batch, so a smaller batch sees fewer of them per step), and the sweep
# over N in {8, 12, 14, 16} instead of the paper's seven sizes. Every variant trains from
# scratch with a constant q, as in the paper.
RECALL_CPU = dataclasses.replace(
    RECALL_PAPER,
    n_pairs=(8, 12, 14, 16),
    steps=6_000,
    batch_size=128,
    warmup_steps=300,
    eval_seeds="all",  # the 1,024 seeds: exact, and cheap at this size
)

# The public port's own recipe, the toolkit's reproduction recipe where the CPU scale falls short
# (N >= 14): the paper scale with the port's cosine floor (3e-3 annealed to about 9e-7, not 3e-4),
# over N in {14, 16}, every seed evaluated. About 95 minutes a run on one shared CPU core.
RECALL_PORT = dataclasses.replace(RECALL_PAPER, n_pairs=(14, 16), min_lr_ratio=0.0003, eval_seeds="all")

# Read off the paper (values marked ≈ there were read off the paper's plots). ``metric`` is a
# column of reproduce's table; ``bound: "≤"`` marks an upper bound, not a value.
_PAPER_NS = (8, 10, 11, 12, 14, 16, 20)
RECALL_PAPER_POINTS: tuple[dict[str, Any], ...] = (
    *[{"variant": v, "N": n, "metric": "worst_5pct", "value": 1.0 if n <= 11 else 0.0}
      for v in ("A^E_r0", "A^q_r0", "A^E_R") for n in _PAPER_NS],
    *[{"variant": "A^q_R", "N": n, "metric": "worst_5pct", "value": v}
      for n, v in ((12, 0.67), (14, 0.42), (16, 0.29), (20, 0.20))],
    *[{"variant": "A^q_R", "N": n, "metric": "majority_30_worst", "value": 1.0} for n in _PAPER_NS],
    {"variant": "A^q_R", "N": 20, "metric": "majority_5_worst", "value": 0.50},
    {"variant": "A^q_R", "N": 20, "metric": "average", "value": 0.40},
    {"variant": "A^E_R", "N": 20, "metric": "average", "value": 0.57},
)

# ``interp-rand reproduce recall``: every variant at each N of the scale, on 1,000 fresh inputs.
RECALL_EXPERIMENT = Experiment(
    sweep_key="N",
    settings=lambda scale: [{"n_pairs": n} for n in scale.n_pairs],
    sweep_value=lambda task_config, config: task_config["n_pairs"],
    scales={"cpu": RECALL_CPU, "paper": RECALL_PAPER, "port": RECALL_PORT},
    eval_inputs=1000,
    paper_points=RECALL_PAPER_POINTS,
    paper_note="paper: majority-30 of A^q_R ≈ 100% worst-case at every N; majority-5 ≈ 50% at N = 20",
)


@register_task
@dataclass(frozen=True)
class RecallTask:
    """Recall the value bits of a queried key among ``n_pairs`` key/value pairs.

    Attributes:
        n_pairs: ``N``, the number of pairs (2 .. 64).
        value_bits: bits per value (>= 1; the paper uses 5).
        seed_bits: width of the seed shared by all positions (>= 1; the paper uses 10).
        key_order: ``"permuted"`` (a uniform order of the keys per example) or ``"identity"``
            (key i at position i, as the paper's public JAX port samples).
        n_keys: the key alphabet, the width of a key's one-hot (``None``: ``n_pairs``, the
            paper's task). With more keys than pairs each example draws ``n_pairs`` distinct keys,
            and the same model reads any number of pairs up to ``n_keys``: the task's length is
            ``n_pairs`` (:mod:`interp_rand.tasks.lengths`; at another length the key alphabet is
            kept). Left out of ``config_dict`` at ``None``.
        r0: the fixed seed of a model trained on one seed: ``"toolkit"`` (the toolkit's own
            draw), ``seed_bits`` 0/1 characters (e.g. an imported model's seed), or
            ``"unknown"`` (evaluating such a model at its fixed seed is refused).
    """

    name: ClassVar[str] = "recall"
    description: ClassVar[str] = "recall a queried key's value bits among N pairs (seeded, linear attention)"
    loss_kind: ClassVar[str] = "bce"
    capabilities: ClassVar[frozenset[str]] = frozenset({KEY_VALUE_RECALL})
    experiment: ClassVar[Experiment] = RECALL_EXPERIMENT

    n_pairs: int = 12
    value_bits: int = 5
    seed_bits: int = 10
    key_order: str = "permuted"
    n_keys: int | None = None
    r0: str = R0_TOOLKIT

    def __post_init__(self) -> None:
        # Fail at construction, not at the first sample deep inside a training run.
        self.validate()

    # ------------------------------------------------------------------ config

    # the field that is its length (interp_rand.tasks.lengths): the number of pairs, over a kept key alphabet
    length_field: ClassVar[str] = "n_pairs"

    @property
    def key_space(self) -> int:
        """The number of distinct keys (``n_keys``, or ``N``)."""
        return self.n_pairs if self.n_keys is None else self.n_keys

    def at_length(self, n_pairs: int) -> "RecallTask":
        """This task with ``n_pairs`` pairs over the same key alphabet (so the same model reads
        it); more pairs than keys is refused."""
        return dataclasses.replace(self, n_pairs=n_pairs, n_keys=None if n_pairs == self.key_space else self.key_space)

    @property
    def d_input(self) -> int:
        """Token width: one-hot key (the key alphabet) plus value bits."""
        return self.key_space + self.value_bits

    @property
    def n_ctx(self) -> int:
        """``N + 1``: the pairs and the query."""
        return self.n_pairs + 1

    @property
    def d_seed(self) -> int:
        return self.seed_bits

    @property
    def seed_shape(self) -> tuple[int, ...]:
        """``(seed_bits,)``: one seed shared by every position."""
        return (self.seed_bits,)

    def position_names(self) -> list[str]:
        return [f"k{i}" for i in range(self.n_pairs)] + ["query"]  # the i-th key/value pair, then the query

    def token_labels(self, batch: Batch, row: int) -> list[str]:
        meta = batch.metadata
        names = self.position_names()
        pairs = [f"{name}: key {int(meta['key_order'][row, i])} -> "
                 + "".join(str(int(b)) for b in meta["values"][row, i]) for i, name in enumerate(names[:-1])]
        return pairs + [f"{names[-1]}: key {int(meta['query_key'][row])}"]

    def validate(self) -> None:
        if not _is_int(self.n_pairs) or not 2 <= self.n_pairs <= MAX_PAIRS:
            raise ValueError(f"RecallTask.n_pairs={self.n_pairs!r} must be an integer in 2..{MAX_PAIRS}")
        if not _is_int(self.value_bits) or self.value_bits < 1:
            raise ValueError(f"RecallTask.value_bits={self.value_bits!r} must be an integer >= 1")
        if not _is_int(self.seed_bits) or self.seed_bits < 1:
            raise ValueError(f"RecallTask.seed_bits={self.seed_bits!r} must be an integer >= 1")
        if self.n_keys is not None and (not _is_int(self.n_keys) or not self.n_pairs <= self.n_keys <= MAX_PAIRS):
            raise ValueError(f"RecallTask.n_keys={self.n_keys!r} must be an integer in n_pairs={self.n_pairs}..{MAX_PAIRS} "
                             "(each example draws n_pairs distinct keys), or None (n_keys = n_pairs)")
        if self.key_order not in KEY_ORDERS:
            raise ValueError(f"RecallTask.key_order={self.key_order!r} is not allowed; choose from {KEY_ORDERS}")
        bits = isinstance(self.r0, str) and len(self.r0) == self.seed_bits and set(self.r0) <= {"0", "1"}
        if self.r0 not in (R0_TOOLKIT, R0_UNKNOWN) and not bits:
            raise ValueError(f"RecallTask.r0={self.r0!r} must be {R0_TOOLKIT!r}, {R0_UNKNOWN!r} or "
                             f"seed_bits={self.seed_bits} characters 0/1")

    def config_dict(self) -> dict[str, Any]:
        """The fields, without the conventions that are at their defaults (:data:`CONVENTION_DEFAULTS`)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if CONVENTION_DEFAULTS.get(k, object()) != v}

    def model_config(self, **overrides: Any) -> "ModelConfig":
        """The paper's recall model (as its public JAX port builds it); ``overrides`` win.

        Each token ``[key, value]`` joined with the seed bits goes through one linear map to
        width 40 (``W_E`` and ``W_seed`` together, with the input MLP's ``b_in`` as its bias), a
        GELU and a second linear map (the input MLP's ``W_out``): token -> 40 -> 40, with no
        extra matrix in between (``input_mlp_w_in=False``). Then 2 attention-only blocks of one
        head with key size 5 and causal *linear* attention (its fixed-size state is the memory
        limit), unscaled and without biases, no LayerNorm, and the fan-in initialisation with
        residual-writing matrices scaled down by depth (``init="fan_in"``): 4,565 parameters at
        N = 12.

        One departure from the paper's text, following the port: no positional embedding (the
        paper says "standard positional encodings"; the port has none, and the one-hot keys
        already tell the pairs apart).
        """
        width = overrides.get("d_model", RECALL_WIDTH)
        defaults: dict[str, Any] = dict(
            d_model=RECALL_WIDTH,
            n_layers=2,
            n_heads=1,
            d_head=5,
            n_ctx=self.n_ctx,
            d_input=self.d_input,
            d_vocab_out=self.value_bits,
            input_kind="vectors",
            attention="linear",
            mask="causal",
            attn_only=True,
            # the embedding is the input MLP's first layer, so the two widths are one; an
            # override with another input-MLP width gives that MLP a first matrix of its own
            d_input_mlp=width,
            input_mlp_w_in=overrides.get("d_input_mlp", width) != width,
            normalization_type=None,
            d_seed=self.seed_bits,
            seed_mode="append",
            positional="none",
            use_attn_scale=False,
            attn_bias=False,
            init="fan_in",
        )
        return model_config_from(defaults, overrides)

    # ------------------------------------------------------------------ seeds

    def sample_seeds(self, m: int, generator: torch.Generator) -> Tensor:
        """``[m, seed_bits]`` float Bernoulli(1/2) bits."""
        bits = torch.randint(0, 2, (m, self.seed_bits), generator=generator, device=generator.device)
        return bits.float()

    def fixed_seed(self) -> Tensor:
        """``[seed_bits]`` the deterministic variants' seed ``r0``: ``first_seed`` for
        ``r0="toolkit"``, the given bits otherwise; ``ValueError`` for ``r0="unknown"`` (a
        fixed-seed model is never evaluated at a seed it was not trained on)."""
        if self.r0 == R0_UNKNOWN:
            raise ValueError("this model was trained on one fixed seed r0 that is not known (recall r0='unknown'); "
                             "give its bits (r0='0110...', --r0 on import) to evaluate it, it is never run at another seed")
        if self.r0 == R0_TOOLKIT:
            return first_seed(self)
        return torch.tensor([float(b) for b in self.r0])

    def all_seeds(self) -> Tensor:
        """``[2**seed_bits, seed_bits]`` float: row ``i`` is ``i`` in binary, most significant
        bit first (so rows are in lexicographic order; the toolkit's one bit order,
        :func:`interp_rand.losses.bit_patterns`). Only for ``seed_bits <= 16``."""
        if self.seed_bits > MAX_ENUMERABLE_SEED_BITS:
            raise ValueError(
                f"all_seeds() needs seed_bits <= {MAX_ENUMERABLE_SEED_BITS} "
                f"(2**seed_bits rows); got seed_bits={self.seed_bits}"
            )
        return bit_patterns(self.seed_bits).float()

    def with_seeds(self, batch: Batch, seeds: Tensor) -> Batch:
        """``batch`` with ``seeds: [len(batch), seed_bits]`` in place of its own."""
        return replace_seeds(batch, seeds, self.seed_shape)

    # ------------------------------------------------------------------ batches

    def answer_positions(self, device: torch.device | str | None = None) -> Tensor:
        """``[1]`` long: the query position ``N``."""
        return torch.tensor([self.n_pairs], device=device)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` examples: uniform key order, uniform value bits, a uniform queried pair and a
        fresh seed per example."""
        device = generator.device
        # (n_keys = N: a uniform permutation, the draws the task always made)
        key_order = torch.rand(n, self.key_space, generator=generator, device=device).argsort(1)[:, : self.n_pairs]
        if self.key_order == "identity":  # the same draws as "permuted", then the port's order
            key_order = torch.arange(self.n_pairs, device=device).expand(n, -1).clone()
        shape = (n, self.n_pairs, self.value_bits)
        values = torch.randint(0, 2, shape, generator=generator, device=device)
        query_index = torch.randint(0, self.n_pairs, (n,), generator=generator, device=device)
        return self._build(key_order, values, query_index, self.sample_seeds(n, generator))

    def build(
        self, key_order: Tensor, values: Tensor, query_index: Tensor, seeds: Tensor | None = None
    ) -> Batch:
        """The batch for given pairs and queries.

        Args:
            key_order: ``[batch, N]`` integer, ``N`` distinct keys of ``0 .. key_space-1`` per
                row (a permutation of ``0 .. N-1`` without ``n_keys``): the key id of the pair at
                each position.
            values: ``[batch, N, value_bits]`` 0/1, the value of the pair at each position.
            query_index: ``[batch]`` integer in ``0 .. N-1``, the queried pair's position.
            seeds: ``[batch, seed_bits]`` or ``None`` (all-zero seeds, to be replaced with
                :meth:`with_seeds`).

        Returns:
            A :class:`Batch`: ``inputs`` ``[batch, N+1, key_space+value_bits]`` float, ``targets``
            ``[batch, N+1, value_bits]`` float (the queried value at position ``N``, zeros
            elsewhere), ``loss_mask`` ``[batch, N+1]`` (true at ``N`` only), ``seeds``
            ``[batch, seed_bits]``, metadata ``query_index``, ``query_key`` ``[batch]``,
            ``values`` ``[batch, N, value_bits]`` long, ``key_order`` ``[batch, N]``.
        """
        n, N = len(key_order), self.n_pairs
        if key_order.shape != (n, N) or not _is_integer(key_order):
            raise ValueError(
                f"key_order must be integer [batch, n_pairs={N}], "
                f"got {key_order.dtype} {tuple(key_order.shape)}"
            )
        if not _rows_are_distinct_keys(key_order, self.key_space):
            raise ValueError(f"every row of key_order must be {N} distinct keys of 0..{self.key_space - 1}")
        if values.shape != (n, N, self.value_bits) or not ((values == 0) | (values == 1)).all():
            raise ValueError(
                f"values must be 0/1 [batch, n_pairs={N}, value_bits={self.value_bits}], "
                f"got {tuple(values.shape)}"
            )
        if query_index.shape != (n,) or not _is_integer(query_index):
            raise ValueError(
                f"query_index must be integer [batch={n}], "
                f"got {query_index.dtype} {tuple(query_index.shape)}"
            )
        if n and (int(query_index.min()) < 0 or int(query_index.max()) >= N):
            raise ValueError(f"query_index must lie in 0..{N - 1}")
        if seeds is None:
            seeds = torch.zeros(n, self.seed_bits, device=key_order.device)
        elif seeds.shape != (n, self.seed_bits):
            raise ValueError(f"seeds must be [batch={n}, seed_bits={self.seed_bits}], got {tuple(seeds.shape)}")
        return self._build(key_order.long(), values.long(), query_index.long(), seeds.float())

    def _build(self, key_order: Tensor, values: Tensor, query_index: Tensor, seeds: Tensor) -> Batch:
        """:meth:`build` without input checks (the sampling hot path)."""
        n, N, V = len(key_order), self.n_pairs, self.value_bits
        device = key_order.device
        rows = torch.arange(n, device=device)
        query_key = key_order[rows, query_index]

        eye = torch.eye(self.key_space, device=device)
        pairs = torch.cat([eye[key_order], values.float()], dim=-1)  # [batch, N, N + V]
        query = torch.cat([eye[query_key], torch.zeros(n, V, device=device)], dim=-1)
        inputs = torch.cat([pairs, query[:, None]], dim=1)  # [batch, N + 1, N + V]

        targets = torch.zeros(n, N + 1, V, device=device)
        targets[:, N] = values[rows, query_index].float()
        loss_mask = torch.zeros(n, N + 1, dtype=torch.bool, device=device)
        loss_mask[:, N] = True
        return Batch(
            inputs=inputs,
            targets=targets,
            loss_mask=loss_mask,
            answer_positions=self.answer_positions(device),
            seeds=seeds,
            metadata={
                "query_index": query_index,
                "query_key": query_key,
                "values": values,
                "key_order": key_order,
            },
        )

    # ------------------------------------------------------------------ patching

    def corrupt(self, batch: Batch, generator: torch.Generator) -> PairBatch:
        """Query another pair: per row, a uniform pair whose value differs from the queried
        one in at least one bit (pairs, values and seeds unchanged).

        Where every other pair holds the same value as the queried one (probability
        ``2**(-value_bits * (N-1))`` per row) the answer cannot change; those rows query a
        uniform other pair and keep their answer. ``changed`` ``[batch]`` is the newly
        queried pair's position (the new ``query_index``).
        """
        meta = batch.metadata
        key_order, values, query_index = meta["key_order"], meta["values"], meta["query_index"]
        n, N = key_order.shape
        device = key_order.device
        rows = torch.arange(n, device=device)
        other = torch.arange(N, device=device) != query_index[:, None]  # [batch, N]
        differs = (values != values[rows, query_index][:, None]).any(-1) & other
        candidates = torch.where(differs.any(1, keepdim=True), differs, other)
        # argmax of random scores over the candidates = a uniform candidate.
        scores = torch.rand(n, N, generator=generator, device=generator.device).to(device)
        new_query = torch.where(candidates, scores, -1.0).argmax(1)
        corrupted = self._build(key_order, values, new_query, batch.seeds)
        return PairBatch(clean=batch, corrupted=corrupted, changed=new_query)
