"""Where a colouring model's noise decides a vertex's colour, against where a noise-free model
fails (:mod:`interp_rand.seeded_evaluation.noise_use`), on the zoo's colouring models."""

import torch

from interp_rand import zoo
from interp_rand.reports.mechanisms.coloring_seed import CLASS_NAMES, ID_CLASS
from interp_rand.seeded_evaluation.noise_use import noise_use


def test_the_randomized_models_noise_decides_where_the_erm_model_fails():
    randomized, erm = zoo.load("coloring-Aq_R"), zoo.load("coloring-AE_R")
    task = randomized.spec.make_task()
    use = noise_use(randomized.model().eval(), erm.model().eval(), task, n_cycles=1000, n_noise=16,
                    classes=ID_CLASS, class_names=CLASS_NAMES)
    assert use.decided_where_conflict > 0.75 > 0.6 > use.decided_elsewhere
    assert use.conflict_where_decided > 5 * use.conflict_elsewhere
    assert set(use.per_class) == set(CLASS_NAMES)
    # the ERM model against itself: its noise decides almost nothing (near-ties), conflicts or not
    same = noise_use(erm.model().eval(), erm.model().eval(), task, n_cycles=200, n_noise=4)
    assert same.decided < 0.01 and same.decided_where_conflict < 0.1
