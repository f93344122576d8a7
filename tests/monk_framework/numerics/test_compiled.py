"""The compiled one-pass loops: the same bits as the numpy passes they replace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monk_framework.numerics.compiled import compiled_available
from monk_framework.numerics.distances import scaled_squared_distances, squared_distances
from monk_framework.numerics.exp_loops import finish_squared_distances
from monk_framework.numerics.product_loops import add_tile_product


def numpy_passes(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float) -> np.ndarray:
    """The four numpy passes the compiled loop replaces, as the kernels ran them before."""
    out = out.copy()
    out += nx[:, None]
    out += ny[None, :]
    np.maximum(out, 0.0, out=out)
    out *= scale
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 9),
    m=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1.0, -0.5, -0.025, 3.0e-7, -1.0e300, 0.0]),
)
def test_one_pass_equals_the_numpy_passes_bit_for_bit(n, m, seed, scale):
    g = np.random.default_rng(seed)
    # products that nearly cancel the norms (negative round-off to clip), far ones, exact zeros
    nx, ny = g.random(n) * 10.0 ** g.integers(-3, 4), g.random(m) * 10.0 ** g.integers(-3, 4)
    prod = -(nx[:, None] + ny[None, :]) * (1.0 + g.normal(0, 1e-15, (n, m)))
    prod[g.random((n, m)) < 0.3] = 0.0
    want = numpy_passes(prod, nx, ny, scale)
    with np.errstate(over="ignore"):
        got = finish_squared_distances(prod.copy(), nx, ny, scale)
    assert got.tobytes() == want.tobytes()


def test_clipping_keeps_nan_and_infinities_as_numpy_does():
    out = np.array([[np.nan, -np.inf, np.inf, -1e-300]])
    nx, ny = np.zeros(1), np.zeros(4)
    got = finish_squared_distances(out.copy(), nx, ny, -0.5)
    want = numpy_passes(out, nx, ny, -0.5)
    np.testing.assert_array_equal(got, want)  # NaN where NaN, -inf for +inf, 0 where clipped
    assert np.isnan(got[0, 0]) and got[0, 1] == 0.0 and got[0, 2] == -np.inf


@pytest.mark.parametrize("d", [1, 4, 5, 10, 40])
def test_squared_distances_scaled_in_the_pass_equal_scaling_afterwards(d):
    g = np.random.default_rng(d)
    X, Y = g.normal(size=(37, d)) * 3.0, g.normal(1.0, 1.0, size=(23, d))
    X[5] = Y[7]  # an exact duplicate: distance 0 either way
    for scale in (1.0, -0.5 / 7.3**2, 2.0**-20):
        assert squared_distances(X, Y, scale=scale).tobytes() == (squared_distances(X, Y) * scale).tobytes()
    # the kernels' path: 1/σ² times a power-of-two factor, as RBF calls it
    sigma = 2.9
    want = squared_distances(X, Y) * (-0.5 * (1.0 / sigma**2))
    assert scaled_squared_distances(X, Y, sigma, factor=-0.5).tobytes() == want.tobytes()


def test_bad_arrays_are_refused_by_name():
    nx, ny = np.zeros(3), np.zeros(4)
    with pytest.raises(ValueError, match=r"C-ordered float64 array of shape \(3, 4\)"):
        finish_squared_distances(np.zeros((4, 3)), nx, ny)
    with pytest.raises(ValueError, match="C-ordered float64"):
        finish_squared_distances(np.zeros((3, 4), dtype=np.float32), nx, ny)
    with pytest.raises(ValueError, match="C-ordered float64"):
        finish_squared_distances(np.zeros((4, 3)).T, nx, ny)


# -- the exponential and the direct block Gram matrix ----------------------------------------

from monk_framework.numerics.exp_loops import COMPILED_FORM_MAX_FEATURES, exp_nonpositive, exp_squared_distance_form  # noqa: E402


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got − want| in units of the last place of want (of the smallest normal below it)."""
    return np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.finfo(float).tiny))


