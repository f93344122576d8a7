"""Partitions, the median convention and block reductions against brute force."""

from typing import ClassVar

import attrs
import numpy as np
import pytest
import scipy.sparse as sp

from monk_framework import Kernel, KernelOverflowError
from monk_framework.core.errors import ParameterError
from monk_framework.engine import band_reductions
from monk_framework.engine.gram_sources import MatrixFreeGram, StoredGram
from monk_framework.engine.lepski import geometric_grid, lepski
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.engine.partitions import block_sizes, check_n_blocks, majority, median_block, median_value, pair_partition, random_partition
from monk_framework.numerics.compiled import compiled_available


@pytest.mark.parametrize("n, Q", [(10, 3), (11, 11), (100, 7), (22, 11), (5, 1)])
def test_block_sizes_follow_the_authors_rule(n, Q):
    sizes = block_sizes(n, Q)
    assert sizes.sum() == n
    extra = n % Q
    assert (sizes[:extra] == n // Q + 1).all() and (sizes[extra:] == n // Q).all()


def test_random_partition_is_a_seeded_partition():
    a = random_partition(23, 4, np.random.default_rng(5))
    b = random_partition(23, 4, np.random.default_rng(5))
    assert np.array_equal(a, b)
    assert np.array_equal(np.bincount(a), block_sizes(23, 4))


def test_paired_blocks_share_indices_only_for_equal_sizes():
    same = pair_partition(30, 30, 5, np.random.default_rng(0))
    assert np.array_equal(same.x_labels, same.y_labels)
    diff = pair_partition(30, 41, 5, np.random.default_rng(0))
    assert np.array_equal(diff.y_sizes, block_sizes(41, 5))
    w = diff.difference_weights()
    # d_q = mean over S_q minus mean over T_q: weights sum to +1 and -1 per block
    sums_x = np.bincount(diff.x_labels, weights=w[:30])
    sums_y = np.bincount(diff.y_labels, weights=w[30:])
    assert np.allclose(sums_x, 1.0) and np.allclose(sums_y, -1.0)


def test_lower_median_is_a_strict_majority_value():
    rng = np.random.default_rng(1)
    for Q in range(1, 12):
        values = rng.standard_normal(Q)
        med = float(median_value(values))
        assert (values >= med).sum() >= majority(Q) > Q / 2
        assert values[median_block(values)] == med
        if Q % 2:
            assert med == np.median(values)
        else:
            assert med == np.sort(values)[Q // 2 - 1]


def test_n_blocks_bound_names_the_parameter():
    check_n_blocks(5, {"X": 10}, estimator="e")
    with pytest.raises(ParameterError, match="n_blocks.*N/2 = 5.*sample X of 11"):
        check_n_blocks(6, {"X": 11}, estimator="e")


@pytest.mark.parametrize("source", ["stored", "matrix-free"])
def test_block_reductions_equal_brute_force(registry, source, monkeypatch):

    monkeypatch.setitem(CHUNK_BYTES, "tile", 8)  # matrix-free bands in tiles of 64 columns
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((157, 3))
    kernel = registry.get_kernel("rbf", sigma=1.3)
    K = kernel.gram(Z)
    src = StoredGram(kernel, Z) if source == "stored" else MatrixFreeGram(kernel, Z)
    src._band_rows = lambda: 40  # several bands, to exercise the mirroring
    labels = rng.integers(0, 6, size=157)
    weights = rng.standard_normal(157)
    W = sp.csr_array((weights, (np.arange(157), labels)), shape=(157, 6))
    Wd = W.toarray()
    assert np.allclose(src.block_gram(W), Wd.T @ K @ Wd, rtol=1e-12, atol=1e-12)
    # dense weights (BCD-Fast's per-block indicators) take the same banded path
    assert np.allclose(src.block_gram(Wd), Wd.T @ K @ Wd, rtol=1e-12, atol=1e-12)
    assert np.allclose(src.row_sums(), K.sum(axis=1), rtol=1e-13)
    v = rng.standard_normal(157)
    assert np.allclose(src.matvec(v), K @ v, rtol=1e-12, atol=1e-12)
    idx = np.sort(rng.choice(157, 20, replace=False))
    coef = rng.standard_normal(20)
    assert np.allclose(src.rows_combination(idx, coef), K[:, idx] @ coef, rtol=1e-13, atol=1e-13)


def test_matrix_free_bands_with_a_given_diagonal_and_height(registry):
    # BCD-Fast's per-block source: the diagonal is passed in, the band height is fixed
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((50, 4))
    kernel = registry.get_kernel("rbf", sigma=0.9)
    K = kernel.gram(Z)
    diag = np.full(50, 7.0)  # a marker: the passed diagonal must be the one used
    src = MatrixFreeGram(kernel, Z, diag=diag, band_rows=16)
    E = np.zeros((50, 2))
    E[:20, 0] = E[20:, 1] = 1.0
    K_marked = K.copy()
    np.fill_diagonal(K_marked, 7.0)
    assert np.allclose(src.block_gram(E), E.T @ K_marked @ E, rtol=1e-13)


def test_geometric_grid_and_lepski():
    assert geometric_grid(40) == [1, 3, 7, 15, 31]
    assert geometric_grid(0) == []
    # estimates 10, 10.5, 1, 1.1 with radii 1: Q=1 and Q=3 disagree with the larger Q
    values = [10.0, 10.5, 1.0, 1.1]
    chosen = lepski([1, 3, 7, 15], [1, 1, 1, 1], lambda i, j: abs(values[i] - values[j]))
    assert chosen == 2
    assert lepski([1, 3], [5, 5], lambda i, j: 1.0) == 0


@pytest.mark.parametrize("n", [1, 7, 40, 333])
def test_quadratic_forms_from_the_upper_half_equal_brute_force(registry, rng, monkeypatch, n):
    from monk_framework.engine import gram_sources as gs
    from monk_framework.engine.gram_sources import PermutedGram

    monkeypatch.setattr(gs, "HALVING_LEAF", 5)  # several levels of halving on small n
    monkeypatch.setitem(CHUNK_BYTES, "tile", 8)  # matrix-free bands in tiles of 64 columns
    Z = rng.normal(size=(n, 3))
    kernel = registry.get_kernel("laplace", sigma=1.5)
    K = kernel.gram(Z)
    E = (rng.random((n, 6)) < 0.5).astype(float)
    E[:, 0] = rng.normal(size=n)  # any real weights, not only indicators
    want = np.array([E[:, b] @ K @ E[:, b] for b in range(6)])
    perm = rng.permutation(n)
    sources = (
        StoredGram(kernel, Z),
        MatrixFreeGram(kernel, Z, band_rows=3),
        MatrixFreeGram(kernel, Z, band_rows=13),  # blocks of 6 rows and a remainder
        PermutedGram(K[np.ix_(perm, perm)], np.argsort(perm)),
    )
    # E in C order goes through BLAS; in Fortran order a matrix-free source multiplies
    # its tiles in the compiled loop (fused.add_tile_product): the same forms either way
    for src in sources:
        for layout in (np.ascontiguousarray, np.asfortranarray):
            np.testing.assert_allclose(src.quadratic_forms(layout(E)), want, rtol=1e-12, atol=1e-12)
            forms, cross = src.forms_and_last(layout(E))
            np.testing.assert_allclose(forms, want, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(cross, [E[:, b] @ K @ E[:, -1] for b in range(6)], rtol=1e-12, atol=1e-12)
            forms, cross = src.forms_and_last(layout(np.column_stack([E, np.ones(n)])))  # as the tests use it
            np.testing.assert_allclose(forms[:-1], want, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(cross, [*(E.T @ K.sum(axis=1)), K.sum()], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 7, 40, 333])
def test_forms_of_packed_indicator_columns_equal_brute_force(registry, rng, monkeypatch, n):
    from monk_framework.engine.gram_sources import IndicatorColumns
    from monk_framework.engine.pooled import indicator_patterns

    monkeypatch.setitem(CHUNK_BYTES, "tile", 8)  # matrix-free bands in tiles of 64 columns
    Z = rng.normal(size=(n, 3))
    kernel = registry.get_kernel("laplace", sigma=1.5)
    K = kernel.gram(Z)
    perms = np.array([rng.permutation(n) for _ in range(9)])
    E = np.asfortranarray(np.column_stack([np.isin(np.arange(n)[:, None], p[: n // 2]).ravel() for p in perms]).astype(float))
    packed = IndicatorColumns(E, indicator_patterns(perms, n // 2, n))
    want = np.array([E[:, b] @ K @ E[:, b] for b in range(9)])
    ones = np.asfortranarray(np.column_stack([E, np.ones(n)]))
    with_ones = IndicatorColumns(ones, indicator_patterns(perms, n // 2, n))  # the patterns' ones column is W's own
    # bands whose ends are multiples of 4 or not: tiles from the middle of a group of four
    for src in (StoredGram(kernel, Z), MatrixFreeGram(kernel, Z, band_rows=16), MatrixFreeGram(kernel, Z, band_rows=13)):
        np.testing.assert_allclose(src.quadratic_forms(packed), want, rtol=1e-12, atol=1e-12)
        forms, cross = src.forms_and_last(with_ones)
        np.testing.assert_allclose(forms[:-1], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cross, [*(E.T @ K.sum(axis=1)), K.sum()], rtol=1e-12, atol=1e-12)


def test_packed_forms_of_a_gram_matrix_in_another_layout_take_the_blas_products(registry, rng):
    # subset sums read K's rows in place; a precomputed K in Fortran order, or a
    # kernel whose tiles come in Fortran order, must still give the right forms
    from monk_framework.engine.gram_sources import IndicatorColumns
    from monk_framework.engine.pooled import indicator_columns, indicator_patterns

    Z = rng.normal(size=(90, 3))
    kernel = registry.get_kernel("rbf", sigma=1.5)
    K = kernel.gram(Z)
    perms = np.array([rng.permutation(90) for _ in range(7)])
    W = IndicatorColumns(indicator_columns(perms, 40, 90, order="F"), indicator_patterns(perms, 40, 90))
    want = np.einsum("ij,ij->j", W.dense, K @ W.dense)
    for layout in (np.asfortranarray, lambda A: A.T.copy().T):
        np.testing.assert_allclose(StoredGram(kernel, Z, K=layout(K)).quadratic_forms(W), want, rtol=1e-13)

    class FortranTiles(type(kernel)):
        def compute_gram(self, X, Y):
            return np.asfortranarray(super().compute_gram(X, Y))

    fortran = FortranTiles(sigma=1.5)
    np.testing.assert_allclose(MatrixFreeGram(fortran, Z, band_rows=16).quadratic_forms(W), want, rtol=1e-13)


def test_indicator_columns_check_their_patterns():
    from monk_framework.engine.gram_sources import IndicatorColumns, dense_columns

    E = np.zeros((9, 3))
    P = np.zeros((3, 4), dtype=np.uint8)
    P[:, 3] = [15, 15, 1]  # every one of the 9 points
    assert IndicatorColumns(E, P).shape == (9, 3)
    E[:, 2] = 1.0
    assert dense_columns(IndicatorColumns(E, P[:, 1:])) is E and dense_columns(E) is E
    for bad in (np.zeros((2, 3), dtype=np.uint8), np.zeros((3, 5), dtype=np.uint8), P[:, 1:].astype(float)):
        with pytest.raises(ValueError, match=r"patterns must be uint8 of shape \(3, 3 or 4\) for 9 × 3 columns"):
            IndicatorColumns(E, bad)
    with pytest.raises(ValueError, match="last column must pick every point"):
        IndicatorColumns(E, P[:, :3])  # its last column is not all the points
    E[4, 2] = 0.0
    with pytest.raises(ValueError, match="be dense's last column"):
        IndicatorColumns(E, P[:, 1:])  # dense's last column is not all ones


def record_calls(monkeypatch, module, name: str) -> list:
    """Wrap ``module.name`` so that each call's result is recorded in the returned list."""
    calls: list = []
    original = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(original(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(module, name, spy)
    return calls


def test_matrix_free_forms_of_indicator_columns_add_subset_sums(registry, rng, monkeypatch):
    from monk_framework.engine.gram_sources import IndicatorColumns
    from monk_framework.engine.pooled import indicator_patterns

    monkeypatch.setitem(CHUNK_BYTES, "tile", 8 * 13 * 50)
    calls = record_calls(monkeypatch, band_reductions, "add_indicator_product")
    Z = rng.normal(size=(200, 4))
    perms = np.array([rng.permutation(200) for _ in range(11)])
    W = IndicatorColumns(np.asfortranarray(np.zeros((200, 11))), indicator_patterns(perms, 90, 200))
    W.dense[:] = np.array([np.isin(np.arange(200), p[:90]) for p in perms]).T
    src = MatrixFreeGram(registry.get_kernel("rbf", sigma=2.0), Z, band_rows=13)
    got = src.quadratic_forms(W)
    assert calls and all(calls)  # every tile right of a diagonal block: subset sums
    np.testing.assert_allclose(got, src.quadratic_forms(W.dense), rtol=1e-13)


def test_matrix_free_forms_multiply_fortran_ordered_weights_in_the_compiled_loop(registry, rng, monkeypatch):

    monkeypatch.setitem(CHUNK_BYTES, "tile", 8 * 13 * 50)  # tiles of 50 columns
    Z = rng.normal(size=(200, 4))
    kernel = registry.get_kernel("rbf", sigma=2.0)
    calls = record_calls(monkeypatch, band_reductions, "add_tile_product")
    E = (rng.random((200, 11)) < 0.5).astype(float)
    src = MatrixFreeGram(kernel, Z, band_rows=13)
    got_f = src.forms_and_last(np.asfortranarray(E))
    assert calls and all(calls)  # every tile: the compiled product
    calls.clear()
    got_c = src.forms_and_last(np.ascontiguousarray(E))
    assert calls and not any(calls)  # declined: BLAS
    for f, c in zip(got_f, got_c):
        np.testing.assert_allclose(f, c, rtol=1e-13)


@pytest.mark.parametrize("n", [2, 321, 1000])
def test_stored_quadratic_forms_are_the_same_bits_on_threads_and_here(registry, rng, monkeypatch, n):
    # the row chunks of every halving level run on a pool, each with one BLAS thread, and
    # are added in a fixed order: the same bits on two threads as one after another
    from monk_framework.engine import backends
    from monk_framework.engine import gram_sources as gs
    from monk_framework.engine.backends import on_this_thread

    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(gs, "FORM_TASK_ROWS", 96)  # several chunks per product
    Z = rng.normal(size=(n, 4))
    K = registry.get_kernel("rbf", sigma=2.0).gram(Z)
    E = (rng.random((n, 40)) < 0.5).astype(float)
    chunks: list = []
    form_chunk = gs._form_chunk
    monkeypatch.setattr(gs, "_form_chunk", lambda task, shared: chunks.append(task) or form_chunk(task, shared))
    on_pool = StoredGram(registry.get_kernel("rbf", sigma=2.0).fit(Z), Z, K=K).quadratic_forms(E)
    used = list(chunks)
    with on_this_thread():
        here = gs._halved_forms(K, E, 0, n)
    assert np.array_equal(on_pool, here)
    assert chunks[len(used) :] == used  # the same chunks here
    np.testing.assert_allclose(on_pool, np.einsum("ij,ij->j", E, K @ E), rtol=1e-13)
    # the chunks have at most FORM_TASK_ROWS rows, use no entry of K twice, and reach
    # every entry directly or through its mirror
    covered = np.zeros((n, n), dtype=int)
    for r0, r1, c0, c1 in used:
        assert 0 < r1 - r0 <= 96
        covered[r0:r1, c0:c1] += 1
    assert covered.max() == 1
    assert (covered + covered.T).min() >= 1


@pytest.mark.parametrize("n", [250, 777])
def test_subset_sum_forms_are_the_same_bits_on_any_number_of_threads(registry, rng, monkeypatch, n):
    # the relabellings' 0/1 columns on a stored K: row bands on a pool, added in band order
    from monk_framework.engine import backends
    from monk_framework.engine import gram_sources as gs
    from monk_framework.engine.backends import on_this_thread
    from monk_framework.engine.gram_sources import IndicatorColumns
    from monk_framework.engine.pooled import indicator_columns, indicator_patterns

    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(gs, "SUBSET_FORM_ROWS", 96)  # bands whose ends split groups of four
    Z = rng.normal(size=(n, 4))
    K = registry.get_kernel("rbf", sigma=2.0).gram(Z)
    perms = np.array([rng.permutation(n) for _ in range(40)])
    W = IndicatorColumns(indicator_columns(perms, n // 3, n, order="F"), indicator_patterns(perms, n // 3, n))
    source = StoredGram(registry.get_kernel("rbf", sigma=2.0).fit(Z), Z, K=K)
    on_pool = source.quadratic_forms(W)
    with on_this_thread():
        here = source.quadratic_forms(W)
    if compiled_available():
        assert np.array_equal(on_pool, here)  # the compiled sums add the bands in band order
    else:
        np.testing.assert_allclose(on_pool, here, rtol=1e-14)  # BLAS's own threads may reorder
    np.testing.assert_allclose(on_pool, np.einsum("ij,ij->j", W.dense, K @ W.dense), rtol=1e-13)


@pytest.fixture
def direct_form_kernels():
    """Throwaway kernel plugins with a direct Wᵀ K W: right (from their own Gram matrix),
    of the wrong shape, or declining."""
    from typing import ClassVar

    import attrs

    from monk_framework import Kernel

    @attrs.frozen(kw_only=True)
    class Direct(Kernel):
        name: ClassVar[str] = "direct-test"
        summary: ClassVar[str] = "A test kernel with a direct block Gram matrix."
        answer: str = attrs.field(default="right")
        calls: list = attrs.field(factory=list, eq=False)

        def compute_gram(self, X, Y):
            return np.exp(-0.5 * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))

        def compute_diag(self, X):
            return np.ones(len(X))

        def compute_block_gram(self, Z, W, diag):
            self.calls.append(W.shape)
            if self.answer == "decline":
                return None
            if self.answer == "shape":
                return np.zeros((1, 1))
            K = self.compute_gram(Z, Z)
            np.fill_diagonal(K, diag)
            return W.T @ K @ W

    return Direct


def test_a_narrow_dense_block_gram_takes_the_kernels_direct_form(registry, direct_form_kernels, monkeypatch):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # many bands would run on two threads
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((120, 3))
    E = np.zeros((120, 2))
    E[:50, 0] = E[50:, 1] = 1.0
    kernel = direct_form_kernels()
    want = E.T @ kernel.gram(Z) @ E
    src = MatrixFreeGram(kernel, Z, band_rows=16)
    np.testing.assert_allclose(src.block_gram(E), want, rtol=1e-13)
    assert kernel.calls == []  # 8 bands run on both cores: the tiles, not one thread
    few = MatrixFreeGram(kernel, Z, band_rows=40)  # 3 bands: one thread either way
    np.testing.assert_allclose(few.block_gram(E), want, rtol=1e-13)
    assert kernel.calls == [(120, 2)]
    # wide or sparse weights, and a kernel that declines, take the tiles
    wide = rng.standard_normal((120, 5))
    np.testing.assert_allclose(few.block_gram(wide), wide.T @ kernel.gram(Z) @ wide, rtol=1e-12)
    np.testing.assert_allclose(few.block_gram(sp.csr_array(E)), want, rtol=1e-13)
    assert kernel.calls == [(120, 2)]
    declining = direct_form_kernels(answer="decline")
    np.testing.assert_allclose(MatrixFreeGram(declining, Z, band_rows=40).block_gram(E), want, rtol=1e-13)
    assert declining.calls == [(120, 2)]


def test_a_direct_form_of_the_wrong_shape_is_named(direct_form_kernels):
    from monk_framework import KernelContractError

    Z = np.zeros((6, 2))
    with pytest.raises(KernelContractError, match=r"compute_block_gram returned shape \(1, 1\) for 2 weight columns"):
        MatrixFreeGram(direct_form_kernels(answer="shape"), Z).block_gram(np.ones((6, 2)))


@pytest.mark.parametrize("scale", [1.0, 1e200])
def test_rbf_direct_form_equals_its_tiles(registry, scale):
    # the RBF kernel's compiled form against its own Gram matrix, on data of any scale
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((90, 4)) * scale
    kernel = registry.get_kernel("rbf", sigma=1.7 * scale)
    E = (rng.random((90, 3)) < 0.5).astype(float)
    diag = kernel.diag(Z)
    got = kernel.direct_block_gram(Z, E, diag)
    np.testing.assert_allclose(got, E.T @ kernel.gram(Z) @ E, rtol=1e-13)
    # a σ so small that the scaled points overflow: declined, the tiles handle it
    assert registry.get_kernel("rbf", sigma=1e-300).direct_block_gram(Z * 1e10, E, diag) is None


@attrs.frozen(kw_only=True)
class OneNaN(Kernel):
    """A broken kernel: NaN for the pair of points at 0.5 and 0.75 (in that order)."""

    name: ClassVar[str] = "one-nan"
    summary: ClassVar[str] = "A broken kernel: NaN for one pair of points."

    def compute_gram(self, X, Y):
        K = np.exp(-np.abs(X[:, :1] - Y[:, 0]))
        K[(X[:, :1] == 0.5) & (Y[:, 0] == 0.75)] = np.nan
        return K

    def compute_diag(self, X):
        return np.ones(len(X))


def one_nan_far_from_the_diagonal(rng, n=200):
    Z = rng.uniform(1.0, 2.0, size=(n, 1))
    Z[20, 0], Z[n - 30, 0] = 0.5, 0.75
    return Z


@pytest.mark.parametrize("reduce", ["forms, E by columns", "forms, E by rows", "forms, E packed", "row sums"])
def test_matrix_free_reductions_name_a_kernel_that_gives_nan_in_one_tile(rng, monkeypatch, reduce):
    # tiles checked through the sums made of them (the compiled product, the subset sums
    # with their column of ones, the row sums) or each (BLAS): one NaN far from the
    # diagonal is caught either way, even by zero weights
    from monk_framework.engine.gram_sources import IndicatorColumns

    monkeypatch.setitem(CHUNK_BYTES, "tile", 8 * 13 * 50)
    Z = one_nan_far_from_the_diagonal(rng)
    if reduce == "forms, E packed":
        # subset sums evaluate the tiles transposed (the later points first): the broken
        # pair in that order
        Z[[20, 170]] = Z[[170, 20]]
    src = MatrixFreeGram(OneNaN(), Z, band_rows=13)
    layout = np.ascontiguousarray if reduce == "forms, E by rows" else np.asfortranarray
    with pytest.raises(KernelOverflowError, match="one-nan.*non-finite values"):
        if reduce == "row sums":
            src.row_sums()
        elif reduce == "forms, E packed":
            every = np.zeros((50, 6), dtype=np.uint8)
            every[:, 5] = 15
            src.quadratic_forms(IndicatorColumns(np.zeros((200, 5), order="F"), every))
        else:
            src.forms_and_last(layout(np.zeros((200, 5))))


@pytest.mark.parametrize("where", ["x", "xy"])
def test_tiled_kernel_sums_name_a_kernel_that_gives_nan_in_one_tile(rng, where):
    from monk_framework.core.resources import Resources
    from monk_framework.engine.reductions import kernel_sums

    # 600 points: more than one band of rows, so the NaN lies right of the diagonal block
    Z = one_nan_far_from_the_diagonal(rng, 600)
    X, Y = (Z, rng.uniform(1.0, 2.0, size=(50, 1))) if where == "x" else (Z[:300], Z[300:])
    # the tiles are checked through their sums: the message names both causes a sum can have
    with pytest.raises(KernelOverflowError, match="one-nan.*sums of its values over these data are not finite: a NaN"):
        kernel_sums(OneNaN(), X, Y, resources=Resources(budget=1))


@pytest.mark.parametrize("spec", ["quadratic", "linear", "polynomial:degree=3,offset=0.5"])
def test_a_feature_source_gives_every_reduction_of_the_stored_gram_matrix(registry, spec):
    # K = ΦΦᵀ: every product with K is two with Φ, the same numbers to round-off
    from monk_framework.engine.gram_sources import FeatureGram

    kernel = registry.resolve_kernel(spec)
    gen = np.random.default_rng(21)
    Z = gen.normal(size=(120, 3))
    stored, featured = StoredGram(kernel, Z), FeatureGram(kernel, Z, kernel.features(Z))
    scale = np.abs(stored.K).max()
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * scale * Z.shape[0])  # noqa: E731
    W = gen.normal(size=(120, 4))
    E = (gen.random((120, 6)) < 0.5).astype(float)
    E[:, -1] = 1.0
    labels = gen.integers(0, 5, size=120)
    sparse = sp.csr_array((np.ones(120), (np.arange(120), labels)), shape=(120, 5))
    idx = np.array([3, 17, 64])
    close(featured.row_sums(), stored.row_sums())
    close(featured.matvec(W), stored.matvec(W))
    close(featured.quadratic_forms(E), stored.quadratic_forms(E))
    for got, want in zip(featured.forms_and_last(E), stored.forms_and_last(E)):
        close(got, want)
    close(featured.block_gram(W), stored.block_gram(W))
    close(featured.block_gram(sparse), stored.block_gram(sparse))
    close(featured.rows_combination(idx, np.array([1.0, -2.0, 0.5])), stored.rows_combination(idx, np.array([1.0, -2.0, 0.5])))
    close(featured.band(10, 30), stored.band(10, 30))
    perm = gen.permutation(120)
    close(featured.permuted(perm).matvec(W), stored.K[np.ix_(perm, perm)] @ W)
    np.testing.assert_array_equal(featured.diag, kernel.diag(Z))


def test_a_matrix_free_source_reads_features_where_they_pay_and_tiles_elsewhere(registry):
    from monk_framework.core.resources import Resources
    from monk_framework.engine.gram_sources import FeatureGram, gram_source

    Z = np.random.default_rng(22).normal(size=(400, 3))
    budget = Resources.of("100KB")  # 400² doubles do not fit
    assert isinstance(gram_source(registry.get_kernel("quadratic"), Z, resources=budget), FeatureGram)
    assert isinstance(gram_source(registry.get_kernel("rbf", sigma=1.0), Z, resources=budget), MatrixFreeGram)
    # a stored matrix keeps its place where it fits (the paper's experiments' numbers)
    assert isinstance(gram_source(registry.get_kernel("quadratic"), Z, resources=Resources()), StoredGram)


@pytest.mark.parametrize("spec", ["monk-bcd", "monk-bcd:n_blocks=auto", "monk-bcd:solver=exact"])
def test_monk_estimates_over_the_budget_from_features_equal_the_stored_ones(spec):
    from monk_framework import estimate

    gen = np.random.default_rng(23)
    X, Y = gen.normal(size=(600, 2)), gen.normal(0.2, 1.0, size=(600, 2))
    X[:4] = 40.0
    stored = estimate(X, Y, kernel="quadratic", estimator=spec, rng=5)
    featured = estimate(X, Y, kernel="quadratic", estimator=spec, rng=5, max_memory="2MB")
    assert featured.diagnostics["features"] is True and featured.diagnostics["matrix_free"] is True
    assert featured.mmd2 == pytest.approx(stored.mmd2, rel=1e-10)
