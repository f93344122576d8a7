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
    from tiles of rows computed on the fly and dropped at once; inside
    :func:`~monk_framework.blocks.spread.spread_over`, from tiles computed on the workers.

    Tiled, Σ k(x_i, x_j) takes each row band's diagonal block once and the band right of
    it twice (the kernel is symmetric), and the traces come from ``diag_tile``: the same
    sums up to the order of the additions (relative round-off about 1e-15). Each
    diagonal block is checked against the kernel contract, as in ``gram(X)``.
    """
    from ..backends import in_this_process
    from ..memory import memory_budget
    from .spread import spread_kernel_sums, spreading

    start = time.perf_counter()
    n, m = len(X), len(Y)
    budget = memory_budget() if budget is None else budget
    # spread over workers (which never receive a Gram matrix), or stored when it fits
    if spreading() is None and (budget is None or 8.0 * (n * n + m * m + n * m) <= budget):
        Kxx, Kyy, Kxy = kernel.gram(X), kernel.gram(Y), kernel.gram(X, Y)
        dx, dy = np.diag(Kxx), np.diag(Kyy)
        return KernelSums(
            xx=float(Kxx.sum()), yy=float(Kyy.sum()), xy=float(Kxy.sum()), trace_x=float(np.trace(Kxx)),
            trace_y=float(np.trace(Kyy)), max_diag=float(max(dx.max(), dy.max())), tiled=False,
            seconds=time.perf_counter() - start,
        )
    # bands of rows, each reduced in column tiles that stay in cache (and well within the
    # budget); on workers inside spread_over, else here
    dx, dy = kernel.diag_tile(X), kernel.diag_tile(Y)
    xx, yy, xy = spread_kernel_sums(kernel, X, Y, dx, dy, spreading() or in_this_process())
    return KernelSums(
        xx=xx, yy=yy, xy=xy, trace_x=float(dx.sum()), trace_y=float(dy.sum()),
        max_diag=float(max(dx.max(initial=0.0), dy.max(initial=0.0))), tiled=True,
        seconds=time.perf_counter() - start,
    )


def _take(sample: Any, a: int, b: int) -> Any:
    return sample[a:b]


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
