"""Random Fourier features: the feature kernel converges to the kernel, the statistics are
those of the feature Gram matrix, and a test relabels with the same features."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, get_registry
from monk_framework.pooled import PooledSample
from monk_framework.two_sample import permutation_test

REG = get_registry()
GEN = np.random.default_rng(11)
X, Y = GEN.normal(size=(40, 3)), GEN.normal(0.5, 1.0, size=(30, 3))


@pytest.mark.parametrize(
    "kernel", ["rbf:sigma=1.5", "laplace:sigma=2", "laplace:sigma=2,norm=l1", "gaussian:sigma=0.8"]
)
def test_the_feature_kernel_converges_to_the_kernel(kernel):
    # Bochner: E φ(x)ᵀφ(y) = k(x, y); with D = 40 000 features the error is about 1/sqrt(D)
    k = REG.resolve_kernel(kernel)
    rff = REG.get_estimator("rff", n_features=40000, feature_seed=3)
    approx = rff.features(k, X) @ rff.features(k, Y).T
    assert np.abs(approx - k(X, Y)).max() < 0.03
    # unbiased: averaging independent feature draws shrinks the error like 1/sqrt(draws)
    small = [REG.get_estimator("rff", n_features=50, feature_seed=s) for s in range(200)]
    mean = np.mean([r.features(k, X[:5]) @ r.features(k, Y[:5]).T for r in small], axis=0)
    assert np.abs(mean - k(X[:5], Y[:5])).max() < 0.05


@pytest.mark.parametrize("statistic", ["u", "v"])
def test_the_statistics_are_those_of_the_feature_gram_matrix(statistic):
    k = REG.get_kernel("rbf", sigma=1.0)
    rff = REG.get_estimator("rff", n_features=64, statistic=statistic, feature_seed=1)
    Fx, Fy = rff.features(k, X), rff.features(k, Y)
    Kxx, Kyy, Kxy = Fx @ Fx.T, Fy @ Fy.T, Fx @ Fy.T
    n, m = len(X), len(Y)
    if statistic == "v":
        want = Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    else:
        want = (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean()
    got = rff.estimate(k, X, Y, rng=0)
    assert got.mmd2 == pytest.approx(want, rel=1e-10) and got.diagnostics["n_features"] == 64


def test_relabellings_use_the_same_features_as_the_statistic():
    k = REG.get_kernel("rbf", sigma=1.0)
    rff = REG.get_estimator("rff", n_features=128, feature_seed=4)
    pool = PooledSample(k, X, Y)
    perms = np.stack([np.arange(70)] + [np.random.default_rng(s).permutation(70) for s in range(5)])
    got = rff.permuted_statistics(pool, perms, None)
    for b, perm in enumerate(perms):
        Xb, Yb = pool.relabelled(perm)
        assert got[b] == pytest.approx(rff.estimate(k, Xb, Yb).mmd2, rel=1e-10, abs=1e-14)
    # the estimate does not depend on rng: the features are part of the estimator
    assert rff.estimate(k, X, Y, rng=1).mmd2 == rff.estimate(k, X, Y, rng=2).mmd2


def test_a_test_with_features_detects_a_shift_and_keeps_its_level():
    k = REG.get_kernel("rbf", sigma=2.0)
    gen = np.random.default_rng(0)
    A, B = gen.normal(size=(300, 5)), gen.normal(0.4, 1.0, size=(300, 5))
    assert permutation_test(k, "rff:n_features=500", A, B, n_permutations=199, rng=0).reject
    null = [permutation_test(k, "rff:n_features=200", *np.split(np.random.default_rng(s).normal(size=(200, 2)), 2),
                             n_permutations=99, rng=s).pvalue for s in range(40)]
    # p-values of an exact permutation test are super-uniform under H0
    assert np.mean(np.array(null) <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 40)


def test_a_kernel_without_a_spectral_density_is_refused_by_name():
    with pytest.raises(ParameterError, match="translation-invariant kernel.*'quadratic'"):
        REG.get_estimator("rff").estimate(REG.get_kernel("quadratic"), X, Y)
