"""ruff (lint and format) and mypy, as configured in pyproject.toml, pass on the whole
tree (the CI runs the test suite, so it runs them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "tool",
    # mypy takes 10-25 s on a cold cache: among the slow checks, which .ci/run runs too
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], pytest.param(["mypy"], marks=pytest.mark.slow)],
    ids=["ruff", "ruff-format", "mypy"],
)
def test_tree_passes(tool):
    result = subprocess.run([sys.executable, "-m", *tool], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
