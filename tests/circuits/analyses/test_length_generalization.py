"""Length generalisation (circuits.analyses.length_generalization): the extrapolation factor and
the breaking length from the scores, the breaking step from the heads' attention (a head that
moves is named; none moving says the readout fails), lengths a learned table cannot reach, and
the attention measures themselves."""

from __future__ import annotations

import pytest
import torch

from circuits.analyses.length_generalization import (DRIFTS, Generalization, HeadAttention, LengthScore,
                                                     generalization, head_attention, role_of, with_drift)
from interp_rand import HookedTransformer, make_task


def _scores(table):
    return [LengthScore(length, em, [em] * length if em is not None else [], 100,
                        None if em is not None else "beyond n_ctx") for length, em in table]


def test_the_factor_counts_only_an_unbroken_run_from_the_trained_maximum():
    found = Generalization("sort", "alibi", (2, 8), _scores([(4, 0.95), (8, 0.99), (9, 0.97), (10, 0.92),
                                                              (11, 0.5), (12, 0.95)]))
    assert found.longest_solved() == 10 and found.extrapolation_factor() == pytest.approx(10 / 8)
    assert found.breaks_at() == 11  # 12 passes again, but the run from 8 was broken at 11
    inside = Generalization("sort", "alibi", (2, 8), _scores([(8, 0.5), (9, 0.99)]))
    assert inside.extrapolation_factor() == 0.0 and "below 0.9" in inside.headline()
    stopped = Generalization("sort", "learned", (2, 8), _scores([(8, 0.99), (9, None), (10, None)]))
    assert stopped.extrapolation_factor() == 1.0
    assert stopped.breaking_step() == "cannot run past length 8: beyond n_ctx"


def _heads(x_mass, entropy):
    return [HeadAttention("a0.0", {"x": x_mass, "y": 1 - x_mass}, entropy), HeadAttention("a1.0", {"x": 0.5, "y": 0.5}, 0.5)]


def test_the_breaking_step_names_the_head_that_moves_and_otherwise_blames_the_readout():
    reference = _heads(0.9, 0.2)
    scores = _scores([(8, 1.0), (9, 0.3)])
    moved = Generalization("sort", "alibi", (2, 8), scores, {8: reference, 9: with_drift(_heads(0.2, 0.2), reference)}, 8)
    assert moved.attention[9][0].drift == pytest.approx(0.7) and moved.attention[9][1].drift == 0
    assert "head a0.0's attention moves off x (0.90 at length 8 -> 0.20" in moved.breaking_step()
    spread = Generalization("sort", "alibi", (2, 8), scores, {8: reference, 9: with_drift(_heads(0.9, 0.7), reference)}, 8)
    assert "head a0.0's attention spreads (entropy 0.20 -> 0.70)" in spread.breaking_step()
    held = Generalization("sort", "alibi", (2, 8), scores, {8: reference, 9: with_drift(_heads(0.88, 0.25), reference)}, 8)
    assert held.attention[9][0].drift < DRIFTS
    assert "no head's attention drifts" in held.breaking_step() and "readout" in held.breaking_step()


def test_roles_are_position_names_without_their_index():
    assert [role_of(p) for p in ("x12", "SEP", "y0", "=", "a3")] == ["x", "SEP", "y", "=", "a"]


def test_a_learned_table_stops_at_n_ctx_and_the_zoo_sort_model_holds_its_own_length():
    from interp_rand import zoo

    ckpt = zoo.load("sort")
    found = generalization(ckpt.model(), ckpt.spec.make_task(), range(5, 8), n=256, n_attention=32)
    assert found.score_at(5).exact_match > 0.99
    assert [s.length for s in found.scores if s.exact_match is None] == [6, 7]
    assert "n_ctx=10" in found.score_at(6).skipped
    assert found.extrapolation_factor() == 1.0 and found.breaking_step().startswith("cannot run past length 5")


def test_head_attention_masses_are_distributions_and_drift_is_zero_at_the_reference():
    task = make_task("sort", length=4, vocab=6)
    model = HookedTransformer(task.model_config(d_model=16, n_heads=2, positional="alibi"), seed=0).eval()
    found = generalization(model, task, range(2, 10), trained=(2, 4), n=64, n_attention=32)
    assert all(s.exact_match is not None for s in found.scores)  # ALiBi runs at every length
    for heads in found.attention.values():
        assert len(heads) == 4
        for h in heads:
            assert sum(h.roles.values()) == pytest.approx(1.0) and 0 <= h.entropy <= 1 + 1e-9
    assert all(h.drift == 0 for h in found.attention[4])
    assert max(h.drift for h in found.attention[9]) > 0
    batch = task.sample(16, torch.Generator().manual_seed(0))
    again = head_attention(model, task, batch)
    assert set(again[0].roles) == {"x", "SEP", "y"}


def test_a_linear_attention_has_no_role_masses_or_entropy():
    """Recall's linear attention gives patterns that are not distributions: no drift is stated."""
    task = make_task("recall", n_pairs=4)
    model = HookedTransformer(task.model_config(), seed=0).eval()
    assert head_attention(model, task, task.sample(8, torch.Generator().manual_seed(0))) == []
