"""Reductions of a Gram matrix that estimators share: per-block trace variances, and the
kernel sums of two samples, in tiles (or stored, for a kernel computed whole)."""

from __future__ import annotations

import time
import warnings
from typing import Any, cast

import attrs
import numpy as np
import scipy.sparse as sp

from monk_framework.core.errors import KernelOverflowError, PrecisionWarning
from monk_framework.core.kernels import Kernel
from monk_framework.core.protocols import GramMatrix
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample, take
from monk_framework.engine.backends import in_this_process
from monk_framework.engine.kernel_sums import feature_sums, paying_features
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.engine.memory import chunk_rows
from monk_framework.engine.spread import spread_kernel_sums

__all__ = [
    "DIAGONAL_DOMINANCE",
    "DIAGONAL_ROUND_OFF_LIMIT",
    "EXACT_ESTIMATE_POINTS",
    "EXACT_TEST_POINTS",
    "KernelSums",
    "SPLIT_MAX_POINTS",
    "block_trace_variances",
    "diagonal_round_off",
    "kernel_sums",
    "loses_to_diagonal",
    "off_diagonal",
    "squared_kernel_sum",
    "u_statistic",
    "warn_lost_to_diagonal",
]

#: pooled points up to which an estimate whose feature sums lose digits to the diagonal
#: takes the (N + M)² kernel values instead (10⁵ + 10⁵: 9–14 s); beyond, it keeps
#: the fast value and says so (:func:`warn_lost_to_diagonal`)
EXACT_ESTIMATE_POINTS = 200_000
#: the same for a test, whose every batch of relabellings is then summed again from all
#: the kernel values, two products a band (10⁴ + 10⁴ points, B = 1000: 37 s)
EXACT_TEST_POINTS = 20_000

#: the relative round-off, of a U-statistic computed as S_xx − tr_x, beyond which its sums
#: are taken again without the diagonal
DIAGONAL_ROUND_OFF_LIMIT = 1e-9


@attrs.frozen
class KernelSums:
    """Σ_ij k(x_i, x_j), Σ_ij k(y_i, y_j), Σ_ij k(x_i, y_j), the traces Σ_i k(x_i, x_i)
    and Σ_j k(y_j, y_j), the largest k(z, z), whether they came from tiles, and the
    seconds spent. An estimator's ``mmd2_from_sums`` reads the first five, and
    ``xx_off`` and ``yy_off`` where given: Σ_{i≠j} k(x_i, x_j) and Σ_{i≠j} k(y_i, y_j)
    summed without the diagonal (:func:`off_diagonal`)."""

    xx: float
    yy: float
    xy: float
    trace_x: float
    trace_y: float
    max_diag: float
    tiled: bool
    seconds: float
    #: whether they came from the kernel's explicit features (:func:`~monk_framework.core.kernels.paying_features`)
    features: bool = False
    xx_off: float | None = None
    yy_off: float | None = None


