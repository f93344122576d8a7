"""Compiled loops that fuse the elementwise passes over a kernel tile into one.

numpy runs each elementwise operation as its own pass over memory: adding the two
norm vectors to a matrix product, clipping at 0 and scaling is four passes over a tile,
which at the sizes of a matrix-free path cost more than the product of the distances
itself. The loops here make one pass, and do the same floating-point operations in the
same order as the numpy expressions they replace (no fast-math, no reassociation), so
the results are the same bit for bit (tested against those expressions).

They are compiled by numba on first use and cached on disk; ``nogil`` lets the threads
of a matrix-free reduction run them side by side. Importing this module does not import
numba: the loops are plain functions until first needed.

**A plain twin for each.** Every public routine here has a numpy reference of the same
name in :mod:`monk_framework.numerics.reference`, which runs instead when the compiled
loops are switched off (``MONK_COMPILED=0`` in the environment, or
:func:`set_compiled` / :func:`using_compiled` in Python), when numba cannot be imported,
or when a loop fails to compile (then with one :class:`CompiledLoopsWarning`). The
tests compare both paths on random inputs; where the compiled loop does the same
operations in the same order the bits are equal, elsewhere they agree to the round-off
each docstring states ("bit for bit" below is a statement about one processor's
arithmetic, not a contract across processors).

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

:func:`add_tile_product` is the other end of the scale: a tile's product with the
hundred-odd weight columns of a matrix-free permutation test, which BLAS runs below
its square-matrix rate. It reassociates its sums (each a vector of partial sums), so it
agrees with BLAS to round-off.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FunctionType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from monk_framework.core.errors import ParameterError, from_signal_handler
from monk_framework.numerics import reference

if TYPE_CHECKING:
    from llvmlite import ir

__all__ = [
    "COMPILED_FORM_MAX_FEATURES",
    "COMPILED_VARIABLE",
    "CompiledLoops",
    "CompiledLoopsWarning",
    "NOT_RUN",
    "compiled_available",
    "compiled_enabled",
    "compiled_threads",
    "set_compiled",
    "using_compiled",
    "COMPILED_TILE_MAX_FEATURES",
    "PATTERN_POINTS",
    "add_indicator_product",
    "add_tile_product",
    "centred_with_norms",
    "every_point_patterns",
    "exp_nonpositive",
    "exp_squared_distance_form",
    "exp_squared_distance_tile",
    "finish_squared_distances",
    "pack_patterns",
]

#: beyond this many features the unrolled distance loop of :func:`exp_squared_distance_form`
#: is slower than the BLAS product of a tile (d = 32: 4.6 against 5.8 ns a pair on one core;
#: d = 64: 54 against 7.8), so it declines and the caller walks the tiles
COMPILED_FORM_MAX_FEATURES = 32


# -- the switch, the lazy compilation and the fallback --------------------------------------

#: the environment variable that switches the compiled loops off ("0", "false", "no", "off")
COMPILED_VARIABLE = "MONK_COMPILED"
#: the values of COMPILED_VARIABLE read as on (unset or empty is on) and as off
_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


class CompiledLoopsWarning(UserWarning):
    """The compiled loops cannot run here (numba is missing, or a loop failed to compile):
    the library computes with the plain numpy references instead, with the same numbers
    to round-off and more time. Issued once per process. Also issued, once, where the
    loops run but numba cannot cache them on disk (they compile again in each process)."""


_LOCK = threading.RLock()
#: the switch set from Python (None: follow the environment variable); numba once
#: imported (None: not tried yet, False: cannot run here); whether the warning was given;
#: whether numba found nowhere to write its disk cache
_STATE: dict[str, Any] = {"switch": None, "numba": None, "warned": False, "no_cache": False}
#: what :meth:`CompiledLoops.run` returns when the loops did not run
NOT_RUN: Any = object()
F = TypeVar("F", bound=Callable[..., Any])


def compiled_enabled() -> bool:
    """Whether the compiled loops are switched on: by :func:`set_compiled`, else by the
    environment variable ``MONK_COMPILED`` (0, false, no or off: off; unset, empty, 1,
    true, yes or on: on; anything else is refused by name)."""
    switch = _STATE["switch"]
    if switch is not None:
        return bool(switch)
    value = os.environ.get(COMPILED_VARIABLE, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    # a typo ('fasle', 'of') must not leave the loops on while the user believes them off
    raise ParameterError(
        f"{COMPILED_VARIABLE}={os.environ[COMPILED_VARIABLE]!r} is not a switch: give 0 (off) or 1 (on, the default); "
        "false/true, no/yes and off/on are read the same way."
    )


def compiled_available() -> bool:
    """Whether the compiled loops run here: switched on, and numba imported (this loads
    it; a loop that later fails to compile switches them off for the process)."""
    return compiled_enabled() and _numba() is not None


def compiled_threads() -> int:
    """The threads the compiled parallel loops run on: numba's, or 1 where the compiled
    loops do not run. Starting them loads numba's threading layer: one that is not
    installed or not known (``NUMBA_THREADING_LAYER=tbb``, a typo) switches the compiled
    loops off for the process, with one :class:`CompiledLoopsWarning`, and gives 1."""
    if not compiled_available():
        return 1
    try:
        return int(_STATE["numba"].get_num_threads())
    except ValueError as exc:
        _threads_failed(exc)
        return 1


def _threads_failed(exc: ValueError) -> None:
    first = (str(exc).strip().splitlines() or [""])[0].rstrip(".")  # numba adds lines of hints
    _fall_back(f"numba cannot start its threads ({first}; check NUMBA_THREADING_LAYER)")


def set_compiled(enabled: bool | None) -> None:
    """Switch the compiled loops on (True) or off (False) for this process; None follows
    ``MONK_COMPILED`` again. Off, every routine here runs its numpy reference
    (:mod:`monk_framework.numerics.reference`)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_compiled takes True, False or None; got {enabled!r}")
    _STATE["switch"] = enabled