def test_exponential_within_one_ulp_of_libm_and_numpy():
    import math

    g = np.random.default_rng(0)
    # every scale down to the underflow: tiny arguments, the reduction's edges, subnormal results
    x = np.concatenate(
        [
            -g.exponential(3.0, 20_000),
            -g.uniform(0, 746, 20_000),
            -(10.0 ** g.uniform(-20, 0, 5_000)),
            -np.log(2) / 2 + g.normal(0, 1e-12, 100),
            -g.uniform(708, 745.2, 5_000),
        ]
    )
    got = exp_nonpositive(x)
    libm = np.array([math.exp(v) for v in x])
    assert ulps(got, libm).max() <= 1.0
    assert ulps(got, np.exp(x)).max() <= 1.0


def test_exponential_at_its_edges():
    edges = np.array([0.0, -0.0, -5e-324, -1e-300, -745.13, -745.2, -746.0, -800.0, -1e308, -np.inf])
    got = exp_nonpositive(edges)
    assert got[0] == got[1] == got[2] == got[3] == 1.0  # exp rounds to 1 below half an ulp
    assert got[4] == np.exp(-745.13) == 5e-324  # the smallest subnormal
    assert (got[5:] == 0.0).all()
    for bad in ([np.nan], [1e-3], [np.inf]):
        with pytest.raises(ValueError, match="<= 0"):
            exp_nonpositive(np.array(bad))


def brute_form(Z: np.ndarray, W: np.ndarray, scale: float, diag: np.ndarray | None) -> np.ndarray:
    """Wᵀ K W with every K_ij from math.exp of the squared distance, in pure Python."""
    import math

    n = len(Z)
    K = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            K[i, j] = math.exp(scale * float(((Z[i] - Z[j]) ** 2).sum()))
        if diag is not None:
            K[i, i] = diag[i]
    return W.T @ K @ W


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 13),
    d=st.integers(1, 6),
    c=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([-0.5, -3.0, -1e-4, 0.0]),
    with_diag=st.booleans(),
)
def test_direct_form_equals_brute_force(n, d, c, seed, scale, with_diag):
    g = np.random.default_rng(seed)
    Z = g.normal(size=(n, d)) * g.choice([0.1, 1.0, 10.0])
    W = g.normal(size=(n, c))
    diag = g.uniform(0.5, 2.0, n) if with_diag else None
    got = exp_squared_distance_form(Z, W, scale, diag)
    want = brute_form(Z, W, scale, diag)
    assert got.shape == (c, c)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * max(1.0, np.abs(want).max()))
    np.testing.assert_array_equal(got, got.T)  # each pair is added to both triangles


