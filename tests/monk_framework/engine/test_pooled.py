"""The pooled sample and its relabellings: permuted Gram views and batched kernel sums."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import get_registry
from monk_framework.core.resources import Resources
from monk_framework.engine import pooled as pooled_mod
from monk_framework.engine.gram_sources import MatrixFreeGram, PermutedGram
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.engine.pooled import PooledSample, sample_sums


@pytest.fixture
def pool(registry, rng):
    X, Y = rng.normal(size=(9, 2)), rng.normal(size=(6, 2)) + 0.5
    return PooledSample(registry.get_kernel("rbf", sigma=0.8), X, Y, resources=Resources.of())


def test_permuted_gram_reads_k_through_the_permutation(pool, rng):
    K = pool.source.K
    perm = rng.permutation(pool.size)
    P = K[np.ix_(perm, perm)]
    view = PermutedGram(K, perm)
    np.testing.assert_array_equal(view.band(3, 7), P[3:7, 3:])
    np.testing.assert_allclose(view.row_sums(), P.sum(axis=1), rtol=1e-14)
    w = rng.normal(size=pool.size)
    np.testing.assert_allclose(view.matvec(w), P @ w, rtol=1e-13)
    idx = np.array([1, 4, 10])
    coef = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(view.rows_combination(idx, coef), P[:, idx] @ coef, rtol=1e-13)
    np.testing.assert_array_equal(view.submatrix(idx), P[np.ix_(idx, idx)])
    W = rng.normal(size=(pool.size, 3))
    np.testing.assert_allclose(view.block_gram(W), W.T @ P @ W, rtol=1e-12)


def test_permuted_source_of_a_matrix_free_pool(registry, rng):
    X, Y = rng.normal(size=(7, 2)), rng.normal(size=(5, 2))
    kernel = registry.get_kernel("rbf", sigma=1.1)
    pool = PooledSample(kernel, X, Y, matrix_free=True, resources=Resources.of())
    perm = rng.permutation(12)
    src = pool.permuted_source(perm)
    assert isinstance(src, MatrixFreeGram)
    Z = np.vstack([X, Y])[perm]
    np.testing.assert_allclose(src.row_sums(), kernel.gram(Z).sum(axis=1), rtol=1e-12)


def naive_sums(K, perm, n):
    x, y = perm[:n], perm[n:]
    return (K[np.ix_(x, x)].sum(), K[np.ix_(y, y)].sum(), K[np.ix_(x, y)].sum(), np.trace(K[np.ix_(x, x)]), np.trace(K[np.ix_(y, y)]))


@pytest.mark.parametrize("matrix_free", [False, True])
def test_sample_sums_equal_the_naive_sums(registry, rng, monkeypatch, matrix_free):
    X, Y = rng.normal(size=(11, 3)), rng.normal(size=(8, 3))
    pool = PooledSample(registry.get_kernel("laplace", sigma=2.0), X, Y, matrix_free=matrix_free, resources=Resources.of())
    K = registry.get_kernel("laplace", sigma=2.0).gram(np.vstack([X, Y]))
    perms = np.stack([rng.permutation(19) for _ in range(7)])
    monkeypatch.setitem(CHUNK_BYTES, "batch", 2 * 8 * 19 * 3)  # batches of 3 relabellings
    # a matrix-free pool sizes its batches by the memory budget: force batches of 3 there too
    monkeypatch.setattr(pooled_mod, "relabelling_batch", lambda pool: 3)
    s = sample_sums(pool, perms)
    for b, perm in enumerate(perms):
        want = naive_sums(K, perm, 11)
        got = (s.xx[b], s.yy[b], s.xy[b], s.trace_x[b], s.trace_y[b])
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_matrix_product_from_bands_equals_the_product(registry, rng):
    Z = rng.normal(size=(30, 2))
    kernel = registry.get_kernel("rbf", sigma=1.0)
    src = MatrixFreeGram(kernel, Z, band_rows=7)
    W = rng.normal(size=(30, 4))
    np.testing.assert_allclose(src.matvec(W), kernel.gram(Z) @ W, rtol=1e-12)


def test_relabelled_strings(registry):
    pool = PooledSample(registry.get_kernel("ssk", n=2), ["ab", "ba", "aa"], ["bb", "ab"], resources=Resources.of())
    X, Y = pool.relabelled(np.array([4, 0, 2, 1, 3]))
    assert X == ["ab", "ab", "aa"] and Y == ["ba", "bb"]


def test_a_precomputed_gram_serves_the_permutation_test(rng):
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    X, Y = rng.normal(size=(40, 2)), rng.normal(0.5, 1.0, size=(30, 2))
    kernel = reg.get_kernel("rbf", sigma=1.3)
    K = kernel.gram(np.vstack([X, Y]))
    for est in (reg.get_estimator("u-stat"), reg.get_estimator("monk-bcd-fast", n_blocks=5)):
        direct = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=60, rng=2, return_null=True)
        given = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=60, rng=2, return_null=True, gram=K)
        np.testing.assert_allclose(given.null_distribution, direct.null_distribution, rtol=1e-12, atol=1e-14)
        assert given.statistic == pytest.approx(direct.statistic, rel=1e-12)


def test_a_negative_relabelled_v_statistic_is_said_to_be_a_relabellings(rng):
    # the message said "the V-statistic MMD^2 is -0.035" where the estimate of the samples
    # as given is positive: it is one relabelling's
    from typing import ClassVar

    import attrs

    from monk_framework import Kernel, KernelContractError, estimate
    from monk_framework.numerics.distances import squared_distances
    from monk_framework.two_sample import permutation_test

    @attrs.frozen(kw_only=True)
    class Cosine(Kernel):
        """cos(3|x - y|): symmetric, k(x, x) = 1, |k| <= 1, and not PSD in two dimensions."""

        name: ClassVar[str] = "cosine-distance"
        summary: ClassVar[str] = "not PSD"

        def compute_gram(self, X, Y):
            return np.cos(3.0 * np.sqrt(squared_distances(X, Y)))

        def compute_diag(self, X):
            return np.ones(len(X))

    X, Y = rng.normal(size=(60, 3)), rng.normal(0.3, 1.0, size=(50, 3))
    kernel = Cosine()
    found = None
    for seed in range(20):
        try:
            permutation_test(X, Y, kernel=kernel, estimator=get_registry().get_estimator("u-stat"), n_permutations=99, rng=seed)
        except KernelContractError as exc:
            found = str(exc)
            break
    assert found is not None
    assert estimate(X, Y, kernel=kernel, estimator="v-stat").mmd2 > 0  # the samples as given: a positive V-statistic
    assert "the V-statistic MMD^2 of a relabelling (the pooled points shuffled between X and Y) is -" in found


def test_a_precomputed_gram_of_the_wrong_shape_is_refused(rng):
    from monk_framework.core.errors import ParameterError

    X, Y = rng.normal(size=(4, 1)), rng.normal(size=(3, 1))
    with pytest.raises(ParameterError, match=r"must be 7 x 7 \(the pooled sample\); got shape \(6, 6\)"):
        PooledSample(get_registry().get_kernel("rbf", sigma=1.0), X, Y, gram=np.eye(6), resources=Resources.of())
    with pytest.raises(ParameterError, match="NaN or infinite"):
        PooledSample(get_registry().get_kernel("rbf", sigma=1.0), X, Y, gram=np.full((7, 7), np.nan), resources=Resources.of())


def test_a_precomputed_gram_breaking_the_contract_is_refused_as_given_not_blamed_on_the_kernel(rng, monkeypatch):
    # an asymmetric matrix was reported as "kernel 'rbf' is not positive semi-definite"
    from monk_framework.core.errors import ParameterError
    from monk_framework.two_sample import permutation_test

    monkeypatch.setattr(pooled_mod, "GIVEN_GRAM_BAND", 7)  # several bands, and a last short one
    X, Y = rng.normal(size=(20, 2)), rng.normal(size=(13, 2))
    K = get_registry().get_kernel("rbf", sigma=1.0).gram(np.vstack([X, Y]))
    asym = K.copy()
    asym[30, 4] += 1e-3
    negative = K.copy()
    negative[25, 25] = -0.5
    beyond = K.copy()
    beyond[3, 29] = beyond[29, 3] = 1.5  # |K_ij| > sqrt(K_ii K_jj) = 1
    for G, message in (
        (asym, r"not symmetric: K\[4, 30\] = 0.0\d+ but K\[30, 4\] = "),
        (negative, r"K\[25, 25\] = -0.5 < 0"),
        (beyond, r"\|K\[3, 29\]\| = 1.5 exceeds sqrt\(K\[3, 3\] K\[29, 29\]\) = 1 \(Cauchy-Schwarz\)"),
    ):
        with pytest.raises(ParameterError, match="The precomputed Gram matrix is not"):
            permutation_test(X, Y, kernel="rbf", estimator="u-stat", gram=G, n_permutations=9, rng=0)
        with pytest.raises(ParameterError, match=message):
            PooledSample(get_registry().get_kernel("rbf", sigma=1.0), X, Y, gram=G, resources=Resources.of())
    PooledSample(get_registry().get_kernel("rbf", sigma=1.0), X, Y, gram=K, resources=Resources.of())  # the true one passes


def test_a_matrix_free_test_evaluates_the_kernel_once_for_t_the_null_and_the_kernel_sums(registry, rng, monkeypatch):
    # the observed statistic, B relabellings, e_b'K1 and 1'K1 come from one walk through the bands
    from monk_framework.engine import gram_sources
    from monk_framework.two_sample import permutation_test

    walks = []
    original = gram_sources.MatrixFreeGram.band_results

    def counted(self, op, W):
        walks.append(op)
        return original(self, op, W)

    monkeypatch.setattr(gram_sources.MatrixFreeGram, "band_results", counted)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(25, 2))
    forced = permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=50, rng=1, max_memory="8kB")
    assert walks == ["forms_and_last"]
    stored = permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=50, rng=1)
    assert forced.pvalue == stored.pvalue and forced.statistic == pytest.approx(stored.statistic, rel=1e-10)


def test_indicator_columns_mark_each_relabellings_x_points():
    from monk_framework.engine.pooled import indicator_columns

    g = np.random.default_rng(3)
    perms = np.array([g.permutation(9) for _ in range(5)])
    E = indicator_columns(perms, 4, 9)
    expected = np.zeros((9, 5))
    for b, perm in enumerate(perms):
        for i in perm[:4]:
            expected[i, b] = 1.0
    np.testing.assert_array_equal(E, expected)
    np.testing.assert_array_equal(indicator_columns(perms, 4, 9, ones=True), np.column_stack([expected, np.ones(9)]))
    # column by column, for the matrix-free products: the same entries, each column
    # contiguous and the first on a 64-byte boundary
    for ones in (False, True):
        F = indicator_columns(perms, 4, 9, ones=ones, order="F")
        np.testing.assert_array_equal(F, indicator_columns(perms, 4, 9, ones=ones))
        assert F.flags.f_contiguous and F.ctypes.data % 64 == 0
    with pytest.raises(ValueError, match="order"):
        indicator_columns(perms, 4, 9, order="K")


@pytest.mark.parametrize("size", [8, 9, 10, 11])
def test_indicator_patterns_pack_the_indicator_columns_with_a_last_column_of_ones(size):
    from monk_framework.engine.pooled import indicator_columns, indicator_patterns

    g = np.random.default_rng(size)
    perms = np.array([g.permutation(size) for _ in range(6)])
    E = np.column_stack([indicator_columns(perms, 4, size), np.ones(size)])
    P = indicator_patterns(perms, 4, size)
    assert P.dtype == np.uint8 and P.shape == (-(-size // 4), 7)
    # unpacked: bit t of row g is point 4g + t; the points past the last are 0
    bits = (P[:, None, :] >> np.arange(4, dtype=np.uint8)[None, :, None]) & 1
    unpacked = bits.reshape(-1, 7)
    np.testing.assert_array_equal(unpacked[:size], E)
    np.testing.assert_array_equal(unpacked[size:], 0)
    with pytest.raises(ValueError, match=rf"points 0..{size - 1}"):
        indicator_patterns(np.array([[0, size]]), 2, size)


def test_an_indicator_memo_makes_each_batch_once_and_only_for_its_own_rows():
    from monk_framework.engine.pooled import IndicatorMemo, indicator_columns, indicator_patterns

    g = np.random.default_rng(5)
    rows = np.array([g.permutation(10) for _ in range(8)])
    rows.flags.writeable = False
    memo = IndicatorMemo(rows, max_bytes=10**6)
    batch = rows[2:6]
    E = memo.columns(batch, 4, 10, ones=True, order="F")
    np.testing.assert_array_equal(E, indicator_columns(batch, 4, 10, ones=True, order="F"))
    assert E.flags.f_contiguous and not E.flags.writeable
    assert memo.columns(rows[2:6], 4, 10, ones=True, order="F") is E  # the same rows: made once
    # other rows or other arguments: made for them
    plain = memo.columns(rows[2:6], 4, 10)
    assert plain is not E and np.array_equal(plain, indicator_columns(batch, 4, 10))
    np.testing.assert_array_equal(memo.columns(rows[3:6], 4, 10), indicator_columns(rows[3:6], 4, 10))
    P = memo.patterns(batch, 4, 10)
    assert memo.patterns(rows[2:6], 4, 10) is P and np.array_equal(P, indicator_patterns(batch, 4, 10))
    # rows that are not a run of the memo's own (a copy, every other row): computed, never kept
    for elsewhere in (rows[2:6].copy(), rows[::2]):
        F = memo.columns(elsewhere, 4, 10)
        assert F.flags.writeable and np.array_equal(F, indicator_columns(elsewhere, 4, 10))
        assert memo.columns(elsewhere, 4, 10) is not F
    # a memo over part of an array: rows before its first are not its own
    part = IndicatorMemo(rows[3:], max_bytes=10**6)
    assert part.columns(rows[1:4], 4, 10).flags.writeable and not part.columns(rows[4:6], 4, 10).flags.writeable
    # no room: made every time
    full = IndicatorMemo(rows, max_bytes=0)
    assert full.columns(batch, 4, 10) is not full.columns(batch, 4, 10)
    with pytest.raises(ValueError, match="read-only"):
        IndicatorMemo(rows.copy(), 100)


@pytest.mark.parametrize("name", ["linear", "quadratic"])
def test_features_beyond_the_budget_are_read_in_blocks_with_the_same_sums(registry, rng, name):
    # a budget too small for the feature matrix (200 x 10 x 8 bytes) but not for a few
    # rows of it: every batch adds Φᵀ E up over blocks of rows (it read the tiles of
    # kernel values before, O(size²) a batch), and the sums are the naive ones
    X, Y = rng.normal(size=(110, 3)), rng.normal(size=(90, 3)) + 0.3
    kernel = registry.get_kernel(name)
    small = PooledSample(kernel, X, Y, resources=Resources(budget=2048))
    assert small.features is None and small.feature_total is not None
    assert pooled_mod.feature_block_rows(small.resources, len(small.feature_total)) < 90  # blocks, several a sample
    K = kernel.gram(np.vstack([X, Y]))
    perms = np.vstack([np.arange(200), np.stack([rng.permutation(200) for _ in range(9)])])
    sums = sample_sums(small, perms)
    for b, perm in enumerate(perms):
        want = naive_sums(K, perm, 110)
        got = (sums.xx[b], sums.yy[b], sums.xy[b], sums.trace_x[b], sums.trace_y[b])
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-9)
    # and a test gives the p-value of the default budget, its statistic to round-off
    from monk_framework import permutation_test

    wide = permutation_test(X, Y, kernel=name, estimator="u-stat", n_permutations=99, rng=4)
    tight = permutation_test(X, Y, kernel=name, estimator="u-stat", n_permutations=99, rng=4, max_memory="2KB")
    assert tight.pvalue == wide.pvalue
    assert tight.statistic_mmd2 == pytest.approx(wide.statistic_mmd2, rel=1e-10)


def test_a_given_gram_matrix_is_never_read_through_features(registry, rng):
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(20, 2))
    kernel = registry.get_kernel("linear")
    K = kernel.gram(np.vstack([X, Y]))
    pool = PooledSample(kernel, X, Y, resources=Resources(budget=64), gram=K)
    assert pool.features is None and pool.feature_total is None
    # the sums are the given matrix's, naive
    perms = np.stack([rng.permutation(50) for _ in range(4)])
    sums = sample_sums(pool, perms)
    for b, perm in enumerate(perms):
        got = (sums.xx[b], sums.yy[b], sums.xy[b], sums.trace_x[b], sums.trace_y[b])
        np.testing.assert_allclose(got, naive_sums(K, perm, 30), rtol=1e-11, atol=1e-11)
