"""The compiled one-pass loops: the same bits as the numpy passes they replace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monk_framework.fused import finish_squared_distances
from monk_framework.kernels import scaled_squared_distances, squared_distances


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
