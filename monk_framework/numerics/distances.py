"""Distances between points and order statistics: the numerics every vector kernel shares.

Pure functions of arrays, no threads and no memory policy (the engine bands them).
Squared distances come from coordinate differences for few features and from the BLAS
identity ‖x − y‖² = ‖x‖² + ‖y‖² − 2⟨x, y⟩ on centred data beyond, with near-duplicate
pairs refined from differences; data of extreme magnitude are first divided by an
exact power of two. The compiled passes they use live in
:mod:`monk_framework.numerics.compiled`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from monk_framework.numerics.exp_loops import centred_with_norms, exp_squared_distance_tile, finish_squared_distances

__all__ = [
    "DIRECT_MAX_FEATURES",
    "GROUP_BITS",
    "REFINE_RATIO",
    "centred_identity",
    "bracket",
    "distances",
    "exp_scaled_squared_distances",
    "homogeneous_pairwise",
    "l1_distances",
    "SAFE_MAGNITUDE",
    "magnitude",
    "magnitude_groups",
    "moderate",
    "order_statistics",
    "row_norms",
    "power_of_two",
    "refined_squared_distances",
    "scaled_distances",
    "scaled_l1_distances",
    "scaled_squared_distances",
    "select_in_bracket",
    "squared_distances",
]


#: below this many features, distances are computed from coordinate differences
#: (exact, and as fast as the BLAS identity); above it by the identity.
DIRECT_MAX_FEATURES = 4
#: with the BLAS identity, entries with ‖x − y‖² below this fraction of ‖x‖² + ‖y‖²
#: (after centring) lose digits to cancellation and are recomputed from differences.
REFINE_RATIO = 1e-3


def centred_identity(X: np.ndarray, Y: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """‖x − y‖² (times ``scale``) by the BLAS identity on data centred at Y's mean, with
    the centred norms.

    Centring leaves distances unchanged and shrinks the cancellation; the result is
    built in place in the matrix-product output, clipped at 0 and scaled in one
    compiled pass (the same bits as numpy's four passes, at about a third of their cost).
    """
    Xc, Yc, nx, ny = centred_with_norms(X, Y)
    # −2⟨x, y⟩ as (−2x)·y: scaling by a power of two is exact, so this is (x·y)·(−2) bit
    # for bit, without a pass over the n × m result
    out = (-2.0 * Xc) @ Yc.T
    finish_squared_distances(out, nx, ny, scale)
    return out, nx, ny


#: data or scales outside [1/SAFE_MAGNITUDE, SAFE_MAGNITUDE] are first divided by a power
#: of two (exact), so that squares and products of them cannot overflow or underflow
SAFE_MAGNITUDE = 1e100


def power_of_two(x: float) -> float:
    """2^e with 2^e ≤ |x| < 2^(e+1) (1 for x = 0): dividing by it is exact in floating point."""
    if x == 0 or not math.isfinite(x):
        return 1.0
    return math.ldexp(1.0, math.frexp(abs(x))[1] - 1)


def magnitude(*arrays: np.ndarray) -> float:
    """The largest |value| over the arrays (0 for empty ones)."""
    return max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)


def moderate(x: float) -> bool:
    """Whether a magnitude needs no rescaling: 0, or within (1/SAFE_MAGNITUDE, SAFE_MAGNITUDE)."""
    return x == 0.0 or 1.0 / SAFE_MAGNITUDE < x < SAFE_MAGNITUDE


def _times_square(out: np.ndarray, ratio: float, power: int) -> np.ndarray:
    """out · ratio^power in place for nonnegative ``out``, where ratio^power may overflow: an
    exact 0 stays 0 (equal points), anything else becomes inf, never NaN."""
    with np.errstate(over="ignore"):
        factor = np.float64(ratio) ** power
    if np.isinf(factor):
        out[...] = np.where(out > 0, np.inf, 0.0)
        return out
    with np.errstate(over="ignore", under="ignore"):
        out *= factor
    return out


def scaled_squared_distances(X: np.ndarray, Y: np.ndarray, sigma: float, factor: float = 1.0) -> np.ndarray:
    """‖x_i − y_j‖²/σ² for all pairs (times ``factor``, a power of two such as −0.5, so
    that the result is the same bit for bit as multiplying afterwards, without a pass),
    without overflow or underflow on the way.

    With moderate data and σ it is ``squared_distances(X, Y) * (1/σ²)``. Otherwise the data
    are divided by a power of two s near their magnitude (per magnitude group, so that
    a gross outlier leaves the ordinary pairs exact: :func:`_scaled`) and the result
    multiplied by (s/σ)²: a ratio beyond float64 becomes inf (exp(−inf) = 0 is then the
    kernel's exact value in float64), equal points still give exactly 0.
    """
    if moderate(magnitude(X, Y)) and moderate(sigma):
        # the scaling rides on the pass that completes the distances (same bits as after it)
        return squared_distances(X, Y, scale=factor * (1.0 / sigma**2))
    return _scaled(squared_distances, X, Y, sigma, 2, factor)


def exp_scaled_squared_distances(X: np.ndarray, Y: np.ndarray, sigma: float, factor: float = -0.5) -> np.ndarray:
    """exp(factor · ‖x_i − y_j‖²/σ²) for all pairs (the RBF kernel's values with the
    default factor, a negative power of two), without overflow or underflow on the way.

    With moderate data and σ, one compiled pass writes the tile
    (:func:`monk_framework.numerics.exp_loops.exp_squared_distance_tile`): the exponentials of
    ``scaled_squared_distances(X, Y, sigma, factor)``, bit for bit in the distances and
    within one unit in the last place of ``np.exp``. Otherwise ``np.exp`` of those.
    """
    if factor < 0 and moderate(magnitude(X, Y)) and moderate(sigma):
        return exp_squared_distance_tile(X, Y, factor * (1.0 / sigma**2), direct=X.shape[1] <= DIRECT_MAX_FEATURES)
    out = scaled_squared_distances(X, Y, sigma, factor)
    np.exp(out, out=out)
    return out


#: the span of one magnitude group, in powers of two (:func:`magnitude_groups`)
GROUP_BITS = 300


def magnitude_groups(A: np.ndarray) -> np.ndarray:
    """Each point's magnitude group: ⌊e / GROUP_BITS⌋ for the point's largest |coordinate|
    in [2^(e−1), 2^e) (0 for the zero point).

    Two points are divided by the power of two of the larger one's group block
    (:func:`_scaled`): within a group, and from one group to a smaller one, every nonzero
    coordinate difference then keeps its precision and its square stays above float64's
    smallest normal number (2^−352 and 2^−704 at worst, against 2^−1022), while a point
    of a much larger group is never divided by the ordinary points' scale.
    """
    mags = np.abs(A).max(axis=1) if A.size else np.zeros(len(A))
    return np.frexp(mags)[1] // GROUP_BITS


def _scaled(pairwise: Any, X: np.ndarray, Y: np.ndarray, sigma: float, power: int, factor: float = 1.0) -> np.ndarray:
    """pairwise(X, Y) / σ^power, which is homogeneous of degree ``power`` in the data:
    computed on data divided by an exact power of two when data or σ are extreme, and
    rescaled by (s/σ)^power without overflow (:func:`_times_square`).

    The power of two is chosen per block of magnitude groups (:func:`magnitude_groups`),
    not for the whole tile: one point of magnitude 1e200 among ordinary points is divided
    by its own scale, and the ordinary pairs keep theirs, so their distances stay exact
    instead of vanishing below float64's range. Data of one group take a single block:
    the values of a whole-tile scale, bit for bit.
    """
    scale = magnitude(X, Y)
    if moderate(scale) and moderate(sigma):
        out = pairwise(X, Y)
        out *= factor * (1.0 / sigma**power)  # factor · (1/σ^p) is exact for a power of two
        return out
    gx, gy = magnitude_groups(X), magnitude_groups(Y)
    row_groups, col_groups = np.unique(gx), np.unique(gy)
    if len(row_groups) <= 1 and len(col_groups) <= 1:
        out = _block_scaled(pairwise, X, Y, scale, sigma, power)
    else:
        out = np.empty((len(X), len(Y)))
        for a in row_groups:
            rows = np.flatnonzero(gx == a)
            for b in col_groups:
                cols = np.flatnonzero(gy == b)
                Xa, Yb = X[rows], Y[cols]
                out[np.ix_(rows, cols)] = _block_scaled(pairwise, Xa, Yb, magnitude(Xa, Yb), sigma, power)
    if factor != 1.0:
        out *= factor
    return out


def _block_scaled(pairwise: Any, X: np.ndarray, Y: np.ndarray, scale: float, sigma: float, power: int) -> np.ndarray:
    """pairwise(X/s, Y/s) · (s/σ)^power for s the power of two of ``scale``."""
    s = power_of_two(scale)
    return _times_square(pairwise(X / s, Y / s), np.float64(s) / np.float64(sigma), power)


def homogeneous_pairwise(pairwise: Any, X: np.ndarray, Y: np.ndarray, degree: int) -> np.ndarray:
    """``pairwise(X, Y)`` for a function of pairs homogeneous of degree ``degree``
    (pairwise(tX, tY) = t^degree · pairwise(X, Y) for t > 0, as the energy kernel is with
    degree 1), on data of any magnitude: computed per block of magnitude groups on data
    divided by an exact power of two and scaled back (:func:`_scaled`), so that one point
    at 1e200 leaves the ordinary pairs their digits. Moderate data are passed as given."""
    return _scaled(pairwise, X, Y, 1.0, degree)


def row_norms(X: np.ndarray) -> np.ndarray:
    """‖x_i‖ for every row, without overflow or underflow on the way: each row divided by
    the power of two of its largest |coordinate| first (exact), so a row of size 1e-200
    or 1e200 keeps its digits where Σ x² would leave 0 or inf."""
    X = np.asarray(X, dtype=np.float64)
    if not X.size:
        return np.zeros(len(X))
    largest = np.abs(X).max(axis=1)
    exponents = np.frexp(largest)[1] - 1
    scale = np.where(largest > 0, np.ldexp(1.0, exponents), 1.0)
    unit = X / scale[:, None]
    with np.errstate(over="ignore"):
        return scale * np.sqrt(np.einsum("ij,ij->i", unit, unit))


def scaled_distances(X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """‖x_i − y_j‖/σ for all pairs (see :func:`scaled_squared_distances`)."""
    return _scaled(distances, X, Y, sigma, 1)


def l1_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖₁ = Σ_k |x_ik − y_jk| for all pairs, as an ``(n, m)`` array (exact
    coordinate differences, no cancellation)."""
    from scipy.spatial.distance import cdist

    return np.asarray(cdist(X, Y, "cityblock"), dtype=np.float64)


def scaled_l1_distances(X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """‖x_i − y_j‖₁ / σ for all pairs, without overflow for data or σ near the float64 limits
    (as :func:`scaled_distances` does for the Euclidean norm)."""
    return _scaled(l1_distances, X, Y, sigma, 1)


def squared_distances(X: np.ndarray, Y: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
    """‖x_i − y_j‖² · ``scale`` for all pairs, as an ``(n, m)`` array.

    For few features it sums squared coordinate differences (exact); otherwise it uses
    the BLAS identity ‖x‖² + ‖y‖² − 2⟨x, y⟩ on centred data, completed, clipped at 0 and
    scaled in one pass. Either way the values are those of ``squared_distances(X, Y) *
    scale``, bit for bit.
    """
    if X.shape[1] <= DIRECT_MAX_FEATURES:
        out = np.subtract.outer(X[:, 0], Y[:, 0])
        np.square(out, out=out)
        for k in range(1, X.shape[1]):
            diff = np.subtract.outer(X[:, k], Y[:, k])
            np.square(diff, out=diff)
            out += diff
        if scale != 1.0:
            out *= scale
        return out
    return centred_identity(X, Y, scale)[0]


def refined_squared_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖² for all pairs, with close pairs recomputed from differences.

    The BLAS identity loses digits to cancellation for close pairs (and the square root
    amplifies that error), so those pairs (a small fraction in practice) are recomputed.
    """
    if X.shape[1] <= DIRECT_MAX_FEATURES:
        return squared_distances(X, Y)
    out, nx, ny = centred_identity(X, Y)
    # candidates first, against a per-row bound (one pass, no n × m temporary): rounding is
    # monotone, so r·(‖x‖² + max‖y‖²) bounds every r·(‖x‖² + ‖y‖²) of the row and the exact
    # test below, on the candidates only, selects the same pairs as on the whole matrix
    rows, cols = np.nonzero(out < (REFINE_RATIO * (nx + ny.max(initial=0.0)))[:, None])
    close = out[rows, cols] < REFINE_RATIO * (nx[rows] + ny[cols])
    rows, cols = rows[close], cols[close]
    if rows.size:
        diff = X[rows] - Y[cols]
        out[rows, cols] = np.einsum("ij,ij->i", diff, diff)
    return out


def distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖ for all pairs, accurate to a few ulps even for near-duplicate points."""
    out = refined_squared_distances(X, Y)
    np.sqrt(out, out=out)
    return out


def order_statistics(values: np.ndarray, first: int, last: int) -> np.ndarray:
    """The ``first``-th to ``last``-th smallest of ``values`` (0-based, inclusive), exactly.

    Selection over all values (np.partition) is the cost of the median heuristic; here
    a strided sample of about 16 000 values brackets the wanted ranks, [lo, hi], one pass
    counts the values below lo, and only the values inside the bracket are selected. The
    counts prove the bracket right (below ≤ first and last < below + |bracket|); when
    they do not, the whole array is selected. Same numbers either way, about 5x faster.
    """
    if len(values) // BRACKET_SAMPLE > 4:
        found = select_in_bracket([values], first, last, *bracket([values], first, last))
        if found is not None:
            return found
    ranks = np.arange(first, last + 1)
    return np.partition(values, ranks)[ranks]


#: values in the strided sample that brackets an order statistic
BRACKET_SAMPLE = 16384


def bracket(parts: list[np.ndarray], first: int, last: int) -> tuple[float, float]:
    """[lo, hi] that holds the ``first``-th to ``last``-th smallest of the union of
    ``parts`` with high probability, from a strided sample of about BRACKET_SAMPLE values."""
    total = sum(len(p) for p in parts)
    stride = max(1, total // BRACKET_SAMPLE)
    sample = np.sort(np.concatenate([p[::stride] for p in parts]))
    at = len(sample) * np.array([first, last]) // total
    margin = 4 * int(math.isqrt(len(sample))) + 2  # about 8 standard deviations of a sample rank
    return sample[max(int(at[0]) - margin, 0)], sample[min(int(at[1]) + margin, len(sample) - 1)]


def select_in_bracket(parts: list[np.ndarray], first: int, last: int, lo: float, hi: float) -> np.ndarray | None:
    """The ``first``-th to ``last``-th smallest of the union of ``parts`` if the counts
    prove they lie in [lo, hi] (one counting pass, a selection inside), else None."""
    below = sum(int(np.count_nonzero(p < lo)) for p in parts)
    inside = np.concatenate([p[(p >= lo) & (p <= hi)] for p in parts])
    if not (below <= first and last < below + len(inside)):
        return None
    ranks = np.arange(first, last + 1) - below
    inside.partition(ranks)
    return inside[ranks]
