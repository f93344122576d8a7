"""The Kernel base class: memory guard, non-finite values, distances (property-based)."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist

from monk_framework import Kernel, KernelOverflowError, ResourceError, get_registry
from monk_framework import kernels as kernels_module

REG = get_registry()


@attrs.frozen(kw_only=True)
class NaNKernel(Kernel):
    name: ClassVar[str] = "nan-kernel"
    summary: ClassVar[str] = "A broken kernel that returns NaN."

    def _gram(self, X, Y):
        return np.full((len(X), len(Y)), np.nan)

    def _diag(self, X):
        return np.ones(len(X))


def test_a_kernel_returning_nan_is_an_error_not_a_number():
    with pytest.raises(KernelOverflowError, match="nan-kernel.*non-finite values"):
        NaNKernel().gram(np.zeros((3, 1)))
    with pytest.raises(KernelOverflowError):
        NaNKernel().gram(np.zeros((3, 1)), np.zeros((2, 1)))


def test_polynomial_overflow_is_detected():
    X = np.array([[2000.0], [1.0]])
    with pytest.raises(KernelOverflowError, match=r"polynomial\(degree=60"):
        REG.get_kernel("polynomial", degree=60).gram(X)
    with pytest.raises(KernelOverflowError):
        REG.get_kernel("polynomial", degree=60).diag(X)


def test_memory_is_checked_before_allocating(monkeypatch):
    monkeypatch.setattr(kernels_module, "available_memory", lambda: 10 * 2**20)
    with pytest.raises(ResourceError, match=r"A 2000 x 2000 float64 Gram matrix needs 30.5 MiB but only 10.0 MiB"):
        REG.get_kernel("rbf").gram(np.zeros((2000, 1)))
    assert REG.get_kernel("rbf").gram(np.zeros((100, 1))).shape == (100, 100)


def test_available_memory_is_between_zero_and_physical_memory():
    import os

    avail = kernels_module.available_memory()
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert avail is not None and 0 < avail <= total


finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 9).flatmap(
        lambda d: st.tuples(
            arrays(np.float64, st.tuples(st.integers(1, 12), st.just(d)), elements=finite),
            arrays(np.float64, st.tuples(st.integers(1, 12), st.just(d)), elements=finite),
        )
    )
)
def test_distances_match_scipy(pair):
    X, Y = pair
    want = cdist(X, Y)
    np.testing.assert_allclose(kernels_module.distances(X, Y), want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max()))
    sq = kernels_module.squared_distances(X, Y)
    assert (sq >= 0).all()
    np.testing.assert_allclose(sq, want**2, rtol=1e-9, atol=1e-9 * (1 + (want**2).max()))


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 6)), elements=finite), st.sampled_from(["rbf", "laplace", "energy", "linear", "quadratic"]))
def test_gram_is_exactly_symmetric_for_any_data(X, name):
    K = REG.get_kernel(name, **({"sigma": 50.0} if name in ("rbf", "laplace") else {})).gram(X)
    assert np.array_equal(K, K.T)
