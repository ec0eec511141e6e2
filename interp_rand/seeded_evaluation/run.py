"""Run a model on every (input, seed) pair: the :class:`SeedRun` the metrics read."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from interp_rand import losses
from interp_rand.evaluation import check_model_fits_task
from interp_rand.losses import (
    answer_correct,
    answer_logits,
    answers_every_position,
    get_loss_kind,
    loss_kinds,
    output_judge,
    vote_rules,
)
from interp_rand.model.fast import FastForward
from interp_rand.model.first_block import FirstBlockTable
from interp_rand.model.receptive_field import ReceptiveFields
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Batch, Task

#: Loss kinds whose logits are independent bits (one logit per output unit), as registered when
#: this module was imported; every other kind's logits are classes. The loss kind itself says
#: (``get_loss_kind(kind).bits``, which :attr:`SeedRun.bits` reads).
BIT_LOSS_KINDS = tuple(k for k in loss_kinds() if get_loss_kind(k).bits)

#: Rows (input-seed pairs) per forward pass by default. Measured on the exhaustive colouring
#: evaluation (``bench/fast_eval.py``, CPU time per row at 1 thread, chunks side by side): 1,024
#: and 2,048 rows the fastest, 4,096 ~25% slower, 8,192 ~2x: a chunk's activations should stay
#: near a core's 1 MiB L2 cache, while each chunk also pays a fixed ~0.35 ms of op dispatch.
DEFAULT_CHUNK_ROWS = 2048

#: Rows per chunk where the logits are looked up from receptive fields, not computed (at least
#: the forward's chunk): a lookup chunk holds no activations, so the per-chunk dispatch is what
#: its size trades against. Measured on the exhaustive colouring evaluation (2 workers, 2026-12-02,
#: load 1-1.8): 2,048 rows 22.3 / 23.0 s (40.0 / 40.6 CPU-s), 8,192 rows 16.6-20.8 s (31.4-36.4),
#: 16,384 rows 17.3 s (32.4), 32,768 rows 17.1 / 15.6 s (32.0 / 29.6).
LOOKUP_CHUNK_ROWS = 32_768


#: Chunks of whole inputs (for per-input statistics) hold a multiple of ``lcm(S, ALIGN_ROWS)``
#: rows. The softmax of a few classes (:meth:`~interp_rand.losses.ClassDecoding.marginals`)
#: rounds a chunk's last values differently when its length is not a multiple of the vector
#: width, so chunks of 2,048 or 32,768 rows (the defaults) and of multiples of 16 rows give the
#: same probabilities bit for bit, where 2,100 rows (21 inputs of 100 seeds) would not.
ALIGN_ROWS = 16


def _whole_inputs(rows: int, n_seeds: int) -> int:
    """``rows`` rounded up to chunks of whole inputs (:data:`ALIGN_ROWS`)."""
    step = math.lcm(n_seeds, ALIGN_ROWS)
    return -(-rows // step) * step


@dataclass(frozen=True)
class SeedRun:
    """A model's behaviour on ``n`` inputs x ``S`` seeds.

    Attributes:
        success: ``[n, S]`` bool, every answer position of input ``i`` under seed ``j`` right
            (``answer_correct(...).all(-1)``, so the task's own notion of correct).
        outputs: ``[n, S, n_answer]``, one hashable discrete output per answer position, in
            the smallest integer type that holds every output of the loss kind
            (:func:`output_dtype`: ``uint8`` for up to 256 classes, e.g. 3 colours): the loss
            kind's answer id (:meth:`~interp_rand.losses.LossKind.predict`: the argmax class, or
            for bit kinds (``"bce"``) the thresholded bits packed into an integer by
            :func:`interp_rand.losses.pack_bits`, most significant bit first: the one bit order of
            the toolkit).
        probs: ``[n, S, n_answer, K]`` float, the output distribution: the softmax over
            ``K = d_vocab_out`` classes, or for bit tasks the per-bit sigmoid probabilities
            (``K = n_bits``; bit ``k`` is 1 with probability ``probs[..., k]``, independently;
            the joint over ``2**n_bits`` packed outputs is their product and is not stored).
            ``None`` unless ``success_matrix(..., keep_probs=True)``: what the metrics read of
            it is computed while the model runs (:attr:`variance`, :attr:`sampled`).
        loss_kind: the task's loss kind.
        target_outputs: ``[n, n_answer]`` long, the right output in the encoding of
            ``outputs``, for tasks where correct means equal to the target (``"ce"``,
            ``"bce"``); ``None`` for other kinds (e.g. colouring, where any valid colouring is
            right).
        judge: ``outputs [n, k, n_answer] long -> [n, k] bool`` for the run's ``n`` inputs, the
            loss kind's judge of outputs that have no logits (a vote's combined output, a
            sampled one); ``None`` for kinds judged against ``target_outputs``. Use
            :meth:`judge_outputs`, which covers both.
        vote_rules: how the outputs of several seeds combine for this loss kind (majority-k,
            see :mod:`~interp_rand.seeded_evaluation.amplification`).
        variance: ``[n]`` float, per input the predictive variance (what
            :func:`~interp_rand.seeded_evaluation.predictive_variance` computes from
            :attr:`probs`), computed chunk by chunk while the model ran; ``None`` when not asked
            for (``success_matrix(..., variance=False)``).
        sampled: ``[n]`` float, per input the output-sampled baseline (what
            :func:`~interp_rand.seeded_evaluation.sampled_success` computes from :attr:`probs`
            with the same generator, judged by the run's own judge or targets), drawn chunk by
            chunk while the model ran (``success_matrix(..., sample=generator)``); else ``None``.
        n_samples: the samples per input behind :attr:`sampled` (``None`` without it).
    """

    success: Tensor
    outputs: Tensor
    probs: Tensor | None
    loss_kind: str
    target_outputs: Tensor | None = None
    judge: Callable[[Tensor], Tensor] | None = None
    vote_rules: tuple[str, ...] = ("majority_whole",)
    variance: Tensor | None = None
    sampled: Tensor | None = None
    n_samples: int | None = None

    def judge_outputs(self, outputs: Tensor) -> Tensor:
        """``outputs [n, k, n_answer]`` long (encoded like :attr:`outputs`) -> ``[n, k]`` bool:
        is each whole output right, by :attr:`judge` or else equality with the targets."""
        if self.judge is not None:
            return self.judge(outputs)
        if self.target_outputs is None:
            raise ValueError(f"loss kind {self.loss_kind!r} has neither a judge nor target outputs")
        return (outputs == self.target_outputs[:, None]).all(-1)

    @property
    def n_inputs(self) -> int:
        return self.success.shape[0]

    @property
    def n_seeds(self) -> int:
        return self.success.shape[1]

    @property
    def bits(self) -> bool:
        """True when outputs are packed bits (``probs`` then holds per-bit probabilities): the
        loss kind's decoding says; a kind the registry does not know has class outputs."""
        return self.loss_kind in loss_kinds() and get_loss_kind(self.loss_kind).bits


# ----------------------------------------------------------------------------------------
# Running the model on every (input, seed) pair
# ----------------------------------------------------------------------------------------
def resolve_seeds(task: Task, seeds: Tensor | Literal["all"] | None) -> Tensor | None:
    """``seeds`` itself, or for ``"all"`` every seed of ``task`` (``task.all_seeds()``, e.g.
    recall's ``2**10`` bit patterns; ``ValueError`` where the seeds cannot be enumerated)."""
    if isinstance(seeds, str):
        if seeds != "all":
            raise ValueError(f"seeds={seeds!r}: give a tensor, None or 'all'")
        if not hasattr(task, "all_seeds"):
            raise ValueError(f"seeds='all': task {task.name!r} has no seed channel")
        return task.all_seeds()
    return seeds


def _check_seeds(batch: Batch, seeds: Tensor | None) -> int:
    """Validate ``seeds`` against ``batch``; return ``S`` (1 when ``seeds`` is None)."""
    if seeds is None:
        return 1
    if seeds.dim() not in (2, 3) or seeds.shape[0] < 1:
        raise ValueError(
            f"seeds must be [S, d_seed] or [S, pos, d_seed] with S >= 1; got {tuple(seeds.shape)}"
        )
    if seeds.dim() == 3 and seeds.shape[1] != batch.inputs.shape[1]:
        raise ValueError(
            f"per-position seeds must be [S, pos={batch.inputs.shape[1]}, d_seed]; "
            f"got {tuple(seeds.shape)}"
        )
    return seeds.shape[0]


def _take(t: Tensor, index: Tensor) -> Tensor:
    """``t[index]`` along the first axis; a tensor broadcast along it (stride 0: every row the
    same, e.g. the colouring's one-hot vertex ids) stays a broadcast view, not a copy."""
    if t.dim() and t.shape[0] and t.stride(0) == 0:
        return t[:1].expand(len(index), *t.shape[1:])
    return t.index_select(0, index)  # (~2x faster than t[index] on the colouring's masks and targets)


def _expand_rows(batch: Batch, seeds: Tensor | None, start: int, stop: int) -> Batch:
    """Rows ``start:stop`` of the ``n*S``-row batch: row ``r`` = input ``r // S``, seed ``r % S``."""
    n_seeds = 1 if seeds is None else seeds.shape[0]
    rows = torch.arange(start, stop, device=batch.inputs.device)
    return dataclasses.replace(_select_inputs(batch, rows // n_seeds),
                               seeds=None if seeds is None else seeds.to(batch.inputs.device)[rows % n_seeds])


def _select_inputs(batch: Batch, inputs: Tensor) -> Batch:
    """The inputs ``inputs`` of ``batch``, without seeds (a broadcast tensor stays a broadcast
    view)."""
    return Batch(
        inputs=_take(batch.inputs, inputs),
        targets=_take(batch.targets, inputs),
        loss_mask=_take(batch.loss_mask, inputs),
        answer_positions=batch.answer_positions,
        seeds=None,
        attention_mask=None if batch.attention_mask is None else _take(batch.attention_mask, inputs),
        metadata={k: _take(v, inputs) for k, v in batch.metadata.items()},
    )


def _chunked(run: Callable[..., tuple[Tensor | None, ...]], total: int, chunk_size: int, workers: int,
             prepare: Callable[[int, int], Any] | None = None) -> list[Tensor | None]:
    """``run(start, stop)`` over ``0 .. total`` in chunks of ``chunk_size``, each chunk writing its
    results into full-size ones (no concatenation at the end). A result may have a row per row of
    the chunk, or several (the receptive fields' logits: a row per position), or one per
    ``chunk_size / m`` rows (per input, with chunks of whole inputs): its rows per chunk row,
    read off the first chunk, place every chunk's. With ``workers > 1`` the chunks after the
    first run side by side, each in its own thread with one intra-op thread (the caller restores
    the thread count), a bounded number at once. ``prepare(start, stop)``, where given, runs in
    this thread in the chunks' order (e.g. random draws from one generator) and its result is
    passed on: ``run(start, stop, prepared)``."""
    results: list[Tensor | None] = []
    scale: list[tuple[int, int]] = []  # per result: (its rows, the chunk's rows) of the first chunk

    def call(start: int, stop: int) -> Callable[[], tuple[Tensor | None, ...]]:
        args = (start, stop) if prepare is None else (start, stop, prepare(start, stop))
        return lambda: run(*args)

    def store(start: int, chunk_results: tuple[Tensor | None, ...]) -> None:
        for whole, chunk, (num, den) in zip(results, chunk_results, scale):
            if whole is not None:
                first = start * num // den
                whole[first : first + len(chunk)] = chunk

    stop = min(chunk_size, total)
    first = call(0, stop)()  # its shapes and dtypes size the results
    for t in first:
        scale.append((1, 1) if t is None or not stop else (len(t), stop))
        results.append(None if t is None else t.new_empty((total * len(t) // max(1, stop), *t.shape[1:])))
    store(0, first)
    del first
    starts = range(chunk_size, total, chunk_size)
    if workers == 1 or len(starts) <= 1:
        for start in starts:
            store(start, call(start, min(start + chunk_size, total))())
        return results
    torch.set_num_threads(1)
    with ThreadPoolExecutor(workers) as pool:
        pending: list[Any] = []
        for start in starts:
            work = call(start, min(start + chunk_size, total))
            pending.append(pool.submit(lambda start=start, work=work: store(start, work())))
            while len(pending) > 2 * workers:  # a bounded number of chunks in flight (memory)
                pending.pop(0).result()
        for done in pending:
            done.result()
    return results


def expand_over_seeds(batch: Batch, seeds: Tensor | None) -> Batch:
    """The ``n*S``-row batch pairing every input of ``batch`` with every seed.

    Row ``i * S + j`` holds input ``i`` (its inputs, targets, masks and metadata) with seed
    ``seeds[j]`` (input-major order). ``seeds`` is ``[S, d_seed]`` (one seed for all positions)
    or ``[S, pos, d_seed]`` (per position); it replaces any seeds ``batch`` carries. With
    ``seeds=None`` the result is ``batch`` itself with no seeds (``S = 1``).

    This materialises all ``n*S`` rows (an input broadcast along the batch, stride 0, stays a
    broadcast view); :func:`success_matrix` builds them chunk by chunk.
    """
    n_seeds = _check_seeds(batch, seeds)
    return _expand_rows(batch, seeds, 0, len(batch) * n_seeds)


def smallest_int(low: int, high: int) -> torch.dtype:
    """The smallest integer dtype holding every value in ``[low, high]``."""
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    return torch.long


def output_dtype(kind: losses.LossKind, width: int) -> torch.dtype:
    """The smallest integer type holding every answer id of ``kind`` with ``width`` output units
    per answer position: classes ``0 .. width - 1``, or ``width`` bits packed (``uint8`` for the
    colouring's 3 colours)."""
    return smallest_int(0, (1 << width) - 1 if kind.bits else max(0, width - 1))


def sample_outputs(probs: Tensor, uniforms: Tensor, bits: bool) -> Tensor:
    """Outputs drawn from ``probs [..., n_answer, K]`` with ``uniforms`` (``torch.rand`` of
    ``probs``' shape for bits, of ``[..., n_answer, 1]`` for classes): ``[..., n_answer]`` long.
    Classes by the inverse CDF (the first class whose cumulative probability exceeds ``u``,
    :func:`inverse_cdf`); bits each on with its probability, packed as
    :func:`~interp_rand.losses.pack_bits` does."""
    if bits:
        return losses.pack_bits(uniforms < probs)
    return inverse_cdf(probs.cumsum(-1), uniforms)


def inverse_cdf(cumulative: Tensor, uniforms: Tensor) -> Tensor:
    """``[...]`` long: the first class whose cumulative probability (``cumulative [..., K]``,
    ``probs.cumsum(-1)``) exceeds ``uniforms [..., 1]``."""
    return (cumulative <= uniforms).sum(-1).clamp(max=cumulative.shape[-1] - 1)


def _table_marginals(table: Tensor, decoder: losses.LossKind, n_pos: int) -> Tensor:
    """``decoder.marginals`` of the receptive fields' logits ``[rows * pos, K]``, computed in
    blocks of a multiple of :data:`ALIGN_ROWS` rows (the last one padded): every value is then the
    one a chunk of rows gives (a few classes' softmax rounds the last values of a chunk whose
    length is not a multiple of the vector width differently, the others alike wherever they are)."""
    rows, width = len(table) // n_pos, table.shape[-1]
    out = torch.empty(table.shape, dtype=torch.float32, device=table.device)
    step = ALIGN_ROWS * 1024
    for first in range(0, rows, step):
        last = min(first + step, rows)
        block = table[first * n_pos : last * n_pos].view(last - first, n_pos, width)
        pad = -(last - first) % ALIGN_ROWS
        if pad:
            block = torch.cat([block, block.new_zeros(pad, n_pos, width)])
        out[first * n_pos : last * n_pos] = decoder.marginals(block)[: last - first].reshape(-1, width)
    return out


def sample_shape(probs_shape: tuple[int, ...], bits: bool) -> tuple[int, ...]:
    """The shape of the uniforms :func:`sample_outputs` takes for probabilities of ``probs_shape``."""
    return tuple(probs_shape) if bits else tuple(probs_shape[:-1]) + (1,)


def _field_tables(table: Tensor, decoder: losses.LossKind, fields: ReceptiveFields, n_seeds: int, n_pos: int,
                  keep_probs: bool, variance: bool, sample: bool) -> dict[str, Tensor]:
    """From the receptive fields' logits ``[R * S * pos, K]``: ``probs`` (each row's
    :func:`_table_marginals`, where kept or drawn as bits), ``variance`` ``[R * pos, K]`` (over the
    seeds, of each representative's position: that of every input whose field it is) and
    ``cumulative`` (``probs.cumsum(-1)``, to draw classes). Per row they are what the row's own
    probabilities give (the same values: one softmax per field and seed, not per row)."""
    probs = _table_marginals(table, decoder, n_pos)
    out: dict[str, Tensor] = {}
    if variance:
        out["variance"] = probs.view(len(fields.inputs), n_seeds, n_pos, -1).var(dim=1, correction=0).flatten(0, 1)
    if sample and not decoder.bits:
        out["cumulative"] = probs.cumsum(-1)
    if keep_probs or (sample and decoder.bits):
        out["probs"] = probs
    return out


def evaluation_forward(model: nn.Module, hooked: bool = False) -> Callable[..., Tensor]:
    """What evaluation calls for ``model``'s logits: its :class:`FastForward` when ``model`` is
    a :class:`~interp_rand.model.HookedTransformer` (its own ``forward``, not a subclass's) with
    no hook attached (on a hook point or any other module) and ``hooked`` is false; otherwise
    ``model`` itself (the hooked path, so hooks, ablations and patches act as always)."""
    if hooked or not isinstance(model, HookedTransformer) or type(model).forward is not HookedTransformer.forward:
        return model
    if "forward" in vars(model) or any(
        m._forward_hooks or m._forward_pre_hooks or m._backward_hooks for m in model.modules()
    ):
        return model  # an ablation or patch must act
    return FastForward.from_model(model)


def success_matrix(
    model: nn.Module,
    task: Task,
    batch: Batch,
    seeds: Tensor | Literal["all"] | None,
    *,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
    keep_probs: bool = False,
    variance: bool = True,
    sample: torch.Generator | None = None,
    n_samples: int | None = None,
    workers: int | None = None,
    hooked: bool = False,
) -> SeedRun:
    """Run ``model`` on every (input, seed) pair of ``batch`` x ``seeds``.

    Args:
        model: called as ``model(inputs, seeds=..., attention_mask=...)`` (only the keyword
            arguments the rows carry), returning ``[rows, pos, d_vocab_out]`` logits.
        task: supplies ``loss_kind`` (correctness via :func:`~interp_rand.losses.answer_correct`).
        batch: ``n`` inputs; any seeds it carries are replaced by ``seeds``.
        seeds: ``[S, d_seed]`` (shared by all positions) or ``[S, pos, d_seed]`` (per position),
            every input meets every seed; ``"all"`` for every seed the task can enumerate
            (:func:`resolve_seeds`); ``None`` for a model without a seed channel (``S = 1``, no
            seeds passed). Memory: the forward passes are chunked; the result holds ``n * S``
            pairs: a bool and ``n_answer`` outputs of :func:`output_dtype` each (with
            ``keep_probs``, ``n_answer * K`` floats more).
        chunk_size: rows (input-seed pairs) per forward pass (rows whose logits are looked up
            from receptive fields go in chunks of at least :data:`LOOKUP_CHUNK_ROWS`), rounded up
            to whole inputs for ``variance`` and ``sample`` (a multiple of ``S`` and of
            :data:`ALIGN_ROWS`).
        keep_probs: store the output distribution (``SeedRun.probs``; on the exhaustive
            colouring set 2.2 GB). What the metrics read of it is computed chunk by chunk
            without it: ``variance`` and ``sample``.
        variance: compute the per-input predictive variance (``SeedRun.variance``, what
            :func:`predictive_variance` reads) chunk by chunk.
        sample: a generator: draw the output-sampled baseline (``SeedRun.sampled``, what
            :func:`sampled_success` reads) chunk by chunk, ``n_samples`` per input (default
            ``S``; sample ``t`` from the distribution under seed ``t % S``), judged by the loss
            kind's judge or its targets. The draws are those :func:`sampled_success` makes from
            the same generator (taken from it in the inputs' order, whatever ``workers``), so
            ``summarize(run, generator=g)`` after ``success_matrix(..., sample=g)`` gives what
            ``summarize`` gave on a run with ``keep_probs=True``.
        workers: chunks run at once, each in its own thread with one intra-op thread
            (default: ``torch.get_num_threads()``). The models here are small, so whole chunks
            side by side use the cores better than each small op split across them. The
            result does not depend on it.
        hooked: run the hooked forward even where the fast path applies. By default a
            :class:`~interp_rand.model.HookedTransformer` with no hook attached runs through
            :class:`~interp_rand.model.fast.FastForward` (its weights, no hook dispatch; logits
            within float rounding of the hooked forward); any other model, or one with a hook
            attached, is called itself. Where the inputs are one broadcast tensor and differ only
            in which keys each query reads (the colouring's cycles), the fast path runs only on
            the inputs that first hold each distinct receptive field
            (:class:`~interp_rand.model.receptive_field.ReceptiveFields`), and every other row's
            logits are copied from there (the same numbers; on the exhaustive cycle set 11,174 of
            181,440 inputs).

    Runs without autograd in eval mode; the model's mode and the thread count are restored.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be >= 1")
    threads = torch.get_num_threads()
    workers = threads if workers is None else workers
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} must be an integer >= 1")
    check_model_fits_task(model, task)
    seeds = resolve_seeds(task, seeds)
    n_seeds = _check_seeds(batch, seeds)
    n, kind = len(batch), task.loss_kind
    decoder = get_loss_kind(kind)
    total = n * n_seeds
    n_answer = len(batch.answer_positions)
    if sample is not None:
        n_samples = n_seeds if n_samples is None else n_samples
        if not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples={n_samples!r} must be an integer >= 1")
    elif n_samples is not None:
        raise ValueError("n_samples needs sample=<a generator> to draw them with")
    target_outputs = decoder.target_ids(batch)
    if sample is not None and target_outputs is None and decoder.judge is None:
        raise ValueError(f"loss kind {kind!r} has neither a judge nor target outputs to judge samples by")
    want_probs = keep_probs or variance or sample is not None
    seed_of = None if sample is None or n_samples == n_seeds else torch.arange(n_samples) % n_seeds
    forward = evaluation_forward(model, hooked)
    fast = isinstance(forward, FastForward)
    # every input's mask serves all its seeds: the fast path finds its keys once per input
    key_index = forward.key_index(batch.attention_mask) if fast else None
    if seeds is not None and fast:
        seeds = seeds.to(batch.inputs.device)  # the fast path takes them as one table
    # where the inputs differ only in their masks, the logits of every distinct receptive field
    # (interp_rand.model.receptive_field) are computed once, on the inputs that first hold them,
    # and every row's are copied from there, where those inputs are at most a quarter of all
    fields = ReceptiveFields.find(batch.inputs, key_index, model.cfg.n_layers, n_seeds) if fast else None
    if fields is not None and not fields.pays_off:
        fields = None
    computed = batch if fields is None else _select_inputs(batch, fields.inputs)
    computed_keys = key_index if fields is None else key_index[fields.inputs]
    first_block = None
    if computed_keys is not None and seeds is not None:
        # the first block's output for every seed and key set, looked up by every chunk, where
        # building it costs under a quarter of what it saves
        with torch.no_grad():
            first_block = FirstBlockTable.build(forward, computed.inputs, seeds, computed_keys,
                                                max_rows=len(computed) * n_seeds * batch.inputs.shape[1] // 4)
    table: Tensor | None = None  # with fields: the representatives' logits, every row's looked up
    field_tables: dict[str, Tensor] = {}  # with fields: their probabilities, variance, cumulative sums
    n_pos = batch.inputs.shape[1]
    # with fields: where each (input, position)'s field is among the representatives' (input, position)
    field_found = None if fields is None else fields.where[fields.field]

    def forward_rows(start: int, stop: int) -> tuple[Batch, Tensor]:
        """Rows ``start:stop`` of ``computed`` x seeds and their logits, through the forward."""
        part = _expand_rows(computed, seeds, start, stop)
        kwargs = part.model_kwargs()
        if fast:
            rows = torch.arange(start, stop, device=batch.inputs.device)
            if computed_keys is not None:
                kwargs["key_index"] = computed_keys[rows // n_seeds]
            if seeds is not None:  # the seeds as a table: the fast path runs what depends only on them once
                kwargs["seeds"], kwargs["seed_rows"] = seeds, rows % n_seeds
                if first_block is not None:
                    kwargs["first_block"] = first_block
        logits = forward(part.inputs, **kwargs)
        # x * 0 is 0 for every finite x and NaN for +-inf and NaN: one product and one sum
        # say what isfinite(logits).all() says (~3x fewer passes over the transposed logits)
        if torch.isnan((logits * 0).sum()):
            raise FloatingPointError("the model produced non-finite logits during evaluation")
        return part, logits

    def uniforms(start: int, stop: int) -> Tensor | None:
        """The sampled baseline's draws for the inputs of rows ``start:stop`` (in this thread, in
        the chunks' order: the generator's stream is consumed as ``sampled_success`` does)."""
        if sample is None:
            return None
        width = batch.targets.shape[-1] if decoder.bits else 1  # bits: one draw per bit (the targets' bits)
        return torch.rand(sample_shape(((stop - start) // n_seeds, n_samples, n_answer, width), decoder.bits),
                          generator=sample)

    def sampled_right(outputs: Tensor, inputs: Tensor) -> Tensor:
        """``[c]`` the fraction of ``outputs [c, n_samples, n_answer]`` (drawn for ``inputs``) judged right."""
        if decoder.judge is None:
            right = (outputs == target_outputs[inputs][:, None]).all(-1)
        else:
            right = decoder.judge(outputs, _select_inputs(batch, inputs))
        return right.float().mean(1)

    def decoded(part: Batch, logits: Tensor, start: int, stop: int, u: Tensor | None,
                rows: Tensor | None = None) -> tuple[Tensor | None, ...]:
        """What a chunk keeps of rows ``start:stop``; ``rows``: where their logits are in the
        receptive fields' table (the probabilities are then read from its tables too)."""
        success = answer_correct(logits, part, kind).all(-1)
        picked = answer_logits(logits, part)
        out = decoder.predict(picked).to(output_dtype(decoder, picked.shape[-1]))
        if not want_probs:
            return success, out, None, None, None
        inputs = torch.arange(start // n_seeds, stop // n_seeds, device=batch.inputs.device)
        if rows is not None:
            return (success, out, *from_fields(rows, inputs, u))
        prob = decoder.marginals(picked).contiguous()  # (the layout stored probabilities had)
        if not (variance or u is not None):
            return success, out, prob, None, None
        per_input = prob.view(-1, n_seeds, *prob.shape[1:])  # [c, S, n_answer, K]: whole inputs
        spread = per_input.var(dim=1, correction=0).mean((-1, -2)) if variance else None
        drawn = None
        if u is not None:
            probs = per_input if seed_of is None else per_input[:, seed_of.to(prob.device)]
            drawn = sampled_right(sample_outputs(probs, u.to(prob.device), decoder.bits), inputs)
        return success, out, (prob if keep_probs else None), spread, drawn

    def from_fields(rows: Tensor, inputs: Tensor, u: Tensor | None) -> tuple[Tensor | None, ...]:
        """The probabilities, variance and samples of a chunk from the fields' tables (the same
        numbers: the same values, gathered): ``rows [c * S, pos]`` index the logits' table."""
        every = answers_every_position(batch.answer_positions, n_pos)
        answer_rows = rows if every else rows[:, batch.answer_positions]
        prob = spread = drawn = None
        if keep_probs:
            prob = field_tables["probs"].index_select(0, answer_rows.flatten()).view(*answer_rows.shape, -1)
        if variance:  # each input's positions' fields: their variance over the seeds
            found = field_found[inputs] if every else field_found[inputs][:, batch.answer_positions]
            spread = field_tables["variance"].index_select(0, found.flatten()).view(*found.shape, -1).mean((-1, -2))
        if u is not None:  # sample t of each input reads seed t % S's row of each position's field
            first = fields.offset[inputs] if every else fields.offset[inputs][:, batch.answer_positions]
            seed = torch.arange(n_samples, device=rows.device) % n_seeds
            at = first[:, None, :] + (seed * n_pos)[None, :, None]  # [c, n_samples, n_answer]
            values = field_tables["probs" if decoder.bits else "cumulative"]
            values = values.index_select(0, at.flatten()).view(*at.shape, -1)
            u = u.to(values.device)
            outputs = losses.pack_bits(u < values) if decoder.bits else inverse_cdf(values, u)
            drawn = sampled_right(outputs, inputs)
        return prob, spread, drawn

    def run_chunk(start: int, stop: int, u: Tensor | None) -> tuple[Tensor | None, ...]:
        with torch.inference_mode():  # grad mode is per thread
            if fields is None:
                return decoded(*forward_rows(start, stop), start, stop, u)
            part = _expand_rows(batch, seeds, start, stop)
            rows = fields.rows(torch.arange(start, stop, device=batch.inputs.device))
            return decoded(part, table.index_select(0, rows.flatten()).view(*rows.shape, -1), start, stop, u, rows)

    def field_chunk(start: int, stop: int) -> tuple[Tensor]:
        with torch.inference_mode():
            return (forward_rows(start, stop)[1].reshape((stop - start) * batch.inputs.shape[1], -1),)

    was_training = model.training
    model.eval()
    try:
        if fields is not None:  # the representatives' logits [rows * pos, K], rows as in computed x seeds
            (table,) = _chunked(field_chunk, len(computed) * n_seeds, chunk_size, workers)
            if want_probs:
                with torch.inference_mode():
                    field_tables.update(_field_tables(table, decoder, fields, n_seeds, n_pos, keep_probs,
                                                      variance, sample is not None))
        rows_per_chunk = chunk_size if fields is None else max(chunk_size, LOOKUP_CHUNK_ROWS)
        if variance or sample is not None:  # per-input statistics: chunks of whole inputs
            rows_per_chunk = _whole_inputs(rows_per_chunk, n_seeds)
        results = _chunked(run_chunk, total, rows_per_chunk, workers, prepare=uniforms)
    finally:
        model.train(was_training)
        torch.set_num_threads(threads)
    successes, outputs, probs, spread, drawn = results
    return SeedRun(
        success=successes.view(n, n_seeds),
        outputs=outputs.view(n, n_seeds, n_answer),
        probs=probs.view(n, n_seeds, n_answer, -1) if keep_probs else None,
        loss_kind=kind,
        target_outputs=target_outputs,
        judge=output_judge(kind, batch),
        vote_rules=vote_rules(kind),
        variance=spread,
        sampled=drawn,
        n_samples=n_samples if sample is not None else None,
    )
