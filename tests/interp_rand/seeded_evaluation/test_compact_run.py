"""The run holds its results in the smallest types and the probabilities only on request; what
the metrics read of the probabilities is computed while the model runs, and equals what they
compute from the kept probabilities (issue 38: the exhaustive colouring evaluation held 2.2 GB
of probabilities and 1.5 GB of int64 outputs); the majority draws come from numpy's copy of the
generator's stream and are counted without the groups' indices, and give the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from interp_rand import zoo
from interp_rand.losses import get_loss_kind
from interp_rand.model import HookedTransformer
from interp_rand.seeded_evaluation import (
    SeedRun,
    draw_seed_groups,
    evaluate_seeded,
    group_success,
    predictive_variance,
    sampled_success,
    success_matrix,
    summarize,
)
from interp_rand.seeded_evaluation import amplification, uniform_stream
from interp_rand.seeded_evaluation.run import output_dtype
from interp_rand.tasks import make_task
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask


def test_outputs_take_the_smallest_type_that_holds_the_vocabulary():
    classes, bits = get_loss_kind("ce"), get_loss_kind("bce")
    assert output_dtype(classes, 3) == torch.uint8 and output_dtype(classes, 256) == torch.uint8
    assert output_dtype(classes, 257) == torch.int16 and output_dtype(classes, 40_000) == torch.int32
    assert output_dtype(bits, 8) == torch.uint8 and output_dtype(bits, 9) == torch.int16
    assert output_dtype(bits, 40) == torch.long
    task = ColoringTask(n_vertices=5)
    model = HookedTransformer(task.model_config(d_model=8, n_layers=1, d_head=8), seed=0)
    run = success_matrix(model, task, task.sample(6, torch.Generator().manual_seed(0)),
                         task.sample_seeds(4, torch.Generator().manual_seed(1)))
    assert run.outputs.dtype == torch.uint8 and run.success.dtype == torch.bool  # 3 colours
    recall = RecallTask(n_pairs=3, value_bits=2, seed_bits=3)
    model = HookedTransformer(recall.model_config(d_model=8, n_layers=1, d_input_mlp=8), seed=0)
    run = success_matrix(model, recall, recall.sample(5, torch.Generator().manual_seed(0)), "all")
    assert run.outputs.dtype == torch.uint8  # 2 value bits packed


def test_probabilities_only_on_request():
    task = ColoringTask(n_vertices=5)
    model = HookedTransformer(task.model_config(d_model=8, n_layers=1, d_head=8), seed=0)
    batch = task.sample(6, torch.Generator().manual_seed(0))
    seeds = task.sample_seeds(4, torch.Generator().manual_seed(1))
    plain = success_matrix(model, task, batch, seeds)
    assert plain.probs is None and plain.sampled is None and plain.variance.shape == (6,)
    kept = success_matrix(model, task, batch, seeds, keep_probs=True)
    assert kept.probs.shape == (6, 4, 5, 3)
    assert torch.equal(plain.success, kept.success) and torch.equal(plain.outputs, kept.outputs)
    bare = success_matrix(model, task, batch, seeds, variance=False)
    assert bare.variance is None and bare.probs is None
    with pytest.raises(ValueError, match="keep_probs=True or sample"):
        sampled_success(plain, torch.Generator())
    with pytest.raises(ValueError, match="variance=True"):
        predictive_variance(bare)
    with pytest.raises(ValueError, match="n_samples needs sample"):
        success_matrix(model, task, batch, seeds, n_samples=3)


def _equal_statistics(model, task, batch, seeds, n_samples=None, **kwargs):
    """The statistics drawn and computed chunk by chunk equal those of the kept probabilities,
    and leave the generator where ``sampled_success`` leaves it."""
    kept = success_matrix(model, task, batch, seeds, keep_probs=True)
    g_kept, g_fly = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    expected = sampled_success(kept, g_kept, n_samples=n_samples)
    fly = success_matrix(model, task, batch, seeds, sample=g_fly, n_samples=n_samples, **kwargs)
    assert fly.probs is None and fly.n_samples == (n_samples or kept.n_seeds)
    assert torch.equal(fly.sampled, expected) and torch.equal(sampled_success(fly, torch.Generator()), expected)
    assert torch.equal(fly.variance, predictive_variance(kept))
    assert torch.equal(torch.rand(4, generator=g_fly), torch.rand(4, generator=g_kept))
    return kept, fly


def test_statistics_on_the_fly_equal_those_of_the_probabilities_colouring():
    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    batch = task.exhaustive()[:60]
    seeds = task.sample_seeds(7, torch.Generator().manual_seed(2))
    for kwargs in ({}, {"chunk_size": 5, "workers": 3}, {"chunk_size": 50, "workers": 1}):
        _, fly = _equal_statistics(model, task, batch, seeds, **kwargs)
        assert 0 < fly.sampled.mean() < 1 and (fly.variance > 0).all()
    _equal_statistics(model, task, batch, seeds, n_samples=11, chunk_size=5, workers=2)  # samples cycle the seeds
    _equal_statistics(model, task, batch, seeds[:1], n_samples=5)  # one seed, several samples (a fixed seed)


def test_statistics_read_from_the_receptive_fields_tables_are_the_rows_own(monkeypatch):
    """Where the rows' logits are looked up from receptive fields, their probabilities, variance
    and samples are read from the fields' tables: bit for bit what each row's own give."""
    from interp_rand.model.receptive_field import ReceptiveFields
    from interp_rand.seeded_evaluation import run as seeded_run

    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    batch = task.exhaustive()[:64]
    seeds = task.sample_seeds(5, torch.Generator().manual_seed(4))
    find, used = ReceptiveFields.find, []
    monkeypatch.setattr(ReceptiveFields, "pays_off", property(lambda self: True))  # (on a small batch)
    monkeypatch.setattr(seeded_run.ReceptiveFields, "find", lambda *args: used.append(find(*args)) or used[-1])
    kept, fly = _equal_statistics(model, task, batch, seeds, n_samples=8, chunk_size=40, workers=2)
    assert used and all(f is not None for f in used)
    monkeypatch.setattr(seeded_run.ReceptiveFields, "find", lambda *args: None)  # every row through the forward
    rows = success_matrix(model, task, batch, seeds, keep_probs=True, sample=torch.Generator().manual_seed(9),
                          n_samples=8)
    for field in ("success", "outputs", "probs"):
        assert torch.equal(getattr(kept, field), getattr(rows, field))
    assert torch.equal(fly.variance, rows.variance) and torch.equal(fly.sampled, rows.sampled)


def test_statistics_on_the_fly_equal_those_of_the_probabilities_ce_and_bits():
    recall = RecallTask(n_pairs=3, value_bits=2, seed_bits=3)  # bce: each bit drawn, judged by targets
    model = HookedTransformer(recall.model_config(d_model=8, n_layers=1, d_input_mlp=8), seed=0)
    batch = recall.sample(30, torch.Generator().manual_seed(0))
    _equal_statistics(model, recall, batch, recall.all_seeds(), chunk_size=7, workers=2)
    _equal_statistics(model, recall, batch, recall.all_seeds(), n_samples=3)
    sort = make_task("sort", length=3)  # ce, no seeds: every sample from the one distribution
    model = HookedTransformer(sort.model_config(d_model=8, n_layers=1), seed=0)
    _equal_statistics(model, sort, sort.sample(20, torch.Generator().manual_seed(0)), None, n_samples=6)


def test_summary_of_a_run_that_sampled_while_it_ran_is_the_summary_of_its_probabilities():
    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    batch = task.exhaustive()[:80]
    seeds = task.sample_seeds(40, torch.Generator().manual_seed(1))
    kept = success_matrix(model, task, batch, seeds, keep_probs=True)
    expected = summarize(kept, majority_ks=[5, 30], generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(0)
    fly = success_matrix(model, task, batch, seeds, sample=generator)
    assert summarize(fly, majority_ks=[5, 30], generator=generator) == expected
    with pytest.raises(ValueError, match="judged while it ran"):
        summarize(fly, majority_ks=[5], generator=generator, correct_fn=lambda outputs: outputs[..., 0] == 0)
    with pytest.raises(ValueError, match="n_samples=40"):
        summarize(fly, majority_ks=[5], generator=generator, n_samples=7)


def test_evaluate_seeded_gives_what_the_kept_probabilities_gave():
    """``evaluate_seeded`` (``interp-rand eval --seeds``, the experiment runner) samples while the
    model runs: the numbers of the former flow (probabilities kept, then summarized)."""
    from interp_rand.losses import output_judge

    task = make_task("coloring")
    model = zoo.load("coloring-Aq_R").model()
    for fixed in (False, True):
        generator = torch.Generator().manual_seed(3)
        batch = task.sample(50, generator)
        got = evaluate_seeded(task, model, batch, 30, generator, fixed=fixed)
        generator = torch.Generator().manual_seed(3)
        batch = task.sample(50, generator)
        seeds = task.sample_seeds(30, generator)
        run = success_matrix(model, task, batch, task.fixed_seed()[None] if fixed else seeds, keep_probs=True)
        assert got == summarize(run, majority_ks=(5, 30), generator=generator, n_samples=30,
                                correct_fn=output_judge(task.loss_kind, batch))


# --- the majority draws ---------------------------------------------------------------------------
@pytest.mark.parametrize("skip", [0, 1, 623, 624, 1000])
def test_the_numpy_stream_is_torch_rand(skip):
    assert uniform_stream.available()
    generator = torch.Generator().manual_seed(42)
    torch.rand(skip, generator=generator)
    reference = torch.Generator()
    reference.set_state(generator.get_state())
    expected = torch.rand(3 * 700 + 50, generator=reference)
    with uniform_stream.UniformStream(generator) as stream:
        assert stream.fast
        keys = [stream.keys((2, 5, 70)), stream.keys(1400)]
    got = torch.cat([uniform_stream.as_uniform(k).flatten() for k in keys])
    assert keys[0].dtype == np.int32 and torch.equal(got, expected[:2100])
    assert torch.equal(torch.rand(50, generator=generator), expected[2100:])  # the generator continues


def test_the_stream_falls_back_to_torch(monkeypatch):
    monkeypatch.setattr(uniform_stream, "available", lambda: False)
    a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    with uniform_stream.UniformStream(a) as stream:
        assert not stream.fast
        keys = stream.keys((3, 4))
    assert torch.equal(uniform_stream.as_uniform(keys), torch.rand(3, 4, generator=b))
    assert torch.equal(torch.rand(2, generator=a), torch.rand(2, generator=b))


def _colouring_like(n, n_seeds, n_answer, seed, judge_from_outputs=True):
    g = torch.Generator().manual_seed(seed)
    favourite = torch.randint(0, 3, (n, 3, n_answer), generator=g)
    outputs = favourite.gather(1, torch.randint(0, 3, (n, n_seeds), generator=g)[..., None].expand(-1, -1, n_answer))

    def judge(colours):
        return (colours != colours.roll(1, -1)).all(-1)

    success = judge(outputs) if judge_from_outputs else torch.rand(n, n_seeds, generator=g) < 0.5
    return SeedRun(success=success, outputs=outputs.to(torch.uint8), probs=None, loss_kind="colouring", judge=judge,
                   vote_rules=("majority_whole", "majority_per_vertex", "las_vegas"))


def _expected_rates(run, k, n_groups, seed):
    groups = draw_seed_groups(run.n_inputs, run.n_seeds, k, n_groups, torch.Generator().manual_seed(seed))
    return {rule: group_success(run, groups, rule).float().mean(-1) for rule in run.vote_rules}


def test_counted_votes_equal_the_groups_votes_where_keys_tie(monkeypatch):
    """Coarse keys (many equal) leave groups whose k-th and k+1-th keys tie: those are picked by
    ``topk`` as before, the rest counted; both equal the votes over the groups' indices."""
    coarse = uniform_stream.UniformStream.keys

    def tying(self, shape):
        return coarse(self, shape) >> 18 << 18  # 64 key values

    monkeypatch.setattr(uniform_stream.UniformStream, "keys", tying)
    run = _colouring_like(40, 30, 6, 0)
    counted = amplification.majority_rates(run, 7, torch.Generator().manual_seed(5), n_groups=25)
    monkeypatch.setattr(amplification._GroupCounts, "plan", classmethod(lambda cls, *args: None))
    by_index = amplification.majority_rates(run, 7, torch.Generator().manual_seed(5), n_groups=25)
    assert counted.keys() == by_index.keys() and all(torch.equal(counted[r], by_index[r]) for r in counted)


