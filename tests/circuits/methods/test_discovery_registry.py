"""A discovery method registered for one test only: discover() runs it with its options, and it
is gone afterwards."""

import pytest
import torch

from circuits import discover, method_names
from circuits.methods.discovery import DISCOVERY_METHODS
from interp_rand.registry import Option


def _constant(model, graph, data, metric, value: float = 1.0):
    return torch.full(graph.shape, value)


def test_a_temporary_method_runs_with_its_options_and_is_gone_afterwards(model, pairs):
    clean, corrupted = pairs
    option = Option("value", "float", help="the score of every edge")
    with DISCOVERY_METHODS.temporarily("test-constant", _constant, description="test only", options=[option]):
        assert "test-constant" in method_names()
        assert DISCOVERY_METHODS.entry("test-constant").defaults() == {"value": 1.0}
        scores = discover(model, clean, corrupted, method="test-constant", value=2.5)
        assert scores.settings["method"] == "test-constant" and scores.settings["options"] == {"value": 2.5}
        assert torch.all(scores.values() == 2.5) and len(scores.values()) == scores.graph.n_edges
    assert "test-constant" not in method_names()
    with pytest.raises(ValueError, match="unknown discovery method 'test-constant'; registered discovery methods: acdc"):
        discover(model, clean, corrupted, method="test-constant")
