"""Reductions of a Gram matrix (engine/reductions.py): the U-statistic's loss to a
diagonal that dwarfs the values between points is said, against brute force."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from monk_framework import PrecisionWarning, estimate, get_registry, permutation_test


def _brute_u_statistic(k, x, y) -> float:
    """MMD_U² of 1-d samples, every sum rounded once (math.fsum): the off-diagonal
    values are summed without the diagonal, so nothing is lost to it."""
    n, m = len(x), len(y)
    xx = math.fsum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = math.fsum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = math.fsum(k(a, b) for a in x for b in y) / (n * m)
    return xx + yy - 2.0 * xy


def _said(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in seen if issubclass(w.category, PrecisionWarning)]


def test_a_diagonal_that_swallows_the_u_statistic_is_said_by_estimates_and_tests():
    # exp(<x, y>/sigma^2) at sigma = 0.2 on N(0, 1)-sized data: k(y, y) reaches 1e81
    # for y = -2.7 where no value between points exceeds 1e37. S_yy - tr_y came out 0,
    # and MMD_U^2 -5.9e33 where brute force gives -3.2e33: a wrong number, silently
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.1, 0.4, size=40), rng.normal(0.3, 1.0, size=40)
    y[0] = -2.7
    truth = _brute_u_statistic(lambda a, b: math.exp(a * b / 0.04), x, y)
    result, said = _said(lambda: estimate("exponential:sigma=0.2", "u-stat", x[:, None], y[:, None]))
    assert abs(result.mmd2 - truth) > 0.01 * abs(truth)  # what the warning is about (4 % here)
    assert len(said) == 1 and re.match(
        r"exponential\(sigma=0\.2\) is far larger on the diagonal, k\(z, z\), than between these points: the U-statistic, "
        r"which leaves the diagonal out, can carry a round-off of up to [\d.e+]+ (times|of) its value\. Use the V-statistic \(v-stat\)",
        said[0])
    _, said = _said(lambda: permutation_test("exponential:sigma=0.2", "u-stat", x[:, None], y[:, None],
                                              n_permutations=19, rng=0))
    assert len(said) == 1 and "can carry a round-off of up to" in said[0]
    # the V-statistic keeps the diagonal: nothing to say, and brute force agrees
    v, said = _said(lambda: estimate("exponential:sigma=0.2", "v-stat", x[:, None], y[:, None]))
    k = np.exp(np.outer(np.r_[x, y], np.r_[x, y]) / 0.04)
    vx, vy, vxy = (math.fsum(k[:40, :40].ravel()) / 1600, math.fsum(k[40:, 40:].ravel()) / 1600,
                   math.fsum(k[:40, 40:].ravel()) / 1600)
    assert said == [] and v.mmd2 == pytest.approx(vx + vy - 2 * vxy, rel=1e-12)


@pytest.mark.parametrize(("far", "said"), [(1e4, False), (1e6, True), (1e8, True)])
def test_one_gross_outlier_with_the_quadratic_kernel_is_said_once_it_costs_digits(far, said):
    # the error of MMD_U^2 measured against brute force: 3e-8 at 1e4 (below the 1e-6 the
    # warning is for), 1e-5 at 1e6, and 190 % at 1e8
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=300), rng.normal(0.3, 1.0, size=300)
    x[0] = far
    result, warned = _said(lambda: estimate("quadratic", "u-stat", x[:, None], y[:, None]))
    error = abs(result.mmd2 - _brute_u_statistic(lambda a, b: (a * b + 1.0) ** 2, x, y))
    assert bool(warned) == said
    if said:
        assert "quadratic(scale=1.0, offset=1.0, normalize=False) is far larger on the diagonal" in warned[0]
        assert error / abs(result.mmd2) > 1e-6
    else:
        assert error / abs(result.mmd2) < 1e-6


@pytest.mark.parametrize("kernel", ["rbf:sigma=1", "laplace:sigma=1", "quadratic", "polynomial:degree=4", "linear",
                                    "energy", "rbf:sigma=1e-200"])
def test_ordinary_data_and_a_kernel_that_sees_only_ties_are_not_blamed_on_the_diagonal(kernel):
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(200, 3)), rng.normal(0.2, 1.0, size=(200, 3))
    result, said = _said(lambda: estimate(kernel, "u-stat", X, Y))
    assert not any("far larger on the diagonal" in s for s in said)
    # and nothing to say: the off-diagonal values summed without their diagonal, from the
    # Gram matrix of the kernel as fitted (a kernel 0 between every two points: exactly 0)
    fitted = get_registry().resolve_kernel(kernel).fitted(X, Y)
    Kxx, Kyy, Kxy = fitted.gram(X), fitted.gram(Y), fitted.gram(X, Y)
    off = ~np.eye(200, dtype=bool)
    truth = (math.fsum(Kxx[off]) / (200 * 199) + math.fsum(Kyy[off]) / (200 * 199)
             - 2.0 * math.fsum(Kxy.ravel()) / 200**2)
    assert result.mmd2 == pytest.approx(truth, rel=1e-9, abs=1e-12)
