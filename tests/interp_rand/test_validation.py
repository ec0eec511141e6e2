"""Bounds (interp_rand.validation): one declaration of a number's allowed values, checked by the
config on construction and by the command line while parsing, in the same words."""

from __future__ import annotations

import math
import warnings

import pytest

from interp_rand.cli import catalogue
from interp_rand.model.config import ModelConfig
from interp_rand.threads import cores, set_threads
from interp_rand.training import TrainConfig
from interp_rand.validation import MAX_INT, Bounds


@pytest.mark.parametrize("bounds, value, integer, ok", [
    (Bounds(), 1.5, False, True),
    (Bounds(), math.nan, False, False),  # NaN never
    (Bounds(), math.inf, False, False),  # inf only where declared
    (Bounds(infinite=True, minimum=1, maximum=10), math.inf, False, True),
    (Bounds(infinite=True, minimum=1, maximum=10), -math.inf, False, False),
    (Bounds(infinite=True, minimum=1, maximum=10), 11, False, False),
    (Bounds(above=0), 0.0, False, False),
    (Bounds(minimum=0), 0.0, False, True),
    (Bounds(minimum=0, below=1), 1.0, False, False),
    (Bounds(minimum=1), 2.0, True, False),  # a float where an integer is due
    (Bounds(minimum=1), True, True, False),  # a bool is not a number here
    (Bounds(minimum=1), MAX_INT + 1, True, False),  # beyond int64
])
def test_bounds(bounds, value, integer, ok):
    assert (bounds.problem(value, integer=integer) is None) == ok


@pytest.mark.parametrize("make, field", [
    (lambda: ModelConfig(d_vocab=5, eps=math.nan), "eps"),
    (lambda: ModelConfig(d_vocab=5, init_range=math.nan), "init_range"),
    (lambda: ModelConfig(d_vocab=5, d_model=0), "d_model"),
    (lambda: TrainConfig(q=1e39), "q"),
    (lambda: TrainConfig(lr=math.inf), "lr"),
    (lambda: TrainConfig(seed=-1), "seed"),
])
def test_configs_refuse_what_their_bounds_refuse(make, field):
    with pytest.raises(ValueError, match=rf"\.{field}="):
        make()


def test_the_cli_reads_the_configs_own_bounds():
    """The catalogue (what the parser checks) carries the dataclasses' declarations."""
    q = next(s for s in catalogue.config_options("TrainConfig") if s.name == "q")
    assert q.limits() == Bounds(minimum=1, maximum=1e38, infinite=True)
    assert TrainConfig(q=math.inf).q == math.inf  # the worst input
    eps = next(s for s in catalogue.config_options("ModelConfig") if s.name == "eps")
    assert eps.limits().problem(math.nan) and eps.limits().problem(1e-5) is None


def test_more_threads_than_cores_are_clamped_with_a_warning():
    import torch

    before = torch.get_num_threads()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            set_threads(100000)
        assert torch.get_num_threads() == cores() and "100000" in str(caught[0].message)
    finally:
        set_threads(before)
