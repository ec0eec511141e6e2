"""PAPER.md's metrics on a :class:`~interp_rand.seeded_evaluation.run.SeedRun`."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from interp_rand.seeded_evaluation.run import SeedRun, pack_bits

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
        sampled = pack_bits(u < probs)
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
    n_samples: int | None = None,
) -> dict[str, Any]:
    """All metrics as a JSON-serialisable dict.

    Keys: ``n_inputs``, ``n_seeds``, ``loss_kind``, ``average``, ``worst_5pct`` (the
    ``fraction``-quantile of :func:`worst_case_success`; the key keeps its name for other
    fractions, and ``worst_fraction`` records it), ``majority_<k>`` = ``{"average", "worst"}``
    of :func:`majority_success` with groups in seed order (``None`` when ``k > S``),
    ``sampled`` = ``{"average", "worst"}`` of :func:`sampled_success` with ``n_samples`` (default
    ``S``; a deterministic run with ``S = 1`` wants more) drawn with ``generator`` (default: a generator seeded 0; ``None`` when the run has no
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
    out["sampled"] = (
        avg_worst(sampled_success(run, generator, n_samples=n_samples, correct_fn=correct_fn)) if can_sample else None
    )
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

