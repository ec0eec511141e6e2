"""Evaluation of seeded (randomized) models: every input against many seeds, and PAPER.md's
metrics on the resulting success matrix.

:func:`success_matrix` runs a model on every (input ``i``, seed ``j``) pair and keeps, per pair,
whether the answer is fully right, a discrete output per answer position, and the output
distribution. The metrics are plain functions of that :class:`SeedRun`:

===========================  =================================================================
:func:`per_input_success`    fraction of seeds whose argmax output is fully correct
:func:`average_success`      mean of per-input success over inputs
:func:`worst_case_success`   the ``fraction``-quantile (lower) of per-input success
:func:`majority_success`     success of the most frequent output over groups of ``k`` seeds
:func:`sampled_success`      the "-sampled" baseline: outputs drawn from the output distribution
:func:`predictive_variance`  variance over seeds of the output probabilities
:func:`success_histogram`    histogram of per-input success over ``[0, 1]``
:func:`summarize`            all of the above as a JSON-serialisable dict
===========================  =================================================================

Pure computation: no plotting. Everything is vectorised over inputs and seeds; the only loop
is over row chunks of the model's forward pass (memory).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from interp_rand.evaluation import check_model_fits_task
from interp_rand.losses import answer_correct, answer_logits
from interp_rand.tasks.base import Batch, Task

#: Loss kinds whose logits are independent bits (one logit per output unit); every other
#: kind's logits are classes (argmax / softmax).
BIT_LOSS_KINDS = ("bce",)


@dataclass(frozen=True)
class SeedRun:
    """A model's behaviour on ``n`` inputs x ``S`` seeds.

    Attributes:
        success: ``[n, S]`` bool, every answer position of input ``i`` under seed ``j`` right
            (``answer_correct(...).all(-1)``, so the task's own notion of correct).
        outputs: ``[n, S, n_answer]`` long, one hashable discrete output per answer position:
            the argmax class, or for bit tasks (``"bce"``) the thresholded bits packed into an
            integer, ``sum_k (logit_k > 0) << k``.
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
    """

    success: Tensor
    outputs: Tensor
    probs: Tensor | None
    loss_kind: str
    target_outputs: Tensor | None = None

    @property
    def n_inputs(self) -> int:
        return self.success.shape[0]

    @property
    def n_seeds(self) -> int:
        return self.success.shape[1]

    @property
    def bits(self) -> bool:
        """True when outputs are packed bits (``probs`` then holds per-bit probabilities)."""
        return self.loss_kind in BIT_LOSS_KINDS


# ----------------------------------------------------------------------------------------
# Running the model on every (input, seed) pair
# ----------------------------------------------------------------------------------------
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


def _expand_rows(batch: Batch, seeds: Tensor | None, start: int, stop: int) -> Batch:
    """Rows ``start:stop`` of the ``n*S``-row batch: row ``r`` = input ``r // S``, seed ``r % S``."""
    n_seeds = 1 if seeds is None else seeds.shape[0]
    rows = torch.arange(start, stop, device=batch.inputs.device)
    part = batch[rows // n_seeds]
    new_seeds = None if seeds is None else seeds.to(batch.inputs.device)[rows % n_seeds]
    return Batch(
        inputs=part.inputs,
        targets=part.targets,
        loss_mask=part.loss_mask,
        answer_positions=part.answer_positions,
        seeds=new_seeds,
        attention_mask=part.attention_mask,
        metadata=part.metadata,
    )


def expand_over_seeds(batch: Batch, seeds: Tensor | None) -> Batch:
    """The ``n*S``-row batch pairing every input of ``batch`` with every seed.

    Row ``i * S + j`` holds input ``i`` (its inputs, targets, masks and metadata) with seed
    ``seeds[j]`` (input-major order). ``seeds`` is ``[S, d_seed]`` (one seed for all positions)
    or ``[S, pos, d_seed]`` (per position); it replaces any seeds ``batch`` carries. With
    ``seeds=None`` the result is ``batch`` itself with no seeds (``S = 1``).

    This materialises all ``n*S`` rows; :func:`success_matrix` builds them chunk by chunk.
    """
    n_seeds = _check_seeds(batch, seeds)
    return _expand_rows(batch, seeds, 0, len(batch) * n_seeds)


def _pack_bits(bits: Tensor) -> Tensor:
    """``[..., n_bits]`` bool/0-1 -> ``[...]`` long, ``sum_k bit_k << k``."""
    n_bits = bits.shape[-1]
    if n_bits > 62:
        raise ValueError(f"cannot pack {n_bits} bits into an int64 output")
    weights = torch.ones(n_bits, dtype=torch.long, device=bits.device) << torch.arange(
        n_bits, device=bits.device
    )
    return (bits.long() * weights).sum(-1)


def _discrete(picked: Tensor, loss_kind: str) -> tuple[Tensor, Tensor]:
    """Answer-position logits ``[rows, n_answer, K]`` -> (outputs ``[rows, n_answer]`` long,
    probs ``[rows, n_answer, K]``)."""
    if loss_kind in BIT_LOSS_KINDS:
        return _pack_bits(picked > 0), torch.sigmoid(picked.float())
    return picked.argmax(-1), torch.softmax(picked.float(), dim=-1)


def _target_outputs(batch: Batch, loss_kind: str) -> Tensor | None:
    if loss_kind == "ce":
        return batch.answer_targets().long()
    if loss_kind in BIT_LOSS_KINDS:
        return _pack_bits(batch.answer_targets() > 0.5)
    return None


@torch.no_grad()
def success_matrix(
    model: nn.Module,
    task: Task,
    batch: Batch,
    seeds: Tensor | None,
    *,
    chunk_size: int = 4096,
    keep_probs: bool = True,
) -> SeedRun:
    """Run ``model`` on every (input, seed) pair of ``batch`` x ``seeds``.

    Args:
        model: called as ``model(inputs, seeds=..., attention_mask=...)`` (only the keyword
            arguments the rows carry), returning ``[rows, pos, d_vocab_out]`` logits.
        task: supplies ``loss_kind`` (correctness via :func:`~interp_rand.losses.answer_correct`).
        batch: ``n`` inputs; any seeds it carries are replaced by ``seeds``.
        seeds: ``[S, d_seed]`` (shared by all positions) or ``[S, pos, d_seed]`` (per position),
            every input meets every seed; ``None`` for a model without a seed channel (``S = 1``,
            no seeds passed).
        chunk_size: rows (input-seed pairs) per forward pass.
        keep_probs: store the output distribution (``SeedRun.probs``); needed by
            :func:`sampled_success` and :func:`predictive_variance`.

    Runs under ``torch.no_grad()`` in eval mode; the model's mode is restored afterwards.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be >= 1")
    check_model_fits_task(model, task)
    n_seeds = _check_seeds(batch, seeds)
    n, kind = len(batch), task.loss_kind
    total = n * n_seeds
    successes, outputs, probs = [], [], []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, total, chunk_size):
            part = _expand_rows(batch, seeds, start, min(start + chunk_size, total))
            logits = model(part.inputs, **part.model_kwargs())
            if not torch.isfinite(logits).all():
                raise FloatingPointError("the model produced non-finite logits during evaluation")
            successes.append(answer_correct(logits, part, kind).all(-1))
            out, prob = _discrete(answer_logits(logits, part), kind)
            outputs.append(out)
            if keep_probs:
                probs.append(prob)
    finally:
        model.train(was_training)
    n_answer = len(batch.answer_positions)
    return SeedRun(
        success=torch.cat(successes).view(n, n_seeds),
        outputs=torch.cat(outputs).view(n, n_seeds, n_answer),
        probs=torch.cat(probs).view(n, n_seeds, n_answer, -1) if keep_probs else None,
        loss_kind=kind,
        target_outputs=_target_outputs(batch, kind),
    )


# ----------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------
def per_input_success(run: SeedRun) -> Tensor:
    """``[n]`` float: per input, the fraction of its ``S`` seeds whose argmax output is fully
    correct (PAPER: "per-input success of a seeded model")."""
    return run.success.float().mean(1)


def average_success(run: SeedRun) -> float:
    """PAPER's **average** success: the mean over inputs of per-input success (equivalently the
    fraction of all input-seed pairs that are right)."""
    return per_input_success(run).mean().item()


def _lower_quantile(values: Tensor, fraction: float) -> float:
    """``torch.quantile(values, fraction, interpolation="lower")`` without its size limit:
    the ``floor(fraction * (n - 1))``-th smallest value."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction} must lie in [0, 1]")
    if values.numel() == 0:
        raise ValueError("no inputs")
    flat = values.flatten().sort().values
    return flat[math.floor(fraction * (flat.numel() - 1))].item()


