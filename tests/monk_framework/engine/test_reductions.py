"""Reductions of a Gram matrix (engine/reductions.py, engine/pooled.py): the U-statistic
keeps its digits when an unbounded kernel's diagonal dwarfs its values between points,
on every path (tiles, a stored matrix, features, relabellings, blocks), against exact
sums."""

from __future__ import annotations

import math
import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

from monk_framework import PrecisionWarning, estimate, get_registry, permutation_test, robust_test
from monk_framework.core.resources import Resources
from monk_framework.engine.pooled import PooledSample, off_diagonal_sample_sums, sample_sums, u_statistic
from monk_framework.engine.reductions import kernel_sums, loses_to_diagonal
from monk_framework.engine.within_blocks import within_block_sums

REG = get_registry()


def _brute_u_statistic(k, x, y) -> float:
    """MMD_U² of 1-d samples, every sum rounded once (math.fsum): the off-diagonal
    values are summed without the diagonal, so nothing is lost to it."""
    n, m = len(x), len(y)
    xx = math.fsum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = math.fsum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = math.fsum(k(a, b) for a in x for b in y) / (n * m)
    return xx + yy - 2.0 * xy


def _exponential(a, b):
    return math.exp(a * b / 0.04)


def _quadratic(a, b):
    return (a * b + 1.0) ** 2


def _exponential_data():
    # exp(<x, y>/sigma^2) at sigma = 0.2: k(y, y) reaches 1e79 for y = -2.7 where no
    # value between points exceeds 1e61. S_yy - tr_y kept only the diagonal's digits:
    # MMD_U^2 was off by 4 % (and of either sign on other draws), silently
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.1, 0.4, size=40), rng.normal(0.3, 1.0, size=40)
    y[0] = -2.7
    return x, y


def _quadratic_data(far):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=300), rng.normal(0.3, 1.0, size=300)
    x[0] = far
    return x, y


def _no_precision_warning(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        return call()


@pytest.mark.parametrize("budget", [None, "1KB"])
def test_an_exponential_kernel_whose_diagonal_dwarfs_the_rest_gives_the_exact_u_statistic(budget):
    x, y = _exponential_data()
    truth = _brute_u_statistic(_exponential, x, y)
    X, Y = x[:, None], y[:, None]
    # tiles (the default for this kernel) and stored within a budget: no warning, the value
    result = _no_precision_warning(lambda: estimate(X, Y, kernel="exponential:sigma=0.2", estimator="u-stat", max_memory=budget))
    assert result.mmd2 == pytest.approx(truth, rel=1e-12)
    # a test's statistic from its stored (or, under 1 KB, matrix-free) pooled Gram matrix
    test = _no_precision_warning(
        lambda: permutation_test(X, Y, kernel="exponential:sigma=0.2", estimator="u-stat", n_permutations=19, rng=0, max_memory=budget)
    )
    assert test.statistic_mmd2 == pytest.approx(truth, rel=1e-12)


@pytest.mark.parametrize("far", [1e4, 1e6, 1e8])
@pytest.mark.parametrize("budget", [None, "2KB"])
def test_one_gross_outlier_with_the_quadratic_kernel_keeps_the_u_statistic_right(far, budget):
    # the error of MMD_U^2 against brute force was 3e-8 at 1e4, 1e-5 at 1e6 and 190 % at
    # 1e8: the features' sums hold the diagonal, which the U-statistic subtracted. Now
    # the tiles are taken where that costs digits (and features, in blocks of rows,
    # under 2 KB)
    x, y = _quadratic_data(far)
    truth = _brute_u_statistic(_quadratic, x, y)
    X, Y = x[:, None], y[:, None]
    result = _no_precision_warning(lambda: estimate(X, Y, kernel="quadratic", estimator="u-stat", max_memory=budget))
    assert result.mmd2 == pytest.approx(truth, rel=1e-9)
    test = _no_precision_warning(lambda: permutation_test(X, Y, kernel="quadratic", estimator="u-stat", n_permutations=9, rng=1, max_memory=budget))
    assert test.statistic_mmd2 == pytest.approx(truth, rel=1e-9)


def _energy(a: Fraction, b: Fraction) -> Fraction:
    return (abs(a) + abs(b) - abs(a - b)) / 2


def test_the_energy_kernel_with_a_point_at_1e20_gives_the_exact_u_statistic():
    # the diagonal k(o, o) = 1e20 dwarfs every value between points, and the values
    # between o and the others were differences of numbers near 1e20: MMD_U^2 came out
    # -0.25 where it is +0.022. The truth here: exact rational arithmetic on the data as
    # given (the statistic does not depend on the origin the kernel is read from)
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=50), rng.normal(0.5, 1.0, size=50)
    x[0] = 1e20
    fx, fy = [Fraction(float(v)) for v in x], [Fraction(float(v)) for v in y]
    n, m = len(fx), len(fy)
    truth = float(
        sum(_energy(a, b) for i, a in enumerate(fx) for j, b in enumerate(fx) if i != j) / (n * (n - 1))
        + sum(_energy(a, b) for i, a in enumerate(fy) for j, b in enumerate(fy) if i != j) / (m * (m - 1))
        - 2 * sum(_energy(a, b) for a in fx for b in fy) / (n * m)
    )
    result = _no_precision_warning(lambda: estimate(x[:, None], y[:, None], kernel="energy", estimator="u-stat"))
    assert result.mmd2 == pytest.approx(truth, rel=1e-10)
    test = _no_precision_warning(lambda: permutation_test(x[:, None], y[:, None], kernel="energy", estimator="u-stat", n_permutations=9, rng=2))
    assert test.statistic_mmd2 == pytest.approx(truth, rel=1e-10)


