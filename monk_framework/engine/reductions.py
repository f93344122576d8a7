"""Reductions of a Gram matrix that estimators share: per-block trace variances, and the
kernel sums of two samples, in tiles (or stored, for a kernel computed whole)."""

from __future__ import annotations

import time
import warnings

import attrs
import numpy as np
import scipy.sparse as sp

from monk_framework.core.errors import KernelOverflowError, PrecisionWarning
from monk_framework.core.kernels import Kernel, feature_sums, paying_features
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample
from monk_framework.engine.backends import in_this_process
from monk_framework.engine.gram_sources import GramSource
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.engine.spread import spread_kernel_sums

__all__ = ["DIAGONAL_DOMINANCE", "DIAGONAL_ROUND_OFF_LIMIT", "KernelSums", "block_trace_variances", "kernel_sums", "warn_if_diagonal_dominates"]

#: the relative round-off of a sum without its diagonal beyond which it is said
DIAGONAL_ROUND_OFF_LIMIT = 1e-6


@attrs.frozen
class KernelSums:
    """Σ_ij k(x_i, x_j), Σ_ij k(y_i, y_j), Σ_ij k(x_i, y_j), the traces Σ_i k(x_i, x_i)
    and Σ_j k(y_j, y_j), the largest k(z, z), whether they came from tiles, and the
    seconds spent. An estimator's ``mmd2_from_sums`` reads the first five."""

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


def kernel_sums(kernel: Kernel, X: Sample, Y: Sample, *, resources: Resources) -> KernelSums:
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
                xx=float(sx @ sx), yy=float(sy @ sy), xy=float(sx @ sy), trace_x=float(dx.sum()), trace_y=float(dy.sum()),
                max_diag=float(max(dx.max(initial=0.0), dy.max(initial=0.0))), tiled=False,
                seconds=time.perf_counter() - start, features=True,
            )
        return _finite(kernel, sums, sums.max_diag)
    # spread over workers (which never receive a Gram matrix), or stored when it fits
    if resources.spread is None and kernel.computes_gram_whole() and resources.fits(8.0 * (n + m) ** 2):
        # one symmetric Gram matrix of the pooled sample, its three blocks read in place: a
        # kernel computed whole builds each point's tables once (three matrices built X's
        # and Y's twice: 7.6 s against 3.6 s for 200 + 200 DNA strings of 20 000 letters)
        Z: Sample = np.concatenate([X, Y]) if isinstance(X, np.ndarray) else [*X, *Y]
        K = gram_matrix(kernel, Z, report=None if resources.progress is None else resources.report)
        Kxx, Kyy, Kxy = K[:n, :n], K[n:, n:], K[:n, n:]
        d = np.diag(K)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is refused below
            sums = KernelSums(
                xx=float(Kxx.sum()), yy=float(Kyy.sum()), xy=float(Kxy.sum()), trace_x=float(d[:n].sum()),
                trace_y=float(d[n:].sum()), max_diag=float(d.max()), tiled=False, seconds=time.perf_counter() - start,
            )
        # the largest |value| without a temporary the size of the matrix
        largest = max(float(K.max(initial=0.0)), -float(K.min(initial=0.0)))
        return _finite(kernel, sums, largest)
    # bands of rows, each reduced in column tiles that stay in cache (and well within the
    # budget); on the workers of a spreading backend, else here
    dx, dy = kernel.diag_tile(X), kernel.diag_tile(Y)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is refused below
        xx, yy, xy = spread_kernel_sums(kernel, X, Y, dx, dy, resources.spread or in_this_process(), report=resources.report)
        sums = KernelSums(
            xx=xx, yy=yy, xy=xy, trace_x=float(dx.sum()), trace_y=float(dy.sum()),
            max_diag=float(max(dx.max(initial=0.0), dy.max(initial=0.0))), tiled=True,
            seconds=time.perf_counter() - start,
        )
    # |k(x, y)| <= the largest k(z, z) for a PSD kernel: the size of the values that overflowed
    return _finite(kernel, sums, sums.max_diag)


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


