"""Sums of kernel values within the memory budget: explicit features, and an embedding's reductions.

A kernel with a finite feature map Φ (``has_features``: linear, polynomial, quadratic,
and their sums, products, multiples and clipped versions) has K = ΦΦᵀ, so every sum of
kernel values the classical statistics and the embeddings need is a product of feature
sums: Σ_ij u_i k(a_i, b_j) v_j = ⟨Φ(A)ᵀu, Φ(B)ᵀv⟩, O((N + M) D) work instead of N·M kernel
values. The engine's sums and an embedding's (:func:`bilinear`, :func:`weighted_gram`)
read them when D is at most 1/FEATURES_PAY of the points and they fit in the budget,
after holding them to the kernel's own values on the points the kernel contract checks
(a plugin whose features disagree is refused, never trusted). Without features, an
embedding's sums come from row tiles of at most a quarter of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from monk_framework.core.errors import KernelContractError
from monk_framework.core.kernel_checks import CONTRACT_CHECK_POINTS
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample
from monk_framework.engine.gram_bands import counted_in_turn
from monk_framework.engine.memory import chunk_rows

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel

__all__ = ["FEATURES_PAY", "FEATURE_TOLERANCE", "bilinear", "feature_block_rows", "feature_sums", "paying_features", "weighted_gram"]

#: the features replace the Gram matrix when there are at least this many points for each
#: feature: below, N² kernel values at the rate of a GEMM are no dearer than N·D products
FEATURES_PAY = 16

#: |⟨φ(a), φ(b)⟩ − k(a, b)| allowed, relative to √(k(a, a) k(b, b)): round-off, not a fault
FEATURE_TOLERANCE = 1e-9


def paying_features(kernel: Kernel, parts: Sequence[Sample], resources: Resources) -> list[np.ndarray] | None:
    """Φ of each sample in ``parts`` (validated vector samples), or None when the kernel
    has no finite feature map, its D features a point are more than 1/FEATURES_PAY of the
    points, or the feature matrices would not fit in the budget of ``resources``."""
    plan = _feature_plan(kernel, parts)
    if plan is None:
        return None
    arrays, first, D = plan
    if not resources.fits(8.0 * sum(len(p) for p in arrays) * D):
        return None
    # one point's features first: a count that is not their width would size everything after it wrongly
    widths = {kernel.features(first[:1]).shape[1]}
    features = []
    for p in arrays:
        features.append(kernel.features(p))
        widths.add(features[-1].shape[1])
    _check_widths(kernel, first, D, widths)
    _check_against_values(kernel, arrays, features)
    return features


def _feature_plan(kernel: Kernel, parts: Sequence[Sample]) -> tuple[list[np.ndarray], np.ndarray, int] | None:
    """(the parts, the first non-empty one, D) when the kernel has features and D pays
    (at most 1/FEATURES_PAY of the points), else None."""
    arrays = [p for p in parts if isinstance(p, np.ndarray) and p.ndim == 2]
    if not kernel.has_features or len(arrays) != len(parts) or not any(len(p) for p in arrays):
        return None
    first = next(p for p in arrays if len(p))
    D = kernel.feature_count(first)
    return None if D * FEATURES_PAY > sum(len(p) for p in arrays) else (arrays, first, D)


def _check_widths(kernel: Kernel, first: np.ndarray, D: int, widths: set[int]) -> None:
    """Refuse features whose width is not the plugin's own count D, by name."""
    if widths - {D}:
        raise KernelContractError(
            f"{kernel.plugin_label()}: compute_feature_count({first.shape[1]}) gives {D:,} features a point, but "
            f"compute_features gives {', '.join(f'{w:,}' for w in sorted(widths - {D}))}; they must agree."
        )


def feature_block_rows(resources: Resources, D: int) -> int:
    """Rows of D features a point that a block read by :func:`feature_sums` (and a test's
    products with the features in blocks) may hold: a quarter of the budget."""
    return chunk_rows(8 * D, share=0.25, at_least=0, resources=resources)


