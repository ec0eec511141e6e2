"""Fixtures for the circuits tests (models in circuit_models.py)."""

from __future__ import annotations

import pytest
from circuit_models import make_model, token_pairs

from interp_rand.model.bridge import to_bridge


@pytest.fixture(scope="session")
def model():
    return make_model()


@pytest.fixture(scope="session")
def bridge(model):
    return to_bridge(model)


@pytest.fixture(scope="session")
def pairs():
    return token_pairs()
