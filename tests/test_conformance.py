"""Checks every registered kernel and estimator must pass (as scikit-learn's
``parametrize_with_checks`` does): a new plugin is tested the moment it is registered.
The contract itself is checked by the kit third-party authors use,
:mod:`monk_framework.checks`; the checks below add the framework's own promises
(bad input refused with a message, bounds under extreme inputs, MMD near 0 without a
difference)."""

from __future__ import annotations

import string

import numpy as np
import pytest

from monk_framework import DataError, MMDEstimator, ParameterError, get_registry
from monk_framework.checks import check_estimator, check_kernel

REG = get_registry()
KERNELS = [e.cls for e in REG.kernels()]
ESTIMATORS = [e.cls for e in REG.estimators()]

#: the bandwidth kernels at sigma = 1 (their default is the median heuristic)
FIXED = {"rbf": {"sigma": 1.0}, "laplace": {"sigma": 1.0}}


def sample(kind: str, n: int, seed: int, shift: float = 0.0):
    gen = np.random.default_rng(seed)
    if kind == "string":
        letters = np.array(list(string.ascii_uppercase[:4]))
        return ["".join(gen.choice(letters, size=gen.integers(3, 12))) for _ in range(n)]
    return gen.normal(size=(n, 3)) * 0.5 + shift


def bad_samples(kind: str):
    if kind == "string":
        return [([], "empty"), ([1, 2], "is int"), (np.zeros(3), "numbers")]
    return [([], "empty"), ([[np.nan, 0, 0]] * 3, "NaN"), (np.zeros((2, 2, 2)), "dimensions"), (["ab", "cd"], "strings")]


@pytest.mark.parametrize("cls", KERNELS, ids=lambda c: c.name)
def test_every_kernel_passes_the_conformance_kit(cls):
    check_kernel(cls)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.name)
def test_every_estimator_passes_the_conformance_kit(cls):
    check_estimator(cls)
    # and with kernels from the registry too, an unbounded one where the estimator takes it
    for kernel in (REG.get_kernel("quadratic"), REG.get_kernel("laplace", sigma=2.0)):
        if accepts(cls(), kernel):
            check_estimator(cls, kernel=kernel)


def accepts(est, kernel) -> bool:
    """Whether an estimator takes this kernel (rff takes translation-invariant ones only)."""
    try:
        est.check_kernel(kernel)
    except ParameterError:
        return False
    return True


def kernel_for(est, kernel_name):
    kernel = REG.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
    if not accepts(est, kernel):
        pytest.skip(f"{est.name} does not take kernel {kernel_name}")
    return kernel


@pytest.mark.parametrize("cls", KERNELS, ids=lambda c: c.name)
class TestKernelConformance:
    def test_declared_bound_holds(self, cls):
        # a kernel that declares sup k(x, x) (robust tests rely on it) never exceeds it, even
        # on extreme inputs; a nonnegative one never gives a negative value
        kernel = cls().fit(sample(cls.input_kind, 30, 5))
        X = sample(cls.input_kind, 30, 5)
        if cls.input_kind == "vector":
            X = np.vstack([X, X[:5] * 1e3, np.zeros((1, 3))])
        kappa = kernel.sup_diag()
        if kappa is not None:
            assert kernel.diag(X).max() <= kappa * (1 + 1e-12)
            assert kernel.feature_diameter() <= 2 * np.sqrt(kappa) + 1e-12
        if kernel.nonnegative:
            assert kernel.gram(X).min() >= 0

    @pytest.mark.parametrize("which", range(4))
    def test_bad_input_is_rejected_with_a_message(self, cls, which):
        cases = bad_samples(cls.input_kind)
        if which >= len(cases):
            pytest.skip("fewer cases for this input kind")
        value, message = cases[which]
        with pytest.raises(DataError, match=message):
            cls().fit(sample(cls.input_kind, 5, 0)).gram(value)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.name)
@pytest.mark.parametrize("kernel_name", ["rbf", "quadratic"])
class TestEstimatorConformance:
    def test_too_few_points_is_a_clear_error(self, cls, kernel_name):
        est = cls()
        need, _ = est.min_sample_size()
        if need <= 1:
            pytest.skip("accepts a single point")
        small = sample("vector", need - 1, 0)
        kernel = kernel_for(est, kernel_name)
        with pytest.raises(DataError, match=f"needs at least {need}"):
            if isinstance(est, MMDEstimator):
                est.estimate(kernel, small, sample("vector", need + 5, 1))
            else:
                est.embed(kernel, small)

    def test_no_difference_means_small_mmd(self, cls, kernel_name):
        est = cls()
        X = sample("vector", 300, 8)
        kernel = kernel_for(est, kernel_name)
        if isinstance(est, MMDEstimator):
            same = est.estimate(kernel, X, X, rng=0).mmd
            far = est.estimate(kernel, X, X + 2.0, rng=0).mmd
            assert same < 0.05 * far
        else:
            kernel = REG.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
            emb = est.embed(kernel, X, rng=0)
            empirical = REG.get_estimator("mean").embed(kernel, X)
            shifted = REG.get_estimator("mean").embed(kernel, X + 2.0)
            # on clean data the estimate sits near the empirical embedding of X
            assert emb.distance(empirical) < 0.05 * emb.distance(shifted)
