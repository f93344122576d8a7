"""Where kernel values enter the engine, and where bands of work meet the cores.

Every Gram matrix, tile and diagonal the engine uses is read through the kernel's
checked methods (``gram_tile``, ``diag_tile``, ``direct_block_gram``, ``whole_gram``
of :class:`~monk_framework.core.kernels.Kernel`), so a plugin's values meet the same
contract checks whichever estimator or test asked for them. This module adds what only
the engine decides: how many threads evaluate the bands of a matrix.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from monk_framework.core.kernels import Kernel
from monk_framework.core.samples import Sample
from monk_framework.engine.backends import for_bands, in_this_process
from monk_framework.engine.gram_bands import counted_in_turn

__all__ = ["band_cores", "gram_matrix", "on_cores"]


def band_cores() -> int:
    """How many bands :func:`on_cores` runs side by side here: one per core, or 1 inside
    a Dask worker (its thread is its share of a machine) and on a thread already running
    a band. What a kernel's plan may expect of bands that release the GIL."""
    return in_this_process().workers


def on_cores(work: Callable[[int, int], Any], bands: list[tuple[int, int]]) -> list[Any]:
    """``[work(start, stop) for start, stop in bands]``, run on every core
    (:func:`~monk_framework.engine.backends.in_this_process`: threads with one BLAS thread
    each) when there are at least :data:`~monk_framework.engine.backends.PARALLEL_MIN_BANDS`
    of them, else here.

    On the threads, OpenBLAS's own threads stay asleep: after a parallel call they spin
    for about 0.1 s, on the core that whatever runs next would need.
    """
    return for_bands(len(bands)).map(_band_task, bands, work)


def _band_task(band: tuple[int, int], work: Callable[[int, int], Any]) -> Any:
    return work(*band)


def gram_matrix(kernel: Kernel, Z: Sample, Y: Sample | None = None, *, report: Callable[[float, float, str], None] | None = None) -> np.ndarray:
    """k(Z, Z) (exactly symmetric, its bands on every core) or k(Z, Y) (its bands in turn),
    for validated samples and a fitted kernel: the stored Gram matrices of every estimator
    and test. ``report(done, total, "Gram matrix")`` counts the kernel values of the bands
    as they finish (of a symmetric one, from the engine's threads)."""
    if Y is None:
        return kernel.whole_gram(Z, run_bands=on_cores if report is None else _counted_bands(len(Z), report))
    if report is None:
        return kernel.whole_gram(Z, Y)
    total = float(len(Z)) * len(Y)
    return kernel.whole_gram(Z, Y, run_bands=counted_in_turn(len(Y), lambda done: report(done, total, "Gram matrix")))


def _counted_bands(n: int, report: Callable[[float, float, str], None]) -> Callable[..., list[Any]]:
    """:func:`on_cores`, telling ``report`` the values of the upper triangle done."""
    lock = threading.Lock()
    done = [0.0]
    total = n * (n + 1) / 2.0

    def run(work: Callable[[int, int], Any], bands: list[tuple[int, int]]) -> list[Any]:
        def counted(a: int, b: int) -> Any:
            out = work(a, b)
            with lock:
                done[0] += (b - a) * (n - a) - (b - a) * (b - a - 1) / 2.0
                report(done[0], total, "Gram matrix")
            return out

        return on_cores(counted, bands)

    return run
