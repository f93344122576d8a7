"""One large Gram computation spread over a backend's workers, tile by tile.

Inside :func:`spread_over` (a context manager, entered by ``estimate(..., backend=)``
and ``permutation_test(..., backend=)`` for a remote backend such as Dask), the Gram
reductions of one job run on the workers:

* :class:`SpreadGram`, the Gram source of a pooled sample: every row band of the upper
  half of K is a task; a worker evaluates the band from the data and returns only its
  share of the reduction (row sums, K W, diag(Wᵀ K W), Wᵀ K W), so a Gram matrix never
  travels;
* :func:`spread_kernel_sums`, the kernel sums of the V- and U-statistics, one task per
  tile of rows.

The workers receive the data once per source (and a weight matrix once per reduction);
the shares are combined here in band order, the order the local matrix-free path uses,
so the numbers do not depend on where or in which order the tasks ran.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..backends import Backend, LocalBackend
from ..data import Sample
from ..kernels import Kernel
from .gram_sources import MATRIX_FREE_BAND_ROWS, MatrixFreeGram, tiled_band_reduction

__all__ = ["SPREAD_TILE_BYTES", "SpreadGram", "spread_over", "spreading", "spread_kernel_sums", "sum_tiles"]

#: bytes of one task's tile of K: large enough that a task's work dwarfs its scheduling
#: (about a millisecond on Dask), small enough for several per worker in memory
SPREAD_TILE_BYTES = 128 * 1024 * 1024

_SPREAD: ContextVar[Backend | None] = ContextVar("spread_backend", default=None)


def spreading() -> Backend | None:
    """The remote backend the Gram reductions of the current job run on, or None (here)."""
    return _SPREAD.get()


@contextlib.contextmanager
def spread_over(backend: Backend | None) -> Iterator[Backend | None]:
    """Spread the Gram reductions inside the block over ``backend``'s workers (nothing
    changes for None or the local backend: the work stays in this process)."""
    if backend is None or isinstance(backend, LocalBackend):
        yield None
        return
    token = _SPREAD.set(backend)
    try:
        yield backend
    finally:
        _SPREAD.reset(token)


class SpreadGram(MatrixFreeGram):
    """A matrix-free Gram source whose band reductions run as tasks on ``backend``."""

    def __init__(self, kernel: Kernel, Z: Sample, backend: Backend, *, diag: np.ndarray | None = None,
                 band_rows: int | None = None):
        super().__init__(kernel, Z, diag=diag, band_rows=band_rows or MATRIX_FREE_BAND_ROWS)
        self.backend = backend
        self._data = backend.share((kernel, Z, self.diag))

    def band_results(self, op: str, W: Any) -> Iterator[tuple[int, int, Any]]:
        bounds = self.band_bounds()
        tasks = [(a, b, op) for a, b in bounds]
        shares = self.backend.map(_band_task, tasks, (self._data, self.backend.share(W)))
        for (a, b), share in zip(bounds, shares):
            yield a, b, share


def _band_task(task: tuple[int, int, str], shared: tuple[Any, Any]) -> Any:
    """On a worker: one band of K from the data, reduced tile by tile (module level: pickled)."""
    (kernel, Z, diag), W = shared
    start, stop, op = task
    return tiled_band_reduction(op, kernel, Z, diag, start, stop, W)


def sum_tiles(n: int, m: int, tile_bytes: int) -> list[tuple[str, int, int]]:
    """The tiles of the kernel sums of n and m points: row bands of the upper half of
    k(X, X) ("x") and of k(Y, Y) ("y"), and row tiles of k(X, Y) ("xy")."""
    tasks = []
    for kind, rows, cols in (("x", n, n), ("y", m, m), ("xy", n, m)):
        step = max(1, tile_bytes // (8 * max(cols, 1)))
        tasks += [(kind, a, min(a + step, rows)) for a in range(0, rows, step)]
    return tasks


def tile_sum(task: tuple[str, int, int], data: tuple[Any, ...]) -> float:
    """One tile's share of a kernel sum (module level: it runs on workers).

    A band a:b of a symmetric Gram matrix gives its diagonal block once, with the
    diagonal from ``diag_tile`` as in ``gram(X)`` (and checked against the kernel
    contract), and the part right of it twice."""
    kernel, X, Y, diag_x, diag_y = data
    kind, a, b = task
    if kind == "xy":
        return float(kernel.gram_tile(X[a:b], Y).sum())
    Z, diag = (X, diag_x) if kind == "x" else (Y, diag_y)
    band = kernel.gram_tile(Z[a:b], Z[a:])
    block = band[:, : b - a]
    kernel.check_diagonal_block(block, diag[a:b], a)
    return float(block.sum() - np.trace(block) + diag[a:b].sum()) + 2.0 * float(band[:, b - a :].sum())


def spread_kernel_sums(
    kernel: Kernel, X: Sample, Y: Sample, diag_x: np.ndarray, diag_y: np.ndarray, backend: Backend, tile_bytes: int
) -> tuple[float, float, float]:
    """Σ k(x_i, x_j), Σ k(y_i, y_j) and Σ k(x_i, y_j) from tiles run on ``backend``
    (any backend: the local one gives the tiled path), each sum in tile order; ``diag_x``
    and ``diag_y`` are the kernel's ``diag_tile`` of X and Y."""
    tasks = sum_tiles(len(X), len(Y), tile_bytes)
    shares = backend.map(tile_sum, tasks, backend.share((kernel, X, Y, diag_x, diag_y)))
    totals = {"x": 0.0, "y": 0.0, "xy": 0.0}
    for (kind, _, _), share in zip(tasks, shares):
        totals[kind] += share
    return totals["x"], totals["y"], totals["xy"]