@pytest.mark.parametrize("d", [1, 10, COMPILED_FORM_MAX_FEATURES])
def test_direct_form_on_a_within_block_sum(d):
    # BCD-Fast's use: one block of 300 points, its X and Y indicators
    g = np.random.default_rng(d)
    Z = g.normal(size=(300, d)) / np.sqrt(2 * d)
    E = np.zeros((300, 2))
    E[:140, 0] = E[140:, 1] = 1.0
    K = np.exp(-0.5 * ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(exp_squared_distance_form(Z, E, -0.5), E.T @ K @ E, rtol=1e-13)


def test_direct_form_gives_zero_to_overflowing_distances_and_declines_wide_data():
    Z = np.array([[0.0], [1e200], [-1e200]])  # squared distances overflow to inf: exp(-inf) = 0
    np.testing.assert_array_equal(exp_squared_distance_form(Z, np.ones((3, 1)), -0.5), [[3.0]])
    assert exp_squared_distance_form(np.zeros((4, COMPILED_FORM_MAX_FEATURES + 1)), np.ones((4, 1)), -0.5) is None
    with pytest.raises(ValueError, match="finite points"):
        exp_squared_distance_form(np.array([[np.nan]]), np.ones((1, 1)), -0.5)
    with pytest.raises(ValueError, match="scale <= 0"):
        exp_squared_distance_form(np.zeros((2, 1)), np.ones((2, 1)), 0.5)
    with pytest.raises(ValueError, match=r"\(n, d\) and W \(n, c\)"):
        exp_squared_distance_form(np.zeros((2, 1)), np.ones((3, 1)), -0.5)


# -- a tile of the Gaussian kernel ----------------------------------------------------------

from monk_framework.numerics.distances import DIRECT_MAX_FEATURES, exp_scaled_squared_distances  # noqa: E402
from monk_framework.numerics.exp_loops import COMPILED_TILE_MAX_FEATURES, centred_with_norms, exp_squared_distance_tile  # noqa: E402


def sums_reference(X: np.ndarray, Y: np.ndarray, scale: float, *, fused: bool) -> np.ndarray:
    """The compiled loop's arithmetic in pure Python: −2⟨x, y⟩ on centred data summed in
    the order of the features, each term a fused multiply-add rounded once (``fused``,
    through exact fractions) or a product and a sum each rounded (a processor without
    FMA), completed, clipped at 0, scaled, then exp_nonpositive."""
    from fractions import Fraction

    Xc, Yc, nx, ny = centred_with_norms(X, Y)
    A = -2.0 * Xc
    out = np.empty((len(X), len(Y)))
    for i in range(len(X)):
        for j in range(len(Y)):
            s = 0.0
            for k in range(X.shape[1]):
                if fused:
                    s = float(Fraction(float(A[i, k])) * Fraction(float(Yc[j, k])) + Fraction(s))
                else:
                    s = s + float(A[i, k]) * float(Yc[j, k])
            out[i, j] = max((s + float(nx[i])) + float(ny[j]), 0.0) * scale
    return exp_nonpositive(out.ravel()).reshape(out.shape)


@pytest.mark.skipif(not compiled_available(), reason="tests the compiled loop")
@pytest.mark.parametrize("d", range(DIRECT_MAX_FEATURES + 1, COMPILED_TILE_MAX_FEATURES + 1))
def test_compiled_tile_is_its_arithmetic_bit_for_bit(d):
    # a processor with FMA fuses each term (x86-64 with AVX2, ARM), one without rounds the
    # product and the sum apart (NUMBA_CPU_NAME=generic): the loop is one or the other, bit
    # for bit, and within round-off of numpy's BLAS path either way
    g = np.random.default_rng(d)
    X, Y = g.normal(size=(7, d)), g.normal(0.3, 2.0, size=(19, d))  # odd rows: the last one alone
    X[3] = Y[5]  # a duplicate: 0 up to round-off, clipped
    scale = -0.5 / (2.0 * d)
    got = exp_squared_distance_tile(X, Y, scale).tobytes()
    assert got in (sums_reference(X, Y, scale, fused=True).tobytes(), sums_reference(X, Y, scale, fused=False).tobytes())


@pytest.mark.parametrize("d", [1, 2, DIRECT_MAX_FEATURES, 5, 10, COMPILED_TILE_MAX_FEATURES, COMPILED_TILE_MAX_FEATURES + 1, 40])
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (1, 1), (9, 300), (64, 17)])
def test_tile_is_the_exponential_of_the_squared_distances(d, shape):
    g = np.random.default_rng(d + 100 * shape[0])
    X, Y = g.normal(size=(shape[0], d)), g.normal(size=(shape[1], d)) * 1.5
    sigma = 0.7 * np.sqrt(d)
    got = exp_scaled_squared_distances(X, Y, sigma)
    assert got.shape == shape
    if not got.size:
        return
    exponent = scaled_squared_distances(X, Y, sigma, factor=-0.5)
    want = np.exp(exponent)
    if DIRECT_MAX_FEATURES < d <= COMPILED_TILE_MAX_FEATURES:
        # the loop's sums and BLAS's may fuse their multiply-adds differently (by processor):
        # the exponents agree to round-off of the centred norms, the values to that times exp
        centred = np.vstack([X, Y]) - Y.mean(axis=0)
        bound = 4e-16 + 8e-16 * d * np.square(centred).sum(axis=1).max() / (2 * sigma**2)
        assert (np.abs(got - want) <= bound * want).all()
        return
    # within one ulp of numpy's exponential of the numpy path's exponent
    assert (ulps(got, want) <= 1.0).all()
    if d <= DIRECT_MAX_FEATURES or d > COMPILED_TILE_MAX_FEATURES:
        # the same distances bit for bit: numpy's passes, or the same BLAS product, completed alike
        assert got.tobytes() == exp_nonpositive(exponent).reshape(shape).tobytes()


