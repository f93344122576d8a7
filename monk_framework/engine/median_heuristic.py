"""The median heuristic: the median pairwise distance of a pooled sample.

It is a reduction over all pairs, so it runs in bands of rows on the engine's threads
(:func:`monk_framework.engine.kernel_values.on_cores`); the numbers do not depend on
how many threads ran.
"""

from __future__ import annotations

import math

import numpy as np

from monk_framework.core.errors import DataError, KernelOverflowError, ParameterError
from monk_framework.engine.kernel_values import on_cores
from monk_framework.engine.memory import chunk_rows
from monk_framework.numerics.distances import (
    DIRECT_MAX_FEATURES,
    REFINE_RATIO,
    bracket,
    centred_identity,
    l1_distances,
    magnitude,
    moderate,
    order_statistics,
    refined_squared_distances,
    scaled_distances,
    scaled_l1_distances,
    select_in_bracket,
)

__all__ = ["MEDIAN_MAX_POINTS", "median_distance", "median_points"]

#: the median heuristic uses at most this many pooled points (a fixed-seed subsample).
MEDIAN_MAX_POINTS = 2000


def median_points(Z: np.ndarray) -> np.ndarray:
    """The pooled points the median heuristic reads: all of them, or above
    :data:`MEDIAN_MAX_POINTS` a subsample of that many positions drawn with a fixed seed
    (so at most r of them are any r given points)."""
    if len(Z) <= MEDIAN_MAX_POINTS:
        return Z
    return Z[np.sort(np.random.default_rng(0).choice(len(Z), MEDIAN_MAX_POINTS, replace=False))]


def median_distance(X: np.ndarray, Y: np.ndarray | None = None, *, metric: str = "l2") -> float:
    """The median heuristic: the median of ‖z_i − z_j‖ over pairs i < j of Z = X ∪ Y
    (the Euclidean norm, or the L1 norm with ``metric="l1"``).

    Above :data:`MEDIAN_MAX_POINTS` pooled points, the median is taken over a subsample
    of that many points drawn with a fixed seed, so the value depends on the data only.
    """
    Z = X if Y is None else np.vstack([X, Y])
    if len(Z) < 2:
        raise DataError("The median heuristic needs at least 2 pooled points.")
    Z = median_points(Z)
    if metric not in ("l2", "l1"):
        raise ParameterError(f"median_distance: metric must be 'l2' or 'l1'; got {metric!r}.")
    scale = magnitude(Z)
    if moderate(scale):
        value = _median_pair_distance(Z, metric)
    else:
        value = _scaled_median_pair_distance(Z, metric)
    if not math.isfinite(value):
        raise KernelOverflowError(
            f"The median heuristic overflows float64: the median pairwise distance of these data "
            f"(of magnitude {scale:.3g}) exceeds {np.finfo(np.float64).max:.3g}. Rescale the data."
        )
    if value <= 0.0:
        raise DataError(
            f"The median heuristic gives sigma = 0: more than half of the pooled pairwise distances are zero (many repeated points{_nonzero_hint(Z, metric)}"
        )
    return value


def _nonzero_hint(Z: np.ndarray, metric: str) -> str:
    """The end of the sigma = 0 message: the share of zero distances and the median of the
    others, a usual choice on data with repeated values (binary or categorical data)."""
    from scipy.spatial.distance import pdist

    with np.errstate(over="ignore", invalid="ignore"):
        d = pdist(Z.reshape(len(Z), -1), "cityblock" if metric == "l1" else "euclidean")
    nonzero = d[d > 0]
    if not len(nonzero):
        return ": all pooled points are equal, so every MMD is 0 whatever sigma). Pass sigma explicitly."
    if not np.all(np.isfinite(nonzero)):
        return "). Pass sigma explicitly."
    share = 1.0 - len(nonzero) / len(d)
    return f": {share:.0%} of the pairs). Pass sigma explicitly, for instance the median of the nonzero distances: sigma={float(np.median(nonzero)):.4g}."


