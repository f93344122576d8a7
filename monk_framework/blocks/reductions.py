"""Reductions of a Gram matrix that estimators share: per-block trace variances, and the
kernel sums of two samples, stored or in tiles."""

from __future__ import annotations

import time
from typing import Any

import attrs
import numpy as np
import scipy.sparse as sp

from ..data import Sample
from ..kernels import CHUNK_BYTES, Kernel
from .gram_sources import GramSource

__all__ = ["KernelSums", "bilinear", "block_trace_variances", "kernel_sums", "weighted_gram"]


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


def kernel_sums(kernel: Kernel, X: Sample, Y: Sample, *, budget: int | None = None) -> KernelSums:
    """The kernel sums of two validated samples, from the three Gram matrices when they
    fit in ``budget`` bytes (default: :func:`monk_framework.memory.memory_budget`), else
    from tiles of rows computed on the fly and dropped at once.

    Tiled, Σ k(x_i, x_j) takes each row band's diagonal block once and the band right of
    it twice (the kernel is symmetric), and the traces come from ``diag_tile``: the same
    sums up to the order of the additions (relative round-off about 1e-15). Each
    diagonal block is checked against the kernel contract, as in ``gram(X)``.
    """
    from ..memory import memory_budget

    start = time.perf_counter()
    n, m = len(X), len(Y)
    budget = memory_budget() if budget is None else budget
    if budget is None or 8.0 * (n * n + m * m + n * m) <= budget:
        Kxx, Kyy, Kxy = kernel.gram(X), kernel.gram(Y), kernel.gram(X, Y)
        dx, dy = np.diag(Kxx), np.diag(Kyy)
        return KernelSums(
            xx=float(Kxx.sum()), yy=float(Kyy.sum()), xy=float(Kxy.sum()), trace_x=float(np.trace(Kxx)),
            trace_y=float(np.trace(Kyy)), max_diag=float(max(dx.max(), dy.max())), tiled=False,
            seconds=time.perf_counter() - start,
        )
    # a tile holds at most a quarter of the budget (and CHUNK_BYTES): room for temporaries
    tile_bytes = max(8 * max(n, m), min(CHUNK_BYTES, budget // 4))
    xx, tx, mx = _symmetric_sum(kernel, X, tile_bytes)
    yy, ty, my = _symmetric_sum(kernel, Y, tile_bytes)
    step = max(1, tile_bytes // (8 * m))
    xy = 0.0
    for a in range(0, n, step):
        xy += float(kernel.gram_tile(_take(X, a, a + step), Y).sum())
    return KernelSums(
        xx=xx, yy=yy, xy=xy, trace_x=tx, trace_y=ty, max_diag=max(mx, my), tiled=True,
        seconds=time.perf_counter() - start,
    )


def _take(sample: Any, a: int, b: int) -> Any:
    return sample[a:b]


def _symmetric_sum(kernel: Kernel, Z: Sample, tile_bytes: int) -> tuple[float, float, float]:
    """Σ_ij k(z_i, z_j), its trace and the largest k(z, z), by row bands of the upper triangle."""
    n = len(Z)
    diag = kernel.diag_tile(Z)
    step = max(1, tile_bytes // (8 * n))
    total = 0.0
    for a in range(0, n, step):
        b = min(a + step, n)
        band = kernel.gram_tile(_take(Z, a, b), _take(Z, a, n))
        block = band[:, : b - a]
        kernel.check_diagonal_block(block, diag[a:b], a)
        # the diagonal block's own diagonal is diag_tile's, as in gram(X)
        total += float(block.sum() - np.trace(block) + diag[a:b].sum()) + 2.0 * float(band[:, b - a :].sum())
    return total, float(diag.sum()), float(diag.max(initial=0.0))


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


def _stored(n: int, m: int, budget: int | None) -> bool:
    from ..memory import memory_budget

    budget = memory_budget() if budget is None else budget
    return budget is None or 8.0 * n * m <= budget


def _row_tiles(kernel: Kernel, A: Sample, B: Sample, budget: int | None) -> Any:
    """(start, K(A[start:stop], B)) row tiles of at most a quarter of the budget."""
    from ..memory import memory_budget

    budget = memory_budget() if budget is None else budget
    m = len(B)
    step = max(1, max(8 * m, min(CHUNK_BYTES, (budget or CHUNK_BYTES) // 4)) // (8 * m))
    for a in range(0, len(A), step):
        yield a, kernel.gram_tile(_take(A, a, a + step), B)


def weighted_gram(kernel: Kernel, A: Sample, B: Sample, v: np.ndarray, *, budget: int | None = None) -> np.ndarray:
    """K(A, B) v for validated samples: from the stored Gram matrix when it fits in
    ``budget`` bytes (default: the memory budget), else from row tiles computed on the
    fly (an embedding's witness values never need its whole Gram matrix)."""
    if _stored(len(A), len(B), budget):
        return kernel.gram(A, B) @ v
    out = np.empty(len(A))
    for a, tile in _row_tiles(kernel, A, B, budget):
        out[a : a + len(tile)] = tile @ v
    return out


def bilinear(kernel: Kernel, A: Sample, B: Sample | None, u: np.ndarray, v: np.ndarray, *, budget: int | None = None) -> float:
    """uᵀ K(A, B) v (B = A when None: the symmetric Gram matrix), stored within the budget
    and in row tiles over it (an embedding's norm and inner products)."""
    other = A if B is None else B
    if _stored(len(A), len(other), budget):
        return float(u @ (kernel.gram(A) if B is None else kernel.gram(A, B)) @ v)
    return float(sum(u[a : a + len(tile)] @ (tile @ v) for a, tile in _row_tiles(kernel, A, other, budget)))
