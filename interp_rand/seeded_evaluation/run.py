"""Run a model on every (input, seed) pair: the :class:`SeedRun` the metrics read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from interp_rand import losses
from interp_rand.evaluation import check_model_fits_task
from interp_rand.losses import answer_correct, answer_logits, get_loss_kind, loss_kinds, output_judge, vote_rules
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


@dataclass(frozen=True)
class SeedRun:
    """A model's behaviour on ``n`` inputs x ``S`` seeds.

    Attributes:
        success: ``[n, S]`` bool, every answer position of input ``i`` under seed ``j`` right
            (``answer_correct(...).all(-1)``, so the task's own notion of correct).
        outputs: ``[n, S, n_answer]`` long, one hashable discrete output per answer position:
            the loss kind's answer id (:meth:`~interp_rand.losses.LossKind.predict`: the argmax
            class, or for bit kinds (``"bce"``) the thresholded bits packed into an integer by
            :func:`interp_rand.losses.pack_bits`, most significant bit first: the one bit order of
            the toolkit).
        probs: ``[n, S, n_answer, K]`` float, the output distribution: the softmax over
            ``K = d_vocab_out`` classes, or for bit tasks the per-bit sigmoid probabilities
            (``K = n_bits``; bit ``k`` is 1 with probability ``probs[..., k]``, independently;
            the joint over ``2**n_bits`` packed outputs is their product and is not stored).
            ``None`` when ``success_matrix(..., keep_probs=False)``.
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
    """

    success: Tensor
    outputs: Tensor
    probs: Tensor | None
    loss_kind: str
    target_outputs: Tensor | None = None
    judge: Callable[[Tensor], Tensor] | None = None
    vote_rules: tuple[str, ...] = ("majority_whole",)

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
    return t[index]


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


def _chunked(run: Callable[[int, int], tuple[Tensor | None, ...]], total: int, chunk_size: int, workers: int,
             rows_per_row: int = 1) -> list[Tensor | None]:
    """``run(start, stop)`` over ``0 .. total`` in chunks of ``chunk_size``, each chunk writing its
    ``(stop - start) * rows_per_row`` leading rows into full-size results (no concatenation at the
    end: half the peak memory of the exhaustive set's ~2 GB of probabilities); with ``workers >
    1`` the chunks after the first run side by side, each in its own thread with one intra-op
    thread (the caller restores the thread count)."""
    results: list[Tensor | None] = []

    def store(start: int) -> None:
        for whole, chunk in zip(results, run(start, min(start + chunk_size, total))):
            if whole is not None:
                whole[start * rows_per_row : start * rows_per_row + len(chunk)] = chunk

    first = run(0, min(chunk_size, total))  # its shapes and dtypes size the results
    results.extend(None if t is None else t.new_empty((total * rows_per_row, *t.shape[1:])) for t in first)
    for whole, chunk in zip(results, first):
        if whole is not None:
            whole[: len(chunk)] = chunk
    starts = range(chunk_size, total, chunk_size)
    if workers == 1 or len(starts) <= 1:
        for start in starts:
            store(start)
    else:
        torch.set_num_threads(1)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(store, starts))
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


def _discrete(picked: Tensor, kind: losses.LossKind) -> tuple[Tensor, Tensor]:
    """Answer-position logits ``[rows, n_answer, K]`` -> (outputs ``[rows, n_answer]`` long,
    probs ``[rows, n_answer, K]``), decoded by the loss kind."""
    return kind.predict(picked), kind.marginals(picked)


def _target_outputs(batch: Batch, kind: losses.LossKind) -> Tensor | None:
    return kind.target_ids(batch)


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
    keep_probs: bool = True,
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
            pairs (``probs``: ``n * S * n_answer * K`` floats, so ``keep_probs=False`` for very
            large ``n * S``).
        chunk_size: rows (input-seed pairs) per forward pass (rows whose logits are looked up
            from receptive fields go in chunks of at least :data:`LOOKUP_CHUNK_ROWS`).
        keep_probs: store the output distribution (``SeedRun.probs``); needed by
            :func:`sampled_success` and :func:`predictive_variance`.
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

    def decoded(part: Batch, logits: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        success = answer_correct(logits, part, kind).all(-1)
        out, prob = _discrete(answer_logits(logits, part), decoder)
        return success, out, (prob if keep_probs else None)

    def run_chunk(start: int, stop: int) -> tuple[Tensor, ...]:
        with torch.inference_mode():  # grad mode is per thread
            if fields is None:
                return decoded(*forward_rows(start, stop))
            part = _expand_rows(batch, seeds, start, stop)
            rows = fields.rows(torch.arange(start, stop, device=batch.inputs.device))
            return decoded(part, table.index_select(0, rows.flatten()).view(*rows.shape, -1))

    def field_chunk(start: int, stop: int) -> tuple[Tensor]:
        with torch.inference_mode():
            return (forward_rows(start, stop)[1].reshape((stop - start) * batch.inputs.shape[1], -1),)

    was_training = model.training
    model.eval()
    try:
        if fields is not None:  # the representatives' logits [rows * pos, K], rows as in computed x seeds
            (table,) = _chunked(field_chunk, len(computed) * n_seeds, chunk_size, workers,
                                rows_per_row=batch.inputs.shape[1])
        rows_per_chunk = chunk_size if fields is None else max(chunk_size, LOOKUP_CHUNK_ROWS)
        results = _chunked(run_chunk, total, rows_per_chunk, workers)
    finally:
        model.train(was_training)
        torch.set_num_threads(threads)
    successes, outputs, probs = results
    n_answer = len(batch.answer_positions)
    return SeedRun(
        success=successes.view(n, n_seeds),
        outputs=outputs.view(n, n_seeds, n_answer),
        probs=probs.view(n, n_seeds, n_answer, -1) if keep_probs else None,
        loss_kind=kind,
        target_outputs=_target_outputs(batch, decoder),
        judge=output_judge(kind, batch),
        vote_rules=vote_rules(kind),
    )