def _median_pair_distance(Z: np.ndarray, metric: str = "l2") -> float:
    """The median of ‖z_i − z_j‖ over i < j: the upper triangle only, in row bands.

    The square root is monotone, so the Euclidean median is taken on squared distances
    (the one or two middle order statistics by selection) and only those get a square
    root; L1 distances are used as they are.
    """
    n = len(Z)
    step = chunk_rows(8 * n)
    if metric == "l2" and Z.shape[1] > DIRECT_MAX_FEATURES:
        found = _bracketed_median(Z, step)
        if found is not None:
            return found
    band_of = refined_squared_distances if metric == "l2" else l1_distances
    root = np.sqrt if metric == "l2" else (lambda v: v)

    def pairs(start: int, stop: int) -> np.ndarray:
        band = band_of(Z[start:stop], Z[start:])
        # the entries right of the diagonal, row by row (column j > row i): row slices
        # are views, and copying them is about 4x faster than a boolean mask
        return np.concatenate([band[i, i + 1 :] for i in range(stop - start)])

    values = np.concatenate(on_cores(pairs, [(start, min(start + step, n - 1)) for start in range(0, n - 1, step)]))
    k = (len(values) - 1) // 2
    if len(values) % 2:
        return float(root(order_statistics(values, k, k)[0]))
    low, high = order_statistics(values, k, k + 1)
    return float((root(low) + root(high)) / 2.0)


def _scaled_median_pair_distance(Z: np.ndarray, metric: str) -> float:
    """The median of :func:`_median_pair_distance` for data of extreme magnitude: every
    pair's distance from data divided by the power of two of its magnitude group
    (:func:`monk_framework.numerics.distances.magnitude_groups`), so that a few gross
    outliers leave the ordinary pairs' distances exact (one scale for all would make
    them 0). An infinite value is a distance beyond float64."""
    D = scaled_distances(Z, Z, 1.0) if metric == "l2" else scaled_l1_distances(Z, Z, 1.0)
    values = D[np.triu_indices(len(Z), 1)]
    k = (len(values) - 1) // 2
    if len(values) % 2:
        return float(order_statistics(values, k, k)[0])
    low, high = order_statistics(values, k, k + 1)
    with np.errstate(over="ignore"):
        return float((low + high) / 2.0)


def _bracketed_median(Z: np.ndarray, step: int) -> float | None:
    """The Euclidean median of :func:`_median_pair_distance`, bit for bit, without
    refining close pairs or gathering the upper triangle, when that is provably the same.

    The bands of squared distances by the BLAS identity are kept as they are (the entries
    on and below the diagonal set to +inf, which rank after every pair) and the middle
    order statistics are bracketed on them as in :func:`order_statistics`. Refinement
    only changes pairs whose squared distance is below REFINE_RATIO·(‖x‖² + ‖y‖²), and
    changes them by round-off; when every such bound lies below the bracket, refined and
    unrefined bands agree on the count below it and on every value inside it, so the
    median is the refined one. Returns None when that is not proved (the caller then
    takes the general path).
    """
    n = len(Z)
    m = n * (n - 1) // 2
    if m < 1 << 16:
        return None
    k, last = (m - 1) // 2, m // 2

    def band_and_bound(start: int, stop: int) -> tuple[np.ndarray, float]:
        band, nx, ny = centred_identity(Z[start:stop], Z[start:])
        band[np.tril_indices(stop - start)] = np.inf  # the diagonal and below: not pairs i < j
        return band.ravel(), float(REFINE_RATIO * (nx.max() + ny.max()))

    found_bands = on_cores(band_and_bound, [(start, min(start + step, n - 1)) for start in range(0, n - 1, step)])
    bands = [band for band, _ in found_bands]
    bound = max(b for _, b in found_bands)
    lo, hi = bracket(bands, k, last)
    if not (np.isfinite(hi) and bound * (1 + 1e-6) < lo):
        return None
    found = select_in_bracket(bands, k, last, lo, hi)
    if found is None:
        return None
    low, high = np.sqrt(found[0]), np.sqrt(found[-1])
    return float(low) if m % 2 else float((low + high) / 2.0)
