"""Whole Gram matrices in row bands: what a kernel's ``gram`` builds, within memory.

k(X, X) is built from the upper band of each chunk of rows and mirrored, so it is exactly
symmetric and half the kernel evaluations are saved, with ``diag_tile`` on its diagonal
and every diagonal block checked against the contract; k(X, Y) is filled band by band.
The bands are :func:`~monk_framework.engine.memory.chunk_rows` of rows, the
matrix is refused before it is allocated when memory cannot hold it, and a band runner
(``run_bands``) chooses where the bands run: in turn, or on the machine's cores
(:func:`~monk_framework.engine.kernel_values.on_cores`). The core's
:meth:`~monk_framework.core.kernels.Kernel.symmetric_gram` and
:meth:`~monk_framework.core.kernels.Kernel.rectangular_gram` reach these through
:class:`~monk_framework.core.protocols.KernelWork`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from monk_framework.core.protocols import BandRunner, in_turn
from monk_framework.core.resources import check_memory
from monk_framework.core.samples import Sample
from monk_framework.engine.memory import chunk_rows

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel

__all__ = ["band_rows", "counted_in_turn", "rectangular_in_bands", "symmetric_in_bands"]


def band_rows(n_cols: int) -> int:
    """Rows of one band of a Gram matrix with ``n_cols`` columns (at least 32)."""
    return chunk_rows(8 * max(n_cols, 1), at_least=32)


def symmetric_in_bands(kernel: Kernel, X: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
    """K = k(X, X) of one validated sample, exactly symmetric with ``diag_tile`` on its
    diagonal, built in row bands, each diagonal block checked against the kernel
    contract: what :meth:`Kernel.symmetric_gram` computes unless a plugin overrides it.

    ``run_bands(work, bands)`` calls ``work(start, stop)`` for every band; the default
    runs them here, one after another. The engine passes its own runner, which
    spreads the bands over the machine's cores (every band writes its own entries, so
    the matrix is the same bit for bit).
    """
    run_bands = run_bands or in_turn
    n = len(X)
    check_memory(n, n)
    K = np.empty((n, n), dtype=np.float64)
    diag = kernel.diag_tile(X)
    step = band_rows(n)

    def band(start: int, stop: int) -> None:
        # writes rows start:stop from column start on, and their mirror below the
        # diagonal block: no two bands write the same entries
        K[start:stop, start:] = kernel.gram_tile(X[start:stop], X[start:])
        kernel.check_diagonal_block(K[start:stop, start:stop], diag[start:stop], start)
        K[stop:, start:stop] = K[start:stop, stop:].T
        block = K[start:stop, start:stop]
        upper = np.triu(block, 1)
        block[...] = upper + upper.T

    run_bands(band, [(start, min(start + step, n)) for start in range(0, n, step)])
    np.fill_diagonal(K, diag)
    return K


def rectangular_in_bands(kernel: Kernel, X: Sample, Y: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
    """k(X, Y) of two validated samples, filled in row bands after a memory check: what
    :meth:`Kernel.rectangular_gram` computes unless a plugin overrides it. ``run_bands``
    as in :func:`symmetric_in_bands` (every band writes its own rows: the same matrix bit
    for bit)."""
    run_bands = run_bands or in_turn
    n, m = len(X), len(Y)
    check_memory(n, m)
    K = np.empty((n, m), dtype=np.float64)
    step = band_rows(m)

    def band(start: int, stop: int) -> None:
        K[start:stop] = kernel.gram_tile(X[start:stop], Y)

    run_bands(band, [(start, min(start + step, n)) for start in range(0, n, step)])
    return K


def counted_in_turn(m: int, report: Callable[[float], None]) -> BandRunner:
    """:func:`in_turn`, telling ``report`` the values of a matrix of m columns done after
    each band of rows (``stop × m``)."""

    def run(work: Callable[[int, int], Any], bands: list[tuple[int, int]]) -> list[Any]:
        out = []
        for start, stop in bands:
            out.append(work(start, stop))
            report(float(stop) * m)
        return out

    return run
