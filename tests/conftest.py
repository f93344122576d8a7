"""Shared fixtures: the default registry and a seeded generator."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import Registry, get_registry


@pytest.fixture
def registry() -> Registry:
    return get_registry()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
