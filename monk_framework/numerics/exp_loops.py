"""Compiled loops for the RBF kernel's tiles and forms, with their numpy twins.

The loops do the same floating-point operations in the same order as the numpy
expressions they replace (no fast-math, no reassociation), so the results are the same
bit for bit (tested against those expressions), except where a docstring says otherwise.

:func:`exp_squared_distance_form` goes one step further for the few-column block Gram
matrices WᵀKW of the MONK estimators' small blocks: it never forms a tile of K. Each
pair's squared distance, exponential and weighted sums are done in one vectorised loop,
with an exponential of its own (:func:`exp_nonpositive`, within one unit in the last
place of ``np.exp``), since numpy's cannot be inlined into a loop. Its squared
distances come from differences, the tiles' (beyond 4 features) from the BLAS
identity, so these sums agree with the tiles' to round-off, not bit for bit.

:func:`exp_squared_distance_tile` writes a whole tile of the RBF kernel in one pass:
the squared distances (the same bits as the numpy and BLAS path), two rows at a time,
each pair of rows completed and exponentiated while in cache, with the same exponential.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from monk_framework.numerics import reference
from monk_framework.numerics.compiled import NOT_RUN, CompiledLoops

if TYPE_CHECKING:
    from llvmlite import ir

__all__ = [
    "COMPILED_FORM_MAX_FEATURES",
    "COMPILED_TILE_MAX_FEATURES",
    "centred_with_norms",
    "exp_nonpositive",
    "exp_squared_distance_form",
    "exp_squared_distance_tile",
    "finish_squared_distances",
]

#: beyond this many features the unrolled distance loop of :func:`exp_squared_distance_form`
#: is slower than the BLAS product of a tile (d = 32: 4.6 against 5.8 ns a pair on one core;
#: d = 64: 54 against 7.8), so it declines and the caller walks the tiles
COMPILED_FORM_MAX_FEATURES = 32

_loops = CompiledLoops(globals())
_loop = _loops.loop
_run = _loops.run


def literally(value: Any) -> Any:
    """``numba.literally`` inside the loops (bound when they are compiled): a loop compiled
    once per value of its argument, the number of features, so that loops over it unroll."""
    return value


_loops.bind("literally", lambda numba: numba.literally)


@_loop(nogil=True)
def _clipped(v: float) -> float:  # pragma: no cover - compiled
    # at +0 against round-off; NaN stays NaN (as np.maximum(v, 0.0) keeps it)
    return 0.0 if v <= 0.0 else v


@_loop(nogil=True, boundscheck=False)
def _finish(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float) -> None:  # pragma: no cover - compiled
    n, m = out.shape
    for i in range(n):
        a = nx[i]
        row = out[i]
        for j in range(m):
            row[j] = _clipped((row[j] + a) + ny[j]) * scale


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
    nx, ny, scale = np.ascontiguousarray(nx, dtype=np.float64), np.ascontiguousarray(ny, dtype=np.float64), float(scale)
    if _run(lambda: _finish(out, nx, ny, scale)) is NOT_RUN:
        reference.finish_squared_distances(out, nx, ny, scale)
    return out


# -- the exponential -------------------------------------------------------------------------

# exp(x) = 2^k · exp(r), k = rint(x / ln 2), r = x − k·ln 2 with ln 2 split in two (Cody and
# Waite) so that r is exact to about 2^-60; |r| <= ln(2)/2, where the Taylor polynomial of
# degree 13 is within 5e-18 of exp(r)
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: the Taylor coefficients 1/k!, k = 13 down to 0 (Horner's order)
_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
#: exp(x) is 0 in float64 below about -745.13; any x below this one gives 0 as well
_EXP_FLOOR = -746.0


def _bitcast_typing(typingctx: object, bits: object) -> tuple[object, object]:  # pragma: no cover - compile time
    from llvmlite import ir
    from numba import types

    sig = types.float64(types.int64)

    def codegen(context: object, builder: ir.IRBuilder, signature: object, args: list[ir.Value]) -> ir.Value:
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


#: the float64 whose IEEE bits are an int64 (a bitcast, which vectorises), in compiled code;
#: numba's intrinsic of :func:`_bitcast_typing`, made when the loops are first needed
_bits_as_float: Any = None
_loops.bind("_bits_as_float", lambda numba: numba.extending.intrinsic(_bitcast_typing))


@_loop(nogil=True, fastmath={"contract"})
def _exp_nonpositive(x: float) -> float:  # pragma: no cover - compiled
    # only FMA contraction: reassociation would fold the two halves of ln 2 together
    x = max(x, _EXP_FLOOR)
    kf = np.rint(x * _LOG2E)
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = _TAYLOR[0]
    for coefficient in _TAYLOR[1:]:
        p = p * r + coefficient
    # 2^k as two normal powers of two, so that k down to -1076 (subnormal results) is exact
    k = np.int64(kf)
    half = k >> 1
    return p * _bits_as_float((half + 1023) << 52) * _bits_as_float((k - half + 1023) << 52)


@_loop(nogil=True, fastmath={"contract"})
def _exp_array(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        out[i] = _exp_nonpositive(x[i])


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 (or −inf), with the exponential the compiled loops inline.

    2^k · p(r) with k = rint(x / ln 2), r = x − k·ln 2 (|r| <= ln(2)/2) and p the Taylor
    polynomial of degree 13: within one unit in the last place of ``np.exp`` and libm's
    ``exp`` (tested on 50 000 values down to the underflow at −745.13, where all give 0). NaN and x > 0 are
    outside its domain: it is an internal building block, exposed for its tests.
    """
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    if np.isnan(x).any() or (x > 0).any():
        raise ValueError("exp_nonpositive needs values <= 0 (or -inf), without NaN")
    out = np.empty_like(x)
    if _run(lambda: _exp_array(x, out)) is NOT_RUN:
        return reference.exp_nonpositive(x)
    return out