@contextmanager
def using_compiled(enabled: bool) -> Iterator[None]:
    """Run the ``with`` block with the compiled loops switched on or off."""
    before = _STATE["switch"]
    set_compiled(enabled)
    try:
        yield
    finally:
        _STATE["switch"] = before


def _fall_back(reason: str) -> None:
    with _LOCK:
        _STATE["numba"] = False
        if not _STATE["warned"]:
            _STATE["warned"] = True
            warnings.warn(
                f"{reason}; monk_framework computes with its numpy references instead (the same numbers to "
                f"round-off, slower). Set {COMPILED_VARIABLE}=0 to choose them and silence this warning.",
                CompiledLoopsWarning,
                stacklevel=4,
            )


def _numba() -> Any:
    """The numba module, imported once; None (after one :class:`CompiledLoopsWarning`)
    where it cannot be imported or a loop failed to compile."""
    with _LOCK:
        if _STATE["numba"] is None:
            try:
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    import numba
                    import numba.extending
            except Exception as exc:  # ImportError, or an installation that fails on import
                if from_signal_handler(exc):
                    raise  # the program's own timeout, which happened to interrupt the import
                _fall_back(f"numba cannot be imported ({type(exc).__name__}: {exc})")
            else:
                _pass_on(said)
                if getattr(numba.config, "DISABLE_JIT", False):
                    # njit then returns the plain Python function: the loops would run
                    # interpreted, a thousand times slower, and cannot be specialised
                    _fall_back("numba's compiler is switched off (NUMBA_DISABLE_JIT=1)")
                else:
                    _STATE["numba"] = numba
        return _STATE["numba"] or None


def _pass_on(said: list[warnings.WarningMessage]) -> None:
    """What numba warned while it was imported, as one line each: a setting it could not
    read (``NUMBA_NUM_THREADS=abc``) comes with the text of a traceback, which a user
    should not see."""
    for record in said:
        first = str(record.message).strip().splitlines()[0]
        warnings.warn(CompiledLoopsWarning(f"numba: {first} (numba ignores it)"), stacklevel=4)


def _njit(numba: Any, function: Callable[..., Any], options: dict[str, Any]) -> Any:
    """``numba.njit(cache=True, **options)(function)``, or without the disk cache where numba
    finds nowhere to write it: a read-only installation (a container's site-packages)
    with no writable home or ``NUMBA_CACHE_DIR``, where numba refuses to compile at all
    ("cannot cache function ...: no locator available"). The loops then compile again in
    each process, about a second, and one :class:`CompiledLoopsWarning` says how to
    keep them."""
    if not _STATE["no_cache"]:
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError as exc:
            if "cannot cache" not in str(exc):
                raise
            _STATE["no_cache"] = True
            warnings.warn(
                "numba finds no writable directory for its cache of compiled loops (the installation is "
                "read-only and so is the home directory); they are compiled again in each process, about a "
                "second. Set NUMBA_CACHE_DIR to a writable directory to keep them.",
                CompiledLoopsWarning,
                stacklevel=5,
            )
    return numba.njit(cache=False, **options)(function)