def kernel_sums(kernel: Kernel, X: Sample, Y: Sample, *, resources: Resources, without_diagonal: bool = False) -> KernelSums:
    """The kernel sums of two validated samples, from tiles of rows computed on the fly and
    dropped at once (on the workers, when ``resources`` spreads over a remote backend);
    for a kernel that computes its Gram matrix whole (:meth:`Kernel.computes_gram_whole`,
    the SSK), from the stored Gram matrix of the pooled sample when it fits in the budget;
    for a kernel with a few explicit features (the linear and polynomial kernels), from
    their sums (:func:`~monk_framework.core.kernels.paying_features`).

    Tiles never write a matrix: from a few hundred points they are 3–4 times faster than
    stored matrices summed afterwards, in memory that does not grow with n² (a test's
    pooled Gram matrix, which all B relabellings read, is another matter).

    Tiled, Σ k(x_i, x_j) takes each row band's diagonal block once and the band right of
    it twice (the kernel is symmetric), and the traces come from ``diag_tile``: the same
    sums up to the order of the additions (relative round-off about 1e-15). Each
    diagonal block is checked against the kernel contract, as in ``gram(X)``.

    Tiles and a stored matrix also give the sums without the diagonal (``xx_off``,
    ``yy_off``), added up without it. Features cannot: ‖Σφ(x)‖² holds the diagonal.
    ``without_diagonal`` (the U-statistic) takes the tiles instead when subtracting it
    would cost digits (:func:`loses_to_diagonal`).
    """
    start = time.perf_counter()
    n, m = len(X), len(Y)
    features = paying_features(kernel, (X, Y), resources)
    # beyond the budget, the sums of the features in blocks of rows: the same O((N + M) D)
    summed = None if features is not None else feature_sums(kernel, (X, Y), resources)
    if features is not None or summed is not None:
        # ‖Σφ(x)‖², ‖Σφ(y)‖², ⟨Σφ(x), Σφ(y)⟩: O((N + M) D), no kernel value between points
        sx, sy = [f.sum(axis=0) for f in features] if features is not None else summed  # type: ignore[misc]
        dx, dy = kernel.diag_tile(X), kernel.diag_tile(Y)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is refused below
            sums = KernelSums(
                xx=float(sx @ sx),
                yy=float(sy @ sy),
                xy=float(sx @ sy),
                trace_x=float(dx.sum()),
                trace_y=float(dy.sum()),
                max_diag=float(max(dx.max(initial=0.0), dy.max(initial=0.0))),
                tiled=False,
                seconds=time.perf_counter() - start,
                features=True,
            )
        sums = _finite(kernel, sums, sums.max_diag)
        if not (without_diagonal and loses_to_diagonal(sums, u_statistic(sums, n, m), n, m)):
            return sums
        # an unbounded kernel whose k(z, z) dwarfs its values between points (a gross
        # outlier with a polynomial kernel): its few largest points apart, O((N + M) D)
        split = _split_off_diagonal(kernel, X, Y, dx, dy, features, resources, sums)
        if split is not None or n + m > EXACT_ESTIMATE_POINTS:
            return split if split is not None else sums
        # more of them than pays: the tiles, O((N + M)²), but right
    # spread over workers (which never receive a Gram matrix), or stored when it fits
    elif resources.spread is None and kernel.computes_gram_whole() and resources.fits(8.0 * (n + m) ** 2):
        # one symmetric Gram matrix of the pooled sample, its three blocks read in place: a
        # kernel computed whole builds each point's tables once (three matrices built X's
        # and Y's twice: 7.6 s against 3.6 s for 200 + 200 DNA strings of 20 000 letters)
        Z: Sample = np.concatenate([X, Y]) if isinstance(X, np.ndarray) else [*X, *Y]
        K = gram_matrix(kernel, Z, report=None if resources.progress is None else resources.report)
        Kxx, Kyy, Kxy = K[:n, :n], K[n:, n:], K[:n, n:]
        d = np.diag(K).copy()
        # the largest |value| without a temporary the size of the matrix
        largest = max(float(K.max(initial=0.0)), -float(K.min(initial=0.0)))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is refused below
            xx, yy = float(Kxx.sum()), float(Kyy.sum())
            np.fill_diagonal(K, 0.0)  # K is this call's own: the sums without the diagonal, added up without it
            sums = KernelSums(
                xx=xx,
                yy=yy,
                xy=float(Kxy.sum()),
                trace_x=float(d[:n].sum()),
                trace_y=float(d[n:].sum()),
                max_diag=float(d.max()),
                tiled=False,
                seconds=time.perf_counter() - start,
                xx_off=float(Kxx.sum()),
                yy_off=float(Kyy.sum()),
            )
        return _finite(kernel, sums, largest)
    # bands of rows, each reduced in column tiles that stay in cache (and well within the
    # budget); on the workers of a spreading backend, else here
    dx, dy = kernel.diag_tile(X), kernel.diag_tile(Y)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is refused below
        spread = spread_kernel_sums(kernel, X, Y, dx, dy, resources.spread or in_this_process(), report=resources.report)
        sums = KernelSums(
            xx=spread.xx,
            yy=spread.yy,
            xy=spread.xy,
            trace_x=float(dx.sum()),
            trace_y=float(dy.sum()),
            max_diag=float(max(dx.max(initial=0.0), dy.max(initial=0.0))),
            tiled=True,
            seconds=time.perf_counter() - start,
            xx_off=spread.xx_off,
            yy_off=spread.yy_off,
        )
    # |k(x, y)| <= the largest k(z, z) for a PSD kernel: the size of the values that overflowed
    return _finite(kernel, sums, sums.max_diag)