def worst_case_success(run: SeedRun, fraction: float = 0.05) -> float:
    """PAPER's **worst-case** success, "success at the worst 5% of inputs (95th percentile of
    loss)": the ``fraction``-quantile of per-input success with ``interpolation="lower"``, i.e.
    the ``floor(fraction * (n - 1))``-th smallest per-input success (0-based). It is a value
    some input actually attains, and at least ``fraction`` of the inputs do no better."""
    return _lower_quantile(per_input_success(run), fraction)


def _tuple_ids(outputs: Tensor) -> Tensor:
    """``[..., n_answer]`` long -> ``[...]`` long ids, equal iff the output tuples are equal and
    ordered like the tuples lexicographically (answer position 0 most significant)."""
    flat = outputs.reshape(-1, outputs.shape[-1])
    if flat.numel() == 0:
        return flat.new_zeros(flat.shape[0]).view(outputs.shape[:-1])
    lo = flat.min()
    shifted = flat - lo
    base = int(shifted.max()) + 1
    n_answer = flat.shape[1]
    if n_answer * math.log2(max(base, 2)) < 62:
        weights = torch.tensor([base ** (n_answer - 1 - a) for a in range(n_answer)], dtype=torch.long)
        ids = (shifted * weights.to(flat.device)).sum(-1)
    else:  # too many combinations for one int64: rank the distinct tuples (sorted lexicographically)
        ids = torch.unique(flat, dim=0, return_inverse=True)[1]
    return ids.view(outputs.shape[:-1])


