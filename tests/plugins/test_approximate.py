"""Random Fourier features: the feature kernel converges to the kernel, the statistics are
those of the feature Gram matrix, and a test relabels with the same features."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, get_registry
from monk_framework.core.resources import Resources
from monk_framework.engine.pooled import PooledSample
from monk_framework.two_sample import permutation_test

REG = get_registry()
GEN = np.random.default_rng(11)
X, Y = GEN.normal(size=(40, 3)), GEN.normal(0.5, 1.0, size=(30, 3))


@pytest.mark.parametrize("kernel", ["rbf:sigma=1.5", "laplace:sigma=2", "laplace:sigma=2,norm=l1", "gaussian:sigma=0.8"])
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
    pool = PooledSample(k, X, Y, resources=Resources.of())
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
    assert permutation_test(A, B, kernel=k, estimator="rff:n_features=500", n_permutations=199, rng=0).reject
    null = [
        permutation_test(
            *np.split(np.random.default_rng(s).normal(size=(200, 2)), 2), kernel=k, estimator="rff:n_features=200", n_permutations=99, rng=s
        ).pvalue
        for s in range(40)
    ]
    # p-values of an exact permutation test are super-uniform under H0
    assert np.mean(np.array(null) <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 40)


def test_a_kernel_without_a_spectral_density_is_refused_by_name():
    with pytest.raises(ParameterError, match="translation-invariant kernel.*'quadratic'"):
        REG.get_estimator("rff").estimate(REG.get_kernel("quadratic"), X, Y)


def test_pair_values_are_the_diagonal_of_the_gram_block():
    k = REG.get_kernel("rbf", sigma=1.0)
    A, B = GEN.normal(size=(70, 3)), GEN.normal(size=(70, 3))
    np.testing.assert_allclose(k.pair_values(A, B), np.diag(k(A, B)), rtol=1e-13)
    ssk = REG.get_kernel("ssk", n=2)
    S, T = ["ACGTAC", "GGTA", "CCAT"], ["ACG", "TTGA", "CATC"]
    np.testing.assert_allclose(ssk.pair_values(S, T), np.diag(ssk(S, T)), rtol=1e-13)
    with pytest.raises(Exception, match="one length"):
        k.pair_values(A, B[:5])


def test_incomplete_pairs_are_distinct_and_uniform():
    from monk_plugins.approximate import _distinct_pairs

    i, j = _distinct_pairs(5, 200000, np.random.default_rng(0))
    assert np.all(i != j)
    counts = np.bincount(i * 5 + j, minlength=25).reshape(5, 5)
    off = counts[~np.eye(5, dtype=bool)]
    assert np.all(np.diag(counts) == 0) and off.std() / off.mean() < 0.05  # 20 ordered pairs, 10 000 each


def test_the_incomplete_u_statistic_is_unbiased_for_the_u_statistic_expectation():
    k = REG.get_kernel("rbf", sigma=1.0)
    exact = REG.get_estimator("u-stat").estimate(k, X, Y).mmd2
    # conditionally on the data, pairs drawn uniformly: E MMD_inc^2 = MMD_U^2 of these data
    values = np.array([REG.get_estimator("incomplete-u", n_pairs=500).estimate(k, X, Y, rng=s).mmd2 for s in range(400)])
    assert abs(values.mean() - exact) < 4 * values.std(ddof=1) / np.sqrt(len(values))
    # and a test with it runs and rejects a clear shift
    gen = np.random.default_rng(1)
    A, B = gen.normal(size=(200, 2)), gen.normal(1.0, 1.0, size=(200, 2))
    assert permutation_test(A, B, kernel=k, estimator="incomplete-u:n_pairs=5000", n_permutations=99, rng=0).reject


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_laplace_pair_values_agree_with_the_gram_diagonal_even_at_extreme_scales(norm):
    k = REG.get_kernel("laplace", sigma=1.3, norm=norm)
    A, B = GEN.normal(size=(50, 12)), GEN.normal(size=(50, 12))
    np.testing.assert_allclose(k.pair_values(A, B), np.diag(k(A, B)), rtol=1e-12)
    big = REG.get_kernel("laplace", sigma=1e-300, norm=norm)
    assert np.all(big.pair_values(A * 1e300, B * 1e300) == 0.0) and big.pair_values(A, A).tolist() == [1.0] * 50
    tiny = REG.get_kernel("laplace", sigma=1.0, norm=norm)
    np.testing.assert_allclose(tiny.pair_values(A * 1e-300, B * 1e-300), np.diag(tiny(A * 1e-300, B * 1e-300)), rtol=1e-15)


def test_rbf_pair_values_agree_with_the_gram_diagonal_even_at_extreme_scales():
    k = REG.get_kernel("rbf", sigma=1.3)
    A, B = GEN.normal(size=(50, 12)), GEN.normal(size=(50, 12))
    np.testing.assert_allclose(k.pair_values(A, B), np.diag(k(A, B)), rtol=1e-12)
    big = REG.get_kernel("rbf", sigma=1e-300)
    assert np.all(big.pair_values(A * 1e300, B * 1e300) == 0.0) and big.pair_values(A, A).tolist() == [1.0] * 50


def _plugin_gaussian(height: float, fault: str = "none"):
    """A translation-invariant plugin kernel height · exp(−‖x − y‖²/2) that declares no
    bound, with its spectral frequencies broken one way at a time."""
    from typing import ClassVar

    import attrs

    from monk_framework import Kernel

    @attrs.frozen(kw_only=True)
    class TallGaussian(Kernel):
        name: ClassVar[str] = "tall-gaussian"
        summary: ClassVar[str] = "height * exp(-|x - y|^2 / 2), no declared bound"
        translation_invariant: ClassVar[bool] = True

        def compute_gram(self, A, B):
            return height * np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

        def compute_diag(self, A):
            return np.full(len(A), height)

        def spectral_frequencies(self, d, n_features, rng):
            if fault == "raises":
                raise RuntimeError("no frequencies today")
            W = rng.standard_normal((n_features, d))
            return {"short": W[:-1], "nan": W * np.nan}.get(fault, W)

    return TallGaussian()


def test_rff_scales_its_features_by_the_kernels_own_k_of_0():
    # κ(0) = 2 and no sup_diag: the features must carry √(2κ(0)/D), not a default of 1
    k = _plugin_gaussian(2.0)
    rff = REG.get_estimator("rff", n_features=40000, feature_seed=3, statistic="v")
    exact = REG.get_estimator("v-stat").estimate(k, X, Y).mmd2
    assert rff.estimate(k, X, Y).mmd2 == pytest.approx(exact, rel=0.1)


@pytest.mark.parametrize(
    "fault, error, message",
    [
        ("short", "KernelContractError", r"tall-gaussian.*must return 1000 finite rows of 3 frequencies; got shape \(999, 3\)"),
        ("nan", "KernelContractError", r"got shape \(1000, 3\) with non-finite values"),
        ("raises", "PluginFailure", r"tall-gaussian.*spectral_frequencies failed: RuntimeError: no frequencies today"),
    ],
)
def test_a_plugins_frequencies_are_checked_before_they_make_features(fault, error, message):
    from monk_framework.core import errors

    with pytest.raises(getattr(errors, error), match=message):
        REG.get_estimator("rff").estimate(_plugin_gaussian(1.0, fault), X, Y)


def test_counts_that_cannot_fit_are_refused_before_any_allocation():
    # n_pairs and n_features are numbers a user types: 10^12 of them asked for terabytes
    from monk_framework import ResourceError

    with pytest.raises(ResourceError, match=r"'incomplete-u': n_pairs = 1,000,000,000,000 pairs of each kind need about"):
        REG.get_estimator("incomplete-u", n_pairs=10**12).estimate(REG.get_kernel("rbf", sigma=1.0), X, Y, rng=0)
    with pytest.raises(ResourceError, match=r"'rff': n_features = 1,000,000,000,000 random features of 40 points"):
        REG.get_estimator("rff", n_features=10**12).estimate(REG.get_kernel("rbf", sigma=1.0), X, Y)


def test_draws_that_outnumber_the_pairs_evaluate_each_distinct_pair_once_with_the_same_estimate():
    # 20 + 25 points have 380 + 600 + 500 ordered pairs; L = 5000 draws of each kind repeat them
    from monk_plugins.approximate import IncompleteU, _distinct_pairs

    gen = np.random.default_rng(6)
    X, Y = gen.normal(size=(20, 2)), gen.normal(0.5, 1.0, size=(25, 2))
    kernel = get_registry().get_kernel("rbf", sigma=1.0)
    got = IncompleteU(n_pairs=5000).compute_estimate(kernel, X, Y, np.random.default_rng(8), Resources.of())
    # brute force on the same draws: every drawn pair's value, from whole Gram matrices
    draw = np.random.default_rng(8)
    ix, jx = _distinct_pairs(20, 5000, draw)
    iy, jy = _distinct_pairs(25, 5000, draw)
    a, b = draw.integers(0, 20, 5000), draw.integers(0, 25, 5000)
    Kxx, Kyy, Kxy = kernel.gram(X), kernel.gram(Y), kernel.gram(X, Y)
    want = Kxx[ix, jx].mean() + Kyy[iy, jy].mean() - 2 * Kxy[a, b].mean()
    assert got.mmd2 == pytest.approx(want, rel=1e-12)

    evaluated = []

    class Counting(type(kernel)):
        def compute_gram(self, A, B):
            evaluated.append(len(A) * len(B))
            return super().compute_gram(A, B)

    IncompleteU(n_pairs=5000).compute_estimate(Counting(sigma=1.0), X, Y, np.random.default_rng(8), Resources.of())
    # at most the distinct pairs (380 + 600 + 500), each in a block of 32 pairs: 32 values a pair
    assert sum(evaluated) <= 32 * (380 + 600 + 500) < 32 * 3 * 5000
