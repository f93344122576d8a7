"""Compiled loops that fuse the elementwise passes over a kernel tile into one.

numpy runs each elementwise operation as its own pass over memory: adding the two
norm vectors to a matrix product, clipping at 0 and scaling is four passes over a tile,
which at the sizes of a matrix-free path cost more than the product of the distances
itself. The loops here make one pass, and do the same floating-point operations in the
same order as the numpy expressions they replace (no fast-math, no reassociation), so
the results are the same bit for bit (tested against those expressions).

They are compiled by numba on first use and cached on disk; ``nogil`` lets the threads
of a matrix-free reduction run them side by side.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["finish_squared_distances"]


@njit(cache=True, nogil=True, boundscheck=False)
def _finish(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float) -> None:  # pragma: no cover - compiled
    n, m = out.shape
    for i in range(n):
        a = nx[i]
        row = out[i]
        for j in range(m):
            v = (row[j] + a) + ny[j]
            # clip at +0; NaN stays NaN (as np.maximum(v, 0.0) keeps it)
            if v <= 0.0:
                v = 0.0
            row[j] = v * scale


def finish_squared_distances(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """out ← max((out + ‖x_i‖²) + ‖y_j‖², 0) · scale, in place, in one pass.

    ``out`` holds −2⟨x_i, y_j⟩ (an ``(n, m)`` float64 array, C order), ``nx`` and ``ny``
    the squared norms: the BLAS identity ‖x − y‖² = ‖x‖² + ‖y‖² − 2⟨x, y⟩ completed,
    clipped at 0 against round-off and multiplied by ``scale`` (1/σ² times a kernel's
    factor, say). The same values, bit for bit, as::

        out += nx[:, None]; out += ny[None, :]; np.maximum(out, 0.0, out=out); out *= scale
    """
    if out.shape != (len(nx), len(ny)) or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"finish_squared_distances needs a C-ordered float64 array of shape {(len(nx), len(ny))}, got {out.dtype} {out.shape}")
    _finish(out, np.ascontiguousarray(nx, dtype=np.float64), np.ascontiguousarray(ny, dtype=np.float64), float(scale))
    return out