@pytest.mark.parametrize("matrix_free", [False, True])
def test_every_relabelled_u_statistic_is_exact_where_the_diagonal_dwarfs_the_rest(matrix_free):
    x, y = _exponential_data()
    X, Y = x[:, None], y[:, None]
    kernel = REG.resolve_kernel("exponential:sigma=0.2")
    pool = PooledSample(kernel, X, Y, resources=Resources.of(), matrix_free=matrix_free)
    perms = np.vstack([np.arange(80), np.random.default_rng(4).permuted(np.tile(np.arange(80), (6, 1)), axis=1)])
    z = np.r_[x, y]
    truth = [_brute_u_statistic(_exponential, z[p[:40]], z[p[40:]]) for p in perms]
    fast = sample_sums(pool, perms)
    assert np.all(loses_to_diagonal(fast, u_statistic(fast, 40, 40), 40, 40))  # what the fast sums cannot do
    estimator = REG.resolve_estimator("u-stat")
    np.testing.assert_allclose(estimator.permuted_statistics(pool, perms, None), truth, rtol=1e-12)
    exact = off_diagonal_sample_sums(pool, perms)
    # the sums with the diagonal too (the V-statistic's), against brute force
    Kz = np.exp(np.outer(z, z) / 0.04)
    for b, p in enumerate(perms):
        ix, iy = p[:40], p[40:]
        assert exact.xy[b] == pytest.approx(math.fsum(Kz[np.ix_(ix, iy)].ravel()), rel=1e-12)
        assert exact.xx[b] == pytest.approx(math.fsum(Kz[np.ix_(ix, ix)].ravel()), rel=1e-12)
        assert exact.trace_y[b] == pytest.approx(math.fsum(np.diag(Kz)[iy]), rel=1e-12)


def test_ordinary_data_keep_the_fast_sums_bit_for_bit():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(60, 3)), rng.normal(0.3, 1.0, size=(50, 3))
    for spec in ("rbf:sigma=1", "quadratic", "energy"):
        kernel = REG.resolve_kernel(spec).fitted(X, Y)
        pool = PooledSample(kernel, X, Y, resources=Resources.of())
        perms = np.random.default_rng(0).permuted(np.tile(np.arange(110), (5, 1)), axis=1)
        fast = sample_sums(pool, perms)
        assert not np.any(loses_to_diagonal(fast, u_statistic(fast, 60, 50), 60, 50))
        values = REG.resolve_estimator("u-stat").permuted_statistics(pool, perms, None)
        np.testing.assert_array_equal(values, u_statistic(fast, 60, 50))
        # the exact sums agree with them to round-off
        np.testing.assert_allclose(u_statistic(off_diagonal_sample_sums(pool, perms), 60, 50), values, rtol=1e-10, atol=1e-13)