# -- the few-column block Gram matrix --------------------------------------------------------


@_loop(nogil=True, fastmath={"contract", "reassoc"})
def _exp_form(PT: np.ndarray, WT: np.ndarray, diag: np.ndarray, scale: float, d: int) -> np.ndarray:  # noqa: C901 (a compiled loop nest, kept whole)  # pragma: no cover - compiled
    # d as a compile-time constant: the loop over features unrolls, and the loop over the
    # partners j vectorises (one specialisation per dimension, cached). Points i and i + 1
    # go together: each partner's coordinates are loaded once for both (at d = 10, 1.5-1.7
    # against 1.9 ns a pair point by point), with the same values and sums bit for bit.
    literally(d)
    n = PT.shape[1]
    c = WT.shape[0]
    S = np.zeros((c, c))
    first = np.empty(n)  # k(z_i, z_j) for j = i + 1, i + 2, ...
    second = np.empty(n)  # k(z_{i+1}, z_j) for j = i + 2, ...
    sums = np.empty(c)
    z = np.empty((2, d))
    # unsigned indices: numba's wraparound test for signed ones keeps the loops scalar
    zero, one = np.uint64(0), np.uint64(1)
    for i in range(0, n, 2):
        both = i + 1 < n  # an odd last point has no partner right of it
        if both:
            for k in range(d):
                z[0, k] = PT[k, i]
                z[1, k] = PT[k, i + 1]
            sq = 0.0
            for k in range(d):
                diff = PT[k, i + 1] - z[0, k]
                sq += diff * diff
            first[0] = scale * sq
            m, base = np.uint64(n - i - 2), np.uint64(i + 2)
            for jj in range(zero, m):
                s0 = 0.0
                s1 = 0.0
                for k in range(d):
                    p = PT[k, base + jj]
                    diff0 = p - z[0, k]
                    s0 += diff0 * diff0
                    diff1 = p - z[1, k]
                    s1 += diff1 * diff1
                first[one + jj] = scale * s0
                second[jj] = scale * s1
            # the exponentials in their own loops: with them inside, the loop above stays scalar
            for jj in range(zero, m + one):
                first[jj] = _exp_nonpositive(first[jj])
            for jj in range(zero, m):
                second[jj] = _exp_nonpositive(second[jj])
        for r in range(2 if both else 1):
            row = i + r
            values = first if r == 0 else second
            partners = n - row - 1
            for a in range(c):
                w = WT[a, row + 1 :]
                acc = 0.0
                for jj in range(partners):
                    acc += values[jj] * w[jj]
                sums[a] = acc
            # the pairs (row, j > row) and (j, row), and the diagonal entry K_rr (upper triangle)
            for a in range(c):
                wa = WT[a, row]
                for b in range(a, c):
                    wb = WT[b, row]
                    S[a, b] += wa * sums[b] + sums[a] * wb + diag[row] * wa * wb
    for a in range(c):
        for b in range(a):
            S[a, b] = S[b, a]  # symmetric bit for bit
    return S


