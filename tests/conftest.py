"""Shared fixtures: the default registry and a seeded generator."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

from monk_framework import Registry, get_registry

# property tests draw their examples from a fixed seed: every run of the suite checks the
# same cases, so a failure reproduces (set HYPOTHESIS_PROFILE=explore to search anew)
settings.register_profile("seeded", derandomize=True)
settings.register_profile("explore", max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "seeded"))


@pytest.fixture
def registry() -> Registry:
    return get_registry()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