def test_tiles_and_a_stored_matrix_give_the_sums_without_the_diagonal_summed_apart():
    x, y = _exponential_data()
    X, Y = x[:, None], y[:, None]
    kernel = REG.resolve_kernel("exponential:sigma=0.2")
    sums = kernel_sums(kernel, X, Y, resources=Resources.of())
    K = np.exp(np.outer(np.r_[x, y], np.r_[x, y]) / 0.04)
    off = ~np.eye(40, dtype=bool)
    assert sums.tiled and sums.xx_off == pytest.approx(math.fsum(K[:40, :40][off]), rel=1e-12)
    assert sums.yy_off == pytest.approx(math.fsum(K[40:, 40:][off]), rel=1e-12)
    assert sums.xx == pytest.approx(math.fsum(K[:40, :40].ravel()), rel=1e-12)


def test_block_sums_of_a_robust_test_leave_the_diagonal_out():
    # robust_test(method='mom') reads every block's U-statistic from these sums
    x, y = _quadratic_data(1e8)
    X, Y = x[:, None], y[:, None]
    kernel = REG.resolve_kernel("quadratic")
    pool = PooledSample(kernel, X, Y, resources=Resources.of())
    from monk_framework.engine.partitions import Partition

    labels = np.arange(600) % 3
    partition = Partition(3, labels[:300], labels[300:])
    sums = within_block_sums(pool, partition, np.arange(600)[None, :])
    values = u_statistic(sums, partition.x_sizes, partition.y_sizes)[0]
    for q in range(3):
        truth = _brute_u_statistic(_quadratic, x[labels[:300] == q], y[labels[300:] == q])
        assert values[q] == pytest.approx(truth, rel=1e-9)
    # and the test runs on them without a word
    _no_precision_warning(
        lambda: robust_test(X, Y, kernel=kernel, contamination=0, estimator=REG.resolve_estimator("u-stat"), method="mom", n_blocks=3, n_permutations=19, rng=0)
    )


@pytest.mark.parametrize("kernel", ["rbf:sigma=1", "laplace:sigma=1", "quadratic", "polynomial:degree=4", "linear", "energy", "rbf:sigma=1e-200"])
def test_ordinary_data_and_a_kernel_that_sees_only_ties_give_the_exact_u_statistic(kernel):
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(200, 3)), rng.normal(0.2, 1.0, size=(200, 3))
    with warnings.catch_warnings(record=True):  # rbf at 1e-200 says what it sees
        warnings.simplefilter("always")
        result = estimate(X, Y, kernel=kernel, estimator="u-stat")
    # the off-diagonal values summed without their diagonal, from the Gram matrix of the
    # kernel as fitted (a kernel 0 between every two points: exactly 0)
    fitted = REG.resolve_kernel(kernel).fitted(X, Y)
    Kxx, Kyy, Kxy = fitted.gram(X), fitted.gram(Y), fitted.gram(X, Y)
    off = ~np.eye(200, dtype=bool)
    truth = math.fsum(Kxx[off]) / (200 * 199) + math.fsum(Kyy[off]) / (200 * 199) - 2.0 * math.fsum(Kxy.ravel()) / 200**2
    assert result.mmd2 == pytest.approx(truth, rel=1e-9, abs=1e-12)


def test_a_few_far_points_are_taken_apart_from_the_feature_sums_at_any_size(monkeypatch):
    # features cannot leave the diagonal out; the points with the largest k(z, z) are
    # summed apart from them instead, O((N + M) D), exact without the (N + M)^2 tiles:
    # so even with the tiles ruled out (EXACT_ESTIMATE_POINTS lowered) the value is right
    from monk_framework.engine import reductions

    monkeypatch.setattr(reductions, "EXACT_ESTIMATE_POINTS", 100)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=300), rng.normal(0.3, 1.0, size=300)
    x[0], x[5], y[7] = 1e8, -3e7, 5e6  # three far points, in both samples
    truth = _brute_u_statistic(_quadratic, x, y)
    for budget in (None, "2KB"):  # features whole, and summed in blocks of rows
        result = _no_precision_warning(lambda budget=budget: estimate(x[:, None], y[:, None], kernel="quadratic", estimator="u-stat", max_memory=budget))
        assert result.mmd2 == pytest.approx(truth, rel=1e-12)
        assert result.diagnostics == {"negative_mmd2": False, "root": "clip", "tiled": False, "features": True}