def exp_squared_distance_form(Z: np.ndarray, W: np.ndarray, scale: float, diag: np.ndarray | None = None) -> np.ndarray | None:
    """Wᵀ K W for K_ij = exp(scale · ‖z_i − z_j‖²) off the diagonal and K_ii = ``diag``
    (default exp(0) = 1), without forming K; None beyond
    :data:`COMPILED_FORM_MAX_FEATURES` features.

    ``Z`` is an n × d float64 array of finite points, ``W`` an n × c weight matrix with
    few columns (each costs one multiply-add a pair), ``scale`` <= 0 (the RBF kernel:
    Z/σ and −1/2). Each unordered pair i < j is evaluated once, its squared distance
    from the differences (no cancellation, nothing to clip) and its exponential by
    :func:`exp_nonpositive`, and its value added to Σ_{j>i} k_ij W[j] for every row i:

        Wᵀ K W = Σ_i (W[i] s_iᵀ + s_i W[i]ᵀ + K_ii W[i] W[i]ᵀ),   s_i = Σ_{j>i} K_ij W[j].

    A pair whose squared distance overflows gets exp(−inf) = 0, the kernel's value.
    """
    Z = np.asarray(Z, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if Z.ndim != 2 or W.ndim != 2 or len(W) != len(Z):
        raise ValueError(f"exp_squared_distance_form needs Z (n, d) and W (n, c); got {Z.shape} and {W.shape}")
    if not (math.isfinite(scale) and scale <= 0.0):
        raise ValueError(f"exp_squared_distance_form needs a finite scale <= 0, got {scale}")
    d = Z.shape[1]
    if d == 0 or d > COMPILED_FORM_MAX_FEATURES:
        return None
    if not np.isfinite(Z).all():
        raise ValueError("exp_squared_distance_form needs finite points")
    diag = np.ones(len(Z)) if diag is None else np.array(diag, dtype=np.float64, order="C")
    if diag.shape != (len(Z),):
        raise ValueError(f"exp_squared_distance_form needs one diagonal value per point; got shape {diag.shape}")
    # fresh C-ordered writable copies: the one array type every specialisation is compiled for
    PT, WT = np.array(Z.T, order="C"), np.array(W.T, order="C")
    S = _run(lambda: _exp_form_of(d)(PT, WT, diag, float(scale), d))
    if S is NOT_RUN:
        return reference.exp_squared_distance_form(Z, W, float(scale), diag)
    return cast(np.ndarray, S)


#: the compiled specialisations of ``_exp_form`` and of the tile loops, one per dimension,
#: called directly: through the dispatcher, a literal argument costs about 20 ms a call
_EXP_FORMS: dict[int, Callable[..., Any]] = {}
_IDENTITY_TILES: dict[int, Callable[..., Any]] = {}
_DIRECT_TILES: dict[int, Callable[..., Any]] = {}


def _specialised(function: Any, cache: dict[int, Callable[..., Any]], d: int, arrays: int, vectors: int) -> Callable[..., Any]:
    """``function`` compiled (or loaded from the disk cache) for ``arrays`` C-ordered
    float64 matrices, ``vectors`` vectors, a float and the literal dimension d."""
    from numba import types

    compiled = cache.get(d)
    if compiled is None:
        array, vector = types.Array(types.float64, 2, "C"), types.Array(types.float64, 1, "C")
        signature = (*[array] * arrays, *[vector] * vectors, types.float64, types.IntegerLiteral(d))
        function.compile(signature)
        compiled = cast(Any, function.overloads[signature]).entry_point
        cache[d] = compiled
    return compiled


def _exp_form_of(d: int) -> Callable[..., np.ndarray]:
    return _specialised(_exp_form, _EXP_FORMS, d, 2, 1)


# -- a tile of the Gaussian kernel ----------------------------------------------------------

#: features up to which :func:`exp_squared_distance_tile` forms the inner products in its
#: own loop; beyond, OpenBLAS's product is faster and the loop only completes the tile
#: (one core, 256 × 2048, ns a pair: d = 10 1.5-2.0 against 1.9; d = 16 4.6 against 2.7;
#: d = 32 38 against 2.8, where the unrolled loop no longer vectorises)
COMPILED_TILE_MAX_FEATURES = 12


@_loop(nogil=True, boundscheck=False, fastmath={"contract"})
def _exp_identity_tile(  # noqa: C901 (a compiled loop nest, kept whole)  # pragma: no cover - compiled
    out: np.ndarray, XT: np.ndarray, YT: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float, d: int
) -> None:
    # d literal: the loop over features unrolls and the loop over j vectorises. Two rows at
    # a time share each loaded y value; with three or more, LLVM's vectoriser wants more
    # runtime alias checks than it allows, and the loop stays scalar. Each sum runs over k
    # in order, one fused multiply-add a term, as OpenBLAS's micro-kernel does for a short
    # inner dimension (on this machine, the same bits as its product: docs/performance.md).
    literally(d)
    n, m = out.shape
    zero, size = np.uint64(0), np.uint64(m)
    x = np.empty((2, d))
    for i in range(0, n - 1, 2):
        for k in range(d):
            x[0, k] = XT[k, i]
            x[1, k] = XT[k, i + 1]
        a0, a1 = nx[i], nx[i + 1]
        for j in range(zero, size):
            s0 = 0.0
            s1 = 0.0
            for k in range(d):
                y = YT[k, j]
                s0 += x[0, k] * y
                s1 += x[1, k] * y
            b = ny[j]
            out[i, j] = _clipped((s0 + a0) + b) * scale
            out[i + 1, j] = _clipped((s1 + a1) + b) * scale
        # the exponentials while the two rows are in the first-level cache: the tile is
        # written once (numpy's passes write it three times and read it twice)
        for r in range(i, i + 2):
            row = out[r]
            for j in range(zero, size):
                row[j] = _exp_nonpositive(row[j])
    if n % 2:
        i = n - 1
        for k in range(d):
            x[0, k] = XT[k, i]
        a0 = nx[i]
        row = out[i]
        for j in range(zero, size):
            s0 = 0.0
            for k in range(d):
                s0 += x[0, k] * YT[k, j]
            row[j] = _exp_nonpositive(_clipped((s0 + a0) + ny[j]) * scale)


@_loop(nogil=True, boundscheck=False, fastmath={"contract"})
def _exp_finish(out: np.ndarray, nx: np.ndarray, ny: np.ndarray, scale: float) -> None:  # pragma: no cover - compiled
    # the tile holds −2⟨x, y⟩ from BLAS: completed, clipped, scaled and exponentiated in one pass
    n, m = out.shape
    zero, size = np.uint64(0), np.uint64(m)
    for i in range(n):
        a = nx[i]
        row = out[i]
        for j in range(zero, size):
            row[j] = _exp_nonpositive(_clipped((row[j] + a) + ny[j]) * scale)


@_loop(nogil=True, boundscheck=False)
def _exp_direct_tile(out: np.ndarray, XT: np.ndarray, YT: np.ndarray, scale: float, d: int) -> None:  # pragma: no cover - compiled
    # no contraction: each square rounded, then added in order of k, as numpy's passes do
    literally(d)
    n, m = out.shape
    zero, size = np.uint64(0), np.uint64(m)
    x = np.empty(d)
    for i in range(n):
        for k in range(d):
            x[k] = XT[k, i]
        row = out[i]
        for j in range(zero, size):
            diff = x[0] - YT[0, j]
            s = diff * diff
            for k in range(1, d):
                diff = x[k] - YT[k, j]
                s = s + diff * diff
            row[j] = _exp_nonpositive(s * scale)


def centred_with_norms(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X and Y moved by Y's mean, and their squared row norms: the operands of the BLAS
    identity ‖x − y‖² = ‖x‖² + ‖y‖² − 2⟨x, y⟩, whose cancellation centring shrinks while
    leaving every distance unchanged."""
    centre = Y.mean(axis=0)
    Xc, Yc = X - centre, Y - centre
    return Xc, Yc, np.einsum("ij,ij->i", Xc, Xc), np.einsum("ij,ij->i", Yc, Yc)


def exp_squared_distance_tile(X: np.ndarray, Y: np.ndarray, scale: float, *, direct: bool = False) -> np.ndarray:
    """exp(scale · ‖x_i − y_j‖²) for all pairs, an ``(n, m)`` array, written once.

    The squared distances are :func:`monk_framework.numerics.distances.squared_distances`' times
    ``scale``, bit for bit: with ``direct``, squared coordinate differences summed in
    order; otherwise the BLAS identity on data centred at Y's mean, completed and clipped
    at 0, with −2⟨x, y⟩ summed in a compiled loop (up to :data:`COMPILED_TILE_MAX_FEATURES`
    features: sums of fused multiply-adds in the order of the features, OpenBLAS's bits on
    AVX-512) or by OpenBLAS. The exponential is :func:`exp_nonpositive`, within one unit in
    the last place of ``np.exp``. Each row is finished while in cache: the tile is written
    once, where a BLAS product and numpy's passes write it three times and read it twice.

    ``X`` (n × d) and ``Y`` (m × d) are finite float64 points and ``scale`` <= 0 (the RBF
    kernel: −1/(2σ²)), moderate enough that no square overflows; all the caller's to check.
    """
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"exp_squared_distance_tile needs X (n, d) and Y (m, d); got {X.shape} and {Y.shape}")
    n, d = X.shape
    out = np.empty((n, len(Y)))
    if out.size == 0 or d == 0:
        out.fill(1.0)  # no features: every squared distance is 0 (the loops index feature 0)
        return out
    scale = float(scale)
    if direct:
        XT, YT = np.array(X.T, order="C"), np.array(Y.T, order="C")
        done = _run(lambda: _exp_direct_tile_of(d)(out, XT, YT, scale, d))
    else:
        Xc, Yc, nx, ny = centred_with_norms(X, Y)
        # −2x is exact (a power of two), so the sums are −2⟨x, y⟩ bit for bit
        if d <= COMPILED_TILE_MAX_FEATURES:
            XT, YT = np.array((-2.0 * Xc).T, order="C"), np.array(Yc.T, order="C")
            done = _run(lambda: _exp_identity_tile_of(d)(out, XT, YT, nx, ny, scale, d))
        else:
            np.matmul(-2.0 * Xc, Yc.T, out=out)
            done = _run(lambda: _exp_finish(out, nx, ny, scale))
    if done is NOT_RUN:
        return reference.exp_squared_distance_tile(X, Y, scale, direct=direct)
    return out


def _exp_identity_tile_of(d: int) -> Callable[..., None]:
    return _specialised(_exp_identity_tile, _IDENTITY_TILES, d, 3, 2)


def _exp_direct_tile_of(d: int) -> Callable[..., None]:
    return _specialised(_exp_direct_tile, _DIRECT_TILES, d, 3, 0)
