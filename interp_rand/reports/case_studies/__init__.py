"""Case studies: the mechanisms the toolkit finds in trained models, each claim backed by
ablations against random-component controls.

- :mod:`interp_rand.reports.case_studies.carry`: carry computation and propagation in addition.
- :mod:`interp_rand.reports.case_studies.sorting`: the heads that point to the next element in sort.

Compute only; drawing lives in :mod:`interp_rand.reports.case_studies.draw`.
"""

from interp_rand.reports.case_studies.carry import (
    CarryConfig,
    CarryStudy,
    carry_pairs,
    carry_study,
)
from interp_rand.reports.case_studies.components import (
    ComponentScores,
    correct_under_ablation,
    node_patch_scores,
    random_controls,
)
from interp_rand.reports.case_studies.sorting import SortConfig, SortStudy, sort_study

__all__ = [
    "CarryConfig",
    "CarryStudy",
    "ComponentScores",
    "SortConfig",
    "SortStudy",
    "carry_pairs",
    "carry_study",
    "correct_under_ablation",
    "node_patch_scores",
    "random_controls",
    "sort_study",
]
