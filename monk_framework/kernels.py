"""The kernel interface and the numerical machinery every kernel shares.

A kernel plugin subclasses :class:`Kernel` and implements the *core* methods
``compute_gram(X, Y)`` (the rectangle of values k(x_i, y_j) for already validated inputs) and
``compute_diag(X)`` (k(x_i, x_i)). The public methods validate inputs once, check memory
before allocating, and call the core on chunks:

* ``gram(X)`` computes only the upper band of each row chunk and mirrors it, so the
  matrix is exactly symmetric and half the kernel evaluations are saved; its diagonal
  is set from ``compute_diag`` so that ``np.diag(gram(X)) == diag(X)`` holds bit for bit.
* ``gram(X, Y)`` fills the rectangle row chunk by row chunk, bounding temporaries.
"""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar, Self

import attrs
import numpy as np

from .data import Sample, as_strings, as_vectors, check_same_dimension
from .errors import DataError, KernelContractError, KernelOverflowError, MonkError, ParameterError, ResourceError
from .params import Configurable, renamed_hook

__all__ = [
    "Kernel",
    "available_memory",
    "check_memory",
    "check_squared_norm",
    "format_bytes",
    "magnitude",
    "power_of_two",
    "scaled_distances",
    "scaled_squared_distances",
    "exp_scaled_squared_distances",
    "median_distance",
    "order_statistics",
    "distances",
    "squared_distances",
]

#: bytes of one row chunk of a Gram matrix: small enough to stay in cache for the
#: elementwise passes that follow the matrix product (measured in benchmarks/bench_gram.py).
#: pairs per block of :meth:`Kernel.pair_values` (its cost: this many kernel values a pair)
PAIR_BLOCK = 32
CHUNK_BYTES = 4 * 1024 * 1024
#: the median heuristic uses at most this many pooled points (a fixed-seed subsample).
MEDIAN_MAX_POINTS = 2000
#: relative round-off allowed before a value is taken as proof that a kernel is not PSD
#: or not symmetric: 1e-9 of the scale of the terms it came from (float64 sums of
#: thousands of terms stay near 1e-13; a wrong kernel is off by orders of magnitude)
CONTRACT_RTOL = 1e-9
#: the same for comparisons of k(x, x) computed two ways (the distance identities used by
#: compute_gram round differently from compute_diag, by about 1e-16 times ‖x‖²/σ² for RBF)
DIAG_RTOL = 1e-6
#: points of each diagonal Gram block whose pairs are checked (symmetry, Cauchy–Schwarz)
CONTRACT_CHECK_POINTS = 64


