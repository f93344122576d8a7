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


def pytest_sessionstart(session: pytest.Session) -> None:
    """.ci/run starts its second stream of slow checks only once the README's test command
    has installed the project and started pytest: it names a file to create here."""
    started = os.environ.get("MONK_CI_STARTED")
    if started:
        with open(started, "a"):
            pass


@pytest.fixture
def registry() -> Registry:
    return get_registry()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
