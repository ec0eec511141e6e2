"""Per-seed stored sets against the deterministic capacity, on hand-made matrices."""

from __future__ import annotations

import json

import pytest
import torch

from interp_rand.seeded_evaluation.mixing import deterministic_capacity, mixing_strategies, pairwise_jaccard


def rotating_pairs() -> torch.Tensor:
    # seed s stores positions {s, s+1 mod 4}: two keys per seed, every key under some seed
    stored = torch.zeros(1, 4, 4, dtype=torch.bool)
    for s in range(4):
        stored[0, s, [s, (s + 1) % 4]] = True
    return stored


def test_rotating_sets_mix_strategies():
    stats = mixing_strategies(rotating_pairs(), capacity=2.0)
    assert stats.mean_size == 2 and stats.size_std == 0 and stats.size_histogram == [0, 0, 1, 0, 0]
    # a seed's set against the 3 others: neighbours share 1 of 3 keys, the opposite one none
    assert stats.mean_jaccard == pytest.approx((1 / 3 + 0 + 1 / 3) / 3)
    # random 2-subsets of 4 share 0, 1 or 2 keys (1/6, 4/6, 1/6): Jaccard 7/18 on average
    assert stats.jaccard_control == pytest.approx(7 / 18, abs=0.15) and stats.set_diversity > 1
    assert stats.union_coverage == 1 and stats.never_stored == 0
    assert stats.size_ratio == 1 and stats.mixes and stats.capacity_source == "given"
    json.dumps(stats.to_dict())


def test_a_capacity_the_seeds_do_not_reach_is_no_mixing():
    stats = mixing_strategies(rotating_pairs(), capacity=4.0)
    assert stats.size_ratio == 0.5 and not stats.mixes
    # judged again against the capacity it does reach
    again = stats.against(2.0, "erm-run")
    assert again.mixes and again.capacity_source == "erm-run" and again.mean_jaccard == stats.mean_jaccard


def test_deterministic_set_has_jaccard_one_and_no_mixing():
    stored = torch.zeros(3, 8, 5, dtype=torch.bool)
    stored[..., :3] = True  # the same 3 keys under every seed
    stats = mixing_strategies(stored)
    assert stats.mean_jaccard == 1 and stats.set_diversity == 0 and not stats.mixes
    assert stats.capacity_source == "max over seeds" and stats.capacity == 3 and stats.size_ratio == 1
    assert stats.union_coverage == pytest.approx(0.6) and stats.never_stored == pytest.approx(0.4)
    # control: the same sizes at uniform positions are different sets (3 of 5: Jaccard < 1)
    assert stats.jaccard_control < 0.8
    assert deterministic_capacity(stored) == 3 and deterministic_capacity(stored[:, :1]) == 3


def test_jaccard_of_empty_sets_and_full_sets():
    assert pairwise_jaccard(torch.zeros(2, 3, 4, dtype=torch.bool)).tolist() == [1.0, 1.0]
    full = torch.ones(1, 5, 4, dtype=torch.bool)
    stats = mixing_strategies(full, generator=torch.Generator().manual_seed(1))
    assert stats.mean_jaccard == 1 and stats.jaccard_control == 1  # nowhere else to put them
    assert stats.set_diversity is None and not stats.mixes


def test_bad_inputs():
    with pytest.raises(ValueError, match="n_seeds >= 2"):
        mixing_strategies(torch.ones(2, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="capacity"):
        mixing_strategies(rotating_pairs(), capacity=-1.0)