def test_votes_where_one_output_is_not_equally_right_over_its_seeds_use_the_indices():
    run = _colouring_like(30, 20, 5, 1, judge_from_outputs=False)  # success not a function of the output
    assert amplification._GroupCounts.plan(run, 5, run.vote_rules, amplification._dense_ranks(run.outputs), 0, 0) \
        is None
    got = amplification.majority_rates(run, 5, torch.Generator().manual_seed(2), n_groups=40)
    expected = _expected_rates(run, 5, 40, 2)
    assert all(torch.equal(got[r], expected[r]) for r in expected)


def test_counted_votes_on_wide_values_and_many_seeds():
    """Values spanning several packed columns, k near S: the counts stay exact."""
    g = torch.Generator().manual_seed(3)
    outputs = torch.randint(0, 7, (12, 150, 3), generator=g)

    def judge(values):
        return values.sum(-1) % 2 == 0

    run = SeedRun(success=judge(outputs), outputs=outputs, probs=None, loss_kind="colouring", judge=judge,
                  vote_rules=("majority_whole", "majority_per_vertex", "las_vegas"))
    for k in (1, 77, 150):
        plan = amplification._GroupCounts.plan(run, k, run.vote_rules, amplification._dense_ranks(outputs), 0, 0)
        assert plan is not None
        got = amplification.majority_rates(run, k, torch.Generator().manual_seed(k), n_groups=9)
        expected = _expected_rates(run, k, 9, k)
        assert all(torch.equal(got[r], expected[r]) for r in expected)