class CompiledLoops:
    """The numba loops of one module: plain functions until first needed, then compiled
    (and cached on disk) together, behind one switch and one fallback.

    A module marks its loops with :meth:`loop` and names, with :meth:`bind`, what numba
    supplies inside them (``numba.literally``, ``numba.prange``, an intrinsic: the module
    defines a plain stand-in of each). ``run(call)`` calls ``call`` with the loops
    compiled and returns its result, or :data:`NOT_RUN` when the loops are switched off,
    numba cannot be imported or a loop fails to compile (then with one
    :class:`CompiledLoopsWarning` for the process); the caller then computes its
    reference. :meth:`plain` gives a loop as plain Python, calling the plain versions of
    the others: its own reference, where numpy has no better one. Plugins may use this
    for their own loops.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._options: dict[str, dict[str, Any]] = {}
        self._bindings: dict[str, Callable[[Any], Any]] = {}
        self._stand_ins: dict[str, Any] = {}
        self._compiled = False
        self._plain: dict[str, Any] | None = None

    def loop(self, **options: Any) -> Callable[[F], F]:
        """Mark a module-level function as a loop for ``numba.njit(cache=True, **options)``."""

        def mark(function: F) -> F:
            self._options[function.__name__] = options
            return function

        return mark

    def bind(self, name: str, make: Callable[[Any], Any]) -> None:
        """When the loops are compiled, the module's ``name`` becomes ``make(numba)``."""
        self._bindings[name] = make
        self._stand_ins[name] = self._namespace.get(name)

    def _compile(self) -> bool:
        numba = _numba()
        if numba is None:
            return False
        with _LOCK:
            if not self._compiled:
                self._plain_namespace()  # kept before the names are rebound
                # all rebound at once, so that a failure here leaves the plain functions whole
                compiled = {name: make(numba) for name, make in self._bindings.items()}
                compiled.update({name: _njit(numba, self._namespace[name], options) for name, options in self._options.items()})
                self._namespace.update(compiled)
                self._compiled = True
        return True

    def run(self, call: Callable[[], Any]) -> Any:
        """``call()`` on the compiled loops, or :data:`NOT_RUN`. Compiling happens before a
        loop writes anything, so a loop that fails to compile leaves nothing half done."""
        if not compiled_enabled() or not self._compile():
            return NOT_RUN
        numba = _STATE["numba"]
        try:
            return call()
        except (numba.core.errors.NumbaError, RuntimeError) as exc:  # LLVM's errors come as RuntimeError
            first = str(exc).splitlines()[0] if str(exc) else ""
            _fall_back(f"a compiled loop failed to compile ({type(exc).__name__}: {first})")
            return NOT_RUN
        except ValueError as exc:
            # a parallel loop's threads start at its first call, before it computes
            # anything: a threading layer that is not installed or not known
            # (NUMBA_THREADING_LAYER=tbb, a typo) fails there
            if "threading layer" not in str(exc):
                raise
            _threads_failed(exc)
            return NOT_RUN

    def plain(self, name: str) -> Callable[..., Any]:
        """The loop ``name`` as plain Python, calling the plain versions of the others."""
        return cast(Callable[..., Any], self._plain_namespace()[name])

    def _plain_namespace(self) -> dict[str, Any]:
        with _LOCK:
            if self._plain is None:
                plain = dict(self._namespace)
                plain.update(self._stand_ins)
                for name in self._options:
                    function = self._namespace[name]
                    plain[name] = FunctionType(function.__code__, plain, name, function.__defaults__, function.__closure__)
                self._plain = plain
        return self._plain


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
def _exp_form(PT: np.ndarray, WT: np.ndarray, diag: np.ndarray, scale: float, d: int) -> np.ndarray:  # pragma: no cover - compiled
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
def _exp_identity_tile(  # pragma: no cover - compiled
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


# -- the product of a tile with many weight columns ------------------------------------------


@_loop(nogil=True, boundscheck=False, fastmath={"contract", "reassoc"})
def _tile_product(out: np.ndarray, T: np.ndarray, WT: np.ndarray, offset: int) -> None:  # pragma: no cover - compiled
    # Each running sum is a dot product along a row of T and a row of WT, both contiguous:
    # the loop over j vectorises (reassociation lets each sum run as 8 partial sums), and
    # every value loaded is used 4 or 6 times from a register. The unsigned indices spare
    # numba's test for negative ones, which keeps the loop from vectorising. The block of
    # 6 rows × 4 weight columns (24 sums) was measured on AVX-512: 6 × 4 and 4 × 6 run at
    # 51-52 GFLOP/s on one core, 4 × 4 at 44, 8 × 3 at 50, 2 × 8 at 33.
    rows, n = T.shape
    q = WT.shape[0]
    zero, size, u = np.uint64(0), np.uint64(n), np.uint64(offset)
    full_rows = rows - rows % 6
    full_cols = q - q % 4
    for i in range(0, full_rows, 6):
        for b in range(0, full_cols, 4):
            a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = a20 = a21 = a22 = a23 = 0.0
            a30 = a31 = a32 = a33 = a40 = a41 = a42 = a43 = a50 = a51 = a52 = a53 = 0.0
            for j in range(zero, size):
                k0, k1, k2, k3, k4, k5 = T[i, j], T[i + 1, j], T[i + 2, j], T[i + 3, j], T[i + 4, j], T[i + 5, j]
                w0, w1, w2, w3 = WT[b, u + j], WT[b + 1, u + j], WT[b + 2, u + j], WT[b + 3, u + j]
                a00, a01, a02, a03 = a00 + k0 * w0, a01 + k0 * w1, a02 + k0 * w2, a03 + k0 * w3
                a10, a11, a12, a13 = a10 + k1 * w0, a11 + k1 * w1, a12 + k1 * w2, a13 + k1 * w3
                a20, a21, a22, a23 = a20 + k2 * w0, a21 + k2 * w1, a22 + k2 * w2, a23 + k2 * w3
                a30, a31, a32, a33 = a30 + k3 * w0, a31 + k3 * w1, a32 + k3 * w2, a33 + k3 * w3
                a40, a41, a42, a43 = a40 + k4 * w0, a41 + k4 * w1, a42 + k4 * w2, a43 + k4 * w3
                a50, a51, a52, a53 = a50 + k5 * w0, a51 + k5 * w1, a52 + k5 * w2, a53 + k5 * w3
            sums = (a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33, a40, a41, a42, a43, a50, a51, a52, a53)
            for r in range(6):
                for c in range(4):
                    out[i + r, b + c] += sums[4 * r + c]
        for b in range(full_cols, q):
            a0 = a1 = a2 = a3 = a4 = a5 = 0.0
            for j in range(zero, size):
                w = WT[b, u + j]
                a0, a1, a2 = a0 + T[i, j] * w, a1 + T[i + 1, j] * w, a2 + T[i + 2, j] * w
                a3, a4, a5 = a3 + T[i + 3, j] * w, a4 + T[i + 4, j] * w, a5 + T[i + 5, j] * w
            edge = (a0, a1, a2, a3, a4, a5)
            for r in range(6):
                out[i + r, b] += edge[r]
    for i in range(full_rows, rows):
        for b in range(0, full_cols, 4):
            a0 = a1 = a2 = a3 = 0.0
            for j in range(zero, size):
                k = T[i, j]
                a0, a1 = a0 + k * WT[b, u + j], a1 + k * WT[b + 1, u + j]
                a2, a3 = a2 + k * WT[b + 2, u + j], a3 + k * WT[b + 3, u + j]
            last = (a0, a1, a2, a3)
            for c in range(4):
                out[i, b + c] += last[c]
        for b in range(full_cols, q):
            a = 0.0
            for j in range(zero, size):
                a += T[i, j] * WT[b, u + j]
            out[i, b] += a


def add_tile_product(out: np.ndarray, T: np.ndarray, WT: np.ndarray, offset: int = 0) -> bool:
    """out += T · W[offset : offset + m] for a tile T (r × m) of a Gram matrix and the
    transposed weights WT = Wᵀ (q × n), in place; True if done, False (nothing done) when
    an array is not laid out for it, so that the caller multiplies through BLAS instead.

    The relabelling products of a matrix-free permutation test, R [E, 1] for each tile R
    (docs/performance.md): q is about B + 2 there, a thin product that OpenBLAS runs at
    about 45 GFLOP/s a core, repacking every tile for a hundred columns. This loop reads
    the tile in place and keeps a 6 × 4 block of sums in registers (51-52 GFLOP/s on
    AVX-512). It adds in another order than BLAS, so the sums agree to round-off.

    Needs C-ordered float64 arrays ``out`` (r × q, writable), ``T`` and ``WT`` (W's
    columns contiguous, i.e. W in Fortran order), and ``0 <= offset <= n − m``.
    """
    arrays = (out, T, WT)
    if not all(isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == np.float64 and a.flags.c_contiguous for a in arrays):
        return False
    if not out.flags.writeable or out.shape != (T.shape[0], WT.shape[0]):
        return False
    if not 0 <= offset <= WT.shape[1] - T.shape[1]:
        raise ValueError(f"add_tile_product: columns {offset}:{offset + T.shape[1]} outside the {WT.shape[1]} weight rows")
    if _run(lambda: _tile_product(out, T, WT, int(offset))) is NOT_RUN:
        reference.add_tile_product(out, T, WT, int(offset))
    return True


# -- the relabelling products by subset sums -------------------------------------------------
#
# A relabelling's column of the indicator matrix E holds only 0s and 1s, so the product of
# a tile with E adds up chosen tile values and multiplies nothing. Four points at a time:
# the 16 sums of every subset of four consecutive tile rows are tabulated once (11
# additions and 16 stores per lane), and each of the B columns then takes its subset's
# sum with one load and one addition, where a multiply-add product spends four
# multiply-adds (the method of Four Russians, Arlazarov, Dinic, Kronrod and Faradzev
# 1970, over the reals). The tables are written and read as vectors of 8 doubles in
# LLVM IR of our own: numba's loop vectoriser keeps scalar code for a lookup whose
# address depends on the loaded pattern.
#
# For the next maintainer of this hand-written IR:
# - What it computes: out[b, i] += Σ_j KT[j, i] · E[offset + j, b], E the 0/1 matrix whose
#   rows ``patterns`` packs four to a byte (add_indicator_product's docstring).
# - Its reference: monk_framework.numerics.reference.add_indicator_product, one BLAS
#   product of the unpacked E; both run on every test of this routine.
# - How to check it: tests/monk_framework/numerics/test_compiled_twins.py (against the reference
#   and against E's product, remainders of lanes, columns and groups included),
#   tests/monk_framework/numerics/test_compiled.py (exact integer sums at the tests' shapes), the same
#   with NUMBA_CPU_NAME=generic (no AVX: the 8-double vectors are split by LLVM), and
#   benchmarks/bench_products.py for its speed.
# - Why it stays: on its benchmark it must beat the best plain-numba loop for the same
#   product (add_tile_product, the register-blocked multiply-add loop; a plain-numba
#   subset-sum loop stayed scalar and ran at 0.3-0.8 of that) by 1.3x or more; it runs at
#   2.6-3.5x (102 and 1001 columns, docs/performance.md). The IR gives element types explicitly, so it is the
#   same with llvmlite's typed and opaque pointers.

#: points per pattern: bit t of a pattern byte says whether a relabelling calls point
#: 4g + t of group g an X point
PATTERN_POINTS = 4
#: lanes (result rows) of one vector
_VECTOR = 8
#: result columns whose sums stay in registers through a run of lookups (with two
#: vectors of lanes, 16 registers of AVX-512's 32)
_COLUMN_BLOCK = 8
#: groups of four points whose tables are built before their lookups: 16 groups × 16
#: subsets × 16 lanes × 8 bytes, 32 KB, stay in the L1 cache while every column reads them
_GROUP_BLOCK = 16


def _vector_type() -> ir.VectorType:  # pragma: no cover - compile time
    from llvmlite import ir

    return ir.VectorType(ir.DoubleType(), _VECTOR)


def _vector_pointer(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value) -> ir.Value:  # pragma: no cover - compile time
    from llvmlite import ir

    # element types given explicitly, so that the IR is the same with typed and with opaque pointers
    return builder.bitcast(builder.gep(base, [offset], source_etype=ir.DoubleType()), _vector_type().as_pointer())


def _subset_tables_typing(vectors: int) -> Any:
    """tables(tab, KT, stride, j, lane, base): for the lanes lane:lane + 8·vectors of the
    four rows j..j+3 of KT (rows ``stride`` doubles apart), the sum over every subset p of
    them at tab[base + (p·vectors + v)·8 : … + 8] (bit t of p: row j + t)."""

    def typing(typingctx: object, tab: Any, KT: Any, stride: Any, j: Any, lane: Any, base: Any) -> tuple[object, object]:  # pragma: no cover
        from llvmlite import ir
        from numba import types

        sig = types.void(tab, KT, types.int64, types.int64, types.int64, types.int64)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
            tab_data = context.make_array(signature.args[0])(context, builder, args[0]).data
            kt_data = context.make_array(signature.args[1])(context, builder, args[1]).data
            stride, j, lane, base = args[2:]
            i64 = ir.IntType(64)
            zero = ir.Constant(ir.VectorType(ir.DoubleType(), _VECTOR), [0.0] * _VECTOR)
            for v in range(vectors):
                column = builder.add(lane, ir.Constant(i64, _VECTOR * v))
                x = [
                    builder.load(
                        _vector_pointer(builder, kt_data, builder.add(builder.mul(builder.add(j, ir.Constant(i64, t)), stride), column)),
                        align=8,
                        typ=_vector_type(),
                    )
                    for t in range(PATTERN_POINTS)
                ]
                sums = [zero]
                for t in range(PATTERN_POINTS):  # subsets with top bit t: row j + t plus a smaller subset
                    sums += [x[t] if p == 0 else builder.fadd(sums[p], x[t]) for p in range(1 << t)]
                for p, value in enumerate(sums):
                    builder.store(value, _vector_pointer(builder, tab_data, builder.add(base, ir.Constant(i64, (p * vectors + v) * _VECTOR))), align=8)
            return context.get_dummy_value()

        return sig, codegen

    return typing


def _subset_lookups_typing(columns: int, vectors: int) -> Any:
    """lookups(out, out_stride, tab, P, P_stride, group, b, count, lane): for ``count``
    groups from ``group`` (tables from tab[0], 16·vectors·8 doubles a group) and the
    result columns b..b+columns−1, the sum of the tables' entries that the patterns
    P[group + g, b + c] pick, added to out[b + c, lane : lane + 8·vectors]."""

    def typing(
        typingctx: object, out: Any, out_stride: Any, tab: Any, P: Any, p_stride: Any, group: Any, b: Any, count: Any, lane: Any
    ) -> tuple[object, object]:  # pragma: no cover - compile time
        from llvmlite import ir
        from numba import types

        sig = types.void(out, types.int64, tab, P, types.int64, types.int64, types.int64, types.int64, types.int64)

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
            out_data = context.make_array(signature.args[0])(context, builder, args[0]).data
            tab_data = context.make_array(signature.args[2])(context, builder, args[2]).data
            p_data = context.make_array(signature.args[3])(context, builder, args[3]).data
            out_stride, p_stride, group, b, count, lane = args[1], *args[4:]
            i64 = ir.IntType(64)
            zero = ir.Constant(ir.VectorType(ir.DoubleType(), _VECTOR), [0.0] * _VECTOR)
            entry = builder.block
            loop = builder.append_basic_block("subset.lookups")
            done = builder.append_basic_block("subset.done")
            builder.cbranch(builder.icmp_signed(">", count, ir.Constant(i64, 0)), loop, done)
            builder.position_at_end(loop)
            g = builder.phi(i64)
            g.add_incoming(ir.Constant(i64, 0), entry)
            sums = []
            for _ in range(columns * vectors):
                s = builder.phi(zero.type)
                s.add_incoming(zero, entry)
                sums.append(s)
            row = builder.add(builder.mul(builder.add(group, g), p_stride), b)
            table = builder.mul(g, ir.Constant(i64, 16 * vectors * _VECTOR))
            added = []
            for c in range(columns):
                byte = builder.gep(p_data, [builder.add(row, ir.Constant(i64, c))], source_etype=ir.IntType(8))
                pattern = builder.zext(builder.load(byte, typ=ir.IntType(8)), i64)
                entry_at = builder.add(table, builder.mul(pattern, ir.Constant(i64, vectors * _VECTOR)))
                for v in range(vectors):
                    value = builder.load(_vector_pointer(builder, tab_data, builder.add(entry_at, ir.Constant(i64, v * _VECTOR))), align=8, typ=_vector_type())
                    added.append(builder.fadd(sums[c * vectors + v], value))
            following = builder.add(g, ir.Constant(i64, 1))
            g.add_incoming(following, loop)
            for s, a in zip(sums, added):
                s.add_incoming(a, loop)
            builder.cbranch(builder.icmp_signed("<", following, count), loop, done)
            builder.position_at_end(done)
            totals = []  # a block's phi nodes come before its other instructions
            for a in added:
                total = builder.phi(zero.type)
                total.add_incoming(zero, entry)
                total.add_incoming(a, loop)
                totals.append(total)
            for c in range(columns):
                at = builder.add(builder.mul(builder.add(b, ir.Constant(i64, c)), out_stride), lane)
                for v in range(vectors):
                    pointer = _vector_pointer(builder, out_data, builder.add(at, ir.Constant(i64, v * _VECTOR)))
                    builder.store(builder.fadd(builder.load(pointer, align=8, typ=_vector_type()), totals[c * vectors + v]), pointer, align=8)
            return context.get_dummy_value()

        return sig, codegen

    return typing


#: numba's intrinsics of the tables and the lookups, made when the loops are first needed
#: (tables of 2 or 1 vectors of lanes; lookups of 8 or 1 columns by 2 or 1 vectors)
_INTRINSICS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "_tables_2": (_subset_tables_typing, (2,)),
    "_tables_1": (_subset_tables_typing, (1,)),
    "_lookups_8x2": (_subset_lookups_typing, (_COLUMN_BLOCK, 2)),
    "_lookups_1x2": (_subset_lookups_typing, (1, 2)),
    "_lookups_8x1": (_subset_lookups_typing, (_COLUMN_BLOCK, 1)),
    "_lookups_1x1": (_subset_lookups_typing, (1, 1)),
}
_tables_2: Any = None
_tables_1: Any = None
_lookups_8x2: Any = None
_lookups_1x2: Any = None
_lookups_8x1: Any = None
_lookups_1x1: Any = None


