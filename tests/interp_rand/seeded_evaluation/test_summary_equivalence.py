"""The chunked summary (``summarize``: :func:`majority_rates`, the chunked
:func:`sampled_success`) gives exactly what the former whole-tensor summary gave: the same draws
from the generator, the same numbers, on runs full of ties (issue 38: the exhaustive colouring
summary took 184 s and 12.9 GB)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from interp_rand.losses import pack_bits
from interp_rand.seeded_evaluation import (
    SeedRun,
    draw_seed_groups,
    group_success,
    las_vegas_exact,
    summarize,
)
from interp_rand.seeded_evaluation.metrics import lower_quantile, predictive_variance, success_histogram


def old_sampled(run, generator, n_samples=None, correct_fn=None):
    """``sampled_success`` as it was before it was chunked (the reference)."""
    n, n_seeds, _, width = run.probs.shape
    n_samples = n_seeds if n_samples is None else n_samples
    probs = run.probs if n_samples == n_seeds else run.probs[:, torch.arange(n_samples) % n_seeds]
    if run.bits:
        sampled = pack_bits(torch.rand(probs.shape, generator=generator) < probs)
    else:
        u = torch.rand(probs.shape[:-1] + (1,), generator=generator)
        sampled = (probs.cumsum(-1) <= u).sum(-1).clamp(max=width - 1)
    correct_fn = run.judge if correct_fn is None else correct_fn
    correct = (sampled == run.target_outputs[:, None]).all(-1) if correct_fn is None else correct_fn(sampled)
    return correct.float().mean(1)


def old_summarize(run, majority_ks, generator, n_samples=None, n_groups=100, correct_fn=None, fraction=0.05):
    """``summarize`` as it was before it was chunked: whole ``[n, G, k]`` groups, rule by rule."""
    rules = tuple(run.vote_rules)
    success = run.success.float().mean(1)

    def avg_worst(values):
        return {"average": values.mean().item(), "worst": lower_quantile(values, fraction)}

    can_sample = run.probs is not None and (correct_fn is not None or run.judge is not None
                                            or run.target_outputs is not None)
    sampled = avg_worst(old_sampled(run, generator, n_samples, correct_fn)) if can_sample else None
    out = {"n_inputs": run.n_inputs, "n_seeds": run.n_seeds, "loss_kind": run.loss_kind,
           "average": success.mean().item(), "worst_5pct": lower_quantile(success, fraction),
           "worst_fraction": fraction}
    judged = run if run.judge is not None or correct_fn is None else dataclasses.replace(run, judge=correct_fn)
    for k in majority_ks:
        groups = draw_seed_groups(run.n_inputs, run.n_seeds, k, n_groups, generator) if k <= run.n_seeds else None
        for rule in rules:
            key = f"majority_{k}" if rule == "majority_whole" else f"{rule}_{k}"
            if groups is None:
                out[key] = None
                continue
            out[key] = {**avg_worst(group_success(judged, groups, rule).float().mean(-1)), "rule": rule, "k": k,
                        "n_groups": n_groups}
            if rule == "las_vegas":
                out[key]["exact"] = avg_worst(las_vegas_exact(run, k))
    out["majority_rules"] = list(rules)
    out["majority_n_groups"] = n_groups
    out["sampled"] = sampled
    out["predictive_variance"] = predictive_variance(run).mean().item() if run.probs is not None else None
    counts, edges = success_histogram(run)
    out["histogram"] = {"counts": counts.tolist(), "edges": edges.tolist()}
    return out


def _colouring_run(n, n_seeds, n_vertices, seed):
    """A colouring-like run of few distinct outputs per input (many ties), judged by a rule."""
    g = torch.Generator().manual_seed(seed)
    favourite = torch.randint(0, 3, (n, 4, n_vertices), generator=g)  # 4 outputs an input mostly gives
    pick = torch.randint(0, 4, (n, n_seeds), generator=g)
    outputs = favourite.gather(1, pick[..., None].expand(-1, -1, n_vertices))
    noise = torch.rand(n, n_seeds, n_vertices, generator=g) < 0.1
    outputs = torch.where(noise, torch.randint(0, 3, outputs.shape, generator=g), outputs)

    def judge(colours):  # no two neighbours on a ring share a colour
        return (colours != colours.roll(1, -1)).all(-1)

    probs = torch.softmax(torch.randn(n, n_seeds, n_vertices, 3, generator=g) * 2, -1)
    return SeedRun(success=judge(outputs), outputs=outputs, probs=probs, loss_kind="colouring", judge=judge,
                   vote_rules=("majority_whole", "majority_per_vertex", "las_vegas"))


def _bit_run(n, n_seeds, seed):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, 16, (n, 2), generator=g)
    flip = torch.randint(0, 16, (n, n_seeds, 2), generator=g) * (torch.rand(n, n_seeds, 2, generator=g) < 0.3)
    outputs = targets[:, None] ^ flip
    probs = torch.rand(n, n_seeds, 2, 4, generator=g)
    return SeedRun(success=(outputs == targets[:, None]).all(-1), outputs=outputs, probs=probs, loss_kind="bce",
                   target_outputs=targets, vote_rules=("majority_whole", "majority_per_bit"))


@pytest.mark.parametrize("make, kwargs", [
    (lambda: _colouring_run(300, 40, 6, 0), {}),
    (lambda: _colouring_run(57, 9, 10, 1), {"n_samples": 20, "n_groups": 13}),
    (lambda: _bit_run(200, 30, 2), {}),
    (lambda: _bit_run(31, 7, 3), {"n_samples": 3, "n_groups": 50}),
])
def test_chunked_summary_equals_the_former_one(make, kwargs, monkeypatch):
    from interp_rand.seeded_evaluation import amplification, metrics

    run = make()
    ks = [1, 5, 30]
    expected = old_summarize(run, ks, torch.Generator().manual_seed(7), **kwargs)
    # small chunks, so that every loop runs several times (the draws must not depend on them)
    monkeypatch.setattr(amplification, "_CHUNK_ELEMENTS", 997)
    monkeypatch.setattr(metrics, "_SAMPLE_CHUNK", 1009)
    got = summarize(run, majority_ks=ks, generator=torch.Generator().manual_seed(7), **kwargs)
    assert got == expected


def test_chunked_summary_equals_the_former_one_with_a_correct_fn_on_a_trained_colouring_model():
    from interp_rand.losses import output_judge
    from interp_rand.seeded_evaluation import success_matrix
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint("zoo:coloring-Aq_R")
    model, task = ckpt.model().eval(), ckpt.spec.make_task()
    batch = task.exhaustive()[:400]
    run = success_matrix(model, task, batch, task.sample_seeds(40, torch.Generator().manual_seed(1)), keep_probs=True)
    assert 0.05 < run.success.float().mean() < 0.95  # a model that is sometimes right
    judge = output_judge(task.loss_kind, batch)
    expected = old_summarize(run, [5, 30], torch.Generator().manual_seed(0), correct_fn=judge)
    assert summarize(run, majority_ks=[5, 30], generator=torch.Generator().manual_seed(0), correct_fn=judge) == expected


@pytest.mark.parametrize("workers", [1, 3])
def test_majority_rates_equal_group_success_on_the_same_draws_whatever_the_workers(workers, monkeypatch):
    from interp_rand.seeded_evaluation import amplification

    run = _colouring_run(120, 25, 5, 4)
    groups = draw_seed_groups(120, 25, 7, 30, torch.Generator().manual_seed(3))
    expected = {rule: group_success(run, groups, rule).float().mean(-1) for rule in run.vote_rules}
    monkeypatch.setattr(amplification, "_CHUNK_ELEMENTS", 2000)  # many chunks in flight
    got = amplification.majority_rates(run, 7, torch.Generator().manual_seed(3), n_groups=30, workers=workers)
    assert got.keys() == expected.keys() and all(torch.equal(got[r], expected[r]) for r in expected)