def test_tile_gives_one_for_equal_points_and_zero_far_away():
    for d in (3, 8, 20):
        X = np.zeros((3, d))
        Y = np.vstack([np.zeros(d), np.full(d, 30.0), np.full(d, 1e-9)])
        got = exp_squared_distance_tile(X, Y, -0.5, direct=d <= DIRECT_MAX_FEATURES)
        # equal points: exactly 1 from differences; the identity leaves its round-off, about
        # eps · ‖y − mean‖² (here 1e-13 · d), as the BLAS path does
        np.testing.assert_allclose(got[:, 0], 1.0, rtol=0, atol=0 if d <= DIRECT_MAX_FEATURES else 1e-13 * d)
        assert (got[:, 1] == 0.0).all() and (got <= 1.0).all()
        np.testing.assert_allclose(got[:, 2], np.exp(-0.5 * d * 1e-18), rtol=0, atol=1e-14)


def test_tile_without_features_of_other_dtypes_and_of_bad_shapes():
    for direct in (True, False):
        got = exp_squared_distance_tile(np.zeros((3, 0)), np.zeros((2, 0)), -0.5, direct=direct)
        np.testing.assert_array_equal(got, np.ones((3, 2)))
    # other dtypes are converted; shapes that do not match are refused by name
    X32 = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    assert exp_squared_distance_tile(X32, X32, -0.5).tobytes() == exp_squared_distance_tile(X32.astype(np.float64), X32.astype(np.float64), -0.5).tobytes()
    with pytest.raises(ValueError, match=r"X \(n, d\) and Y \(m, d\)"):
        exp_squared_distance_tile(np.zeros((3, 7)), np.zeros((2, 6)), -0.5)


def test_extreme_data_and_bandwidths_keep_the_numpy_path():
    # 1e200-scale data with σ = 1e200: the distances are rescaled by powers of two first
    g = np.random.default_rng(3)
    X, Y = g.normal(size=(5, 6)) * 1e200, g.normal(size=(4, 6)) * 1e200
    got = exp_scaled_squared_distances(X, Y, 1e200)
    want = np.exp(scaled_squared_distances(X, Y, 1e200, factor=-0.5))
    assert got.tobytes() == want.tobytes() and 0 < got.min() < 1
    # a non-negative factor is outside the compiled exponential's domain: numpy's
    small = g.normal(size=(3, 6))
    assert exp_scaled_squared_distances(small, small, 1.0, factor=0.5).tobytes() == np.exp(scaled_squared_distances(small, small, 1.0, factor=0.5)).tobytes()


def test_rbf_kernel_evaluates_through_the_tile(registry):
    g = np.random.default_rng(4)
    X, Y = g.normal(size=(30, 10)), g.normal(size=(20, 10))
    kernel = registry.get_kernel("rbf", sigma=2.5)
    assert kernel.gram(X, Y).tobytes() == exp_squared_distance_tile(X, Y, -0.5 * (1.0 / 2.5**2)).tobytes()


# -- the product of a tile with many weight columns ------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(0, 20),
    cols=st.integers(0, 40),
    q=st.integers(0, 11),
    extra=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_tile_product_equals_the_blas_product(rows, cols, q, extra, seed):
    # every remainder of the 6 × 4 register block: rows and columns of any count
    g = np.random.default_rng(seed)
    T = g.normal(size=(rows, cols))
    W = np.asfortranarray(g.normal(size=(cols + extra, q)))
    offset = int(g.integers(0, extra + 1))
    start = g.normal(size=(rows, q))
    out = start.copy()
    assert add_tile_product(out, T, W.T, offset)
    part = W[offset : offset + cols]
    want = start + T @ part
    # round-off of sums in any order: a few units of eps times the sums of absolute terms
    bound = 1e-14 * (np.abs(start) + np.abs(T) @ np.abs(part)) + 1e-300
    assert (np.abs(out - want) <= bound).all()