#: at most this many of the points with the largest k(z, z) are taken apart from the
#: feature sums (:func:`_split_off_diagonal`): each costs N + M kernel values
SPLIT_MAX_POINTS = 256


def _split_off_diagonal(
    kernel: Kernel, X: Sample, Y: Sample, dx: np.ndarray, dy: np.ndarray, features: list[np.ndarray] | None, resources: Resources, sums: KernelSums
) -> KernelSums | None:
    """The U-statistic's sums without the diagonal when feature sums lose digits to it,
    with the h points of largest k(z, z) taken apart (h = 1, 2, 4, … up to
    :data:`SPLIT_MAX_POINTS`): the rest's sums from their features, Σ_{i≠j} over them as
    ‖Σφ‖² − tr, whose diagonal no longer dwarfs anything; the pairs with a point apart
    from its kernel values (h rows of N + M, in chunks), the diagonal left out before
    summing. None when even SPLIT_MAX_POINTS points apart leave the rest's round-off
    above DIAGONAL_ROUND_OFF_LIMIT of the value (or they would be a quarter of the points).
    """
    n, m = len(X), len(Y)
    order = np.argsort(-np.concatenate([dx, dy]), kind="stable")
    h = 1
    while h <= min(SPLIT_MAX_POINTS, (n + m) // 4):
        apart = order[:h]
        hx, hy = np.sort(apart[apart < n]), np.sort(apart[apart >= n] - n)
        keep_x, keep_y = np.ones(n, dtype=bool), np.ones(m, dtype=bool)
        keep_x[hx], keep_y[hy] = False, False
        if features is not None:
            sx, sy = features[0][keep_x].sum(axis=0), features[1][keep_y].sum(axis=0)
        else:
            summed = feature_sums(kernel, (X, Y), resources, leave_out=(hx, hy))
            assert summed is not None  # the same plan that gave the sums
            sx, sy = summed
        tx, ty = float(dx[keep_x].sum()), float(dy[keep_y].sum())
        ax, ay = _rows_apart(kernel, X, hx, X, keep_x), _rows_apart(kernel, Y, hy, Y, keep_y)
        axy, ayx = _rows_apart(kernel, X, hx, Y, keep_y), _rows_apart(kernel, Y, hy, X, keep_x)
        with np.errstate(over="ignore", invalid="ignore"):
            split = attrs.evolve(
                sums,
                xy=float(sx @ sy) + axy[0] + ayx[0] + axy[2],
                xx_off=float(sx @ sx) - tx + 2.0 * ax[0] + ax[1],
                yy_off=float(sy @ sy) - ty + 2.0 * ay[0] + ay[1],
            )
            mmd2 = u_statistic(split, n, m)
        if not np.isfinite(np.array([split.xx_off, split.yy_off, split.xy], dtype=float)).all():
            return None
        if diagonal_round_off(tx, ty, n, m) <= DIAGONAL_ROUND_OFF_LIMIT * abs(mmd2):
            return split
        h *= 2
    return None


def _rows_apart(kernel: Kernel, A: Sample, rows: np.ndarray, B: Sample, keep: np.ndarray) -> tuple[float, float, float]:
    """For the points A[rows] taken apart and the sample B with the mask ``keep`` of the
    points not apart: (Σ over kept columns, Σ over the columns apart with the diagonal
    left out, Σ over the columns apart with it), of k(A[rows], B), in chunks of columns.
    With A and B the same sample the second is Σ_{h≠h'} k(a_h, a_h'); across samples the
    third is the pairs of points apart on both sides."""
    if not len(rows):
        return 0.0, 0.0, 0.0
    cols = chunk_rows(8 * len(rows))
    kept = 0.0
    for c in range(0, len(B), cols):
        tile = kernel.gram_tile(take(A, rows), take(B, np.arange(c, min(c + cols, len(B)))))
        kept += float(tile[:, keep[c : c + cols]].sum())
    among = kernel.gram_tile(take(A, rows), take(B, np.flatnonzero(~keep)))
    across = float(among.sum())
    if among.shape[0] == among.shape[1] and A is B:
        np.fill_diagonal(among, 0.0)
    return kept, float(among.sum()), across


def off_diagonal(sums: Any) -> tuple[Any, Any]:
    """(Σ_{i≠j} k(x_i, x_j), Σ_{i≠j} k(y_i, y_j)) of kernel sums: ``xx_off`` and ``yy_off``
    where they were summed without the diagonal, else S_xx − tr_x and S_yy − tr_y."""
    xx_off, yy_off = getattr(sums, "xx_off", None), getattr(sums, "yy_off", None)
    return (sums.xx - sums.trace_x if xx_off is None else xx_off, sums.yy - sums.trace_y if yy_off is None else yy_off)


def u_statistic(sums: Any, n: Any, m: Any) -> Any:
    """MMD_U² = Σ_{i≠j} k(x_i, x_j)/(N(N−1)) + Σ_{i≠j} k(y_i, y_j)/(M(M−1)) − 2 S_xy/(NM)
    from kernel sums: their sums without the diagonal where given, else S_xx − tr_x and
    S_yy − tr_y (:func:`off_diagonal`); elementwise over arrays."""
    xx_off, yy_off = off_diagonal(sums)
    return xx_off / (n * (n - 1)) + yy_off / (m * (m - 1)) - 2.0 * sums.xy / (n * m)


def diagonal_round_off(trace_x: Any, trace_y: Any, n: Any, m: Any) -> Any:
    """10 ε (tr_x/(N(N − 1)) + tr_y/(M(M − 1))): the round-off that subtracting these
    traces from sums holding them may leave in MMD_U² (:func:`loses_to_diagonal`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 10.0 * float(np.finfo(float).eps) * (np.maximum(trace_x, 0.0) / (n * (n - 1)) + np.maximum(trace_y, 0.0) / (m * (m - 1)))


def _finite(kernel: Kernel, sums: KernelSums, largest: float) -> KernelSums:
    """``sums`` if all five are finite; else a :class:`KernelOverflowError` that says why:
    every kernel value is finite (the tiles were checked), but their sums over the sample
    are beyond float64."""
    if all(np.isfinite([sums.xx, sums.yy, sums.xy, sums.trace_x, sums.trace_y])):
        return sums
    raise KernelOverflowError(
        f"Kernel {kernel.spec()} has values up to about {largest:.3g}: each is finite, but their sums over the "
        "samples overflow float64. Scale the kernel (or the data) down."
    )


def squared_kernel_sum(kernel: Kernel, Z: Sample, *, resources: Resources) -> float:
    """Σ_{i≠j} k(z_i, z_j)² over the pooled points, in row bands of at most half the
    memory budget: the diagonal is left out before the sum, not subtracted after it (an
    unbounded kernel's k(z, z)² can dwarf every value between points)."""
    size = len(Z)
    rows = chunk_rows(8 * max(size, 1), share=0.5, at_most=size, resources=resources)
    total = 0.0
    for a in range(0, size, rows):
        b = min(a + rows, size)
        tile = kernel.gram_tile(take(Z, np.arange(a, b)), Z)
        tile[np.arange(b - a), np.arange(a, b)] = 0.0
        total += float(np.einsum("ij,ij->", tile, tile))
    return total


def block_trace_variances(source: GramMatrix, labels: np.ndarray, n_blocks: int, diag: np.ndarray) -> np.ndarray:
    """Per-block trace variance of φ: mean_{S_q} k(x, x) − ‖μ_{S_q}‖², made unbiased.

    ``labels`` gives the block of each point of the source's sample (blocks of X and Y
    may be told apart by distinct labels); the factor |S_q|/(|S_q| − 1) removes the
    within-block bias. Its median over blocks is a robust scale (Lepski's radii).
    """
    sizes = np.bincount(labels, minlength=n_blocks).astype(float)
    W = sp.csr_array((1.0 / sizes[labels], (np.arange(len(labels)), labels)), shape=(len(labels), n_blocks))
    M = source.block_gram(W)
    mean_diag = np.bincount(labels, weights=diag, minlength=n_blocks) / sizes
    return cast(np.ndarray, np.maximum(mean_diag - np.diag(M), 0.0) * sizes / np.maximum(sizes - 1, 1))


#: how far the mean k(z, z) must exceed every mean between points before a U-statistic's
#: round-off is blamed on the diagonal (a kernel that barely varies has its own warning)
DIAGONAL_DOMINANCE = 1e6


def loses_to_diagonal(sums: Any, mmd2: Any, n: Any, m: Any) -> Any:
    """Whether MMD_U² = ``mmd2``, computed as S_xx − tr_x (and S_yy − tr_y) from sums
    that hold the diagonal, may have lost its digits to it (elementwise over arrays).

    S_xx − tr_x carries a round-off of about ε tr_x (ε = 2⁻⁵²; taken 10 times, for the
    sums of N² values and of features), so MMD_U² carries r = 10 ε (tr_x/(N(N − 1)) +
    tr_y/(M(M − 1))). On ordinary data r is ε times the kernel's scale over N, below the
    statistic's own fluctuation. Not when an unbounded kernel makes k(z, z) dwarf every
    value between points: with the exponential kernel exp(⟨x, y⟩/σ²) at σ = 0.2, a point
    at −2.7 has k(x, x) ≈ 10⁸¹ where its largest value with another point is 10³⁶, and
    MMD_U² came out −5.9·10³³ where it is −3.2·10³³; one gross outlier does the same to a
    polynomial kernel (the quadratic kernel's MMD_U² was 2.9 times its value with one
    point at 10⁸ among 600, and off by 10⁻⁵ with one at 10⁶). True when the mean k(z, z)
    exceeds :data:`DIAGONAL_DOMINANCE` times each of the statistic's three means (within
    X, within Y, across) and r exceeds :data:`DIAGONAL_ROUND_OFF_LIMIT` of |MMD_U²|: the
    sums are then taken again without the diagonal.
    """
    tx, ty = np.maximum(sums.trace_x, 0.0), np.maximum(sums.trace_y, 0.0)
    round_off = diagonal_round_off(tx, ty, n, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.maximum.reduce([np.abs(sums.xx - sums.trace_x) / (n * (n - 1)), np.abs(sums.yy - sums.trace_y) / (m * (m - 1)), np.abs(sums.xy) / (n * m)])
        mean_diag = (tx + ty) / (n + m)
        # every value between points 0 (a bandwidth far below the data's scale): the sums are
        # exact, and the kernel's own warning says what it sees
        lost = (np.minimum(n, m) >= 2) & (scale > 0.0) & (mean_diag > DIAGONAL_DOMINANCE * scale) & (round_off > DIAGONAL_ROUND_OFF_LIMIT * np.abs(mmd2))
    return lost if np.ndim(lost) else bool(lost)


def warn_lost_to_diagonal(kernel: Kernel, sums: Any, mmd2: Any, n: int, m: int, limit: int) -> bool:
    """Warn (:class:`PrecisionWarning`) when MMD_U² = ``mmd2`` came from sums that hold the
    diagonal and lost digits to it (:func:`loses_to_diagonal`, for any of the values
    given), because the N + M pooled points exceed ``limit``, beyond which summing all the
    kernel values without the diagonal would take too long. Returns whether it warned."""
    lost = np.asarray(loses_to_diagonal(sums, mmd2, n, m))
    if not lost.any():
        return False
    round_off = diagonal_round_off(sums.trace_x, sums.trace_y, n, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.max(np.where(lost, round_off / np.abs(mmd2), 0.0)))
    size = "any size (its value is 0)" if not np.isfinite(ratio) else (f"up to {ratio:.1g} {'times' if ratio >= 1.0 else 'of'} its value")
    warnings.warn(
        PrecisionWarning(
            f"{kernel.spec()} is far larger on the diagonal, k(z, z), than between these points, and the U-statistic, which "
            f"leaves the diagonal out, can carry a round-off of {size}: summing it without the diagonal would take all "
            f"({n + m:,})² kernel values, beyond the {limit:,} points where it does. Use the V-statistic (v-stat), which "
            "keeps the diagonal, a bounded kernel (rbf, laplace), or parameters for the data's scale."
        ),
        stacklevel=3,
    )
    return True
