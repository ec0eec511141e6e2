"""The paper's metrics on a :class:`~interp_rand.seeded_evaluation.run.SeedRun`."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from interp_rand.seeded_evaluation.amplification import (
    DEFAULT_N_GROUPS,
    _dense_ranks,
    las_vegas_exact,
    majority_rates,
    smallest_int,
)

# elements per chunk of the sampled baseline (inputs drawn at once; samples judged at once)
_SAMPLE_CHUNK = 1 << 24
from interp_rand.seeded_evaluation.run import SeedRun, sample_outputs, sample_shape

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


# The paper's "worst 5% of inputs": the one owner of the fraction behind every ``worst_5pct``.
WORST_FRACTION = 0.05


def lower_quantile(values: Tensor, fraction: float = WORST_FRACTION) -> float:
    """``torch.quantile(values, fraction, interpolation="lower")`` without its size limit:
    the ``floor(fraction * (n - 1))``-th smallest value (0-based) of all of ``values``. The
    one worst-5% quantile of the toolkit: seeded success here, grid-world returns
    (``interp_rand.gridworld.evaluation``) alike."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction} must lie in [0, 1]")
    if values.numel() == 0:
        raise ValueError("no inputs")
    flat = values.flatten().sort().values
    return flat[math.floor(fraction * (flat.numel() - 1))].item()