def block_trace_variances(
    source: GramSource, labels: np.ndarray, n_blocks: int, diag: np.ndarray
) -> np.ndarray:
    """Per-block trace variance of φ: mean_{S_q} k(x, x) − ‖μ_{S_q}‖², made unbiased.

    ``labels`` gives the block of each point of the source's sample (blocks of X and Y
    may be told apart by distinct labels); the factor |S_q|/(|S_q| − 1) removes the
    within-block bias. Its median over blocks is a robust scale (Lepski's radii).
    """
    sizes = np.bincount(labels, minlength=n_blocks).astype(float)
    W = sp.csr_array((1.0 / sizes[labels], (np.arange(len(labels)), labels)), shape=(len(labels), n_blocks))
    M = source.block_gram(W)
    mean_diag = np.bincount(labels, weights=diag, minlength=n_blocks) / sizes
    return np.maximum(mean_diag - np.diag(M), 0.0) * sizes / np.maximum(sizes - 1, 1)


#: how far the mean k(z, z) must exceed every mean between points before a U-statistic's
#: round-off is blamed on the diagonal (a kernel that barely varies has its own warning)
DIAGONAL_DOMINANCE = 1e6


def warn_if_diagonal_dominates(
    kernel: Kernel, sums: KernelSums, mmd2: float, n: int, m: int, *, stacklevel: int = 2
) -> None:
    """Warn (:class:`PrecisionWarning`) when the kernel's values on the diagonal dwarf
    those between points, so that the U-statistic MMD_U² = ``mmd2``, which leaves the
    diagonal out, loses its digits to it.

    S_xx holds tr_x = Σ_i k(x_i, x_i): S_xx − tr_x carries a round-off of about ε tr_x
    (ε = 2⁻⁵²; taken 10 times, for the sums of N² values and of features), so MMD_U²
    carries r = 10 ε (tr_x/(N(N − 1)) + tr_y/(M(M − 1))). On ordinary data r is ε times
    the kernel's scale over N, below the statistic's own fluctuation. Not when an
    unbounded kernel makes k(z, z) dwarf every value between points: with the exponential
    kernel exp(⟨x, y⟩/σ²) at σ = 0.2, a point at −2.7 has k(x, x) ≈ 10⁸¹ where its largest
    value with another point is 10³⁶, and MMD_U² came out −5.9·10³³ where it is
    −3.2·10³³; one gross outlier does the same to a polynomial kernel (the quadratic
    kernel's MMD_U² was 2.9 times its value with one point at 10⁸ among 600, and off by
    10⁻⁵ with one at 10⁶). Said when the mean k(z, z) exceeds :data:`DIAGONAL_DOMINANCE`
    times each of the statistic's three means (within X, within Y, across) and r exceeds
    :data:`DIAGONAL_ROUND_OFF_LIMIT` of |MMD_U²|."""
    if n < 2 or m < 2:
        return
    scale = max(abs(sums.xx - sums.trace_x) / (n * (n - 1)), abs(sums.yy - sums.trace_y) / (m * (m - 1)),
                abs(sums.xy) / (n * m))
    mean_diag = (max(sums.trace_x, 0.0) + max(sums.trace_y, 0.0)) / (n + m)
    # every value between points 0 (a bandwidth far below the data's scale): the sums are
    # exact, and the kernel's own warning says what it sees
    if scale == 0.0 or not mean_diag > DIAGONAL_DOMINANCE * scale:
        return
    round_off = 10.0 * float(np.finfo(float).eps) * (
        max(sums.trace_x, 0.0) / (n * (n - 1)) + max(sums.trace_y, 0.0) / (m * (m - 1)))
    ratio = np.inf if mmd2 == 0.0 else round_off / abs(mmd2)
    if not ratio > DIAGONAL_ROUND_OFF_LIMIT:
        return
    if not np.isfinite(ratio):
        size = "any size (its value is 0)"
    else:
        size = f"up to {ratio:.1g} {'times' if ratio >= 1.0 else 'of'} its value"
    warnings.warn(PrecisionWarning(
        f"{kernel.spec()} is far larger on the diagonal, k(z, z), than between these points: the U-statistic, which "
        f"leaves the diagonal out, can carry a round-off of {size}. Use the V-statistic (v-stat), which keeps the "
        "diagonal, a bounded kernel (rbf, laplace), or parameters for the data's scale."
    ), stacklevel=stacklevel + 1)
