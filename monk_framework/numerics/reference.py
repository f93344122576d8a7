"""Plain numpy twins of the compiled loops of :mod:`monk_framework.numerics.compiled`.

Each function here computes what its compiled namesake computes, with numpy's own
operations, and is what runs where numba is missing, a compilation fails, or the
compiled loops are switched off (``MONK_COMPILED=0``,
:func:`monk_framework.numerics.compiled.set_compiled`). The compiled loops are tested
against these on random inputs. Where a loop does the same floating-point operations in
the same order, the twin gives the same bits; elsewhere (fused multiply-adds, sums in
another order, the loops' own exponential) they agree to a stated round-off: every
docstring says which.

The callers validate the arguments (:mod:`~monk_framework.numerics.compiled` does, for
both paths), so these functions assume well-formed arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "add_indicator_product",
    "add_tile_product",
    "exp_nonpositive",
    "exp_squared_distance_form",
    "exp_squared_distance_tile",
    "finish_squared_distances",
    "pack_patterns",
    "unpack_patterns",
]

#: rows of K formed at a time by :func:`exp_squared_distance_form` (bounds its memory)
FORM_ROWS = 256


def finish_squared_distances(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float) -> np.ndarray:
    """out ← max((out + nx_i) + ny_j, 0) · scale in place: numpy's four passes, the same
    operations in the same order as the compiled loop (the same bits)."""
    out += nx[:, None]
    out += ny[None, :]
    np.maximum(out, 0.0, out=out)
    out *= scale
    return out


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """exp(x) by ``np.exp``; the compiled exponential is within one unit in the last place."""
    return np.exp(x)


def _squared_differences(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    # squared coordinate differences added in the order of the features, each square
    # rounded; a square that overflows is inf, as in the compiled loops (exp(−inf) = 0)
    with np.errstate(over="ignore"):
        out = np.square(X[:, None, 0] - Y[None, :, 0])
        for k in range(1, X.shape[1]):
            out += np.square(X[:, None, k] - Y[None, :, k])
    return out


def exp_squared_distance_tile(X: np.ndarray, Y: np.ndarray, scale: float, *, direct: bool = False) -> np.ndarray:
    """exp(scale · ‖x_i − y_j‖²) for all pairs, from numpy's passes.

    With ``direct``, squared coordinate differences summed in order (the compiled loop's
    arithmetic, bit for bit before the exponential); otherwise the BLAS identity on data
    centred at Y's mean, completed and clipped at 0 (the compiled loop sums −2⟨x, y⟩ with
    fused multiply-adds where the processor has them: equal to round-off, about 1e-15 of
    ‖x‖² + ‖y‖²). The exponential is ``np.exp``.
    """
    if direct:
        sq = _squared_differences(X, Y)
        sq *= scale
        return np.exp(sq, out=sq)
    centre = Y.mean(axis=0)
    Xc, Yc = X - centre, Y - centre
    out = np.matmul(-2.0 * Xc, Yc.T)
    finish_squared_distances(out, np.einsum("ij,ij->i", Xc, Xc), np.einsum("ij,ij->i", Yc, Yc), scale)
    return np.exp(out, out=out)


def exp_squared_distance_form(Z: np.ndarray, W: np.ndarray, scale: float, diag: np.ndarray) -> np.ndarray:
    """Wᵀ K W for K_ij = exp(scale · ‖z_i − z_j‖²) off the diagonal and K_ii = ``diag``,
    from bands of FORM_ROWS rows of K: squared distances by the BLAS identity on centred
    points (the compiled loop sums differences), ``np.exp``, BLAS products. The two agree
    to round-off: the exponents by about 1e-15 of ‖z_i‖² + ‖z_j‖² times |scale|."""
    n, c = W.shape
    S = np.zeros((c, c))
    if n == 0:
        return S
    Zc = Z - Z.mean(axis=0)
    # squares that could overflow (data beyond 1e100) take the differences: inf, exp(−inf) = 0
    identity = float(np.abs(Zc).max()) <= 1e100
    norms = np.einsum("ij,ij->i", Zc, Zc)
    for a in range(0, n, FORM_ROWS):
        b = min(a + FORM_ROWS, n)
        if identity:
            band = np.matmul(-2.0 * Zc[a:b], Zc.T)
            finish_squared_distances(band, norms[a:b], norms, scale)
        else:
            band = _squared_differences(Z[a:b], Z)
            band *= scale
        np.exp(band, out=band)
        band[np.arange(b - a), np.arange(a, b)] = diag[a:b]
        S += W[a:b].T @ (band @ W)
    return (S + S.T) / 2.0  # exactly symmetric, as the compiled loop's


def add_tile_product(out: np.ndarray, T: np.ndarray, WT: np.ndarray, offset: int) -> None:
    """out += T · WT[:, offset : offset + m]ᵀ by one BLAS product (sums in BLAS's order:
    equal to the compiled loop's to round-off)."""
    out += T @ WT[:, offset : offset + T.shape[1]].T


def unpack_patterns(patterns: np.ndarray, offset: int, count: int) -> np.ndarray:
    """Rows offset … offset + count − 1 of the 0/1 matrix E whose rows ``patterns`` packs
    four to a byte (bit t of byte [g, b]: row 4g + t, column b)."""
    points = np.arange(offset, offset + count)
    return ((patterns[points >> 2] >> (points & 3)[:, None].astype(np.uint8)) & 1).astype(np.float64)


def add_indicator_product(out: np.ndarray, KT: np.ndarray, patterns: np.ndarray, offset: int) -> None:
    """out += Eᵀ KT for the rows offset … offset + m − 1 of the 0/1 matrix E that
    ``patterns`` packs, by one BLAS product (the compiled loop adds the same kernel values
    in another order: equal to round-off)."""
    out += unpack_patterns(patterns, offset, KT.shape[0]).T @ KT


def pack_patterns(P: np.ndarray, perms: np.ndarray, n: int) -> None:
    """P[i // 4, b] |= 1 << (i % 4) for the first ``n`` points i of each row b of ``perms``
    (the same bytes as the compiled loop: bitwise or is exact)."""
    points = perms[:, :n]
    columns = np.broadcast_to(np.arange(len(perms))[:, None], points.shape)
    np.bitwise_or.at(P, (points >> 2, columns), (1 << (points & 3)).astype(np.uint8))