def worst_case_success(run: SeedRun, fraction: float = WORST_FRACTION) -> float:
    """PAPER's **worst-case** success, "success at the worst 5% of inputs (95th percentile of
    loss)": the ``fraction``-quantile of per-input success with ``interpolation="lower"``, i.e.
    the ``floor(fraction * (n - 1))``-th smallest per-input success (0-based). It is a value
    some input actually attains, and at least ``fraction`` of the inputs do no better."""
    return lower_quantile(per_input_success(run), fraction)


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
    by default the run's own judge (``run.judge``, e.g. colouring's validity check) or else
    equality of every answer position with ``run.target_outputs`` (ce/bce tasks).

    A run without probabilities that drew its samples while the model ran
    (``success_matrix(..., sample=generator)``, :attr:`SeedRun.sampled`) returns those, drawn
    from that generator (``generator`` is then not drawn from; ``n_samples`` must be the run's
    or ``None``, and ``correct_fn`` ``None``: they were judged by the run's own judge).
    """
    if run.probs is None:
        if run.sampled is None:
            raise ValueError("sampled_success needs the output distribution: run success_matrix with "
                             "keep_probs=True or sample=<a generator>")
        return _drawn(run, n_samples, correct_fn)
    n, n_seeds, n_answer, width = run.probs.shape
    n_samples = n_seeds if n_samples is None else n_samples
    if n_samples < 1:
        raise ValueError(f"n_samples={n_samples} must be >= 1")
    correct_fn = run.judge if correct_fn is None else correct_fn
    if correct_fn is None and run.target_outputs is None:
        raise ValueError(f"loss kind {run.loss_kind!r} has no target outputs to compare with; pass correct_fn")
    seed_of = None if n_samples == n_seeds else torch.arange(n_samples, device=run.probs.device) % n_seeds
    # drawn one chunk of inputs at a time (the same draws as at once: the generator's stream is
    # consumed in the same order), kept in the smallest type that holds them, judged in slices
    # of samples: no full-size cumulative sums, uniforms or long outputs
    sampled = torch.empty(n, n_samples, n_answer, device=run.probs.device,
                          dtype=torch.long if run.bits else smallest_int(0, max(0, width - 1)))
    rows = max(1, _SAMPLE_CHUNK // max(1, n_samples * n_answer * width))
    for start in range(0, n, rows):
        part = slice(start, min(start + rows, n))
        probs = run.probs[part] if seed_of is None else run.probs[part][:, seed_of]  # [c, n_samples, n_answer, width]
        # bits: each on with its probability; classes: the inverse CDF (one draw per position)
        u = torch.rand(sample_shape(probs.shape, run.bits), generator=generator).to(probs.device)
        sampled[part] = sample_outputs(probs, u, run.bits).to(sampled.dtype)
    correct = torch.empty(n, n_samples, dtype=torch.bool, device=run.probs.device)
    step = max(1, _SAMPLE_CHUNK // max(1, n * n_answer))
    for first in range(0, n_samples, step):
        last = min(first + step, n_samples)
        outputs = sampled[:, first:last].long()
        if correct_fn is None:
            correct[:, first:last] = (outputs == run.target_outputs[:, None]).all(-1)
            continue
        judged = correct_fn(outputs)
        if judged.shape != (n, last - first):
            raise ValueError(f"correct_fn must return [n={n}, n_samples={last - first}] for samples {first}:{last} "
                             f"of {n_samples}; got {tuple(judged.shape)}")
        correct[:, first:last] = judged
    return correct.float().mean(1)


def _drawn(run: SeedRun, n_samples: int | None, correct_fn: Callable[[Tensor], Tensor] | None) -> Tensor:
    """The sampled baseline ``run`` drew while the model ran (``ValueError`` where the caller
    asks for other samples: another ``n_samples``, or a ``correct_fn``, since they were judged)."""
    if n_samples not in (None, run.n_samples):
        raise ValueError(f"this run drew n_samples={run.n_samples} per input while it ran; got n_samples={n_samples}"
                         "; for others run success_matrix with keep_probs=True")
    if correct_fn is not None:
        raise ValueError("this run's samples were judged while it ran, by its own judge; for another correct_fn "
                         "run success_matrix with keep_probs=True")
    return run.sampled


def predictive_variance(run: SeedRun) -> Tensor:
    """``[n]`` float: per input, the variance over seeds (population variance, dividing by
    ``S``) of each output probability, averaged over answer positions and output units
    (classes, or bits for bit tasks). Exactly 0 when the output distribution does not depend
    on the seed (and when ``S = 1``). From :attr:`SeedRun.probs`, or where the run kept none,
    the variance it computed while the model ran (:attr:`SeedRun.variance`, the same numbers)."""
    if run.probs is None:
        if run.variance is None:
            raise ValueError("predictive_variance needs the output distribution: run success_matrix with "
                             "variance=True (the default) or keep_probs=True")
        return run.variance
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
    fraction: float = WORST_FRACTION,
    bins: int = 10,
    correct_fn: Callable[[Tensor], Tensor] | None = None,
    n_samples: int | None = None,
    n_groups: int = DEFAULT_N_GROUPS,
    rules: Sequence[str] | None = None,
) -> dict[str, Any]:
    """All metrics as a JSON-serialisable dict.

    Keys: ``n_inputs``, ``n_seeds``, ``loss_kind``, ``average``, ``worst_5pct`` (the
    ``fraction``-quantile of :func:`worst_case_success`; the key keeps its name for other
    fractions, and ``worst_fraction`` records it);

    majority-k, per ``k`` in ``majority_ks`` and rule in ``rules`` (default: the run's
    ``vote_rules``; see :mod:`~interp_rand.seeded_evaluation.amplification`), all rules of one
    ``k`` on the same ``n_groups`` groups per input drawn with ``generator``:
    ``majority_<k>`` (rule ``majority_whole``), ``majority_per_vertex_<k>``, ``las_vegas_<k>``,
    each ``{"average", "worst", "rule", "k", "n_groups"}`` of per-input
    :func:`~interp_rand.seeded_evaluation.amplification.majority_success`, or ``None`` when
    ``k > S``; ``las_vegas_<k>`` adds ``"exact": {"average", "worst"}``
    (:func:`~interp_rand.seeded_evaluation.amplification.las_vegas_exact`, no group sampling);
    ``majority_rules`` (the rules reported) and ``majority_n_groups``;

    ``sampled`` = ``{"average", "worst"}`` of :func:`sampled_success` with ``n_samples`` (default
    ``S``; a deterministic run with ``S = 1`` wants more) drawn with ``generator`` first (so its
    draws do not depend on the majority settings; ``None`` when the run has no probabilities or
    no way to judge samples). A run that drew them while the model ran
    (``success_matrix(..., sample=g)``, :attr:`SeedRun.sampled`) brings its own, and
    ``generator`` goes straight to the majority draws: pass the same ``g`` here for the numbers
    a run with probabilities (and no samples) gives. ``predictive_variance`` (mean over inputs;
    from the run's probabilities or its :attr:`~SeedRun.variance`) and ``histogram`` =
    ``{"counts", "edges"}``.

    ``generator`` defaults to a generator seeded 0. The per-vertex vote is judged by
    ``run.judge``, else by ``correct_fn``, else against the targets.
    """
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    rules = tuple(run.vote_rules if rules is None else rules)
    success = per_input_success(run)

    def avg_worst(values: Tensor) -> dict[str, float]:
        return {"average": values.mean().item(), "worst": lower_quantile(values, fraction)}

    can_sample = run.probs is not None and (
        correct_fn is not None or run.judge is not None or run.target_outputs is not None
    )
    if run.sampled is not None:  # drawn (and judged) while the model ran: the generator is not drawn from
        sampled = avg_worst(_drawn(run, n_samples, correct_fn))
    elif can_sample:
        sampled = avg_worst(sampled_success(run, generator, n_samples=n_samples, correct_fn=correct_fn))
    else:
        sampled = None
    out: dict[str, Any] = {
        "n_inputs": run.n_inputs,
        "n_seeds": run.n_seeds,
        "loss_kind": run.loss_kind,
        "average": success.mean().item(),
        "worst_5pct": lower_quantile(success, fraction),
        "worst_fraction": fraction,
    }
    judged = run if run.judge is not None or correct_fn is None else dataclasses.replace(run, judge=correct_fn)
    # each seed's whole output ranked among its input's, once for every k
    ranks = _dense_ranks(run.outputs) if "majority_whole" in rules and any(k <= run.n_seeds for k in majority_ks) \
        else None
    for k in majority_ks:
        # the groups of draw_seed_groups, voted on by every rule one chunk of inputs at a time
        rates = majority_rates(run, k, generator, rules=rules, n_groups=n_groups, judged=judged, ranks=ranks) \
            if k <= run.n_seeds else None
        for rule in rules:
            key = f"majority_{k}" if rule == "majority_whole" else f"{rule}_{k}"
            if rates is None:
                out[key] = None
                continue
            entry = avg_worst(rates[rule])
            out[key] = {**entry, "rule": rule, "k": k, "n_groups": n_groups}
            if rule == "las_vegas":
                out[key]["exact"] = avg_worst(las_vegas_exact(run, k))
    out["majority_rules"] = list(rules)
    out["majority_n_groups"] = n_groups
    out["sampled"] = sampled
    has_variance = run.probs is not None or run.variance is not None
    out["predictive_variance"] = predictive_variance(run).mean().item() if has_variance else None
    counts, edges = success_histogram(run, bins)
    out["histogram"] = {"counts": counts.tolist(), "edges": edges.tolist()}
    return out


def save_summary(summary: dict[str, Any], path: str | os.PathLike) -> None:
    """Write ``summary`` as strict JSON atomically (:func:`interp_rand.output.write_json`),
    creating the folder if needed."""
    from interp_rand.output import write_json

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(path, summary)

