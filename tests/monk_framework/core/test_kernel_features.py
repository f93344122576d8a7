"""Sums of kernel values from a kernel's explicit features (core/kernels.py's paying_features): the
classical statistics, their tests and the embeddings."""

from __future__ import annotations

import re
from typing import ClassVar

import attrs
import numpy as np
import pytest

from monk_framework import Kernel, KernelContractError, estimate, get_registry, permutation_test
from monk_framework.engine import kernel_sums as kernels_module
from monk_framework.engine.kernel_sums import FEATURES_PAY

REG = get_registry()
SPECS = ["linear", "quadratic", "polynomial:degree=3,offset=0.5,scale=0.7", "linear:normalize=true", "quadratic:normalize=true"]


def _brute(kernel, X, Y, estimator):
    """The V- or U-statistic from the three Gram matrices, summed whole."""
    Kxx, Kyy, Kxy = kernel.gram(X), kernel.gram(Y), kernel.gram(X, Y)
    n, m = len(X), len(Y)
    if estimator == "v-stat":
        return Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    return (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean()


@pytest.fixture
def without_features(monkeypatch):
    """Switch the feature path off: the Gram matrix (stored, or in tiles) as before."""

    def switch():
        monkeypatch.setattr(kernels_module, "FEATURES_PAY", 10**18)

    return switch


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("estimator", ["u-stat", "v-stat"])
def test_an_estimate_from_features_is_the_gram_matrix_sum(spec, estimator):
    gen = np.random.default_rng(7)
    X, Y = gen.normal(size=(240, 3)), gen.normal(0.2, 1.3, size=(200, 3))
    kernel = REG.resolve_kernel(spec)
    result = estimate(X, Y, kernel=kernel, estimator=estimator)
    assert result.diagnostics.get("features") is True
    assert result.mmd2 == pytest.approx(_brute(kernel, X, Y, estimator), rel=1e-12, abs=1e-15)


def test_features_are_used_only_where_they_pay():
    # D = 10 features for the quadratic kernel at d = 3: 16 D = 160 points needed
    gen = np.random.default_rng(8)
    kernel = REG.get_kernel("quadratic")
    assert kernel.features(np.zeros((1, 3))).shape == (1, 10) and FEATURES_PAY == 16
    few = estimate(gen.normal(size=(70, 3)), gen.normal(size=(80, 3)), kernel=kernel, estimator="u-stat")
    many = estimate(gen.normal(size=(80, 3)), gen.normal(size=(80, 3)), kernel=kernel, estimator="u-stat")
    assert "features" not in few.diagnostics and many.diagnostics["features"] is True
    # nor for a kernel without them
    X, Y = gen.normal(size=(400, 3)), gen.normal(size=(400, 3))
    assert "features" not in estimate(X, Y, kernel="rbf", estimator="u-stat").diagnostics


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("estimator", ["u-stat", "v-stat"])
def test_over_the_budget_an_estimate_sums_the_features_in_blocks(spec, estimator):
    # the feature matrices (8 (N + M) D bytes) did not fit, and the estimate fell back to
    # (N + M)^2 kernel values in tiles: 4e12 of them for 10^6 + 10^6 points under 10 MB
    gen = np.random.default_rng(19)
    X, Y = gen.normal(size=(400, 3)), gen.normal(0.3, 1.0, size=(390, 3))
    kernel = REG.resolve_kernel(spec)
    D = kernel.feature_count(X)
    for budget in (8 * 790 * D - 1, 4 * 8 * D * 7, 4 * 8 * D):  # Φ just too large; 7 rows a block; 1 row a block
        result = estimate(X, Y, kernel=kernel, estimator=estimator, max_memory=budget)
        assert result.diagnostics.get("features") is True and result.diagnostics["tiled"] is False
        assert result.mmd2 == pytest.approx(_brute(kernel, X, Y, estimator), rel=1e-11, abs=1e-14)
    # below one row of features a block: the tiles, as before
    tiles = estimate(X, Y, kernel=kernel, estimator=estimator, max_memory=4 * 8 * D - 1)
    assert "features" not in tiles.diagnostics
    assert tiles.mmd2 == pytest.approx(_brute(kernel, X, Y, estimator), rel=1e-11, abs=1e-14)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("estimator", ["u-stat", "v-stat"])
def test_a_test_from_features_has_the_gram_matrix_statistics(spec, estimator, without_features):
    gen = np.random.default_rng(9)
    X, Y = gen.normal(size=(150, 2)), gen.normal(0.25, 1.0, size=(170, 2))
    fast = permutation_test(X, Y, kernel=spec, estimator=estimator, n_permutations=199, rng=3, return_null=True)
    without_features()
    slow = permutation_test(X, Y, kernel=spec, estimator=estimator, n_permutations=199, rng=3, return_null=True)
    scale = np.abs(slow.null_distribution).max()
    np.testing.assert_allclose(fast.null_distribution, slow.null_distribution, rtol=1e-10, atol=1e-12 * scale)
    assert fast.statistic_mmd2 == pytest.approx(slow.statistic_mmd2, rel=1e-10)
    assert fast.pvalue == slow.pvalue


def test_a_precomputed_gram_matrix_is_read_not_the_kernels_features():
    # the caller's K (say, of another kernel) decides the statistics, as before
    from monk_framework.core.resources import Resources
    from monk_framework.engine.pooled import PooledSample, sample_sums

    gen = np.random.default_rng(10)
    X, Y = gen.normal(size=(100, 2)), gen.normal(size=(100, 2))
    kernel = REG.get_kernel("linear")
    Z = np.vstack([X, Y])
    K = 2.0 * (Z @ Z.T)
    pool = PooledSample(kernel, X, Y, resources=Resources(), gram=K)
    assert pool.features is None
    sums = sample_sums(pool, np.arange(200)[None, :])
    assert sums.xx[0] == pytest.approx(K[:100, :100].sum(), rel=1e-12)


@attrs.frozen(kw_only=True)
class MisfeaturedKernel(Kernel):
    """A linear kernel whose features are twice what they should be."""

    name: ClassVar[str] = "misfeatured"
    summary: ClassVar[str] = "A kernel plugin whose features are not its kernel's."
    has_features: ClassVar[bool] = True

    def compute_gram(self, X, Y):
        return X @ Y.T

    def compute_diag(self, X):
        return np.einsum("ij,ij->i", X, X)

    def compute_features(self, X):
        return 2.0 * X


def test_features_that_disagree_with_the_kernel_are_refused_by_name():
    gen = np.random.default_rng(11)
    X, Y = gen.normal(size=(200, 2)), gen.normal(size=(200, 2))
    for run in (
        lambda: estimate(X, Y, kernel=MisfeaturedKernel(), estimator="u-stat"),
        lambda: estimate(X, Y, kernel=MisfeaturedKernel(), estimator="u-stat", max_memory=1000),  # summed in blocks
        lambda: permutation_test(X, Y, kernel=MisfeaturedKernel(), estimator="v-stat", n_permutations=19, rng=0),
    ):
        with pytest.raises(
            KernelContractError,
            match=r"kernel 'misfeatured' \(.*MisfeaturedKernel\): its features disagree "
            r"with its kernel values: <features\([xy]_\d+\), features\([xy]_\d+\)> = .* where k\([xy]_\d+, [xy]_\d+\) = ",
        ):
            run()


def test_a_million_points_take_seconds_not_the_hours_of_their_gram_matrix():
    # 10^6 + 10^6 points: (2·10^6)² kernel values would take hours; their features take
    # a product of sums (the sums of 1, x and x² for the quadratic kernel at d = 1)
    gen = np.random.default_rng(12)
    X, Y = gen.normal(size=(10**6, 1)), gen.normal(0.1, 1.0, size=(10**6, 1))
    result = estimate(X, Y, kernel="quadratic", estimator="v-stat")
    # (xy + 1)² = x²y² + 2xy + 1: MMD_V² = (m2x − m2y)² + 2 (m1x − m1y)²
    m1x, m1y, m2x, m2y = X.mean(), Y.mean(), (X**2).mean(), (Y**2).mean()
    assert result.diagnostics["features"] is True
    assert result.mmd2 == pytest.approx((m2x - m2y) ** 2 + 2 * (m1x - m1y) ** 2, rel=1e-9)


def _composites():
    from monk_framework.core.combinators import ClippedKernel

    lin, quad = REG.get_kernel("linear"), REG.get_kernel("quadratic")
    return {
        "sum": lin + quad,
        "product": lin * quad,
        "scaled": 2.5 * quad,
        "clipped": ClippedKernel(c=5.0, kernel=quad),
        "clipped product": ClippedKernel(c=3.0, kernel=lin * lin),
    }


@pytest.mark.parametrize("name", list(_composites()))
def test_combinations_of_kernels_with_features_have_features(name, without_features):
    # sums concatenate, products multiply (a Kronecker product of the rows), c·k scales by
    # √c, clipping shrinks each row by s(x) = min(1, c/‖φ(x)‖)
    kernel = _composites()[name]
    gen = np.random.default_rng(13)
    X, Y = gen.normal(size=(300, 2)), gen.normal(0.2, 1.0, size=(300, 2))
    X[:3] = 300.0  # beyond every clipping radius
    assert kernel.has_features
    np.testing.assert_allclose(kernel.features(X) @ kernel.features(Y).T, kernel.gram(X, Y), rtol=1e-12, atol=1e-12 * np.abs(kernel.gram(X, Y)).max())
    fast = estimate(X, Y, kernel=kernel, estimator="v-stat")
    without_features()
    slow = estimate(X, Y, kernel=kernel, estimator="v-stat")
    assert fast.diagnostics["features"] is True and "features" not in slow.diagnostics
    assert fast.mmd2 == pytest.approx(slow.mmd2, rel=1e-12)


def test_a_clipped_point_beyond_float64_has_the_feature_0_as_its_kernel_row_is():
    from monk_framework.core.combinators import ClippedKernel

    kernel = ClippedKernel(c=5.0, kernel=REG.get_kernel("quadratic"))
    X = np.array([[1e200], [0.5], [-1.0]])
    F = kernel.features(X)
    assert np.all(F[0] == 0.0) and np.all(np.isfinite(F))
    np.testing.assert_allclose(F @ F.T, kernel.gram(X), rtol=1e-12, atol=1e-15)


def test_the_robust_clip_test_reads_the_features_with_the_same_p_value(without_features):
    # dcMMD on the clipped quadratic kernel: the guaranteed-level test for any kernel
    from monk_framework import robust_test

    gen = np.random.default_rng(14)
    X, Y = gen.normal(size=(400, 3)), gen.normal(size=(400, 3))
    X[:, 0] += 0.35
    X[:5] = 300.0 / np.sqrt(3)
    fast = robust_test(X, Y, kernel="quadratic", contamination=5, method="clip", n_permutations=199, rng=2)
    without_features()
    slow = robust_test(X, Y, kernel="quadratic", contamination=5, method="clip", n_permutations=199, rng=2)
    assert fast.pvalue == slow.pvalue and fast.certificate == slow.certificate
    assert fast.statistic == pytest.approx(slow.statistic, rel=1e-10)


@pytest.mark.parametrize("spec", [*SPECS, "polynomial:degree=4,offset=0", "polynomial:degree=2,offset=1e-300,scale=1"])
@pytest.mark.parametrize("d", [1, 3, 7])
def test_the_feature_count_is_the_width_of_the_features(spec, d):
    # asked before any feature is computed: C(d + p, p) monomials, or those of degree p
    # alone without an offset (and without those whose weight underflows)
    kernel = REG.resolve_kernel(spec)
    X = np.random.default_rng(d).normal(size=(4, d))
    assert kernel.feature_count(X) == kernel.features(X).shape[1]
    for name, combined in _composites().items():
        Z = np.random.default_rng(d).normal(size=(4, d))
        assert combined.feature_count(Z) == combined.features(Z).shape[1], name


def test_a_kernel_with_more_features_than_points_never_computes_them(monkeypatch):
    # polynomial of degree 30 at d = 50: about 8.9e21 features a point; the Gram matrix it is
    kernel = REG.get_kernel("polynomial", degree=30)
    X = np.random.default_rng(15).normal(size=(100, 50)) / 10
    assert kernel.feature_count(X) == 8871412534840453463008

    def never(self, X):
        raise AssertionError("features were computed")

    monkeypatch.setattr(type(kernel), "compute_features", never)
    result = estimate(X, X[::-1] + 0.01, kernel=kernel, estimator="u-stat")
    assert "features" not in result.diagnostics and np.isfinite(result.mmd2)


@pytest.mark.parametrize(("count", "said"), [(0, "0"), (2.5, "2.5"), (True, "True"), ("3", "'3'")])
def test_a_plugin_feature_count_that_is_no_count_is_refused_by_name(count, said):
    @attrs.frozen(kw_only=True)
    class Counting(MisfeaturedKernel):
        name: ClassVar[str] = "counting"

        def compute_features(self, X):
            return X.copy()

        def compute_feature_count(self, d):
            return count

    X = np.random.default_rng(16).normal(size=(200, 2))
    with pytest.raises(
        KernelContractError,
        match=rf"kernel 'counting' .*: compute_feature_count\(2\) returned {re.escape(said)}; it "
        r"must return the number of features a point has",
    ):
        estimate(X, X + 1, kernel=Counting(), estimator="v-stat")


@pytest.mark.parametrize("spec", ["linear", "quadratic", "linear:normalize=true"])
def test_an_embeddings_norm_distance_and_values_come_from_features(spec, without_features):
    # ‖μ̂ − ν̂‖ of two mean embeddings is the V-statistic MMD; μ̂(z) = Φ(z)·(Φ(X)ᵀ w)
    from monk_framework import embed

    gen = np.random.default_rng(17)
    X, Y, Z = gen.normal(size=(400, 3)), gen.normal(0.3, 1.0, size=(300, 3)), gen.normal(size=(50, 3))
    mx, my = embed(X, kernel=spec, estimator="mean"), embed(Y, kernel=spec, estimator="mean")
    fast = mx.distance(my), mx.norm(), mx.inner(my), mx.evaluate(Z)
    assert fast[0] == pytest.approx(estimate(X, Y, kernel=spec, estimator="v-stat").mmd, rel=1e-10)
    without_features()
    slow = mx.distance(my), mx.norm(), mx.inner(my), mx.evaluate(Z)
    for a, b in zip(fast[:3], slow[:3]):
        assert a == pytest.approx(b, rel=1e-10)
    np.testing.assert_allclose(fast[3], slow[3], rtol=1e-10, atol=1e-12 * np.abs(slow[3]).max())


def test_a_plugin_feature_count_that_is_not_the_features_width_is_refused_by_name():
    # a count of 1 for 2 features: every size after it would be wrong
    @attrs.frozen(kw_only=True)
    class Undercounting(MisfeaturedKernel):
        name: ClassVar[str] = "undercounting"

        def compute_features(self, X):
            return X.copy()

        def compute_feature_count(self, d):
            return 1

    X = np.random.default_rng(18).normal(size=(200, 2))
    for budget in (None, 1000):  # the features whole, and summed in blocks over the budget
        with pytest.raises(
            KernelContractError,
            match=r"kernel 'undercounting' .*: compute_feature_count\(2\) gives 1 features "
            r"a point, but compute_features gives 2; they must agree\.",
        ):
            estimate(X, X + 1, kernel=Undercounting(), estimator="v-stat", max_memory=budget)