def test_tile_product_at_the_test_shape_against_exact_sums():
    # a tile of 0/1 products with 0/1 weights: every sum is an exact integer in float64
    g = np.random.default_rng(5)
    T = (g.random((256, 2048)) < 0.5).astype(float)
    W = np.asfortranarray((g.random((3000, 102)) < 0.5).astype(float))
    out = np.zeros((256, 102))
    assert add_tile_product(out, T, W.T, 700)
    np.testing.assert_array_equal(out, T.astype(np.int64) @ W[700:2748].astype(np.int64))


def test_tile_product_declines_layouts_it_cannot_read_and_refuses_a_bad_offset():
    T, WT, out = np.ones((7, 5)), np.ones((3, 9)), np.zeros((7, 3))
    assert not add_tile_product(out, np.asfortranarray(T), WT)  # the tile in Fortran order
    assert not add_tile_product(out, T, np.ones((9, 3)).T)  # W in C order: WT strided
    assert not add_tile_product(out, T.astype(np.float32), WT)
    assert not add_tile_product(np.zeros((7, 4)), T, WT)  # out of the wrong shape
    out.setflags(write=False)
    assert not add_tile_product(out, T, WT)
    np.testing.assert_array_equal(out, 0.0)  # declined: nothing done
    with pytest.raises(ValueError, match=r"columns 5:10 outside the 9 weight rows"):
        add_tile_product(np.zeros((7, 3)), T, WT, 5)
    with pytest.raises(ValueError, match=r"columns -1:4"):
        add_tile_product(np.zeros((7, 3)), T, WT, -1)


# -- the relabelling products by subset sums -------------------------------------------------

from monk_framework.numerics.product_loops import PATTERN_POINTS, add_indicator_product, pack_patterns  # noqa: E402


