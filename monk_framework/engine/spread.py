"""One large Gram computation spread over a backend's workers, tile by tile.

When the call's :class:`~monk_framework.core.resources.Resources` spreads over a remote
backend such as Dask (``estimate(..., backend=)``, and ``permutation_test(...,
backend=)`` for the classical statistics), the Gram reductions of one job run on the
workers:

* :class:`~monk_framework.engine.gram_sources.SpreadGram`, the Gram source of a pooled
  sample: every row band of the upper half of K is a task; a worker evaluates the band
  from the data and returns only its share of the reduction (row sums, K W,
  diag(Wᵀ K W), Wᵀ K W), so a Gram matrix never travels;
* :func:`spread_kernel_sums`, the kernel sums of the V- and U-statistics, one task per
  tile of rows.

The workers receive the data once per source (and a weight matrix once per reduction);
the shares are combined here in band order, the order the local matrix-free path uses,
so the numbers do not depend on where or in which order the tasks ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from monk_framework.core.kernels import Kernel
from monk_framework.core.samples import Sample
from monk_framework.engine.backends import Backend
from monk_framework.engine.gram_sources import MATRIX_FREE_BAND_ROWS
from monk_framework.engine.memory import chunk_rows

__all__ = ["SpreadSums", "spread_kernel_sums", "sum_tiles"]


class SpreadSums(NamedTuple):
    """Σ k(x_i, x_j), Σ k(y_i, y_j), Σ k(x_i, y_j), and the first two without the diagonal
    (added up without it: no difference of nearly equal sums)."""

    xx: float
    yy: float
    xy: float
    xx_off: float
    yy_off: float


def sum_tiles(n: int, m: int, rows: int) -> list[tuple[str, int, int]]:
    """The tasks of the kernel sums of n and m points: bands of ``rows`` rows of the upper
    half of k(X, X) ("x") and of k(Y, Y) ("y"), and of k(X, Y) ("xy")."""
    return [(kind, a, min(a + rows, size)) for kind, size in (("x", n), ("y", m), ("xy", n)) for a in range(0, size, rows)]


def tile_sum(task: tuple[str, int, int], data: tuple[Any, ...]) -> tuple[float, float]:
    """One band's share of a kernel sum with and without the diagonal, in column tiles of
    the engine's tile size (module level: it runs on workers).

    A band a:b of a symmetric Gram matrix gives its diagonal block once, with the
    diagonal from ``diag_tile`` as in ``gram(X)`` (and checked against the kernel
    contract), and the part right of it twice. The block is summed with its diagonal set
    to 0, and the diagonal added to that for the sum with it: where k(z, z) dwarfs the
    values between points, subtracting it afterwards would take their digits with it."""
    kernel, X, Y, diag_x, diag_y = data
    kind, a, b = task
    Z, diag = (X, diag_x) if kind == "x" else (Y, diag_y)
    cols = chunk_rows(8 * (b - a), work="tile", at_least=64)
    # the tiles right of the diagonal are checked through their sum, not value by value: a
    # NaN or an infinity among the values makes the sum NaN or infinite
    if kind == "xy":
        total = sum((float(kernel.gram_tile(X[a:b], Y[c : c + cols], check=False).sum()) for c in range(0, len(Y), cols)), 0.0)
        total = float(kernel.check_finite(np.array(total), sums=True))
        return total, total
    block = kernel.gram_tile(Z[a:b], Z[a:b])
    kernel.check_diagonal_block(block, diag[a:b], a)
    np.fill_diagonal(block, 0.0)
    without = float(block.sum())
    with_diagonal = without + float(diag[a:b].sum())
    for c in range(b, len(Z), cols):
        right = 2.0 * float(kernel.gram_tile(Z[a:b], Z[c : c + cols], check=False).sum())
        with_diagonal += right
        without += right
    return (float(kernel.check_finite(np.array(with_diagonal), sums=True)), float(kernel.check_finite(np.array(without), sums=True)))


def spread_kernel_sums(
    kernel: Kernel,
    X: Sample,
    Y: Sample,
    diag_x: np.ndarray,
    diag_y: np.ndarray,
    backend: Backend,
    rows: int | None = None,
    *,
    report: Callable[[float, float, str], None] | None = None,
) -> SpreadSums:
    """Σ k(x_i, x_j), Σ k(y_i, y_j) and Σ k(x_i, y_j), and the first two without the
    diagonal, from tiles run on ``backend`` (any backend: the local one gives the tiled
    path), bands of ``rows`` rows, each sum in band order; ``diag_x`` and ``diag_y`` are
    the kernel's ``diag_tile`` of X and Y. ``report(done, total, "kernel sums")`` counts
    the kernel values evaluated, as bands finish in any order."""
    n, m = len(X), len(Y)
    tasks = sum_tiles(n, m, rows or MATRIX_FREE_BAND_ROWS)
    # a band's values: its rows times the columns right of its diagonal block (or all of Y)
    work = [(b - a) * ((n if kind == "x" else m) - (a if kind != "xy" else 0)) for kind, a, b in tasks]
    total, done = float(sum(work)), 0.0
    shares: dict[int, tuple[float, float]] = {}
    for i, share in backend.as_completed(tile_sum, tasks, backend.share((kernel, X, Y, diag_x, diag_y))):
        shares[i] = share
        done += work[i]
        if report is not None:
            report(done, total, "kernel sums")
    totals = {"x": [0.0, 0.0], "y": [0.0, 0.0], "xy": [0.0, 0.0]}
    for i, (kind, _, _) in enumerate(tasks):  # in band order, wherever each band ran
        totals[kind][0] += shares[i][0]
        totals[kind][1] += shares[i][1]
    return SpreadSums(totals["x"][0], totals["y"][0], totals["xy"][0], totals["x"][1], totals["y"][1])
