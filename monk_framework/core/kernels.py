"""The kernel interface, its contract checks, and kernels built from kernels.

A kernel plugin subclasses :class:`Kernel` and implements the *core* methods
``compute_gram(X, Y)`` (the rectangle of values k(x_i, y_j) for already validated inputs) and
``compute_diag(X)`` (k(x_i, x_i)). The public methods validate inputs once, check memory
before allocating, and call the core on chunks:

* ``gram(X)`` computes only the upper band of each row chunk and mirrors it, so the
  matrix is exactly symmetric and half the kernel evaluations are saved; its diagonal
  is set from ``compute_diag`` so that ``np.diag(gram(X)) == diag(X)`` holds bit for bit.
* ``gram(X, Y)`` fills the rectangle row chunk by row chunk, bounding temporaries.

Every value a plugin computes passes the contract checks here (shape, finiteness, the
diagonal, symmetry and Cauchy–Schwarz on diagonal blocks), whichever path asked for it:
``gram_tile``, ``diag_tile`` and ``direct_block_gram`` are the only ways the library
reads a plugin's ``compute_*`` methods.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, ClassVar, Self

import attrs
import numpy as np

from monk_framework.core.errors import (
    DataError,
    KernelContractError,
    KernelOverflowError,
    MonkError,
    ParameterError,
    PrecisionWarning,
    plugin_code,
    shown,
)
from monk_framework.core.params import Configurable, finite_real, not_implemented
from monk_framework.core.resources import Resources, check_memory
from monk_framework.core.samples import (
    Sample,
    as_strings,
    as_vectors,
    check_same_dimension,
    owned_result,
    read_only,
    take,
)

__all__ = [
    "ANCHOR_ROUND_OFF",
    "BandRunner",
    "CHUNK_BYTES",
    "COMPOSITES",
    "ClippedKernel",
    "FEATURES_PAY",
    "FEATURE_TOLERANCE",
    "Kernel",
    "PAIR_BLOCK",
    "ProductKernel",
    "RADIUS_RANGE",
    "ScaledKernel",
    "SumKernel",
    "VALUE_LIMIT",
    "bilinear",
    "check_squared_norm",
    "counted_in_turn",
    "in_turn",
    "feature_block_rows",
    "feature_sums",
    "paying_features",
    "rectangular_gram_of",
    "scale",
    "weighted_gram",
]

#: ``run_bands(work, bands)``: calls ``work(start, stop)`` for every band, returns the results in order
BandRunner = Callable[[Callable[[int, int], Any], list[tuple[int, int]]], list[Any]]


def in_turn(work: Callable[[int, int], Any], bands: list[tuple[int, int]]) -> list[Any]:
    """``[work(start, stop) for start, stop in bands]``, here and in order."""
    return [work(start, stop) for start, stop in bands]


#: the largest |k(x, y)| the library takes: sums of up to 2^40 such values stay within
#: float64 (whose largest number is about 2^1024)
VALUE_LIMIT = 2.0**983
#: pairs per block of :meth:`Kernel.pair_values` (its cost: this many kernel values a pair)
PAIR_BLOCK = 32
#: bytes of one row chunk of a Gram matrix: small enough to stay in cache for the
#: elementwise passes that follow the matrix product (measured in benchmarks/bench_gram.py).
CHUNK_BYTES = 4 * 1024 * 1024
#: relative round-off allowed before a value is taken as proof that a kernel is not PSD
#: or not symmetric: 1e-9 of the scale of the terms it came from (float64 sums of
#: thousands of terms stay near 1e-13; a wrong kernel is off by orders of magnitude)
CONTRACT_RTOL = 1e-9
#: the same for comparisons of k(x, x) computed two ways (the distance identities used by
#: compute_gram round differently from compute_diag, by about 1e-16 times ‖x‖²/σ² for RBF)
DIAG_RTOL = 1e-6
#: points of each diagonal Gram block whose pairs are checked (symmetry, Cauchy–Schwarz)
CONTRACT_CHECK_POINTS = 64
#: sampled pairs on which a plugin's whole k(X, X) (an override of symmetric_gram) is
#: checked for exact symmetry and Cauchy–Schwarz, beyond its leading block
WHOLE_CHECK_PAIRS = 4096
#: pooled points whose feature distances to the first one measure a kernel's resolution
RESOLUTION_POINTS = 4096
#: the smallest squared feature distance, relative to the kernel's values, below which an
#: MMD² carries a relative round-off above 10⁻⁶ (ε / 10⁻⁶, ε = 2⁻⁵²)
RESOLUTION_LIMIT = float(np.finfo(np.float64).eps) / 1e-6
#: the round-off ε ρ² (data ρ spreads from the origin) beyond which every MMD path reads a
#: kernel whose MMD depends on the origin anchored at the data (Kernel.mmd_view): ρ above
#: about 67. Nearer the origin the kernel is used as it is, with the same bits as ever.
ANCHOR_ROUND_OFF = 1e-12


@attrs.frozen(kw_only=True)
class Kernel(Configurable):
    """A positive semi-definite kernel k(x, y) with its hyperparameters.

    Subclasses set the class attributes ``name``, ``summary``, ``formula`` and
    ``input_kind`` ("vector" or "string"), declare hyperparameters with
    :func:`monk_framework.core.params.parameter`, and implement ``compute_gram`` and ``compute_diag``
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
        """``k1 + k2``: the kernel k1(x, y) + k2(x, y) (:class:`SumKernel`)."""
        if not isinstance(other, Kernel):
            return NotImplemented
        return SumKernel(left=self, right=other)

    def __mul__(self, other: Any) -> Kernel:
        """``k1 * k2`` (the product kernel) or ``k * c`` (c > 0)."""
        if isinstance(other, Kernel):
            return ProductKernel(left=self, right=other)
        return scale(other, self)

    def __rmul__(self, other: Any) -> Kernel:
        """``c * k`` for a number c > 0."""
        return scale(other, self)

    def check_sample(self, X: Any, *, name: str = "X") -> Sample:
        """Validate a sample for this kernel's input kind (see :mod:`monk_framework.core.samples`)."""
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

    def computes_gram_whole(self) -> bool:
        """Whether this kernel computes a Gram matrix faster whole than tile by tile: it
        overrides :meth:`symmetric_gram` (the SSK builds each string's tables once per
        matrix, where every tile would build them again). The engine then reads an
        estimate's kernel sums from its stored Gram matrices when they fit in the budget;
        every other kernel's from tiles, which never write a matrix."""
        return type(self).symmetric_gram is not Kernel.symmetric_gram

    def shift_free_mmd(self) -> bool:
        """Whether a common translation of every point, x → x − c, moves the feature map
        by one constant vector, φ(x − c) = φ(x) − φ(c) + φ(0) (the unnormalised linear
        kernel, the energy kernel): then every MMD, a norm of a difference of equally
        weighted means, is unchanged by it. The framework uses this to evaluate such a
        kernel's MMD on centred data (:meth:`mmd_view`); a kernel that says so wrongly
        gets another MMD. False by default."""
        return False

    def anchored(self, anchor: np.ndarray) -> Kernel | None:
        """The kernel about a point a, for the data moved by −a:

            k_a(u, v) = ⟨φ(a + u) − φ(a), φ(a + v) − φ(a)⟩
                      = k(a + u, a + v) − k(a + u, a) − k(a, a + v) + k(a, a),

        computed so that it keeps its digits where k's values dwarf the MMD (a closed form
        that subtracts nothing near k(a, a)), or None (the default) when the kernel has
        none. The feature map moves by the constant vector φ(a), and every MMD is a norm
        of a difference of means with equal total weights, so every MMD of k on the data
        equals that of k_a on the data moved by −a. The framework uses it for a kernel
        whose MMD depends on the origin, on data far from the origin (:meth:`mmd_view`).
        The answer is a kernel of this class, whose parameters are this kernel's (the
        anchor is no parameter: results name the kernel as asked), anchored at a point
        of the data; anchoring it again at b anchors at a + b. The conformance kit checks
        it against the four values above."""
        return None

    def checked_anchored(self, anchor: np.ndarray) -> Kernel | None:
        """:meth:`anchored`, called as plugin code and checked to be None or a kernel of this class."""
        with plugin_code(self, "anchored"):
            out = self.anchored(read_only(np.array(anchor, dtype=np.float64)))
        if out is not None and type(out) is not type(self):
            raise KernelContractError(
                f"{self.plugin_label()}: anchored returned {type(out).__name__} {out!r}; it must return None or a "
                f"kernel of its own class ({type(self).__qualname__})."
            )
        return out

    def mmd_view(self, X: Any, Y: Any, *, names: tuple[str, str] = ("X", "Y")) -> tuple[Kernel, Sample, Sample]:
        """The kernel and the samples as every MMD estimate and test reads them:
        :meth:`check_pair`, then

        * for a kernel whose MMD a common shift leaves unchanged (:meth:`shift_free_mmd`),
          both samples moved by the coordinate-wise lower median of the pooled sample;
        * for a kernel whose MMD depends on the origin, on data far from it (a round-off
          of ε ρ² above ANCHOR_ROUND_OFF, :meth:`warn_if_far_from_origin`), the kernel
          anchored at that median (:meth:`anchored`) and the samples moved by it; a
          kernel with no anchored form is used as it is, with a :class:`PrecisionWarning`.

        The MMD is the same in exact arithmetic; in floating point it keeps its digits.
        ⟨x, y⟩ of data near 10⁸ is about 10¹⁶, and the linear kernel's MMD² of order 1
        was lost in the sums (wrong by a factor 30); the quadratic kernel's MMD² on data
        10⁹ spreads from the origin was all round-off. The median, unlike the mean, stays
        with the ordinary points when a few are gross outliers; and it is a data value,
        so it becomes exactly 0 and a second call changes nothing."""
        Xv, Yv = self.check_pair(X, Y, names=names)
        if not (isinstance(Xv, np.ndarray) and isinstance(Yv, np.ndarray)):
            return self, Xv, Yv
        if self.checked_shift_free():
            kernel = self
        else:
            if self._far_from_origin(Xv, Yv, limit=ANCHOR_ROUND_OFF) is None:
                return self, Xv, Yv
            anchor = _lower_median(np.concatenate([Xv, Yv]))
            anchored = self.checked_anchored(anchor) if np.all(np.isfinite(anchor)) else None
            if anchored is None:
                self.warn_if_far_from_origin(Xv, Yv)
                return self, Xv, Yv
            kernel = anchored
        centre = _lower_median(np.concatenate([Xv, Yv]))
        if not centre.any():
            return kernel, Xv, Yv
        return kernel, read_only(Xv - centre), read_only(Yv - centre)

    def centred(self, X: Sample) -> Sample:
        """One validated sample as an embedding estimator may read it to choose its weights:
        moved by its coordinate-wise lower median when the kernel's MMD ignores the origin
        (:meth:`shift_free_mmd`), else as it is. Weights that sum to 1 (an affine
        combination of the points, such as a geometric median's) are the same for the
        sample and for its shift in exact arithmetic, and keep their digits on centred
        data: geometric-mom with the linear kernel on data near 10⁸ had weights off by 0.04."""
        if not (isinstance(X, np.ndarray) and self.checked_shift_free()):
            return X
        centre = _lower_median(X)
        return read_only(X - centre) if centre.any() else X

    def checked_shift_free(self) -> bool:
        """:meth:`shift_free_mmd`, called as plugin code and checked to be a bool."""
        with plugin_code(self, "shift_free_mmd"):
            shift_free = self.shift_free_mmd()
        if not isinstance(shift_free, (bool, np.bool_)):
            raise KernelContractError(f"{self.plugin_label()}: shift_free_mmd() returned {shift_free!r}; it must return True or False.")
        return bool(shift_free)

    def warn_if_far_from_origin(self, X: Sample, Y: Sample, *, clipped: bool = False) -> None:
        """Warn (:class:`PrecisionWarning`) when a kernel whose MMD depends on the origin
        meets data far from it. With the pooled median ρ spreads from the origin (the
        spread: the root sum of squares of the coordinates' median absolute deviations),
        the MMD² carries a relative round-off of about ε ρ² (ε = 2⁻⁵²): a polynomial of
        degree p has values near ρ^(2p) and an MMD² of order ρ^(2p − 2), a cosine values
        near 1 and an MMD² of order ρ⁻² (measured for the quadratic kernel: 4e-6 at
        ρ = 10⁵, a factor 700 at 10⁹). That is for P and Q apart by about a spread; an
        MMD² δ² times smaller (close distributions, means δ spreads apart) carries ε ρ²/δ²
        (measured: 0.17 where ε ρ² = 5e-4), as the warning says. Said once ε ρ² exceeds 10⁻⁶, and only for a kernel
        whose values do move with the origin (checked on 8 of the points), unless its MMD
        ignores the origin and is read on centred data (:meth:`mmd_view`). ``clipped``:
        for the kernel's clipped features, which depend on the origin in any case."""
        found = self._far_from_origin(X, Y, clipped=clipped)
        if found is None:
            return
        rho, round_off = found
        what = "its clipped features depend" if clipped else f"{self.spec()} depends"
        warnings.warn(
            PrecisionWarning(
                f"The data lie {rho:.3g} spreads from the origin, and {what} on the origin: the MMD carries a relative "
                f"round-off of about {min(round_off, 1e300):.1g}, more when the two distributions are close. Subtract a "
                "reference point chosen without these data, or "
                "use a kernel that keeps its digits here (rbf, laplace, linear, energy; polynomial and quadratic without "
                "normalize, which are read about a point of the data)."
            ),
            stacklevel=3,
        )

    def _far_from_origin(self, X: Sample, Y: Sample, *, clipped: bool = False, limit: float = 1e-6) -> tuple[float, float] | None:
        """(ρ, ε ρ²) when ε ρ² exceeds ``limit`` for a kernel whose values move with the
        origin (:meth:`warn_if_far_from_origin` says so beyond 10⁻⁶), else None."""
        if not (isinstance(X, np.ndarray) and isinstance(Y, np.ndarray)) or type(self).translation_invariant:
            return None
        shift_free = self.checked_shift_free()
        if shift_free and not clipped:
            return None
        Z = np.concatenate([X, Y])
        centre = np.median(Z, axis=0)
        with np.errstate(over="ignore", invalid="ignore"):
            deviations = np.median(np.abs(Z - centre), axis=0)
        spread, distance = _norm(deviations), _norm(centre)
        if not (spread > 0 and math.isfinite(spread) and math.isfinite(distance)):
            return None
        rho = distance / spread
        round_off = rho * rho * float(np.finfo(np.float64).eps)
        if round_off <= limit:
            return None
        if not shift_free:
            # the kernel's own values on a few points, and on them moved to the centre (a
            # data-dependent hyperparameter resolved first, as the estimate will)
            fitted = self if self.is_fitted else self.fitted(X, Y)
            A = Z[:8]
            with np.errstate(over="ignore", invalid="ignore"):
                here, moved = fitted.gram_tile(A, A, check=False), fitted.gram_tile(A - centre, A - centre, check=False)
            if np.all(np.isfinite(here)) and np.allclose(here, moved, rtol=1e-6, atol=1e-12 * float(np.abs(here).max())):
                return None  # values that ignore the origin (a translation-invariant plugin that does not say so)
        return rho, round_off

    def fitted(self, X: Sample, Y: Sample | None = None) -> Kernel:
        """:meth:`fit` on validated samples, called as plugin code and checked: the answer
        must be a Kernel whose every hyperparameter is a number (``is_fitted``). What
        every estimate, embedding and test calls, so that a plugin's ``fit`` that fails or
        returns something else is named, whichever path asked."""
        with plugin_code(self, "fit"):
            out = self.fit(X, Y)
        if not isinstance(out, Kernel):
            raise KernelContractError(f"{self.plugin_label()}: fit returned {type(out).__name__} {out!r}; it must return a Kernel.")
        if type(out) is not type(self):
            # a result names its kernel by the class asked for, with the fitted parameters:
            # another class's would be reported (and saved) as this kernel's
            raise KernelContractError(
                f"{self.plugin_label()}: fit returned kernel {out.name!r} ({type(out).__module__}.{type(out).__qualname__}); "
                "it must return its own class, with the data-dependent hyperparameters resolved."
            )
        with plugin_code(out, "is_fitted"):
            done = out.is_fitted
        if done is not True:
            raise KernelContractError(
                f"{self.plugin_label()}: fit returned a kernel that is not fitted (is_fitted = {done!r}); it must resolve every data-dependent hyperparameter."
            )
        return out

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
            return self.whole_gram(self.check_sample(X))
        return self.whole_gram(*self.check_pair(X, Y))

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
        with plugin_code(self, "compute_feature_count"):
            count = self.compute_feature_count(int(Xv.shape[1]) if isinstance(Xv, np.ndarray) and Xv.ndim == 2 else 1)
        if isinstance(count, numbers.Integral) and not isinstance(count, bool):
            # the matrix is refused before the plugin allocates it (a polynomial of high
            # degree has more features than memory); a count it cannot tell is checked after
            check_memory(len(Xv), int(count), what="feature matrix")
        values = self._hook_values("compute_features", Xv)
        if values.ndim != 2 or len(values) != len(Xv):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_features returned shape {values.shape} for {len(Xv)} points; it must "
                f"return one row of features a point, shape ({len(Xv)}, D)."
            )
        return self.check_finite(values)

    def feature_count(self, X: Any) -> int:
        """D, the features a point of the validated vector sample X has: the plugin's
        :meth:`compute_feature_count`, checked to be a whole number >= 1, or else the
        width of the features of X's first point."""
        d = int(X.shape[1]) if isinstance(X, np.ndarray) and X.ndim == 2 else 1
        with plugin_code(self, "compute_feature_count"):
            count = self.compute_feature_count(d)
        if count is None:
            return int(self.features(X[:1]).shape[1])
        if isinstance(count, (bool, np.bool_)) or not isinstance(count, numbers.Integral) or count < 1:
            raise KernelContractError(
                f"{self.plugin_label()}: compute_feature_count({d}) returned {shown(count)}; it must return the number "
                "of features a point has (an int >= 1), or None."
            )
        return int(count)

    def pair_values(self, A: Any, B: Any, *, check: bool = True) -> np.ndarray:
        """k(a_l, b_l) for the pairs l of two validated samples of one length (the diagonal
        of k(A, B), without the rest): the kernel's ``compute_pair_values`` when it has
        one, checked for shape and finiteness as ``gram_tile`` is; else ``gram_tile`` on
        blocks of :data:`PAIR_BLOCK` pairs, PAIR_BLOCK kernel values a pair.
        ``check=False`` leaves the values' finiteness and size to the caller, as in
        :meth:`gram_tile`."""
        if len(A) != len(B):
            raise DataError(f"pair_values needs two samples of one length; got {len(A)} and {len(B)}.")
        values = self._hook_values("compute_pair_values", A, B)
        if values is not None:
            if values.shape != (len(A),):
                raise KernelContractError(
                    f"{self.plugin_label()}: compute_pair_values returned shape {values.shape} for {len(A)} pairs; "
                    f"it must return k(a_l, b_l) for each, shape ({len(A)},)."
                )
            return self.check_finite(values) if check else values
        out = np.empty(len(A))
        for a in range(0, len(A), PAIR_BLOCK):
            out[a : a + PAIR_BLOCK] = np.diagonal(self.gram_tile(A[a : a + PAIR_BLOCK], B[a : a + PAIR_BLOCK], check=check))
        return out

    def spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray | None:
        """ω_1..ω_D drawn from the spectral density of a translation-invariant kernel
        k(x, y) = κ(x − y) = κ(0) E_ω cos(ωᵀ(x − y)) (Bochner), as a (D, d) array; None for
        a kernel that is not translation-invariant (the default). Random Fourier features
        (the ``rff`` estimator) are built from them."""
        return None

    def checked_spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray | None:
        """:meth:`spectral_frequencies`, run as plugin code and checked as the kernel's values
        are: None, or ``n_features`` finite rows of ``d`` frequencies (float64), else a
        :class:`KernelContractError` naming the plugin."""
        with plugin_code(self, "spectral_frequencies"):
            W = self.spectral_frequencies(d, n_features, rng)
        if W is None:
            return None
        W = np.asarray(W, dtype=np.float64)
        if W.shape != (n_features, d) or not np.isfinite(W).all():
            raise KernelContractError(
                f"{self.plugin_label()}: spectral_frequencies(d={d}, n_features={n_features}) must return "
                f"{n_features} finite rows of {d} frequencies; got shape {W.shape}"
                f"{'' if W.shape != (n_features, d) else ' with non-finite values'}."
            )
        return W

    def sup_diag(self) -> float | None:
        """κ = sup_x k(x, x) over every possible input, or None when the kernel is unbounded.

        A bounded kernel declares it by overriding this method (RBF and Laplace: 1; the
        normalised string kernel: 1). Robust tests need it: with κ finite, replacing one
        point moves the V-statistic MMD by at most :meth:`feature_diameter` / min(N, M)
        (see :func:`monk_framework.two_sample.robust.mmd_sensitivity`). The default, None, claims
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

    def checked_feature_diameter(self, Z: Sample | None = None) -> float | None:
        """:meth:`feature_diameter` as robust tests may trust it: the declared bounds
        (``sup_diag`` and ``feature_diameter``) must be None or finite numbers ≥ 0, and on
        a validated sample Z (the pooled data) no k(z, z) may exceed κ and no feature
        distance ‖φ(z_i) − φ(z_j)‖ of 2·|Z| pairs (each point with the next, and with the
        point of the largest k(z, z)) may exceed D. A robust test's certificate is computed
        from D, so a bound these data already break is refused, naming the plugin.
        """
        with plugin_code(self, "sup_diag"):
            kappa = self.sup_diag()
        self._check_declared("sup_diag", kappa)
        with plugin_code(self, "feature_diameter"):
            diameter = self.feature_diameter()
        self._check_declared("feature_diameter", diameter)
        if diameter is None:
            return None
        D = float(diameter)
        if Z is None or len(Z) < 2:
            return D
        diag = self.diag_tile(Z)
        if kappa is not None and diag.max() > float(kappa) * (1 + 1e-9):
            i = int(np.argmax(diag))
            raise KernelContractError(
                f"{self.plugin_label()} declares sup_diag() = {float(kappa):.6g}, but k(z, z) = {diag[i]:.6g} at "
                f"point {i} of the pooled sample (X first); a robust test's guarantee would be computed from a bound that does not hold."
            )
        index = np.arange(len(Z))
        for partner in (np.roll(index, 1), np.full(len(Z), int(np.argmax(diag)))):
            dist2 = diag + diag[partner] - 2.0 * self.pair_values(Z, take(Z, partner))
            worst = int(np.argmax(dist2))
            reached = math.sqrt(max(float(dist2[worst]), 0.0))
            if reached > D * (1 + 1e-9) + 1e-12:
                raise KernelContractError(
                    f"{self.plugin_label()} declares feature_diameter() = {D:.6g}, but points {worst} and "
                    f"{int(partner[worst])} of the pooled sample (X first) are {reached:.6g} apart in feature space; a robust test's "
                    "guarantee would be computed from a bound that does not hold."
                )
        return D

    def _check_declared(self, name: str, value: Any) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or not _fits_float64(value) or value < 0):
            raise KernelContractError(f"{self.plugin_label()}: {name}() must return None or a finite number >= 0; got {shown(value)}.")

    def gaussian_mmd2(self, mean_x: Any, cov_x: Any, mean_y: Any, cov_y: Any) -> float:
        """Closed-form MMD² between N(mean_x, cov_x) and N(mean_y, cov_y), where known.

        MMD² = E k(x, x') + E k(y, y') − 2 E k(x, y) with independent copies; each
        expectation comes from the kernel's ``gaussian_expectation``.
        """
        m1, c1 = _as_gaussian(mean_x, cov_x)
        m2, c2 = _as_gaussian(mean_y, cov_y)
        if m1.shape != m2.shape:
            raise DataError("The two Gaussians live in spaces of different dimensions.")
        self._require_fitted()
        with np.errstate(over="ignore", invalid="ignore"), plugin_code(self, "gaussian_expectation"):
            terms = [float(self.gaussian_expectation(*pair)) for pair in ((m1, c1, m1, c1), (m2, c2, m2, c2), (m1, c1, m2, c2))]
        if not all(math.isfinite(t) for t in terms):
            raise KernelContractError(
                f"{self.plugin_label()}: gaussian_expectation gives {terms}; E k(x, y) between Gaussians must be a "
                "finite number (the data sets' true MMD is computed from it)."
            )
        return terms[0] + terms[1] - 2.0 * terms[2]

    # -- the core a plugin implements ------------------------------------------------

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        """The rectangle k(X[i], Y[j]) for validated inputs (a chunk of rows of X)."""
        raise not_implemented(self, "compute_gram")

    def compute_diag(self, X: Any) -> np.ndarray:
        """k(X[i], X[i]) for validated inputs."""
        raise not_implemented(self, "compute_diag")

    def compute_features(self, X: Any) -> np.ndarray:
        """Φ(X), rows the explicit features of the points (kernels with ``has_features``)."""
        raise not_implemented(self, "compute_features")

    def compute_feature_count(self, d: int) -> int | None:
        """D, the number of features :meth:`compute_features` gives a point of ``d``
        coordinates (kernels with ``has_features``); None (the default) when only
        computing the features of a point tells. The engine asks it before it decides to
        compute any (a polynomial kernel of high degree has more features than points)."""
        return None

    def compute_block_gram(self, Z: Any, W: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
        """Wᵀ K W for the Gram matrix K of a validated sample Z, with ``diag`` on its
        diagonal, and a dense n × c weight matrix W with a few columns, computed directly
        without tiles of K; or None (the default) when the kernel has no such shortcut,
        and the caller walks the tiles.

        Matrix-free sources call it for the within-block sums of the MONK estimators (two
        indicator columns per block), where a compiled loop that adds each pair's value
        as it goes beats forming the tiles (the RBF kernel:
        :func:`monk_framework.numerics.compiled.exp_squared_distance_form`)."""
        return None

    def compute_pair_values(self, A: Any, B: Any) -> np.ndarray | None:
        """k(a_l, b_l) for the pairs of two validated samples of one length, by a direct
        formula (one evaluation a pair); or None (the default), and :meth:`pair_values`
        takes the diagonals of small Gram blocks. The incomplete U-statistic reads its
        pairs from it (the RBF kernel: exp(−‖a_l − b_l‖²/(2σ²)) from each difference)."""
        return None

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        """E k(x, y) for independent x ~ N(m1, c1), y ~ N(m2, c2)."""
        raise MonkError(f"Kernel {self.name!r} has no closed-form MMD between Gaussians.")

    # -- machinery -------------------------------------------------------------------

    def _require_fitted(self) -> None:
        if not self.is_fitted:
            raise MonkError(
                f"Kernel {self.spec()} has a data-dependent hyperparameter; resolve it on the pooled sample first with kernel.fit(X, Y) (estimators do this)."
            )

    def check_finite(self, values: np.ndarray, *, sums: bool = False) -> np.ndarray:
        """``values`` if every one is finite and, for kernel values, at most
        :data:`VALUE_LIMIT` in magnitude (so that the sums the library takes of them stay
        within float64); else :class:`KernelOverflowError`, naming the kernel. A kernel
        that computes its own Gram matrix (overriding :meth:`symmetric_gram`) passes its
        result through this. ``sums=True``: the values are sums of kernel values (a
        matrix-free product's), checked for finiteness only."""
        # a kernel value that overflowed (or a plugin's NaN) must never become a number; the
        # largest and smallest value say it in two passes (max and min propagate NaN)
        hi, lo = (float(values.max()), float(values.min())) if values.size else (0.0, 0.0)
        if not (math.isfinite(hi) and math.isfinite(lo)):
            if sums:
                raise KernelOverflowError(
                    f"Kernel {self.spec()} ({type(self).__module__}.{type(self).__qualname__}): the sums of its values "
                    "over these data are not finite: a NaN or inf from the kernel's code, or values so large (above "
                    f"{VALUE_LIMIT:.3g}) that their sums overflow float64; rescale the data or the kernel."
                )
            if np.isnan(values).any():
                # NaN is not a size: say what it can come from, and whose code made it
                raise KernelOverflowError(
                    f"Kernel {self.spec()} ({type(self).__module__}.{type(self).__qualname__}) gives non-finite "
                    "values on these data: NaN, the result of an undefined operation (0/0, inf - inf, or a "
                    "value that overflowed and was then combined) in the kernel's code."
                )
            raise KernelOverflowError(
                f"Kernel {self.spec()} gives non-finite values on these data: inf, a value beyond float64 (overflow){_overflow_cause(values)}"
            )
        if not sums:
            top = max(hi, -lo)
            if top > VALUE_LIMIT:
                raise KernelOverflowError(
                    f"Kernel {self.spec()} gives values up to {top:.3g} on these data: the library sums up to 2^40 of "
                    f"them, so values above {VALUE_LIMIT:.3g} are refused (their sums would overflow float64). "
                    "Rescale the data or change the kernel's parameters."
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
        values = self._hook_values("compute_gram", X, Y)
        # a wrong shape would be broadcast into the Gram matrix without a word
        if values.shape != (len(X), len(Y)):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_gram returned shape {values.shape} for {len(X)} x {len(Y)} "
                f"points; it must return the whole rectangle k(X[i], Y[j]), shape ({len(X)}, {len(Y)})."
            )
        return self.check_finite(values) if check else values

    def _hook_values(self, method: str, *args: Any) -> Any:
        """What the hook ``method`` returns for read-only views of ``args``, as a float64
        array the framework alone holds (or None when the hook has no answer).

        Complex values are refused by name: numpy would drop their imaginary parts with
        only a warning, and a number would follow. An array the plugin still holds (a
        reused output buffer, a memo) is copied: the framework keeps tiles while the next
        is computed, on other threads too, and writes into some (their diagonals), so
        sharing one with the plugin would change numbers on either side."""
        hook = getattr(self, method)
        return self._answer(method, lambda: hook(*(read_only(a) for a in args)))

    def _answer(self, method: str, call: Callable[[], Any]) -> Any:
        """``call()`` (the plugin's ``method``) run as plugin code: its array owned, real and
        float64, or None (see :meth:`_hook_values`)."""
        with np.errstate(over="ignore", invalid="ignore"), plugin_code(self, method):
            values = owned_result(call)
        if values is None:
            return None
        if values.dtype.kind == "c":
            raise KernelContractError(f"{self.plugin_label()}: {method} returned complex values (dtype {values.dtype}); a kernel's values are real numbers.")
        return np.asarray(values, dtype=np.float64)

    def direct_block_gram(self, Z: Sample, W: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
        """``compute_block_gram``'s Wᵀ K W, checked for shape and finiteness, or None when
        the kernel has no direct form for these inputs."""
        G = self._hook_values("compute_block_gram", Z, W, diag)
        if G is None:
            return None
        if G.shape != (W.shape[1], W.shape[1]):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_block_gram returned shape {G.shape} for {W.shape[1]} weight "
                f"columns; it must return W'KW, shape ({W.shape[1]}, {W.shape[1]})."
            )
        return self.check_finite(G, sums=True)

    def diag_tile(self, X: Sample, *, overflow: bool = False) -> np.ndarray:
        """k(x_i, x_i) for a validated sample: ``compute_diag``'s values, checked for shape,
        finiteness and (PSD kernels) sign. ``overflow=True`` lets +inf through (a feature
        norm beyond float64, which :class:`ClippedKernel` clips); NaN is refused always."""
        values = self._hook_values("compute_diag", X)
        if values.shape != (len(X),):
            raise KernelContractError(
                f"{self.plugin_label()}: compute_diag returned shape {values.shape} for {len(X)} points; "
                f"it must return k(x_i, x_i) for each, shape ({len(X)},)."
            )
        if overflow:
            if np.isnan(values).any() or (values == -np.inf).any():
                self.check_finite(values)  # NaN (or -inf) is never a norm: refused by name
        else:
            values = self.check_finite(values)
        # the tolerance is relative to the finite values: a norm beyond float64 would make it -inf
        if self.is_psd and len(values) and values.min() < -CONTRACT_RTOL * float(np.abs(values[np.isfinite(values)]).max(initial=0.0)):
            i = int(np.argmin(values))
            raise KernelContractError(
                f"{self.plugin_label()} is not positive semi-definite: k(x, x) = {values[i]:.6g} < 0 "
                f"for point {i} (a PSD kernel has k(x, x) = ||phi(x)||^2 >= 0)."
            )
        return values

    def _chunk_rows(self, n_cols: int) -> int:
        return max(32, CHUNK_BYTES // (8 * max(n_cols, 1)))

    def symmetric_gram(self, X: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """K = k(X, X) of one validated sample, exactly symmetric with ``diag_tile`` on its
        diagonal, built in row bands of ``CHUNK_BYTES``, each diagonal block checked
        against the kernel contract. A kernel with a faster symmetric computation (the
        SSK) may override it; the override must return the same exactly symmetric matrix.

        ``run_bands(work, bands)`` calls ``work(start, stop)`` for every band; the default
        runs them here, one after another. The engine passes its own runner, which
        spreads the bands over the machine's cores (every band writes its own entries, so
        the matrix is the same bit for bit).
        """
        run_bands = run_bands or in_turn
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

        run_bands(band, [(start, min(start + step, n)) for start in range(0, n, step)])
        np.fill_diagonal(K, diag)
        return K

    def check_contract(self, X: Sample, Y: Sample | None = None) -> None:
        """The kernel contract on the data, before any path evaluates the kernel on them:
        :meth:`check_diagonal_block` (symmetry, ``compute_gram``'s diagonal against
        ``compute_diag``, Cauchy–Schwarz) and shape and finiteness, on the Gram matrix of the
        leading CONTRACT_CHECK_POINTS points of X (half of them from X and half from Y).

        Every estimate, embedding and test calls it once, so a faulty plugin is refused
        whichever estimator asked, also where the values are later read only in tiles or
        pairs that no diagonal block passes through (a fault is systematic, not confined to
        some pairs)."""
        half = CONTRACT_CHECK_POINTS if Y is None else CONTRACT_CHECK_POINTS // 2
        Z: Sample = X[:half]
        if Y is not None:
            Z = np.vstack([X[:half], Y[:half]]) if isinstance(X, np.ndarray) else [*X[:half], *Y[:half]]
        block, diag = self.gram_tile(Z, Z), self.diag_tile(Z)
        self.check_diagonal_block(block, diag, 0)
        self._warn_if_unresolved(X, Y, half, block[0], diag)
        self._warn_if_blind(Z, block, diag)

    def _warn_if_blind(self, Z: Sample, block: np.ndarray, diag: np.ndarray) -> None:
        """Warn (:class:`PrecisionWarning`) when a kernel on vectors is exactly 0 between every
        two distinct points of the contract check while k(z, z) > 0, and those points are
        mostly distinct: rbf or laplace at a bandwidth far below the data's scale (at
        σ = 10⁻⁵ on data of spread 1, exp(−5·10⁹) underflows to 0), with which an MMD sees
        only how often the same values recur; on distinct points that is the diagonal
        alone, whatever the distributions. On data with few distinct values (one-hot
        categories, counts) such a kernel compares the frequencies of the values, a
        meaningful MMD (the linear kernel on one-hot vectors, or any kernel of a point with
        itself only): no warning while the checked points hold at most half as many
        distinct values as points. Only PSD kernels on vectors are checked (a string kernel
        is 0 between strings that share no subsequence of its length, rightly), and only
        when the checked points hold a distinct pair."""
        if not self.is_psd or not isinstance(Z, np.ndarray) or len(Z) < 2 or not np.any(diag > 0):
            return
        flat = Z.reshape(len(Z), -1)
        equal = np.all(flat[:, None, :] == flat[None, :, :], axis=-1)
        if equal.all() or np.any(block[~equal] != 0.0):
            return
        # the first index of each point's value: how many distinct values the points hold
        distinct = int(np.count_nonzero(np.argmax(equal, axis=1) == np.arange(len(Z))))
        if 2 * distinct <= len(Z):
            return
        warnings.warn(
            PrecisionWarning(
                f"{self.spec()} is 0 between every two distinct points of the {len(Z)} checked ({distinct} distinct "
                "values): an MMD with it counts equal points only, so on data without repeated values it sees the "
                "diagonal k(z, z) alone, whatever the distributions (a bandwidth far below the data's scale makes every "
                "value between points underflow). Choose its parameters for the data's scale (for a bandwidth, "
                "sigma=median), or rescale the data."
            ),
            stacklevel=3,
        )

    def _warn_if_unresolved(self, X: Sample, Y: Sample | None, known: int, row: np.ndarray, diag: np.ndarray) -> None:
        """Warn (:class:`PrecisionWarning`) when the kernel barely varies on the data, so
        that round-off swamps every MMD computed from its values.

        An MMD² is a sum of kernel values of size up to K = max |k|, so it carries an
        absolute round-off of about ε K (ε = 2⁻⁵²), while it is at most the squared feature
        diameter D² = max ‖φ(z) − φ(z′)‖². With δ² = max_j ‖φ(z₁) − φ(z_j)‖² (one row of
        kernel values, on the leading RESOLUTION_POINTS pooled points; D² ≤ 4δ² by the
        triangle inequality), the relative round-off is at least ε K / D² ≥ ε K / (4δ²).
        Said when δ² < 2.2·10⁻¹⁰ K (a round-off above 10⁻⁶), and only when the points
        differ: a bandwidth far beyond the data's scale (rbf at σ = 10⁸ on data of spread 1
        gives MMD² = 0), an offset that dwarfs ⟨x, y⟩. Kernels not declared PSD are not
        checked (their ‖φ(z) − φ(z′)‖² is not a distance), nor one sample of a kernel whose
        MMD ignores the origin (an embedding: :meth:`Embedding.distance` reads it centred,
        as every MMD path reads the pair, :meth:`mmd_view`).

        ``row`` and ``diag`` are the contract check's first Gram row and diagonal, on the
        leading ``known`` points of X and of Y; the row is extended to the rest here."""
        if not self.is_psd or (Y is None and self.checked_shift_free()):
            return
        half = RESOLUTION_POINTS if Y is None else RESOLUTION_POINTS // 2
        parts = [X[:known], X[known:half]] if Y is None else [X[:known], Y[:known], X[known:half], Y[known:half]]
        if isinstance(X, np.ndarray):
            Z: Sample = np.concatenate(parts)
            distinct = bool(np.any(Z != Z[:1]))
        else:
            Z = [z for part in parts for z in part]
            distinct = any(z != Z[0] for z in Z)
        if not distinct:
            return  # one point repeated: every MMD is 0, rightly
        rest = Z[len(diag) :]
        if len(rest):
            row = np.concatenate([row, self.gram_tile(Z[:1], rest)[0]])
            diag = np.concatenate([diag, self.diag_tile(rest)])
        scale = max(float(np.abs(row).max()), float(np.abs(diag).max()))
        spread = float(np.max(diag[0] + diag - 2.0 * row))
        if spread > RESOLUTION_LIMIT * scale:
            return
        if Y is not None and self._far_from_origin(X, Y) is not None:
            return  # said already, with its cause (warn_if_far_from_origin)
        if spread <= 0.0:
            what = "cannot tell these distinct points apart: every MMD comes out 0 (or round-off) whatever the data"
        else:
            what = (
                f"varies by only {spread / scale:.1g} of its values (up to {scale:.3g}) between these points: "
                f"an MMD² carries a relative round-off of at least {RESOLUTION_LIMIT * 1e-6 * scale / (4 * spread):.1g}"
            )
        warnings.warn(
            PrecisionWarning(f"{self.spec()} {what}. Choose its parameters for the data's scale (for a bandwidth, sigma=median), or rescale the data."),
            stacklevel=3,
        )

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
                f"{label}: compute_diag gives k(x_{offset + i}, x_{offset + i}) = {diag[i]:.6g} but compute_gram gives {block[i, i]:.6g}; the two must agree."
            )
        block, diag = block[:CONTRACT_CHECK_POINTS, :CONTRACT_CHECK_POINTS], diag[:CONTRACT_CHECK_POINTS]
        scale = max(float(np.abs(block).max()), scale)
        gap = np.abs(block - block.T)
        if gap.max() > CONTRACT_RTOL * scale:
            i, j = (int(v) for v in np.unravel_index(int(np.argmax(gap)), gap.shape))
            raise KernelContractError(
                f"{label} is not symmetric: k(x_{offset + i}, x_{offset + j}) = {block[i, j]:.6g} but k(x_{offset + j}, x_{offset + i}) = {block[j, i]:.6g}."
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

    def whole_gram(self, X: Sample, Y: Sample | None = None, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """k(X, X) (exactly symmetric) or k(X, Y) of validated samples, from
        :meth:`symmetric_gram` or :meth:`rectangular_gram`: what the framework calls for a
        whole Gram matrix. Its own methods check every band as they build it. A plugin's
        override is run as plugin code and its matrix checked whole: the shape, real and
        finite values, and for k(X, X) exact symmetry and, on its leading block and on
        sampled pairs, the contract a tile is held to (``compute_diag`` on its diagonal,
        Cauchy–Schwarz)."""
        if Y is None and type(self).symmetric_gram is Kernel.symmetric_gram:
            return self.symmetric_gram(X, run_bands=run_bands)
        if Y is not None and type(self).rectangular_gram is Kernel.rectangular_gram:
            return self.rectangular_gram(X, Y, run_bands=run_bands)
        method = "symmetric_gram" if Y is None else "rectangular_gram"
        K = self._answer(method, lambda: self.symmetric_gram(X, run_bands=run_bands) if Y is None else rectangular_gram_of(self, X, Y, run_bands=run_bands))
        if K is None:
            raise KernelContractError(f"{self.plugin_label()}: {method} returned None; it must return the Gram matrix.")
        other = X if Y is None else Y
        if K.shape != (len(X), len(other)):
            raise KernelContractError(
                f"{self.plugin_label()}: {method} returned shape {K.shape} for {len(X)} x {len(other)} points; it must "
                f"return the whole matrix, shape ({len(X)}, {len(other)})."
            )
        self.check_finite(K)
        if Y is None:
            self._check_whole_symmetric(K, X)
        return K

    def _check_whole_symmetric(self, K: np.ndarray, X: Sample) -> None:
        """A plugin's whole k(X, X): exactly symmetric (every estimator reads one triangle or
        the other), checked on its leading block and on WHOLE_CHECK_PAIRS sampled pairs,
        and its diagonal ``compute_diag``'s."""
        n = len(K)
        diag = self.diag_tile(X)
        self.check_diagonal_block(K[:CONTRACT_CHECK_POINTS, :CONTRACT_CHECK_POINTS], diag[:CONTRACT_CHECK_POINTS], 0)
        gen = np.random.default_rng(n)  # the same pairs for the same size: a reproducible check
        i, j = gen.integers(0, n, size=(2, WHOLE_CHECK_PAIRS)) if n else (np.zeros(0, int), np.zeros(0, int))
        gap = np.abs(K[i, j] - K[j, i])
        if gap.size and gap.max() > 0:
            w = int(np.argmax(gap))
            raise KernelContractError(
                f"{self.plugin_label()} is not symmetric: its symmetric_gram gives k(x_{i[w]}, x_{j[w]}) = {K[i[w], j[w]]:.6g} "
                f"but k(x_{j[w]}, x_{i[w]}) = {K[j[w], i[w]]:.6g}; the matrix must be exactly symmetric."
            )
        off = np.abs(np.diagonal(K) - diag)
        scale = max(float(np.abs(diag).max(initial=0.0)), 1e-300)
        if off.size and off.max() > DIAG_RTOL * scale:
            w = int(np.argmax(off))
            raise KernelContractError(
                f"{self.plugin_label()}: compute_diag gives k(x_{w}, x_{w}) = {diag[w]:.6g} but symmetric_gram gives {K[w, w]:.6g}; the two must agree."
            )
        root = np.sqrt(np.maximum(diag, 0.0))
        excess = np.abs(K[i, j]) - root[i] * root[j]
        if self.is_psd and excess.size and excess.max() > CONTRACT_RTOL * max(scale, float(np.abs(K[i, j]).max())):
            w = int(np.argmax(excess))
            raise KernelContractError(
                f"{self.plugin_label()} is not positive semi-definite: |k(x_{i[w]}, x_{j[w]})| = {abs(K[i[w], j[w]]):.6g} "
                f"exceeds sqrt(k(x, x) k(x', x')) = {root[i[w]] * root[j[w]]:.6g} (Cauchy-Schwarz holds for every PSD "
                "kernel)."
            )

    def rectangular_gram(self, X: Sample, Y: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """k(X, Y) of two validated samples, filled in row bands of ``CHUNK_BYTES`` after a
        memory check. A kernel with a faster whole-matrix computation may override it.

        ``run_bands(work, bands)`` calls ``work(start, stop)`` for every band of rows, as in
        :meth:`symmetric_gram`; the engine passes a runner that counts them for its
        progress display (every band writes its own rows: the same matrix bit for bit)."""
        run_bands = run_bands or in_turn
        n, m = len(X), len(Y)
        check_memory(n, m)
        K = np.empty((n, m), dtype=np.float64)
        step = self._chunk_rows(m)

        def band(start: int, stop: int) -> None:
            K[start:stop] = self.gram_tile(X[start:stop], Y)

        run_bands(band, [(start, min(start + step, n)) for start in range(0, n, step)])
        return K


def _fits_float64(value: numbers.Real) -> bool:
    """A finite real number within float64's range (an integer of 400 digits is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _lower_median(Z: np.ndarray) -> np.ndarray:
    """The coordinate-wise lower median of the points of Z: a data value, which gross
    outliers do not drag away from the ordinary points."""
    return np.partition(Z, (len(Z) - 1) // 2, axis=0)[(len(Z) - 1) // 2]


def _norm(v: np.ndarray) -> float:
    """‖v‖ without squaring a coordinate beyond float64 (1e200 data): scaled by max |v_j|."""
    top = float(np.max(np.abs(v), initial=0.0))
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * math.sqrt(float(np.sum((v / top) ** 2)))


def _overflow_cause(values: np.ndarray) -> str:
    """The end of an overflow's message. Where a few points (at most a fifth of the
    block's) hold every infinite value (their rows of features or entries of a diagonal;
    their rows and columns of a block of kernel values, each mostly infinite), they are
    far larger than the others, and no rescaling of the whole sample helps; otherwise
    rescaling does."""
    infinite = np.isinf(values)
    few, total = int(infinite.sum()), infinite.size
    if values.ndim == 2 and values.size:
        n, m = values.shape
        total = n if n == m else n + m  # a diagonal block's rows and columns are the same points
        heavy_rows, heavy_cols = infinite.mean(axis=1) > 0.5, infinite.mean(axis=0) > 0.5
        covered = bool(((infinite & (heavy_rows[:, None] | heavy_cols[None, :])) == infinite).all())
        few = (int(heavy_rows.sum()) if n == m else int(heavy_rows.sum() + heavy_cols.sum())) if covered else 0
        if not 0 < few <= total // 5 and n >= 20:  # features: the far points' rows, whatever their share of infs
            few, total = int(infinite.any(axis=1).sum()), n
    if 0 < few <= total // 5:
        return (
            f", and only at {few} of the {total} points in this block: points far larger than the others (gross "
            "outliers?), which no rescaling of the whole sample brings within float64. Remove them, or use a "
            "bounded kernel (rbf, laplace), or a robust test with clipped features (--contamination R --method clip)."
        )
    return "; rescale the data or change the kernel's parameters."


def check_squared_norm(kernel: Kernel, value: float, scale: float, what: str) -> float:
    """Return ``value``, a squared RKHS norm ‖Σ c_i φ(z_i)‖² = cᵀKc, after checking it is not negative.

    A PSD kernel gives cᵀKc ≥ 0 for every c, so a value below −CONTRACT_RTOL · ``scale``
    (``scale``: the size of the terms it was summed from, e.g. Σ|c_i||c_j||K_ij|) proves
    that ``kernel`` is not PSD on these points. ``what`` names the quantity (e.g. "the
    V-statistic MMD^2"). Cheap checks for estimators that already hold such a value.
    """
    if kernel.is_psd and value < -CONTRACT_RTOL * max(abs(scale), 1e-300):
        raise KernelContractError(
            f"{kernel.plugin_label()} is not positive semi-definite on these data: {what} is {value:.6g} < 0, which no PSD kernel can give."
        )
    return value


def _as_gaussian(mean: Any, cov: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    c = np.asarray(cov, dtype=np.float64)
    if c.ndim == 0:
        c = c * np.eye(m.size)
    if m.ndim != 1 or c.shape != (m.size, m.size):
        raise DataError(f"A Gaussian needs a mean of shape (d,) and a covariance of shape (d, d); got {m.shape} and {c.shape}.")
    return m, c


# -- kernels built from kernels: k1 + k2, k1 * k2 and c * k ------------------------------
#
# Sums and products of positive semi-definite kernels are positive semi-definite (Schur's
# product theorem for the product), and so is c·k for c > 0; so the results are kernels for
# every estimator and test. Data-dependent hyperparameters of the parts are fitted on the
# same pooled sample. A composite is bounded when its parts are: sup k(x, x) is κ₁ + κ₂,
# κ₁κ₂ and cκ. Its JSON form names the parts, {"left": {"name": ..., "params": ...},
# "right": ...}; Registry.kernel_from_spec rebuilds it.


def _as_kernel(value: Any) -> Kernel:
    if isinstance(value, Kernel):
        return value
    raise ParameterError(
        f"A kernel combination takes kernels; got {type(value).__name__} (a kernel's JSON form is rebuilt by monk_framework.core.registry.kernel_from_spec)."
    )


def _same_input(instance: Any, attribute: attrs.Attribute, value: Kernel) -> None:
    left = instance.left
    if value is not left and value.input_kind != left.input_kind:
        raise ParameterError(f"Cannot combine kernel {left.name!r} ({left.input_kind}s) with kernel {value.name!r} ({value.input_kind}s).")


def _spec_of(kernel: Kernel) -> dict[str, Any]:
    return {"name": kernel.name, "params": kernel.params()}


@attrs.frozen(kw_only=True)
class _Pair(Kernel):
    """Two kernels on the same input kind, combined pointwise."""

    left: Kernel = attrs.field(converter=_as_kernel)
    right: Kernel = attrs.field(converter=_as_kernel, validator=_same_input)
    symbol: ClassVar[str] = "?"

    @property
    def input_kind(self) -> str:  # type: ignore[override]
        return self.left.input_kind

    @property
    def is_psd(self) -> bool:  # type: ignore[override]
        return self.left.is_psd and self.right.is_psd

    @property
    def nonnegative(self) -> bool:  # type: ignore[override]
        return self.left.nonnegative and self.right.nonnegative

    @property
    def has_features(self) -> bool:  # type: ignore[override]
        # a combination of two finite feature maps is one (concatenated, or their products)
        return self.left.has_features and self.right.has_features

    @property
    def is_fitted(self) -> bool:
        return self.left.is_fitted and self.right.is_fitted

    def fit(self, X: Any, Y: Any = None) -> Any:
        return attrs.evolve(self, left=self.left.fitted(X, Y), right=self.right.fitted(X, Y))

    def params(self) -> dict[str, Any]:
        return {"left": _spec_of(self.left), "right": _spec_of(self.right)}

    def spec(self) -> str:
        return f"({self.left.spec()} {self.symbol} {self.right.spec()})"


@attrs.frozen(kw_only=True)
class SumKernel(_Pair):
    """k(x, y) = k₁(x, y) + k₂(x, y)."""

    name: ClassVar[str] = "sum"
    summary: ClassVar[str] = "The sum of two kernels."
    formula: ClassVar[str] = "k(x, y) = k1(x, y) + k2(x, y)"
    symbol: ClassVar[str] = "+"

    def shift_free_mmd(self) -> bool:
        # the feature maps side by side: each part's MMD must ignore the origin (a shift-free
        # or translation-invariant part), and one at least must need the centred data
        free = [part.checked_shift_free() for part in (self.left, self.right)]
        invariant = [type(part).translation_invariant for part in (self.left, self.right)]
        return any(free) and all(f or i for f, i in zip(free, invariant))

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        return self.left.gram_tile(X, Y) + self.right.gram_tile(X, Y)

    def compute_features(self, X: Any) -> np.ndarray:
        # ⟨[φ₁(x), φ₂(x)], [φ₁(y), φ₂(y)]⟩ = k₁(x, y) + k₂(x, y)
        return np.hstack([self.left.features(X), self.right.features(X)])

    def compute_feature_count(self, d: int) -> int | None:
        a, b = self.left.compute_feature_count(d), self.right.compute_feature_count(d)
        return None if a is None or b is None else a + b

    def compute_diag(self, X: Any) -> np.ndarray:
        return self.left.diag_tile(X) + self.right.diag_tile(X)

    def sup_diag(self) -> float | None:
        a, b = self.left.sup_diag(), self.right.sup_diag()
        return None if a is None or b is None else a + b

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        # expectation is linear
        return self.left.gaussian_expectation(m1, c1, m2, c2) + self.right.gaussian_expectation(m1, c1, m2, c2)


@attrs.frozen(kw_only=True)
class ProductKernel(_Pair):
    """k(x, y) = k₁(x, y) · k₂(x, y)."""

    name: ClassVar[str] = "product"
    summary: ClassVar[str] = "The product of two kernels."
    formula: ClassVar[str] = "k(x, y) = k1(x, y) * k2(x, y)"
    symbol: ClassVar[str] = "*"

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        return self.left.gram_tile(X, Y) * self.right.gram_tile(X, Y)

    def compute_features(self, X: Any) -> np.ndarray:
        # ⟨φ₁(x) ⊗ φ₂(x), φ₁(y) ⊗ φ₂(y)⟩ = k₁(x, y) · k₂(x, y)
        F, G = self.left.features(X), self.right.features(X)
        return (F[:, :, None] * G[:, None, :]).reshape(len(F), -1)

    def compute_feature_count(self, d: int) -> int | None:
        a, b = self.left.compute_feature_count(d), self.right.compute_feature_count(d)
        return None if a is None or b is None else a * b

    def compute_diag(self, X: Any) -> np.ndarray:
        return self.left.diag_tile(X) * self.right.diag_tile(X)

    def sup_diag(self) -> float | None:
        a, b = self.left.sup_diag(), self.right.sup_diag()
        return None if a is None or b is None else a * b


#: the radii a :class:`ClippedKernel` takes: those whose c² is a normal float64 number
#: (its kernel values, bounded by c², would otherwise overflow or vanish)
RADIUS_RANGE = (math.sqrt(np.finfo(np.float64).tiny), math.sqrt(np.finfo(np.float64).max))


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (np.isfinite(value) and value > 0):
        if isinstance(instance, ScaledKernel):
            raise ParameterError(f"A kernel can be scaled by a finite number > 0 only (c·k stays PSD); got {value!r}.")
        raise ParameterError(f"A kernel can be clipped at a radius c that is a finite number > 0 only; got {value!r}.")
    if isinstance(instance, ClippedKernel) and not RADIUS_RANGE[0] <= value <= RADIUS_RANGE[1]:
        raise ParameterError(
            f"A kernel can be clipped at a radius c whose square is within float64's range "
            f"({RADIUS_RANGE[0]:.3g} <= c <= {RADIUS_RANGE[1]:.3g}) only; got {value!r}."
        )


@attrs.frozen(kw_only=True)
class _Wrapping(Kernel):
    """A kernel built from one kernel ``kernel`` and a number ``c`` > 0: it reads inputs
    as ``kernel`` does, is fitted when ``kernel`` is, and keeps ``kernel``'s PSD and sign
    properties (shared by :class:`ScaledKernel` and :class:`ClippedKernel`)."""

    c: float = attrs.field(converter=float, validator=_positive)
    kernel: Kernel = attrs.field(converter=_as_kernel)

    @property
    def input_kind(self) -> str:  # type: ignore[override]
        return self.kernel.input_kind

    @property
    def is_psd(self) -> bool:  # type: ignore[override]
        return self.kernel.is_psd

    @property
    def nonnegative(self) -> bool:  # type: ignore[override]
        return self.kernel.nonnegative

    @property
    def has_features(self) -> bool:  # type: ignore[override]
        return self.kernel.has_features

    def compute_feature_count(self, d: int) -> int | None:
        return self.kernel.compute_feature_count(d)

    @property
    def is_fitted(self) -> bool:
        return self.kernel.is_fitted

    def fit(self, X: Any, Y: Any = None) -> Any:
        return attrs.evolve(self, kernel=self.kernel.fitted(X, Y))

    def params(self) -> dict[str, Any]:
        return {"c": self.c, "kernel": _spec_of(self.kernel)}


@attrs.frozen(kw_only=True)
class ScaledKernel(_Wrapping):
    """k(x, y) = c · k₀(x, y), c > 0."""

    name: ClassVar[str] = "scaled"
    summary: ClassVar[str] = "A kernel times a constant c > 0."
    formula: ClassVar[str] = "k(x, y) = c * k0(x, y)"

    def spec(self) -> str:
        return f"{self.c:g} * {self.kernel.spec()}"

    def shift_free_mmd(self) -> bool:
        return self.kernel.shift_free_mmd()

    def anchored(self, anchor: np.ndarray) -> Kernel | None:
        # c·k anchored is c times k anchored (a sum or a product of kernels has no anchored form)
        inner = self.kernel.checked_anchored(anchor)
        return None if inner is None else attrs.evolve(self, kernel=inner)

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        return self.c * self.kernel.gram_tile(X, Y)

    def compute_features(self, X: Any) -> np.ndarray:
        return math.sqrt(self.c) * self.kernel.features(X)

    def compute_diag(self, X: Any) -> np.ndarray:
        return self.c * self.kernel.diag_tile(X)

    def sup_diag(self) -> float | None:
        kappa = self.kernel.sup_diag()
        return None if kappa is None else self.c * kappa

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        return self.c * self.kernel.gaussian_expectation(m1, c1, m2, c2)


@attrs.frozen(kw_only=True)
class ClippedKernel(_Wrapping):
    """k_c(x, y) = k₀(x, y)·s(x)·s(y), s(x) = min(1, c/√k₀(x, x)): the clipped-feature kernel.

    Its feature map is φ_c(x) = φ₀(x)·min(1, c/‖φ₀(x)‖): each feature vector is shrunk
    onto the ball of radius c and left alone inside it. So k_c is positive
    semi-definite (an inner product of features), equals k₀ wherever ‖φ₀‖ ≤ c,
    k_c(x, x) ≤ c², and its feature diameter is at most 2c (at most k₀'s own when k₀ is
    bounded). Robust tests use it to give any kernel a bounded sensitivity
    (:mod:`monk_framework.two_sample.robust`, method "clip").

    A point whose k₀(x, x) is beyond float64 (a gross outlier of an unbounded kernel:
    norm above about 1e77 for the quadratic kernel) has no computable direction
    φ₀(x)/‖φ₀(x)‖; it gets the feature 0 instead, so k_c(x, ·) = 0. That is still a feature
    map of norm at most c, fixed before the data, so k_c stays positive semi-definite,
    bounded by c², with diameter 2c, and the robust tests' guarantees hold unchanged.
    """

    name: ClassVar[str] = "clipped"
    summary: ClassVar[str] = "A kernel whose feature vectors are shrunk onto a ball of radius c."
    formula: ClassVar[str] = "k(x, y) = k0(x, y) * s(x) * s(y), s(x) = min(1, c / sqrt(k0(x, x)))"

    def spec(self) -> str:
        return f"clip({self.kernel.spec()}, c={self.c:g})"

    def shrink(self, diag: np.ndarray) -> np.ndarray:
        """s = min(1, c/√k₀(x, x)) from k₀'s diagonal values (1 where k₀(x, x) = 0, and 0
        where it is +inf: the point's feature is set to 0, see the class docstring)."""
        root_diag = np.sqrt(np.maximum(diag, 0.0))
        with np.errstate(divide="ignore"):
            return np.minimum(1.0, self.c / root_diag)

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        sx = self.shrink(self.kernel.diag_tile(X, overflow=True))
        sy = sx if Y is X else self.shrink(self.kernel.diag_tile(Y, overflow=True))
        # k₀'s values are checked through the clipped ones (gram_tile checks what this
        # returns): a value of k₀ too large to sum may become a clipped one that is not. A
        # point beyond float64 has s = 0 and a row of k₀ that may be inf: its row is set to 0
        # (inf · 0 would be NaN)
        out = self.kernel.gram_tile(X, Y, check=False) * sx[:, None]
        out *= sy[None, :]
        out[sx == 0.0, :] = 0.0
        out[:, sy == 0.0] = 0.0
        return out

    def compute_pair_values(self, A: Any, B: Any) -> np.ndarray:
        # k₀(a, b)·s(a)·s(b) pair by pair, from k₀'s own pair values (direct where it has them)
        sa = self.shrink(self.kernel.diag_tile(A, overflow=True))
        sb = self.shrink(self.kernel.diag_tile(B, overflow=True))
        inside = (sa > 0.0) & (sb > 0.0)
        out = np.zeros(len(A))
        if inside.any():
            idx = np.flatnonzero(inside)
            out[idx] = self.kernel.pair_values(take(A, idx), take(B, idx), check=False) * sa[idx] * sb[idx]
        return out

    def compute_features(self, X: Any) -> np.ndarray:
        # φ_c(x) = φ₀(x)·s(x); a point beyond float64 has the feature 0, as in compute_gram
        # (its φ₀ may not be finite: it is never computed)
        s = self.shrink(self.kernel.diag_tile(X, overflow=True))
        inside = np.flatnonzero(s > 0.0)
        width = self.kernel.features(take(X, inside[:1]) if len(inside) else np.zeros_like(X[:1])).shape[1]
        out = np.zeros((len(s), width))
        if len(inside):
            out[inside] = self.kernel.features(take(X, inside)) * s[inside, None]
        return out

    def compute_diag(self, X: Any) -> np.ndarray:
        # k_c(x, x) = min(k₀(x, x), c²), and 0 for a point beyond float64
        d = self.kernel.diag_tile(X, overflow=True)
        return np.where(d == np.inf, 0.0, np.minimum(d, self.c**2))

    def sup_diag(self) -> float | None:
        kappa = self.kernel.sup_diag()
        return self.c**2 if kappa is None else min(self.c**2, kappa)

    def feature_diameter(self) -> float | None:
        inner = self.kernel.feature_diameter()
        own = super().feature_diameter()  # from sup_diag: √2·c or 2c
        return own if inner is None or own is None else min(own, inner)


#: the combinations by the name their JSON form carries
COMPOSITES: dict[str, type[Kernel]] = {
    "sum": SumKernel,
    "product": ProductKernel,
    "scaled": ScaledKernel,
    "clipped": ClippedKernel,
}


def scale(c: Any, kernel: Kernel) -> Kernel:
    """c · k, refusing what is not a number."""
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, (numbers.Real, Decimal)):
        raise ParameterError(f"A kernel can be multiplied by a number or a kernel; got {type(c).__name__}.")
    value = finite_real(c)  # a Decimal or a Fraction as a float; an int beyond float64 refused by name
    if value is None:
        raise ParameterError(f"A kernel can be scaled by a finite number > 0 only (c·k stays PSD); got {shown(c)}.")
    return ScaledKernel(c=value, kernel=kernel)


# -- explicit finite features, where they make sums of kernel values cheap -----------------
#
# A kernel with a finite feature map Φ (``has_features``: linear, polynomial, quadratic,
# and their sums, products, multiples and clipped versions) has K = ΦΦᵀ, so every sum of
# kernel values the classical statistics and the embeddings need is a product of feature
# sums: Σ_ij u_i k(a_i, b_j) v_j = ⟨Φ(A)ᵀu, Φ(B)ᵀv⟩, O((N + M) D) work instead of N·M kernel
# values. The engine's sums (kernel_sums, sample_sums) and the embeddings' (bilinear,
# weighted_gram) read them when D is at most 1/FEATURES_PAY of the points and they fit in
# the budget, after holding them to the kernel's own values on the points the kernel
# contract checks (a plugin whose features disagree is refused, never trusted).

#: the features replace the Gram matrix when there are at least this many points for each
#: feature: below, N² kernel values at the rate of a GEMM are no dearer than N·D products
FEATURES_PAY = 16

#: |⟨φ(a), φ(b)⟩ − k(a, b)| allowed, relative to √(k(a, a) k(b, b)): round-off, not a fault
FEATURE_TOLERANCE = 1e-9


def paying_features(kernel: Kernel, parts: Sequence[Sample], resources: Resources) -> list[np.ndarray] | None:
    """Φ of each sample in ``parts`` (validated vector samples), or None when the kernel
    has no finite feature map, its D features a point are more than 1/FEATURES_PAY of the
    points, or the feature matrices would not fit in the budget of ``resources``."""
    plan = _feature_plan(kernel, parts)
    if plan is None:
        return None
    arrays, first, D = plan
    if not resources.fits(8.0 * sum(len(p) for p in arrays) * D):
        return None
    # one point's features first: a count that is not their width would size everything after it wrongly
    widths = {kernel.features(first[:1]).shape[1]}
    features = []
    for p in arrays:
        features.append(kernel.features(p))
        widths.add(features[-1].shape[1])
    _check_widths(kernel, first, D, widths)
    _check_against_values(kernel, arrays, features)
    return features


def _feature_plan(kernel: Kernel, parts: Sequence[Sample]) -> tuple[list[np.ndarray], np.ndarray, int] | None:
    """(the parts, the first non-empty one, D) when the kernel has features and D pays
    (at most 1/FEATURES_PAY of the points), else None."""
    arrays = [p for p in parts if isinstance(p, np.ndarray) and p.ndim == 2]
    if not kernel.has_features or len(arrays) != len(parts) or not any(len(p) for p in arrays):
        return None
    first = next(p for p in arrays if len(p))
    D = kernel.feature_count(first)
    return None if D * FEATURES_PAY > sum(len(p) for p in arrays) else (arrays, first, D)


def _check_widths(kernel: Kernel, first: np.ndarray, D: int, widths: set[int]) -> None:
    """Refuse features whose width is not the plugin's own count D, by name."""
    if widths - {D}:
        raise KernelContractError(
            f"{kernel.plugin_label()}: compute_feature_count({first.shape[1]}) gives {D:,} features a point, but "
            f"compute_features gives {', '.join(f'{w:,}' for w in sorted(widths - {D}))}; they must agree."
        )


def feature_block_rows(resources: Resources, D: int) -> int:
    """Rows of D features a point that a block read by :func:`feature_sums` (and a test's
    products with the features in blocks) may hold: a quarter of the budget."""
    return int((resources.budget or CHUNK_BYTES) // (4 * 8 * D))


def feature_sums(kernel: Kernel, parts: Sequence[Sample], resources: Resources, leave_out: Sequence[np.ndarray] | None = None) -> list[np.ndarray] | None:
    """Σ_i φ(z_i) of each sample in ``parts``, for a kernel whose D features pay (as in
    :func:`paying_features`) but whose feature matrices do not fit the budget: read in
    blocks of rows that take at most a quarter of it, so the sums cost O((N + M) D) in
    any budget, where kernel values cost (N + M)². None when the kernel has no finite
    features, D does not pay, or one row of features does not fit. The features are
    checked as :func:`paying_features` checks them (their width, and their inner products
    against the kernel's values on the leading points). ``leave_out``: for each part, the
    indices of points whose features are not added (their rows are set to 0 first)."""
    plan = _feature_plan(kernel, parts)
    if plan is None:
        return None
    arrays, first, D = plan
    rows = feature_block_rows(resources, D)
    if rows < 1:
        return None
    half = max(1, CONTRACT_CHECK_POINTS // len(arrays))
    leading = [kernel.features(p[:half]) for p in arrays]
    widths = {f.shape[1] for f in leading if len(f)}
    sums = []
    for i, p in enumerate(arrays):
        total = np.zeros(D)
        skip = np.zeros(len(p), dtype=bool)
        if leave_out is not None:
            skip[leave_out[i]] = True
        for start in range(0, len(p), rows):
            block = kernel.features(p[start : start + rows])
            widths.add(block.shape[1])
            if block.shape[1] != D:
                break
            block[skip[start : start + len(block)]] = 0.0
            total += block.sum(axis=0)
        sums.append(total)
    _check_widths(kernel, first, D, widths)
    _check_against_values(kernel, arrays, leading)
    return sums


def _check_against_values(kernel: Kernel, parts: Sequence[np.ndarray], features: Sequence[np.ndarray]) -> None:
    """Φ(A) Φ(A)ᵀ against k(A, A) on the leading points of each part (those the kernel
    contract checks): a plugin's features that are not its kernel's would give another
    MMD without a word."""
    half = max(1, CONTRACT_CHECK_POINTS // len(parts))
    A = np.vstack([p[:half] for p in parts])
    F = np.vstack([f[:half] for f in features])
    # each checked point by its sample and index: x_3, y_0 (z_i beyond two samples)
    letters = "xy" if len(parts) == 2 else "z" * len(parts)
    names = [f"{letters[k]}_{i}" for k, p in enumerate(parts) for i in range(min(half, len(p)))]
    values = kernel.gram_tile(A, A)
    scale = np.sqrt(np.abs(np.diag(values)))
    gap = np.abs(F @ F.T - values) - FEATURE_TOLERANCE * np.outer(scale, scale)
    if np.any(gap > 0):
        i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
        a, b = names[i], names[j]
        raise KernelContractError(
            f"{kernel.plugin_label()}: its features disagree with its kernel values: <features({a}), features({b})> = "
            f"{float(F[i] @ F[j]):.6g} where k({a}, {b}) = {float(values[i, j]):.6g}. compute_features must give "
            "features(X) @ features(Y).T = k(X, Y) (or has_features must be False)."
        )


# -- reductions an embedding needs, within the memory budget -------------------------------


def _tile_rows(m: int, resources: Resources) -> int:
    """Rows of a tile of m columns: at most a quarter of the budget (and of CHUNK_BYTES)."""
    return max(1, max(8 * m, min(CHUNK_BYTES, (resources.budget or CHUNK_BYTES) // 4)) // (8 * m))


def _row_tiles(kernel: Kernel, A: Sample, B: Sample, resources: Resources) -> Iterator[tuple[int, np.ndarray]]:
    """(start, K(A[start:stop], B)) row tiles of at most a quarter of the budget."""
    step = _tile_rows(len(B), resources)
    for a in range(0, len(A), step):
        yield a, kernel.gram_tile(A[a : a + step], B)


def weighted_gram(
    kernel: Kernel,
    A: Sample,
    B: Sample,
    v: np.ndarray,
    *,
    resources: Resources,
    report: Callable[[float], None] | None = None,
) -> np.ndarray:
    """K(A, B) v for validated samples: from the stored Gram matrix when it fits in the
    budget of ``resources``, else from row tiles computed on the fly (an embedding's
    witness values never need its whole Gram matrix). ``report(done)`` is told the kernel
    values evaluated so far, band by band."""
    m = len(B)
    features = paying_features(kernel, (A, B), resources)
    if features is not None:
        # K(A, B) v = Φ(A) (Φ(B)ᵀ v): no kernel value between points
        if report is not None:
            report(float(len(A)) * m)
        return features[0] @ (features[1].T @ v)
    if resources.fits(8.0 * len(A) * m):
        return kernel.whole_gram(A, B, run_bands=None if report is None else counted_in_turn(m, report)) @ v
    out = np.empty(len(A))
    for a, tile in _row_tiles(kernel, A, B, resources):
        out[a : a + len(tile)] = tile @ v
        if report is not None:
            report(float(a + len(tile)) * m)
    return out


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


def rectangular_gram_of(kernel: Kernel, A: Sample, B: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
    """``kernel.rectangular_gram(A, B)``, given ``run_bands`` where the kernel takes it: a
    plugin's override written to the older ``rectangular_gram(X, Y)`` is called without it
    (its matrix is then one step of the progress)."""
    if run_bands is None or not _takes_run_bands(kernel):
        return kernel.rectangular_gram(A, B)
    return kernel.rectangular_gram(A, B, run_bands=run_bands)


def _takes_run_bands(kernel: Kernel) -> bool:
    try:
        return "run_bands" in inspect.signature(kernel.rectangular_gram).parameters
    except (TypeError, ValueError):
        return False


def bilinear(
    kernel: Kernel,
    A: Sample,
    B: Sample | None,
    u: np.ndarray,
    v: np.ndarray,
    *,
    resources: Resources,
    report: Callable[[float], None] | None = None,
) -> float:
    """uᵀ K(A, B) v (B = A when None: the symmetric Gram matrix), in row tiles of at most a
    quarter of the budget of ``resources`` (an embedding's norm, inner products and
    distances), never the whole matrix: storing it cost n² × 8 bytes and, at n = 20 000,
    more time to fault in than to compute.

    Of a symmetric matrix only the upper triangle is evaluated, as in
    :meth:`Kernel.symmetric_gram`: with D a diagonal tile (its diagonal from ``diag_tile``,
    each checked against the kernel contract) and R the tile right of it,
    uᵀKv = Σ u_i k(x_i, x_i) v_i + Σ_{i<j} k(x_i, x_j)(u_i v_j + u_j v_i). ``report(done)``
    is told the kernel values evaluated so far after each tile.

    A kernel computed whole (:meth:`Kernel.computes_gram_whole`, the SSK, whose tiles would
    each rebuild its per-string tables) is read from its whole Gram matrix when that fits."""
    other = A if B is None else B
    features = paying_features(kernel, (A,) if B is None else (A, B), resources)
    if features is not None:
        # uᵀ Φ(A) Φ(B)ᵀ v = ⟨Φ(A)ᵀ u, Φ(B)ᵀ v⟩: no kernel value between points
        if report is not None:
            report(len(A) * (len(A) + 1) / 2.0 if B is None else float(len(A)) * len(other))
        return float((features[0].T @ u) @ (features[-1].T @ v))
    if kernel.computes_gram_whole() and resources.fits(8.0 * len(A) * len(other)):
        K = kernel.whole_gram(A, B)
        if report is not None:
            report(len(A) * (len(A) + 1) / 2.0 if B is None else float(K.size))
        return float(u @ K @ v)
    if B is None:
        return _symmetric_bilinear(kernel, A, u, v, resources, report)
    total, done = 0.0, 0.0
    for a, tile in _row_tiles(kernel, A, B, resources):
        total += float(u[a : a + len(tile)] @ (tile @ v))
        if report is not None:
            done += tile.size
            report(done)
    return total


def _symmetric_bilinear(kernel: Kernel, A: Sample, u: np.ndarray, v: np.ndarray, resources: Resources, report: Callable[[float], None] | None) -> float:
    n = len(A)
    diag = kernel.diag_tile(A)
    total = float(np.sum(u * diag * v))
    done = 0.0
    step = _tile_rows(n, resources)
    for a in range(0, n, step):
        b = min(a + step, n)
        tile = kernel.gram_tile(A[a:b], A[a:])
        block = tile[:, : b - a]
        kernel.check_diagonal_block(block, diag[a:b], a)
        upper = np.triu(block, 1)
        rest = tile[:, b - a :]
        ua, va = u[a:b], v[a:b]
        total += float(ua @ (upper @ va) + va @ (upper @ ua) + ua @ (rest @ v[b:]) + va @ (rest @ u[b:]))
        if report is not None:
            done += (b - a) * (n - a) - (b - a) * (b - a - 1) / 2.0
            report(done)
    return total