def packed(E: np.ndarray) -> np.ndarray:
    """E's rows packed four to a byte, the reference way: bit t of P[g, b] is E[4g + t, b]."""
    rows = -(-len(E) // 4) * 4
    bits = np.zeros((rows, E.shape[1]), dtype=np.uint8)
    bits[: len(E)] = E
    return (bits.reshape(rows // 4, 4, E.shape[1]) << np.arange(4, dtype=np.uint8)[None, :, None]).sum(axis=1).astype(np.uint8)


@settings(max_examples=80, deadline=None)
@given(
    points=st.integers(0, 45),
    lanes=st.integers(0, 45),
    q=st.integers(0, 19),
    extra=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_indicator_product_equals_the_dense_product(points, lanes, q, extra, seed):
    # every remainder: lanes in blocks of 16 and 8 and a padded last vector, columns in
    # blocks of 8 and singly, groups of four in blocks of 16, points before the first
    # whole group and after the last
    g = np.random.default_rng(seed)
    KT = g.normal(size=(points, lanes))
    E = (g.random((points + extra, q)) < 0.5).astype(float)
    offset = int(g.integers(0, extra + 1))
    start = g.normal(size=(q, lanes))
    out = start.copy()
    assert add_indicator_product(out, KT, packed(E), offset)
    part = E[offset : offset + points]
    want = start.T + KT.T @ part  # lanes × q
    bound = 1e-14 * (np.abs(start.T) + np.abs(KT).T @ part) + 1e-300
    assert (np.abs(out - want.T) <= bound.T).all()


def test_indicator_product_at_the_test_shape_against_exact_sums():
    # a tile of 0/1 values: every subset sum is an exact integer in float64
    g = np.random.default_rng(6)
    KT = (g.random((2048, 256)) < 0.5).astype(float)
    E = (g.random((3001, 102)) < 0.5).astype(float)
    out = np.zeros((102, 256))
    assert add_indicator_product(out, KT, packed(E), 701)
    np.testing.assert_array_equal(out, (KT.astype(np.int64).T @ E[701:2749].astype(np.int64)).T)


def test_indicator_product_reads_rows_of_a_larger_matrix():
    # the rows of a tile inside a stored matrix: a row stride longer than the tile
    g = np.random.default_rng(7)
    K = g.normal(size=(300, 300))
    E = (g.random((300, 21)) < 0.5).astype(float)
    out = np.zeros((21, 64))
    assert add_indicator_product(out, K[100:297, 32:96], packed(E), 100)
    np.testing.assert_allclose(out, (K[100:297, 32:96].T @ E[100:297]).T, rtol=1e-13, atol=1e-13)


def test_indicator_product_declines_layouts_it_cannot_read_and_refuses_a_bad_offset():
    KT, P, out = np.ones((9, 8)), np.zeros((3, 5), dtype=np.uint8), np.zeros((5, 8))
    assert not add_indicator_product(out, np.ones((8, 9)).T, P)  # rows strided
    assert not add_indicator_product(out, KT.astype(np.float32), P)
    assert not add_indicator_product(out, KT, P.astype(np.int8))
    assert not add_indicator_product(np.zeros((4, 8)), KT, P)  # out of the wrong shape
    out.setflags(write=False)
    assert not add_indicator_product(out, KT, P)
    np.testing.assert_array_equal(out, 0.0)  # declined: nothing done
    with pytest.raises(ValueError, match=r"points 4:13 outside the 12 of the patterns"):
        add_indicator_product(np.zeros((5, 8)), KT, P, 4)
    with pytest.raises(ValueError, match=r"points -1:8"):
        add_indicator_product(np.zeros((5, 8)), KT, P, -1)


def test_pack_patterns_sets_one_bit_per_chosen_point_and_refuses_other_arrays():
    perms = np.array([[5, 0, 9, 2], [1, 2, 3, 4]])
    P = np.zeros((3, 2), dtype=np.uint8)
    pack_patterns(P, perms, 3)
    E = np.zeros((12, 2))
    E[[5, 0, 9], 0] = E[[1, 2, 3], 1] = 1.0
    np.testing.assert_array_equal(P, packed(E))
    assert PATTERN_POINTS == 4
    with pytest.raises(ValueError, match="C-ordered uint8 array with 2 columns"):
        pack_patterns(np.zeros((3, 1), dtype=np.uint8), perms, 3)


def test_the_environment_switch_reads_the_usual_spellings_and_refuses_a_typo(monkeypatch):
    from monk_framework.core.errors import ParameterError
    from monk_framework.numerics.compiled import compiled_enabled

    for value, on in (("0", False), (" Off ", False), ("no", False), ("FALSE", False), ("", True), ("1", True), ("yes", True)):
        monkeypatch.setenv("MONK_COMPILED", value)
        assert compiled_enabled() is on, value
    monkeypatch.delenv("MONK_COMPILED")
    assert compiled_enabled() is True
    # a typo must not leave the loops on while the user believes them off
    monkeypatch.setenv("MONK_COMPILED", "fasle")
    with pytest.raises(ParameterError, match="MONK_COMPILED='fasle' is not a switch"):
        compiled_enabled()


def test_a_setting_numba_cannot_read_is_one_warning_line_not_a_traceback():
    # NUMBA_NUM_THREADS=abc: numba warns with the text of a traceback while it is imported
    import subprocess
    import sys

    if not compiled_available():
        pytest.skip("numba is not installed")
    code = "from monk_framework.numerics.compiled import compiled_available; compiled_available()"
    env = {**__import__("os").environ, "NUMBA_NUM_THREADS": "abc"}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    assert (
        "CompiledLoopsWarning: numba: Environment variable 'NUMBA_NUM_THREADS' is defined but its associated value "
        "'abc' could not be parsed. (numba ignores it)" in ran.stderr
    )