def _intrinsic(factory: Callable[..., Any], arguments: tuple[int, ...], numba: Any) -> Any:
    return numba.extending.intrinsic(factory(*arguments))


for name, (factory, arguments) in _INTRINSICS.items():
    _loops.bind(name, partial(_intrinsic, factory, arguments))
del name, factory, arguments


@_loop(nogil=True, boundscheck=False)
def _single_points(out: np.ndarray, KT: np.ndarray, P: np.ndarray, offset: int, a: int, b: int) -> None:  # pragma: no cover - compiled
    # rows a:b of KT one by one (points offset + a … of the patterns): outside whole groups
    q, lanes = out.shape
    for j in range(a, b):
        point = offset + j
        g, bit = point // 4, np.uint8(1 << (point % 4))
        values = KT[j]
        for c in range(q):
            if P[g, c] & bit:
                row = out[c]
                for i in range(lanes):
                    row[i] += values[i]


@_loop(nogil=True, boundscheck=False)
def _indicator_product(out: np.ndarray, KT: np.ndarray, P: np.ndarray, offset: int, tab: np.ndarray) -> None:  # pragma: no cover - compiled
    # out (q × lanes, rows contiguous) += the product of KT's transpose with the indicator
    # columns of points offset…, lanes a multiple of 8 (the caller pads): whole groups of four points by
    # subset sums, the points before the first whole group and after the last one by one
    points, lanes = KT.shape
    q = out.shape[0]
    o_stride, k_stride, p_stride = out.strides[0] // 8, KT.strides[0] // 8, P.strides[0]
    lead = min((-offset) % 4, points)
    groups = (points - lead) // 4
    first = (offset + lead) // 4
    full = q - q % _COLUMN_BLOCK
    _single_points(out, KT, P, offset, 0, lead)
    lane = 0
    while lane < lanes:
        wide = lanes - lane >= 16
        for g0 in range(0, groups, _GROUP_BLOCK):
            count = min(_GROUP_BLOCK, groups - g0)
            for g in range(count):
                if wide:
                    _tables_2(tab, KT, k_stride, lead + 4 * (g0 + g), lane, 256 * g)
                else:
                    _tables_1(tab, KT, k_stride, lead + 4 * (g0 + g), lane, 128 * g)
            for b in range(0, full, _COLUMN_BLOCK):
                if wide:
                    _lookups_8x2(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
                else:
                    _lookups_8x1(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
            for b in range(full, q):
                if wide:
                    _lookups_1x2(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
                else:
                    _lookups_1x1(out, o_stride, tab, P, p_stride, first + g0, b, count, lane)
        lane += 16 if wide else 8
    _single_points(out, KT, P, offset, lead + 4 * groups, points)


def add_indicator_product(out: np.ndarray, KT: np.ndarray, patterns: np.ndarray, offset: int = 0) -> bool:
    """out[b, i] += Σ_j KT[j, i] · E[offset + j, b] for a 0/1 matrix E given by its
    ``patterns`` (:func:`~monk_framework.engine.pooled.indicator_patterns`: E's rows packed four
    to a byte), in place; True if done, False (nothing done) when an array is not laid out
    for it, so that the caller multiplies through BLAS or :func:`add_tile_product`.

    The relabelling products of a permutation test, Rᵀ E for a tile Rᵀ = KT of the Gram
    matrix (K is symmetric): each column of E only picks tile values, so this adds
    subset sums tabulated four points at a time instead of multiplying (a 256 × 2048
    tile and 102 columns on one AVX-512 core: 1.65 ms, against 2.66 for the multiply-add
    loop and for OpenBLAS; benchmarks/bench_products.py). The sums are added in another
    order than a product's, so they agree with it to round-off.

    Needs ``out`` C-ordered float64 (q × r, writable), ``KT`` float64 with contiguous
    rows (m × r; lanes beyond a multiple of 8 are copied into one padded vector),
    ``patterns`` C-ordered uint8 (q columns) and
    ``0 <= offset <= 4·len(patterns) − m``. Points before the first whole group of four
    (``offset`` not a multiple of 4) and after the last are added one by one.
    """
    if not (isinstance(out, np.ndarray) and isinstance(KT, np.ndarray) and isinstance(patterns, np.ndarray)):
        return False
    if out.ndim != 2 or KT.ndim != 2 or patterns.ndim != 2 or out.dtype != np.float64 or KT.dtype != np.float64:
        return False
    if patterns.dtype != np.uint8 or not patterns.flags.c_contiguous or not out.flags.c_contiguous or not out.flags.writeable:
        return False
    points, lanes = KT.shape
    if out.shape != (patterns.shape[1], lanes):
        return False
    # (an empty array's strides say nothing about a layout)
    if points and lanes and (KT.strides[1] != 8 or KT.strides[0] % 8):
        return False
    if not 0 <= offset <= PATTERN_POINTS * patterns.shape[0] - points:
        raise ValueError(f"add_indicator_product: points {offset}:{offset + points} outside the {PATTERN_POINTS * patterns.shape[0]} of the patterns")
    if not (points and lanes and len(out)):
        return True
    tables = _aligned_tables()
    whole = lanes - lanes % _VECTOR
    if whole:
        head, KT_head = out[:, :whole], KT[:, :whole]
        if _run(lambda: _indicator_product(head, KT_head, patterns, int(offset), tables)) is NOT_RUN:
            reference.add_indicator_product(head, KT_head, patterns, int(offset))
    if whole < lanes:
        # the last lanes through one padded vector
        rest = np.zeros((points, _VECTOR))
        rest[:, : lanes - whole] = KT[:, whole:]
        sums = np.zeros((len(out), _VECTOR))
        if _run(lambda: _indicator_product(sums, rest, patterns, int(offset), tables)) is NOT_RUN:
            reference.add_indicator_product(sums, rest, patterns, int(offset))
        out[:, whole:] += sums[:, : lanes - whole]
    return True


def _aligned_tables() -> np.ndarray:
    # the tables of one block of groups on a 64-byte boundary: each vector of 8 doubles
    # then lies in one cache line
    buffer = np.empty(_GROUP_BLOCK * 16 * 16 + _VECTOR)
    skip = (-buffer.ctypes.data % 64) // 8
    return buffer[skip : skip + _GROUP_BLOCK * 16 * 16]


def every_point_patterns(size: int) -> np.ndarray:
    """The patterns of a column that picks all ``size`` points: ⌈size/4⌉ bytes, 0b1111
    for each whole group of four and the low bits of a last partial group."""
    whole, rest = divmod(size, PATTERN_POINTS)
    every = np.full(-(-size // PATTERN_POINTS), (1 << PATTERN_POINTS) - 1, dtype=np.uint8)
    if rest:
        every[whole] = (1 << rest) - 1
    return every


@_loop(nogil=True, boundscheck=False)
def _pack_patterns(P: np.ndarray, perms: np.ndarray, n: int) -> None:  # pragma: no cover - compiled
    for b in range(perms.shape[0]):
        for k in range(n):
            i = perms[b, k]
            P[i >> 2, b] |= np.uint8(1 << (i & 3))


def pack_patterns(P: np.ndarray, perms: np.ndarray, n: int) -> None:
    """P[i // 4, b] |= 1 << (i % 4) for the first ``n`` points i of each row b of ``perms``
    (int64, every point in 0..4·len(P) − 1: checked by the caller,
    :func:`~monk_framework.engine.pooled.indicator_patterns`), P uint8 and C-ordered, in place."""
    if P.dtype != np.uint8 or P.ndim != 2 or not P.flags.c_contiguous or P.shape[1] < len(perms):
        raise ValueError(f"pack_patterns needs a C-ordered uint8 array with {len(perms)} columns or more, got {P.dtype} {P.shape}")
    perms = np.asarray(perms, dtype=np.int64)
    if _run(lambda: _pack_patterns(P, perms, int(n))) is NOT_RUN:
        reference.pack_patterns(P, perms, int(n))