def feature_sums(kernel: Kernel, parts: Sequence[Sample], resources: Resources, leave_out: Sequence[np.ndarray] | None = None) -> list[np.ndarray] | None:
    """Σ_i φ(z_i) of each sample in ``parts``, for a kernel whose D features pay (as in
    :func:`paying_features`) but whose feature matrices do not fit the budget: read in
    blocks of rows that take at most a quarter of it, so the sums cost O((N + M) D) in
    any budget, where kernel values cost (N + M)². None when the kernel has no finite
    features, D does not pay, or one row of features does not fit. The features are
    checked as :func:`paying_features` checks them (their width, and their inner products
    against the kernel's values on the leading points). ``leave_out``: for each part, the
    indices of points whose features are not added (their rows are set to 0 first)."""
    plan = _feature_plan(kernel, parts)
    if plan is None:
        return None
    arrays, first, D = plan
    rows = feature_block_rows(resources, D)
    if rows < 1:
        return None
    half = max(1, CONTRACT_CHECK_POINTS // len(arrays))
    leading = [kernel.features(p[:half]) for p in arrays]
    widths = {f.shape[1] for f in leading if len(f)}
    sums = []
    for i, p in enumerate(arrays):
        total = np.zeros(D)
        skip = np.zeros(len(p), dtype=bool)
        if leave_out is not None:
            skip[leave_out[i]] = True
        for start in range(0, len(p), rows):
            block = kernel.features(p[start : start + rows])
            widths.add(block.shape[1])
            if block.shape[1] != D:
                break
            block[skip[start : start + len(block)]] = 0.0
            total += block.sum(axis=0)
        sums.append(total)
    _check_widths(kernel, first, D, widths)
    _check_against_values(kernel, arrays, leading)
    return sums


def _check_against_values(kernel: Kernel, parts: Sequence[np.ndarray], features: Sequence[np.ndarray]) -> None:
    """Φ(A) Φ(A)ᵀ against k(A, A) on the leading points of each part (those the kernel
    contract checks): a plugin's features that are not its kernel's would give another
    MMD without a word."""
    half = max(1, CONTRACT_CHECK_POINTS // len(parts))
    A = np.vstack([p[:half] for p in parts])
    F = np.vstack([f[:half] for f in features])
    # each checked point by its sample and index: x_3, y_0 (z_i beyond two samples)
    letters = "xy" if len(parts) == 2 else "z" * len(parts)
    names = [f"{letters[k]}_{i}" for k, p in enumerate(parts) for i in range(min(half, len(p)))]
    values = kernel.gram_tile(A, A)
    scale = np.sqrt(np.abs(np.diag(values)))
    gap = np.abs(F @ F.T - values) - FEATURE_TOLERANCE * np.outer(scale, scale)
    if np.any(gap > 0):
        i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
        a, b = names[i], names[j]
        raise KernelContractError(
            f"{kernel.plugin_label()}: its features disagree with its kernel values: <features({a}), features({b})> = "
            f"{float(F[i] @ F[j]):.6g} where k({a}, {b}) = {float(values[i, j]):.6g}. compute_features must give "
            "features(X) @ features(Y).T = k(X, Y) (or has_features must be False)."
        )


def _tile_rows(m: int, resources: Resources) -> int:
    """Rows of a tile of m columns: a band's, and at most a quarter of the budget."""
    return min(chunk_rows(8 * m), chunk_rows(8 * m, share=0.25, resources=resources))


def _row_tiles(kernel: Kernel, A: Sample, B: Sample, resources: Resources) -> Iterator[tuple[int, np.ndarray]]:
    """(start, K(A[start:stop], B)) row tiles of at most a quarter of the budget."""
    step = _tile_rows(len(B), resources)
    for a in range(0, len(A), step):
        yield a, kernel.gram_tile(A[a : a + step], B)


def weighted_gram(
    kernel: Kernel,
    A: Sample,
    B: Sample,
    v: np.ndarray,
    *,
    resources: Resources,
    report: Callable[[float], None] | None = None,
) -> np.ndarray:
    """K(A, B) v for validated samples: from the stored Gram matrix when it fits in the
    budget of ``resources``, else from row tiles computed on the fly (an embedding's
    witness values never need its whole Gram matrix). ``report(done)`` is told the kernel
    values evaluated so far, band by band."""
    m = len(B)
    features = paying_features(kernel, (A, B), resources)
    if features is not None:
        # K(A, B) v = Φ(A) (Φ(B)ᵀ v): no kernel value between points
        if report is not None:
            report(float(len(A)) * m)
        return cast(np.ndarray, features[0] @ (features[1].T @ v))
    if resources.fits(8.0 * len(A) * m):
        return cast(np.ndarray, kernel.whole_gram(A, B, run_bands=None if report is None else counted_in_turn(m, report)) @ v)
    out = np.empty(len(A))
    for a, tile in _row_tiles(kernel, A, B, resources):
        out[a : a + len(tile)] = tile @ v
        if report is not None:
            report(float(a + len(tile)) * m)
    return out


def bilinear(
    kernel: Kernel,
    A: Sample,
    B: Sample | None,
    u: np.ndarray,
    v: np.ndarray,
    *,
    resources: Resources,
    report: Callable[[float], None] | None = None,
) -> float:
    """uᵀ K(A, B) v (B = A when None: the symmetric Gram matrix), in row tiles of at most a
    quarter of the budget of ``resources`` (an embedding's norm, inner products and
    distances), never the whole matrix: storing it cost n² × 8 bytes and, at n = 20 000,
    more time to fault in than to compute.

    Of a symmetric matrix only the upper triangle is evaluated, as in
    :meth:`Kernel.symmetric_gram`: with D a diagonal tile (its diagonal from ``diag_tile``,
    each checked against the kernel contract) and R the tile right of it,
    uᵀKv = Σ u_i k(x_i, x_i) v_i + Σ_{i<j} k(x_i, x_j)(u_i v_j + u_j v_i). ``report(done)``
    is told the kernel values evaluated so far after each tile.

    A kernel computed whole (:meth:`Kernel.computes_gram_whole`, the SSK, whose tiles would
    each rebuild its per-string tables) is read from its whole Gram matrix when that fits."""
    other = A if B is None else B
    features = paying_features(kernel, (A,) if B is None else (A, B), resources)
    if features is not None:
        # uᵀ Φ(A) Φ(B)ᵀ v = ⟨Φ(A)ᵀ u, Φ(B)ᵀ v⟩: no kernel value between points
        if report is not None:
            report(len(A) * (len(A) + 1) / 2.0 if B is None else float(len(A)) * len(other))
        return float((features[0].T @ u) @ (features[-1].T @ v))
    if kernel.computes_gram_whole() and resources.fits(8.0 * len(A) * len(other)):
        K = kernel.whole_gram(A, B)
        if report is not None:
            report(len(A) * (len(A) + 1) / 2.0 if B is None else float(K.size))
        return float(u @ K @ v)
    if B is None:
        return _symmetric_bilinear(kernel, A, u, v, resources, report)
    total, done = 0.0, 0.0
    for a, tile in _row_tiles(kernel, A, B, resources):
        total += float(u[a : a + len(tile)] @ (tile @ v))
        if report is not None:
            done += tile.size
            report(done)
    return total


def _symmetric_bilinear(kernel: Kernel, A: Sample, u: np.ndarray, v: np.ndarray, resources: Resources, report: Callable[[float], None] | None) -> float:
    n = len(A)
    diag = kernel.diag_tile(A)
    total = float(np.sum(u * diag * v))
    done = 0.0
    step = _tile_rows(n, resources)
    for a in range(0, n, step):
        b = min(a + step, n)
        tile = kernel.gram_tile(A[a:b], A[a:])
        block = tile[:, : b - a]
        kernel.check_diagonal_block(block, diag[a:b], a)
        upper = np.triu(block, 1)
        rest = tile[:, b - a :]
        ua, va = u[a:b], v[a:b]
        total += float(ua @ (upper @ va) + va @ (upper @ ua) + ua @ (rest @ v[b:]) + va @ (rest @ u[b:]))
        if report is not None:
            done += (b - a) * (n - a) - (b - a) * (b - a - 1) / 2.0
            report(done)
    return total
