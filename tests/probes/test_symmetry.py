"""Colouring symmetry breaking: mutual information on known distributions, and the noise
dependence of hand-built one-block models (receptive field = one ring step)."""

from __future__ import annotations

import math

import pytest
import torch
from seeded_models import seed_path_model

from probes.symmetry import (
    bias_bound,
    colour_noise_information,
    mutual_information,
    noise_rank,
    noise_resample_effect,
)


def test_mutual_information_known_values():
    a = torch.tensor([0, 1, 2, 0, 1, 2])
    assert mutual_information(a, a) == pytest.approx(math.log2(3))
    assert mutual_information(a, torch.zeros(6, dtype=torch.long)) == pytest.approx(0.0)
    # independent by construction: every (a, b) pair once
    a, b = torch.arange(4).repeat_interleave(3), torch.arange(3).repeat(4)
    assert mutual_information(a, b) == pytest.approx(0.0, abs=1e-12)
    assert bias_bound(1000, 3, 3) == pytest.approx(4 / (2000 * math.log(2)))


def test_noise_rank_on_a_known_cycle():
    from interp_rand.tasks.coloring import ColoringTask

    task = ColoringTask(n_vertices=4)
    order = torch.tensor([[0, 1, 2, 3]])  # ring 0-1-2-3-0
    noise = torch.tensor([[[0.1], [0.9], [0.5], [0.3]]])
    assert noise_rank(task.build(order, noise)).tolist() == [[0, 2, 1, 1]]


def test_hand_built_model_breaks_symmetry_within_one_ring_step():
    task, model = seed_path_model()
    g = torch.Generator().manual_seed(0)
    batch = task.sample(1024, g)
    info = colour_noise_information(model, task, batch)
    # colour 0 wins when the own noise beats the neighbours' mean: rank and colour are tied
    assert info.mi > 0.1 and info.mi_shuffled < 0.01 and info.mi_given_id > 0.1
    assert info.rank_accuracy > info.majority_accuracy + 0.1
    effect = noise_resample_effect(model, task, batch, g)
    assert effect.distance == [0, 1, 2, 3] and effect.receptive_field == 1
    assert effect.change_rate[0] > 0.1 and effect.change_rate[1] > 0.05
    assert effect.change_rate[2:] == [0.0, 0.0] and effect.tv[2:] == [0.0, 0.0]


def test_model_without_seed_weights_ignores_all_noise():
    task, model = seed_path_model(zero_seed=True)
    g = torch.Generator().manual_seed(0)
    batch = task.sample(1024, g)
    effect = noise_resample_effect(model, task, batch, g)
    assert effect.change_rate == [0.0] * 4 and effect.tv == [0.0] * 4
    info = colour_noise_information(model, task, batch)
    assert info.mi < 0.01