def _group_seeds(n: int, n_seeds: int, k: int, generator: torch.Generator | None, device) -> Tensor:
    """``[n, G, k]`` seed indices: per input, ``G = S // k`` disjoint groups of ``k`` seeds."""
    if k < 1 or k > n_seeds:
        raise ValueError(f"k={k} must lie in [1, S={n_seeds}]")
    n_groups = n_seeds // k
    if generator is None:
        order = torch.arange(n_seeds, device=device).expand(n, n_seeds)
    else:
        order = torch.rand(n, n_seeds, generator=generator).argsort(-1).to(device)
    return order[:, : n_groups * k].reshape(n, n_groups, k)


def majority_success(run: SeedRun, k: int, generator: torch.Generator | None = None) -> Tensor:
    """PAPER's **majority-k**: ``[n]`` float, per input the fraction of seed groups whose most
    frequent output is correct.

    Per input, the ``S`` seeds are split into ``G = S // k`` disjoint groups of ``k`` (seeds
    ``0..k-1``, ``k..2k-1``, ... in order; with ``generator``, after an independent random
    permutation per input; the last ``S % k`` seeds are unused). In each group the majority
    output is the most frequent full output (the tuple over answer positions); ties go to the
    lexicographically smallest tuple (answer position 0 first, smallest value). Its
    correctness is the ``success`` of a seed of the group that produced it, so any loss kind
    works (e.g. colouring, where several outputs are right).
    """
    n, n_seeds = run.success.shape
    groups = _group_seeds(n, n_seeds, k, generator, run.success.device)  # [n, G, k]
    ids = _tuple_ids(run.outputs).gather(1, groups.flatten(1)).view(groups.shape)
    ok = run.success.gather(1, groups.flatten(1)).view(groups.shape)
    ranked = ids.sort(-1).values
    counts = torch.searchsorted(ranked, ranked, right=True) - torch.searchsorted(ranked, ranked)
    # argmax takes the first maximum: in ascending order, the smallest tied tuple
    winner = ranked.gather(-1, counts.argmax(-1, keepdim=True))  # [n, G, 1]
    seed_of_winner = (ids == winner).int().argmax(-1, keepdim=True)  # first seed giving it
    return ok.gather(-1, seed_of_winner).squeeze(-1).float().mean(-1)


