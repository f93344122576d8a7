"""V- and U-statistics against brute-force double loops, closed forms and the energy distance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from monk_framework import DataError, MMDResult, get_registry
from monk_framework.app.datasets import get_dataset

REG = get_registry()

#: the bandwidth kernels at sigma = 1 (their default is the median heuristic)
FIXED = {"rbf": {"sigma": 1.0}, "laplace": {"sigma": 1.0}}


def brute_force(kernel, X, Y):
    """MMD_V^2 and MMD_U^2 by explicit loops over pairs of points."""
    k = lambda a, b: kernel.gram(a[None, :], b[None, :])[0, 0]  # noqa: E731
    n, m = len(X), len(Y)
    sxx = sum(k(X[i], X[j]) for i in range(n) for j in range(n))
    syy = sum(k(Y[i], Y[j]) for i in range(m) for j in range(m))
    sxy = sum(k(X[i], Y[j]) for i in range(n) for j in range(m))
    dxx = sum(k(X[i], X[i]) for i in range(n))
    dyy = sum(k(Y[i], Y[i]) for i in range(m))
    v = sxx / n**2 + syy / m**2 - 2 * sxy / (n * m)
    u = (sxx - dxx) / (n * (n - 1)) + (syy - dyy) / (m * (m - 1)) - 2 * sxy / (n * m)
    return v, u


@pytest.mark.parametrize("kernel_name", ["rbf", "quadratic", "laplace", "energy", "linear"])
@pytest.mark.parametrize(("n", "m"), [(7, 7), (6, 11), (2, 3)])
def test_v_and_u_statistics_equal_brute_force(kernel_name, n, m, rng):
    X, Y = rng.normal(size=(n, 2)), rng.normal(size=(m, 2)) + 0.4
    kernel = REG.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
    v, u = brute_force(kernel, X, Y)
    rv = REG.get_estimator("v-stat").estimate(kernel, X, Y)
    ru = REG.get_estimator("u-stat").estimate(kernel, X, Y)
    assert rv.mmd2 == pytest.approx(v, rel=1e-12, abs=1e-14)
    assert ru.mmd2 == pytest.approx(u, rel=1e-12, abs=1e-14)
    assert rv.mmd == pytest.approx(math.sqrt(max(v, 0)), rel=1e-12, abs=1e-14)
    assert (rv.n_x, rv.n_y) == (n, m)


def test_u_statistic_root_rules():
    # identical samples: MMD_U^2 < 0 (the within terms lose the diagonal)
    X = np.array([[0.0], [1.0], [2.0]])
    kernel = REG.get_kernel("rbf", sigma=1.0)
    clip = REG.get_estimator("u-stat").estimate(kernel, X, X)
    signed = REG.get_estimator("u-stat", root="signed").estimate(kernel, X, X)
    assert clip.mmd2 < 0 and clip.mmd == 0.0
    assert signed.mmd == pytest.approx(-math.sqrt(-clip.mmd2), rel=1e-14)
    assert clip.diagnostics == {"negative_mmd2": True, "root": "clip", "tiled": True}


def test_v_statistic_of_a_sample_with_itself_is_zero(rng):
    X = rng.normal(size=(20, 3))
    result = REG.get_estimator("v-stat").estimate(REG.get_kernel("rbf", sigma=1.0), X, X)
    assert abs(result.mmd2) < 1e-14


def test_energy_kernel_mmd_is_half_the_energy_distance(rng):
    X, Y = rng.normal(size=(40, 3)), rng.standard_t(3, size=(25, 3))
    energy_distance = 2 * cdist(X, Y).mean() - cdist(X, X).mean() - cdist(Y, Y).mean()
    result = REG.get_estimator("v-stat").estimate(REG.get_kernel("energy"), X, Y)
    assert 2 * result.mmd2 == pytest.approx(energy_distance, rel=1e-12)


def test_energy_kernel_agrees_with_dcor(rng):
    dcor = pytest.importorskip("dcor")
    X, Y = rng.normal(size=(50, 2)), rng.normal(size=(60, 2)) + 0.3
    result = REG.get_estimator("v-stat").estimate(REG.get_kernel("energy"), X, Y)
    assert 2 * result.mmd2 == pytest.approx(dcor.energy_distance(X, Y), rel=1e-10)


@pytest.mark.parametrize(("kernel_name", "d"), [("rbf", 1), ("quadratic", 1), ("rbf", 3), ("quadratic", 2)])
def test_u_statistic_is_unbiased_for_the_closed_form(kernel_name, d):
    """The mean of 30 independent U-statistics is within 4 standard errors of MMD²."""
    data = get_dataset("gauss", n=600, d=d)
    kernel = REG.get_kernel(kernel_name, **FIXED.get(kernel_name, {}))
    truth = data.true_mmd(kernel) ** 2
    est = REG.get_estimator("u-stat")
    values = np.array([est.estimate(kernel, *data.sample(seed)).mmd2 for seed in range(30)])
    assert abs(values.mean() - truth) < 4 * values.std(ddof=1) / math.sqrt(len(values))


def test_mean_embedding_distance_is_the_v_statistic(rng):
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(20, 2)) + 1
    kernel = REG.get_kernel("laplace", sigma=0.8)
    mean = REG.get_estimator("mean")
    ex, ey = mean.embed(kernel, X), mean.embed(kernel, Y)
    np.testing.assert_array_equal(ex.weights, np.full(30, 1 / 30))
    v = REG.get_estimator("v-stat").estimate(kernel, X, Y)
    assert ex.distance(ey) == pytest.approx(v.mmd, rel=1e-12)
    assert ex.norm() == pytest.approx(math.sqrt(kernel.gram(X).mean()), rel=1e-12)
    Z = rng.normal(size=(4, 2))
    np.testing.assert_allclose(ex.evaluate(Z), kernel.gram(Z, X).mean(axis=1), rtol=1e-13)


def test_u_statistic_needs_two_points_per_sample():
    with pytest.raises(DataError, match=r"Y has 1 point\(s\) but estimator 'u-stat' needs at least 2"):
        REG.get_estimator("u-stat").estimate(REG.get_kernel("rbf", sigma=1.0), np.zeros((3, 1)), np.zeros((1, 1)))


def test_results_round_trip_through_json(rng):
    X, Y = rng.normal(size=(10, 2)), rng.normal(size=(12, 2))
    result = REG.get_estimator("u-stat", root="signed").estimate(REG.get_kernel("rbf", sigma="median"), X, Y, rng=5)
    back = MMDResult.from_json(result.to_json())
    assert back == result
    assert back.seed == 5 and back.estimator_params == {"root": "signed"}