@attrs.frozen(kw_only=True)
class Kernel(Configurable):
    """A positive semi-definite kernel k(x, y) with its hyperparameters.

    Subclasses set the class attributes ``name``, ``summary``, ``formula`` and
    ``input_kind`` ("vector" or "string"), declare hyperparameters with
    :func:`monk_framework.params.parameter`, and implement ``compute_gram`` and ``compute_diag``
    (and ``compute_features`` when ``has_features`` is true).
    """

    plugin_type: ClassVar[str] = "kernel"
    #: "vector" (numeric arrays) or "string" (sequences of str).
    input_kind: ClassVar[str] = "vector"
    #: whether the kernel is positive semi-definite (checked by the conformance suite).
    is_psd: ClassVar[bool] = True
    #: whether :meth:`features` gives an explicit finite feature map.
    has_features: ClassVar[bool] = False
    #: whether k(x, y) >= 0 for all inputs (tightens :meth:`feature_diameter`).
    nonnegative: ClassVar[bool] = False
    #: whether k(x, y) = κ(x − y) with :meth:`spectral_frequencies` implemented.
    translation_invariant: ClassVar[bool] = False

    # -- public API: validate, then call the core ------------------------------------

    def __call__(self, X: Any, Y: Any = None) -> np.ndarray:
        """``k(X, Y)`` is ``k.gram(X, Y)`` (and ``k(X)`` is ``k.gram(X)``)."""
        return self.gram(X, Y)

    def __add__(self, other: Any) -> Kernel:
        """``k1 + k2``: the kernel k1(x, y) + k2(x, y) (:mod:`monk_framework.kernel_algebra`)."""
        from .kernel_algebra import SumKernel

        if not isinstance(other, Kernel):
            return NotImplemented
        return SumKernel(left=self, right=other)

    def __mul__(self, other: Any) -> Kernel:
        """``k1 * k2`` (the product kernel) or ``k * c`` (c > 0)."""
        from .kernel_algebra import ProductKernel, scale

        if isinstance(other, Kernel):
            return ProductKernel(left=self, right=other)
        return scale(other, self)

    def __rmul__(self, other: Any) -> Kernel:
        """``c * k`` for a number c > 0."""
        from .kernel_algebra import scale

        return scale(other, self)

    def check_sample(self, X: Any, *, name: str = "X") -> Sample:
        """Validate a sample for this kernel's input kind (see :mod:`monk_framework.data`)."""
        user = f"kernel {self.name!r}"
        if self.input_kind == "string":
            return as_strings(X, name=name, user=user)
        return as_vectors(X, name=name, user=user)

    def check_pair(self, X: Any, Y: Any, *, names: tuple[str, str] = ("X", "Y")) -> tuple[Sample, Sample]:
        """Validate two samples that will be compared (same input kind and dimension)."""
        Xv = self.check_sample(X, name=names[0])
        Yv = self.check_sample(Y, name=names[1])
        if isinstance(Xv, np.ndarray) and isinstance(Yv, np.ndarray):
            check_same_dimension(Xv, Yv, names=names)
        return Xv, Yv

    def fit(self, X: Any, Y: Any = None) -> Self:
        """Resolve data-dependent hyperparameters (e.g. ``sigma="median"``) on X ∪ Y.

        Returns a kernel whose every hyperparameter is a number; estimators call this
        once on the pooled sample so that every Gram block uses the same kernel.
        Kernels without data-dependent hyperparameters return ``self``.
        """
        return self

    @property
    def is_fitted(self) -> bool:
        """False while a hyperparameter is still a rule such as ``"median"``."""
        return True

    def gram(self, X: Any, Y: Any = None) -> np.ndarray:
        """The Gram matrix ``K[i, j] = k(X[i], Y[j])`` (``Y = X`` when omitted).

        With ``Y`` omitted the result is exactly symmetric and its diagonal equals
        :meth:`diag`.
        """
        self._require_fitted()
        if Y is None:
            Xv = self.check_sample(X)
            return self.symmetric_gram(Xv)
        Xv, Yv = self.check_pair(X, Y)
        return self._rectangular_gram(Xv, Yv)

    def diag(self, X: Any) -> np.ndarray:
        """``k(x_i, x_i)`` for every point of X, without forming the Gram matrix."""
        self._require_fitted()
        Xv = self.check_sample(X)
        return self.diag_tile(Xv)

    def features(self, X: Any) -> np.ndarray:
        """An explicit feature map Φ with ``Φ(X) Φ(Y)ᵀ = gram(X, Y)``, where one exists."""
        if not self.has_features:
            raise MonkError(f"Kernel {self.name!r} has no explicit finite feature map.")
        self._require_fitted()
        Xv = self.check_sample(X)
        return self.compute_features(Xv)

    def pair_values(self, A: Any, B: Any) -> np.ndarray:
        """k(a_l, b_l) for the pairs l of two validated samples of one length (the diagonal
        of k(A, B), without the rest): from ``gram_tile`` on blocks of
        :data:`PAIR_BLOCK` pairs, so it costs PAIR_BLOCK kernel values a pair. A kernel
        may override it with a direct formula."""
        if len(A) != len(B):
            raise DataError(f"pair_values needs two samples of one length; got {len(A)} and {len(B)}.")
        out = np.empty(len(A))
        for a in range(0, len(A), PAIR_BLOCK):
            out[a : a + PAIR_BLOCK] = np.diagonal(self.gram_tile(A[a : a + PAIR_BLOCK], B[a : a + PAIR_BLOCK]))
        return out

    def spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray | None:
        """ω_1..ω_D drawn from the spectral density of a translation-invariant kernel
        k(x, y) = κ(x − y) = κ(0) E_ω cos(ωᵀ(x − y)) (Bochner), as a (D, d) array; None for
        a kernel that is not translation-invariant (the default). Random Fourier features
        (the ``rff`` estimator) are built from them."""
        return None

    def sup_diag(self) -> float | None:
        """κ = sup_x k(x, x) over every possible input, or None when the kernel is unbounded.

        A bounded kernel declares it by overriding this method (RBF and Laplace: 1; the
        normalised string kernel: 1). Robust tests need it: with κ finite, replacing one
        point moves the V-statistic MMD by at most :meth:`feature_diameter` / min(N, M)
        (see :func:`monk_framework.robust.mmd_sensitivity`). The default, None, claims
        nothing, so an unknown kernel is treated as unbounded.
        """
        return None

    def feature_diameter(self) -> float | None:
        """D = sup_{x, x'} ‖φ(x) − φ(x')‖_H, or None when the kernel is unbounded.

        ‖φ(x) − φ(x')‖² = k(x, x) + k(x', x') − 2k(x, x') ≤ 2κ + 2κ by Cauchy–Schwarz,
        so D ≤ 2√κ; a kernel with ``nonnegative = True`` has k(x, x') ≥ 0, so D ≤ √(2κ)
        (√2 for the RBF and Laplace kernels). Plugins may override it with a tighter value.
        """
        kappa = self.sup_diag()
        if kappa is None:
            return None
        return math.sqrt(2.0 * kappa) if self.nonnegative else 2.0 * math.sqrt(kappa)

    def gaussian_mmd2(
        self, mean_x: Any, cov_x: Any, mean_y: Any, cov_y: Any
    ) -> float:
        """Closed-form MMD² between N(mean_x, cov_x) and N(mean_y, cov_y), where known.

        MMD² = E k(x, x') + E k(y, y') − 2 E k(x, y) with independent copies; each
        expectation comes from the kernel's ``gaussian_expectation``.
        """
        m1, c1 = _as_gaussian(mean_x, cov_x)
        m2, c2 = _as_gaussian(mean_y, cov_y)
        if m1.shape != m2.shape:
            raise DataError("The two Gaussians live in spaces of different dimensions.")
        self._require_fitted()
        e = self.gaussian_expectation
        return float(e(m1, c1, m1, c1) + e(m2, c2, m2, c2) - 2.0 * e(m1, c1, m2, c2))

    # -- the core a plugin implements ------------------------------------------------

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        """The rectangle k(X[i], Y[j]) for validated inputs (a chunk of rows of X)."""
        return np.asarray(renamed_hook(self, "_gram", "compute_gram")(X, Y))

    def compute_diag(self, X: Any) -> np.ndarray:
        """k(X[i], X[i]) for validated inputs."""
        return np.asarray(renamed_hook(self, "_diag", "compute_diag")(X))

    def compute_features(self, X: Any) -> np.ndarray:
        """Φ(X), rows the explicit features of the points (kernels with ``has_features``)."""
        return np.asarray(renamed_hook(self, "_features", "compute_features")(X))

    def compute_block_gram(self, Z: Any, W: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
        """Wᵀ K W for the Gram matrix K of a validated sample Z, with ``diag`` on its
        diagonal, and a dense n × c weight matrix W with a few columns, computed directly
        without tiles of K; or None (the default) when the kernel has no such shortcut,
        and the caller walks the tiles.

        Matrix-free sources call it for the within-block sums of the MONK estimators (two
        indicator columns per block), where a compiled loop that adds each pair's value
        as it goes beats forming the tiles (the RBF kernel:
        :func:`monk_framework.fused.exp_squared_distance_form`)."""
        return None

    def gaussian_expectation(
        self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray
    ) -> float:
        """E k(x, y) for independent x ~ N(m1, c1), y ~ N(m2, c2)."""
        raise MonkError(f"Kernel {self.name!r} has no closed-form MMD between Gaussians.")

    # -- machinery -------------------------------------------------------------------

    def _require_fitted(self) -> None:
        if not self.is_fitted:
            raise MonkError(
                f"Kernel {self.spec()} has a data-dependent hyperparameter; resolve it on "
                "the pooled sample first with kernel.fit(X, Y) (estimators do this)."
            )

    def check_finite(self, values: np.ndarray) -> np.ndarray:
        """``values`` if every one is finite; else :class:`KernelOverflowError`, naming the
        kernel. A kernel that computes its own Gram matrix (overriding
        :meth:`symmetric_gram`) passes its result through this."""
        # a kernel value that overflowed (or a plugin's NaN) must never become a number
        if not np.isfinite(values).all():
            raise KernelOverflowError(
                f"Kernel {self.spec()} gives non-finite values (overflow to inf, or NaN) on "
                "these data; rescale the data or change the kernel's parameters."
            )
        return values

    def plugin_label(self) -> str:
        """``kernel 'name' (module.Class)``: how errors about a plugin's values name it."""
        cls = type(self)
        return f"kernel {self.name!r} ({cls.__module__}.{cls.__qualname__})"

    def gram_tile(self, X: Sample, Y: Sample, *, check: bool = True) -> np.ndarray:
        """k(X[i], Y[j]) for validated samples (a tile of a Gram matrix): ``compute_gram``'s values,
        checked for shape and finiteness. What Gram sources and chunked loops evaluate; no
        memory check and no symmetry (use :meth:`gram` for a whole Gram matrix).

        ``check=False`` leaves the finiteness to the caller, who must pass what it derives
        from the tile through :meth:`check_finite` (a matrix-free product does: a NaN or
        an infinity reaches every sum of its row, so one check of the sums covers it)."""
        with np.errstate(over="ignore", invalid="ignore"):
            values = np.asarray(self.compute_gram(X, Y), dtype=np.float64)
        # a wrong shape would be broadcast into the Gram matrix without a word
        if values.shape != (len(X), len(Y)):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_gram returned shape {values.shape} for {len(X)} x {len(Y)} "
                f"points; it must return the whole rectangle k(X[i], Y[j]), shape ({len(X)}, {len(Y)})."
            )
        return self.check_finite(values) if check else values

    def direct_block_gram(self, Z: Sample, W: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
        """``compute_block_gram``'s Wᵀ K W, checked for shape and finiteness, or None when
        the kernel has no direct form for these inputs."""
        with np.errstate(over="ignore", invalid="ignore"):
            G = self.compute_block_gram(Z, W, diag)
        if G is None:
            return None
        G = np.asarray(G, dtype=np.float64)
        if G.shape != (W.shape[1], W.shape[1]):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_block_gram returned shape {G.shape} for {W.shape[1]} weight "
                f"columns; it must return W'KW, shape ({W.shape[1]}, {W.shape[1]})."
            )
        return self.check_finite(G)

    def diag_tile(self, X: Sample) -> np.ndarray:
        """k(x_i, x_i) for a validated sample: ``compute_diag``'s values, checked for shape,
        finiteness and (PSD kernels) sign."""
        with np.errstate(over="ignore", invalid="ignore"):
            values = np.asarray(self.compute_diag(X), dtype=np.float64)
        if values.shape != (len(X),):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_diag returned shape {values.shape} for {len(X)} points; "
                f"it must return k(x_i, x_i) for each, shape ({len(X)},)."
            )
        values = self.check_finite(values)
        if self.is_psd and len(values) and values.min() < -CONTRACT_RTOL * float(np.abs(values).max()):
            i = int(np.argmin(values))
            raise KernelContractError(
                f"{self.plugin_label()} is not positive semi-definite: k(x, x) = {values[i]:.6g} < 0 "
                f"for point {i} (a PSD kernel has k(x, x) = ||phi(x)||^2 >= 0)."
            )
        return values

    def _chunk_rows(self, n_cols: int) -> int:
        return max(32, CHUNK_BYTES // (8 * max(n_cols, 1)))

    def symmetric_gram(self, X: Sample) -> np.ndarray:
        """K = k(X, X) of one validated sample, exactly symmetric with ``diag_tile`` on its
        diagonal, built in row bands of ``CHUNK_BYTES``, each diagonal block checked
        against the kernel contract. A kernel with a faster symmetric computation (the
        SSK) may override it; the override must return the same exactly symmetric matrix.
        """
        n = len(X)
        check_memory(n, n)
        K = np.empty((n, n), dtype=np.float64)
        diag = self.diag_tile(X)
        step = self._chunk_rows(n)

        def band(start: int, stop: int) -> None:
            # writes rows start:stop from column start on, and their mirror below the
            # diagonal block: no two bands write the same entries
            K[start:stop, start:] = self.gram_tile(X[start:stop], X[start:])
            self.check_diagonal_block(K[start:stop, start:stop], diag[start:stop], start)
            K[stop:, start:stop] = K[start:stop, stop:].T
            block = K[start:stop, start:stop]
            upper = np.triu(block, 1)
            block[...] = upper + upper.T

        on_cores(band, [(start, min(start + step, n)) for start in range(0, n, step)])
        np.fill_diagonal(K, diag)
        return K

    def check_diagonal_block(self, block: np.ndarray, diag: np.ndarray, offset: int) -> None:
        """Cheap checks on a diagonal block k(X_b, X_b), the one place where ``compute_gram`` and
        ``compute_diag`` meet (the mirroring and the diagonal fill would hide a fault otherwise):

        * symmetry, k(x, x′) = k(x′, x);
        * ``compute_gram``'s diagonal equals ``compute_diag`` (to 1e-6 of the block's scale: the
          distance identities round differently from k(x, x) itself);
        * Cauchy–Schwarz, |k(x, x′)|² ≤ k(x, x) k(x′, x′), which every PSD kernel obeys.

        The pairwise checks look at the block's leading CONTRACT_CHECK_POINTS points only,
        so they stay a small fraction of the Gram matrix's cost (a plugin's fault is
        systematic, not confined to some pairs).
        """
        if not block.size:
            return
        label = self.plugin_label()
        off = np.abs(np.diagonal(block) - diag)
        scale = max(float(np.abs(np.diagonal(block)).max()), float(np.abs(diag).max()), 1e-300)
        if off.max() > DIAG_RTOL * scale:
            i = int(np.argmax(off))
            raise KernelContractError(
                f"{label}: compute_diag gives k(x_{offset + i}, x_{offset + i}) = {diag[i]:.6g} but compute_gram gives "
                f"{block[i, i]:.6g}; the two must agree."
            )
        block, diag = block[:CONTRACT_CHECK_POINTS, :CONTRACT_CHECK_POINTS], diag[:CONTRACT_CHECK_POINTS]
        scale = max(float(np.abs(block).max()), scale)
        gap = np.abs(block - block.T)
        if gap.max() > CONTRACT_RTOL * scale:
            i, j = (int(v) for v in np.unravel_index(int(np.argmax(gap)), gap.shape))
            raise KernelContractError(
                f"{label} is not symmetric: k(x_{offset + i}, x_{offset + j}) = {block[i, j]:.6g} "
                f"but k(x_{offset + j}, x_{offset + i}) = {block[j, i]:.6g}."
            )
        if self.is_psd:
            root = np.sqrt(np.maximum(diag, 0.0))
            excess = np.abs(block) - np.outer(root, root)
            np.fill_diagonal(excess, 0.0)
            if excess.max() > DIAG_RTOL * scale:
                i, j = (int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
                raise KernelContractError(
                    f"{label} is not positive semi-definite: |k(x_{offset + i}, x_{offset + j})| = "
                    f"{abs(block[i, j]):.6g} exceeds sqrt(k(x, x) k(x', x')) = {root[i] * root[j]:.6g} "
                    "(Cauchy-Schwarz holds for every PSD kernel)."
                )

    def _rectangular_gram(self, X: Sample, Y: Sample) -> np.ndarray:
        n, m = len(X), len(Y)
        check_memory(n, m)
        K = np.empty((n, m), dtype=np.float64)
        step = self._chunk_rows(m)
        for start in range(0, n, step):
            stop = min(start + step, n)
            K[start:stop] = self.gram_tile(X[start:stop], Y)
        return K


def on_cores(work: Any, bands: list[tuple[int, int]]) -> list[Any]:
    """``[work(start, stop) for start, stop in bands]``, run on every core
    (:func:`~monk_framework.backends.in_this_process`: threads with one BLAS thread each)
    when there are at least :data:`~monk_framework.backends.PARALLEL_MIN_BANDS` of them,
    else here.

    On the threads, OpenBLAS's own threads stay asleep: after a parallel call they spin
    for about 0.1 s, on the core that whatever runs next would need.
    """
    from .backends import for_bands

    return for_bands(len(bands)).map(_band_task, bands, work)


def _band_task(band: tuple[int, int], work: Any) -> Any:
    return work(*band)


def check_squared_norm(kernel: Kernel, value: float, scale: float, what: str) -> float:
    """Return ``value``, a squared RKHS norm ‖Σ c_i φ(z_i)‖² = cᵀKc, after checking it is not negative.

    A PSD kernel gives cᵀKc ≥ 0 for every c, so a value below −CONTRACT_RTOL · ``scale``
    (``scale``: the size of the terms it was summed from, e.g. Σ|c_i||c_j||K_ij|) proves
    that ``kernel`` is not PSD on these points. ``what`` names the quantity (e.g. "the
    V-statistic MMD^2"). Cheap checks for estimators that already hold such a value.
    """
    if kernel.is_psd and value < -CONTRACT_RTOL * max(abs(scale), 1e-300):
        raise KernelContractError(
            f"{kernel.plugin_label()} is not positive semi-definite on these data: {what} is "
            f"{value:.6g} < 0, which no PSD kernel can give."
        )
    return value


def _as_gaussian(mean: Any, cov: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    c = np.asarray(cov, dtype=np.float64)
    if c.ndim == 0:
        c = c * np.eye(m.size)
    if m.ndim != 1 or c.shape != (m.size, m.size):
        raise DataError(
            f"A Gaussian needs a mean of shape (d,) and a covariance of shape (d, d); "
            f"got {m.shape} and {c.shape}."
        )
    return m, c


#: below this many features, distances are computed from coordinate differences
#: (exact, and as fast as the BLAS identity); above it by the identity.
DIRECT_MAX_FEATURES = 4
#: with the BLAS identity, entries with ‖x − y‖² below this fraction of ‖x‖² + ‖y‖²
#: (after centring) lose digits to cancellation and are recomputed from differences.
REFINE_RATIO = 1e-3


def _centred_identity(X: np.ndarray, Y: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """‖x − y‖² (times ``scale``) by the BLAS identity on data centred at Y's mean, with
    the centred norms.

    Centring leaves distances unchanged and shrinks the cancellation; the result is
    built in place in the matrix-product output, clipped at 0 and scaled in one
    compiled pass (the same bits as numpy's four passes, at about a third of their cost).
    """
    from .fused import centred_with_norms, finish_squared_distances  # numba: loaded when first needed

    Xc, Yc, nx, ny = centred_with_norms(X, Y)
    # −2⟨x, y⟩ as (−2x)·y: scaling by a power of two is exact, so this is (x·y)·(−2) bit
    # for bit, without a pass over the n × m result
    out = (-2.0 * Xc) @ Yc.T
    finish_squared_distances(out, nx, ny, scale)
    return out, nx, ny


#: data or scales outside [1/SAFE_MAGNITUDE, SAFE_MAGNITUDE] are first divided by a power
#: of two (exact), so that squares and products of them cannot overflow or underflow
SAFE_MAGNITUDE = 1e100


def power_of_two(x: float) -> float:
    """2^e with 2^e ≤ |x| < 2^(e+1) (1 for x = 0): dividing by it is exact in floating point."""
    if x == 0 or not math.isfinite(x):
        return 1.0
    return math.ldexp(1.0, math.frexp(abs(x))[1] - 1)


def magnitude(*arrays: np.ndarray) -> float:
    """The largest |value| over the arrays (0 for empty ones)."""
    return max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)


def _moderate(x: float) -> bool:
    return x == 0.0 or 1.0 / SAFE_MAGNITUDE < x < SAFE_MAGNITUDE


def _times_square(out: np.ndarray, ratio: float, power: int) -> np.ndarray:
    """out · ratio^power in place for nonnegative ``out``, where ratio^power may overflow: an
    exact 0 stays 0 (equal points), anything else becomes inf, never NaN."""
    with np.errstate(over="ignore"):
        factor = np.float64(ratio) ** power
    if np.isinf(factor):
        out[...] = np.where(out > 0, np.inf, 0.0)
        return out
    with np.errstate(over="ignore", under="ignore"):
        out *= factor
    return out


def scaled_squared_distances(X: np.ndarray, Y: np.ndarray, sigma: float, factor: float = 1.0) -> np.ndarray:
    """‖x_i − y_j‖²/σ² for all pairs (times ``factor``, a power of two such as −0.5, so
    that the result is the same bit for bit as multiplying afterwards, without a pass),
    without overflow or underflow on the way.

    With moderate data and σ it is ``squared_distances(X, Y) * (1/σ²)``. Otherwise the data
    are divided by a power of two s near their magnitude and the result multiplied by
    (s/σ)²: a ratio beyond float64 becomes inf (exp(−inf) = 0 is then the kernel's exact
    value in float64), equal points still give exactly 0.
    """
    if _moderate(magnitude(X, Y)) and _moderate(sigma):
        # the scaling rides on the pass that completes the distances (same bits as after it)
        return squared_distances(X, Y, scale=factor * (1.0 / sigma**2))
    return _scaled(squared_distances, X, Y, sigma, 2, factor)


def exp_scaled_squared_distances(X: np.ndarray, Y: np.ndarray, sigma: float, factor: float = -0.5) -> np.ndarray:
    """exp(factor · ‖x_i − y_j‖²/σ²) for all pairs (the RBF kernel's values with the
    default factor, a negative power of two), without overflow or underflow on the way.

    With moderate data and σ, one compiled pass writes the tile
    (:func:`monk_framework.fused.exp_squared_distance_tile`): the exponentials of
    ``scaled_squared_distances(X, Y, sigma, factor)``, bit for bit in the distances and
    within one unit in the last place of ``np.exp``. Otherwise ``np.exp`` of those.
    """
    if factor < 0 and _moderate(magnitude(X, Y)) and _moderate(sigma):
        from .fused import exp_squared_distance_tile  # numba: loaded when first needed

        return exp_squared_distance_tile(X, Y, factor * (1.0 / sigma**2), direct=X.shape[1] <= DIRECT_MAX_FEATURES)
    out = scaled_squared_distances(X, Y, sigma, factor)
    np.exp(out, out=out)
    return out


def _scaled(pairwise: Any, X: np.ndarray, Y: np.ndarray, sigma: float, power: int, factor: float = 1.0) -> np.ndarray:
    """pairwise(X, Y) / σ^power, which is homogeneous of degree ``power`` in the data:
    computed on data divided by an exact power of two when data or σ are extreme, and
    rescaled by (s/σ)^power without overflow (:func:`_times_square`)."""
    scale = magnitude(X, Y)
    if _moderate(scale) and _moderate(sigma):
        out = pairwise(X, Y)
        out *= factor * (1.0 / sigma**power)  # factor · (1/σ^p) is exact for a power of two
        return out
    s = power_of_two(scale)
    out = _times_square(pairwise(X / s, Y / s), np.float64(s) / np.float64(sigma), power)
    if factor != 1.0:
        out *= factor
    return out


def scaled_distances(X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """‖x_i − y_j‖/σ for all pairs (see :func:`scaled_squared_distances`)."""
    return _scaled(distances, X, Y, sigma, 1)


def l1_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖₁ = Σ_k |x_ik − y_jk| for all pairs, as an ``(n, m)`` array (exact
    coordinate differences, no cancellation)."""
    from scipy.spatial.distance import cdist

    return np.asarray(cdist(X, Y, "cityblock"), dtype=np.float64)


def scaled_l1_distances(X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """‖x_i − y_j‖₁ / σ for all pairs, without overflow for data or σ near the float64 limits
    (as :func:`scaled_distances` does for the Euclidean norm)."""
    return _scaled(l1_distances, X, Y, sigma, 1)


def squared_distances(X: np.ndarray, Y: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
    """‖x_i − y_j‖² · ``scale`` for all pairs, as an ``(n, m)`` array.

    For few features it sums squared coordinate differences (exact); otherwise it uses
    the BLAS identity ‖x‖² + ‖y‖² − 2⟨x, y⟩ on centred data, completed, clipped at 0 and
    scaled in one pass. Either way the values are those of ``squared_distances(X, Y) *
    scale``, bit for bit.
    """
    if X.shape[1] <= DIRECT_MAX_FEATURES:
        out = np.subtract.outer(X[:, 0], Y[:, 0])
        np.square(out, out=out)
        for k in range(1, X.shape[1]):
            diff = np.subtract.outer(X[:, k], Y[:, k])
            np.square(diff, out=diff)
            out += diff
        if scale != 1.0:
            out *= scale
        return out
    return _centred_identity(X, Y, scale)[0]


def refined_squared_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖² for all pairs, with close pairs recomputed from differences.

    The BLAS identity loses digits to cancellation for close pairs (and the square root
    amplifies that error), so those pairs (a small fraction in practice) are recomputed.
    """
    if X.shape[1] <= DIRECT_MAX_FEATURES:
        return squared_distances(X, Y)
    out, nx, ny = _centred_identity(X, Y)
    # candidates first, against a per-row bound (one pass, no n × m temporary): rounding is
    # monotone, so r·(‖x‖² + max‖y‖²) bounds every r·(‖x‖² + ‖y‖²) of the row and the exact
    # test below, on the candidates only, selects the same pairs as on the whole matrix
    rows, cols = np.nonzero(out < (REFINE_RATIO * (nx + ny.max(initial=0.0)))[:, None])
    close = out[rows, cols] < REFINE_RATIO * (nx[rows] + ny[cols])
    rows, cols = rows[close], cols[close]
    if rows.size:
        diff = X[rows] - Y[cols]
        out[rows, cols] = np.einsum("ij,ij->i", diff, diff)
    return out


def distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """‖x_i − y_j‖ for all pairs, accurate to a few ulps even for near-duplicate points."""
    out = refined_squared_distances(X, Y)
    np.sqrt(out, out=out)
    return out


def median_distance(X: np.ndarray, Y: np.ndarray | None = None, *, metric: str = "l2") -> float:
    """The median heuristic: the median of ‖z_i − z_j‖ over pairs i < j of Z = X ∪ Y
    (the Euclidean norm, or the L1 norm with ``metric="l1"``).

    Above :data:`MEDIAN_MAX_POINTS` pooled points, the median is taken over a subsample
    of that many points drawn with a fixed seed, so the value depends on the data only.
    """
    Z = X if Y is None else np.vstack([X, Y])
    if len(Z) < 2:
        raise DataError("The median heuristic needs at least 2 pooled points.")
    if len(Z) > MEDIAN_MAX_POINTS:
        keep = np.random.default_rng(0).choice(len(Z), MEDIAN_MAX_POINTS, replace=False)
        Z = Z[np.sort(keep)]
    if metric not in ("l2", "l1"):
        raise ParameterError(f"median_distance: metric must be 'l2' or 'l1'; got {metric!r}.")
    scale = magnitude(Z)
    if _moderate(scale):
        value = _median_pair_distance(Z, metric)
    else:
        # exact power-of-two rescaling, so that the squared distances neither overflow nor underflow
        s = power_of_two(scale)
        with np.errstate(over="ignore"):
            value = float(np.float64(_median_pair_distance(Z / s, metric)) * s)
    if not math.isfinite(value):
        raise KernelOverflowError(
            f"The median heuristic overflows float64: the median pairwise distance of these data "
            f"(of magnitude {scale:.3g}) exceeds {np.finfo(np.float64).max:.3g}. Rescale the data."
        )
    if value <= 0.0:
        raise DataError(
            "The median heuristic gives sigma = 0: more than half of the pooled pairwise "
            "distances are zero (many repeated points). Pass sigma explicitly."
        )
    return value


def _median_pair_distance(Z: np.ndarray, metric: str = "l2") -> float:
    """The median of ‖z_i − z_j‖ over i < j: the upper triangle only, in row bands.

    The square root is monotone, so the Euclidean median is taken on squared distances
    (the one or two middle order statistics by selection) and only those get a square
    root; L1 distances are used as they are.
    """
    n = len(Z)
    step = max(1, CHUNK_BYTES // (8 * n))
    if metric == "l2" and Z.shape[1] > DIRECT_MAX_FEATURES:
        found = _bracketed_median(Z, step)
        if found is not None:
            return found
    band_of = refined_squared_distances if metric == "l2" else l1_distances
    root = np.sqrt if metric == "l2" else (lambda v: v)

    def pairs(start: int, stop: int) -> np.ndarray:
        band = band_of(Z[start:stop], Z[start:])
        # the entries right of the diagonal, row by row (column j > row i): row slices
        # are views, and copying them is about 4x faster than a boolean mask
        return np.concatenate([band[i, i + 1 :] for i in range(stop - start)])

    values = np.concatenate(on_cores(pairs, [(start, min(start + step, n - 1)) for start in range(0, n - 1, step)]))
    k = (len(values) - 1) // 2
    if len(values) % 2:
        return float(root(order_statistics(values, k, k)[0]))
    low, high = order_statistics(values, k, k + 1)
    return float((root(low) + root(high)) / 2.0)


def _bracketed_median(Z: np.ndarray, step: int) -> float | None:
    """The Euclidean median of :func:`_median_pair_distance`, bit for bit, without
    refining close pairs or gathering the upper triangle, when that is provably the same.

    The bands of squared distances by the BLAS identity are kept as they are (the entries
    on and below the diagonal set to +inf, which rank after every pair) and the middle
    order statistics are bracketed on them as in :func:`order_statistics`. Refinement
    only changes pairs whose squared distance is below REFINE_RATIO·(‖x‖² + ‖y‖²), and
    changes them by round-off; when every such bound lies below the bracket, refined and
    unrefined bands agree on the count below it and on every value inside it, so the
    median is the refined one. Returns None when that is not proved (the caller then
    takes the general path).
    """
    n = len(Z)
    m = n * (n - 1) // 2
    if m < 1 << 16:
        return None
    k, last = (m - 1) // 2, m // 2

    def band_and_bound(start: int, stop: int) -> tuple[np.ndarray, float]:
        band, nx, ny = _centred_identity(Z[start:stop], Z[start:])
        band[np.tril_indices(stop - start)] = np.inf  # the diagonal and below: not pairs i < j
        return band.ravel(), float(REFINE_RATIO * (nx.max() + ny.max()))

    found_bands = on_cores(band_and_bound, [(start, min(start + step, n - 1)) for start in range(0, n - 1, step)])
    bands = [band for band, _ in found_bands]
    bound = max(b for _, b in found_bands)
    lo, hi = _bracket(bands, k, last)
    if not (np.isfinite(hi) and bound * (1 + 1e-6) < lo):
        return None
    found = _select_in_bracket(bands, k, last, lo, hi)
    if found is None:
        return None
    low, high = np.sqrt(found[0]), np.sqrt(found[-1])
    return float(low) if m % 2 else float((low + high) / 2.0)


def order_statistics(values: np.ndarray, first: int, last: int) -> np.ndarray:
    """The ``first``-th to ``last``-th smallest of ``values`` (0-based, inclusive), exactly.

    Selection over all values (np.partition) is the cost of the median heuristic; here
    a strided sample of about 16 000 values brackets the wanted ranks, [lo, hi], one pass
    counts the values below lo, and only the values inside the bracket are selected. The
    counts prove the bracket right (below ≤ first and last < below + |bracket|); when
    they do not, the whole array is selected. Same numbers either way, about 5x faster.
    """
    if len(values) // BRACKET_SAMPLE > 4:
        found = _select_in_bracket([values], first, last, *_bracket([values], first, last))
        if found is not None:
            return found
    ranks = np.arange(first, last + 1)
    return np.partition(values, ranks)[ranks]


#: values in the strided sample that brackets an order statistic
BRACKET_SAMPLE = 16384


def _bracket(parts: list[np.ndarray], first: int, last: int) -> tuple[float, float]:
    """[lo, hi] that holds the ``first``-th to ``last``-th smallest of the union of
    ``parts`` with high probability, from a strided sample of about BRACKET_SAMPLE values."""
    total = sum(len(p) for p in parts)
    stride = max(1, total // BRACKET_SAMPLE)
    sample = np.sort(np.concatenate([p[::stride] for p in parts]))
    at = len(sample) * np.array([first, last]) // total
    margin = 4 * int(math.isqrt(len(sample))) + 2  # about 8 standard deviations of a sample rank
    return sample[max(int(at[0]) - margin, 0)], sample[min(int(at[1]) + margin, len(sample) - 1)]


def _select_in_bracket(parts: list[np.ndarray], first: int, last: int, lo: float, hi: float) -> np.ndarray | None:
    """The ``first``-th to ``last``-th smallest of the union of ``parts`` if the counts
    prove they lie in [lo, hi] (one counting pass, a selection inside), else None."""
    below = sum(int(np.count_nonzero(p < lo)) for p in parts)
    inside = np.concatenate([p[(p >= lo) & (p <= hi)] for p in parts])
    if not (below <= first and last < below + len(inside)):
        return None
    ranks = np.arange(first, last + 1) - below
    inside.partition(ranks)
    return inside[ranks]


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, if known: the least of the
    machine's available memory (Linux MemAvailable), the room left under this
    process's address-space limit (``ulimit -v``) and under its cgroup's memory limit
    (containers), so that a refusal happens before the allocation fails."""
    limits = [v for v in (_mem_available(), _rlimit_room(), _cgroup_room()) if v is not None]
    return min(limits) if limits else None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _rlimit_room() -> int | None:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status", encoding="ascii") as handle:
            used = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
        return max(soft - used, 0)
    except (ImportError, OSError, ValueError, StopIteration):
        return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            text = handle.read().strip()
        if text == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            current = int(handle.read().strip())
        return max(int(text) - current, 0)
    except (OSError, ValueError):
        return None


def check_memory(n: int, m: int, *, what: str = "Gram matrix") -> None:
    """Raise :class:`ResourceError` before allocating an n × m float64 matrix that cannot fit."""
    need = 8 * n * m
    avail = available_memory()
    if avail is not None and need > 0.9 * avail:
        raise ResourceError(
            f"A {n} x {m} float64 {what} needs {format_bytes(need)} but only {format_bytes(avail)} of "
            "memory are available; use fewer points or a matrix-free estimator."
        )


def format_bytes(nbytes: float) -> str:
    """A byte count for messages: "7.45 GiB", or "12.0 MiB" below 128 MiB."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**27 else f"{nbytes / 2**20:.1f} MiB"