def sampled_success(
    run: SeedRun,
    generator: torch.Generator,
    n_samples: int | None = None,
    correct_fn: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """PAPER's **-sampled** baseline: ``[n]`` float, the fraction of outputs *drawn* from the
    model's output distribution (instead of argmaxed) that are fully correct.

    Sample ``t`` (``t < n_samples``, default ``S``) of input ``i`` is drawn from the
    distribution under seed ``t % S`` (for a deterministic model evaluated with ``S = 1`` every
    sample uses the one distribution): for class outputs one class per answer position from
    ``probs`` independently; for bit outputs each bit independently from its sigmoid
    probability, packed as in ``outputs``.

    Correctness: ``correct_fn(sampled [n, n_samples, n_answer] long) -> [n, n_samples] bool``;
    by default equality of every answer position with ``run.target_outputs`` (ce/bce tasks;
    tasks such as colouring must pass their own).
    """
    if run.probs is None:
        raise ValueError("sampled_success needs the output distribution: run success_matrix with keep_probs=True")
    n, n_seeds, _, width = run.probs.shape
    n_samples = n_seeds if n_samples is None else n_samples
    if n_samples < 1:
        raise ValueError(f"n_samples={n_samples} must be >= 1")
    if n_samples == n_seeds:
        probs = run.probs  # sample t from seed t: no copy
    else:
        seed_of = torch.arange(n_samples, device=run.probs.device) % n_seeds
        probs = run.probs[:, seed_of]  # [n, n_samples, n_answer, width]
    if run.bits:
        u = torch.rand(probs.shape, generator=generator).to(probs.device)
        sampled = _pack_bits(u < probs)
    else:  # inverse CDF: the first class whose cumulative probability exceeds u
        u = torch.rand(probs.shape[:-1] + (1,), generator=generator).to(probs.device)
        sampled = (probs.cumsum(-1) <= u).sum(-1).clamp(max=width - 1)
    if correct_fn is None:
        if run.target_outputs is None:
            raise ValueError(
                f"loss kind {run.loss_kind!r} has no target outputs to compare with; pass correct_fn"
            )
        correct = (sampled == run.target_outputs[:, None]).all(-1)
    else:
        correct = correct_fn(sampled)
        if correct.shape != (n, n_samples):
            raise ValueError(f"correct_fn must return [n={n}, n_samples={n_samples}]; got {tuple(correct.shape)}")
    return correct.float().mean(1)


def predictive_variance(run: SeedRun) -> Tensor:
    """``[n]`` float: per input, the variance over seeds (population variance, dividing by
    ``S``) of each output probability, averaged over answer positions and output units
    (classes, or bits for bit tasks). Exactly 0 when the output distribution does not depend
    on the seed (and when ``S = 1``)."""
    if run.probs is None:
        raise ValueError("predictive_variance needs the output distribution: run success_matrix with keep_probs=True")
    return run.probs.var(dim=1, correction=0).mean((-1, -2))


def success_histogram(run: SeedRun, bins: int = 10) -> tuple[Tensor, Tensor]:
    """Histogram of per-input success: ``(counts [bins] long, edges [bins + 1])`` over
    ``[0, 1]`` in equal-width bins (``torch.histc``: a value on an inner edge goes to the upper
    bin, 1.0 to the last). Mass only in the first and last bins = deterministic behaviour."""
    values = per_input_success(run)
    counts = torch.histc(values, bins=bins, min=0.0, max=1.0).long()
    return counts, torch.linspace(0.0, 1.0, bins + 1)


def summarize(
    run: SeedRun,
    *,
    majority_ks: Sequence[int] = (5, 30),
    generator: torch.Generator | None = None,
    fraction: float = 0.05,
    bins: int = 10,
    correct_fn: Callable[[Tensor], Tensor] | None = None,
) -> dict[str, Any]:
    """All metrics as a JSON-serialisable dict.

    Keys: ``n_inputs``, ``n_seeds``, ``loss_kind``, ``average``, ``worst_5pct`` (the
    ``fraction``-quantile of :func:`worst_case_success`; the key keeps its name for other
    fractions, and ``worst_fraction`` records it), ``majority_<k>`` = ``{"average", "worst"}``
    of :func:`majority_success` with groups in seed order (``None`` when ``k > S``),
    ``sampled`` = ``{"average", "worst"}`` of :func:`sampled_success` with ``n_samples = S``
    drawn with ``generator`` (default: a generator seeded 0; ``None`` when the run has no
    probabilities or no way to judge samples), ``predictive_variance`` (mean over inputs) and
    ``histogram`` = ``{"counts", "edges"}``.
    """
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    success = per_input_success(run)

    def avg_worst(values: Tensor) -> dict[str, float]:
        return {"average": values.mean().item(), "worst": _lower_quantile(values, fraction)}

    out: dict[str, Any] = {
        "n_inputs": run.n_inputs,
        "n_seeds": run.n_seeds,
        "loss_kind": run.loss_kind,
        "average": success.mean().item(),
        "worst_5pct": _lower_quantile(success, fraction),
        "worst_fraction": fraction,
    }
    for k in majority_ks:
        out[f"majority_{k}"] = avg_worst(majority_success(run, k)) if k <= run.n_seeds else None
    can_sample = run.probs is not None and (correct_fn is not None or run.target_outputs is not None)
    out["sampled"] = avg_worst(sampled_success(run, generator, correct_fn=correct_fn)) if can_sample else None
    out["predictive_variance"] = predictive_variance(run).mean().item() if run.probs is not None else None
    counts, edges = success_histogram(run, bins)
    out["histogram"] = {"counts": counts.tolist(), "edges": edges.tolist()}
    return out


def save_summary(summary: dict[str, Any], path: str | os.PathLike) -> None:
    """Write ``summary`` as JSON atomically (a temporary file in the same folder, then
    ``os.replace``), creating the folder if needed."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".summary-", suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = [
    "BIT_LOSS_KINDS",
    "SeedRun",
    "average_success",
    "expand_over_seeds",
    "majority_success",
    "per_input_success",
    "predictive_variance",
    "sampled_success",
    "save_summary",
    "success_histogram",
    "success_matrix",
    "summarize",
    "worst_case_success",
]