@pytest.mark.parametrize("budget", [None, 2048])
def test_a_test_from_features_takes_the_far_points_apart_too(monkeypatch, budget):
    # every relabelling's sums with the far points apart, against fsum sums, with the
    # all-kernel-values path ruled out (EXACT_TEST_POINTS lowered): features whole, and
    # read in blocks of rows under a 2 KB budget
    import monk_plugins.classical as classical
    from monk_framework.engine.pooled import far_point_sample_sums

    monkeypatch.setattr(classical, "EXACT_TEST_POINTS", 10)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(150, 3)), rng.normal(0.3, 1.0, size=(150, 3))
    # three far points along three axes: their k(z, z) dwarf every mean between points
    x[0], x[5], y[7] = [1e8, 0, 0], [0, 3e7, 0], [0, 0, 5e6]
    z = np.vstack([x, y])
    kernel = REG.resolve_kernel("quadratic")
    pool = PooledSample(kernel, x, y, resources=Resources.of() if budget is None else Resources(budget=budget))
    assert (pool.features is not None) == (budget is None) and (pool.feature_total is not None) == (budget is not None)
    perms = np.vstack([np.arange(300), np.random.default_rng(1).permuted(np.tile(np.arange(300), (5, 1)), axis=1)])
    fast = sample_sums(pool, perms)
    assert np.all(loses_to_diagonal(fast, u_statistic(fast, 150, 150), 150, 150))

    def k(a, b):
        return (math.fsum(a * b) + 1.0) ** 2

    truth = [_brute_u_statistic(k, z[p[:150]], z[p[150:]]) for p in perms]
    values = _no_precision_warning(lambda: REG.resolve_estimator("u-stat").permuted_statistics(pool, perms, None))
    np.testing.assert_allclose(values, truth, rtol=1e-10)
    assert pool.cache["far-points"] == 4  # three far points: 1 and 2 apart did not suffice
    sums, bound = far_point_sample_sums(pool, perms, 4)
    np.testing.assert_allclose(u_statistic(sums, 150, 150), truth, rtol=1e-10)
    assert np.all(bound <= 1e-9 * np.abs(truth))


def test_beyond_the_size_where_all_kernel_values_pay_the_fast_value_stands_and_is_said(monkeypatch):
    # where the points apart do not suffice (here: none may be taken apart), the exact
    # sums need all (N + M)^2 kernel values: at 10^6 points that is hours, so beyond
    # EXACT_ESTIMATE_POINTS (EXACT_TEST_POINTS for a test, whose every batch would be
    # summed again) the fast value is kept and the round-off said, once
    import monk_plugins.classical as classical
    from monk_framework.engine import reductions

    monkeypatch.setattr(reductions, "EXACT_ESTIMATE_POINTS", 100)
    monkeypatch.setattr(reductions, "SPLIT_MAX_POINTS", 0)
    monkeypatch.setattr(classical, "SPLIT_MAX_POINTS", 0)
    monkeypatch.setattr(classical, "EXACT_ESTIMATE_POINTS", 100)
    monkeypatch.setattr(classical, "EXACT_TEST_POINTS", 100)
    x, y = _quadratic_data(1e8)
    truth = _brute_u_statistic(_quadratic, x, y)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = estimate(x[:, None], y[:, None], kernel="quadratic", estimator="u-stat")
        test = permutation_test(x[:, None], y[:, None], kernel="quadratic", estimator="u-stat", n_permutations=9, rng=1)
    said = [str(w.message) for w in seen if issubclass(w.category, PrecisionWarning)]
    assert abs(result.mmd2 - truth) > 0.1 * abs(truth)  # the fast value, 190 % off
    assert abs(test.statistic_mmd2 - truth) > 0.1 * abs(truth)
    assert len(said) == 2 and all(
        re.match(
            r"quadratic\(scale=1\.0, offset=1\.0, normalize=False\) is far larger on the diagonal, k\(z, z\), than between "
            r"these points, and the U-statistic, which leaves the diagonal out, can carry a round-off of up to [\d.e+-]+ "
            r"(times|of) its value: summing it without the diagonal would take all \(600\)² kernel values, beyond the 100 "
            r"points where it does\. Use the V-statistic",
            s,
        )
        for s in said
    )
