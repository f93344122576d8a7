"""The kernel interface: what a kernel plugin implements, and what the library calls.

A kernel plugin subclasses :class:`Kernel` and implements the *core* methods
``compute_gram(X, Y)`` (the rectangle of values k(x_i, y_j) for already validated inputs) and
``compute_diag(X)`` (k(x_i, x_i)). The public methods validate inputs once and call the
core; the library reads a plugin's ``compute_*`` methods only through ``gram_tile``,
``diag_tile``, ``pair_values``, ``features`` and ``direct_block_gram``, which hold every
value to the contract (:mod:`~monk_framework.core.kernel_checks`). ``gram(X)`` asks
the engine for the whole matrix, built in row bands within memory
(:class:`~monk_framework.core.protocols.KernelWork`); kernels built from kernels are in
:mod:`~monk_framework.core.combinators`.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar, Self, cast

import attrs
import numpy as np

from monk_framework.core.errors import DataError, KernelContractError, MonkError, plugin_code, shown
from monk_framework.core.kernel_checks import (
    CONTRACT_CHECK_POINTS,
    CONTRACT_RTOL,
    VALUE_LIMIT,
    check_diagonal_block,
    check_finite,
    check_squared_norm,
    check_whole_symmetric,
    checked_feature_diameter,
    far_from_origin,
    lower_median,
    warn_if_blind,
    warn_if_far_from_origin,
    warn_if_unresolved,
)
from monk_framework.core.params import Configurable, not_implemented
from monk_framework.core.protocols import BandRunner, in_turn, kernel_work
from monk_framework.core.samples import Sample, as_strings, as_vectors, check_same_dimension, owned_result, read_only

__all__ = ["ANCHOR_ROUND_OFF", "BandRunner", "COMPOSITES", "Kernel", "PAIR_BLOCK", "VALUE_LIMIT", "check_squared_norm", "in_turn"]

#: the kernels built from kernels by the name their JSON form carries ("sum", "product",
#: "scaled", "clipped"), which the operators below build: filled by
#: :mod:`monk_framework.core.combinators`
COMPOSITES: dict[str, type[Kernel]] = {}

#: pairs per block of :meth:`Kernel.pair_values` (its cost: this many kernel values a pair)
PAIR_BLOCK = 32
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
        """``k1 + k2``: the kernel k1(x, y) + k2(x, y) (:class:`~monk_framework.core.combinators.SumKernel`)."""
        if not isinstance(other, Kernel):
            return NotImplemented
        return COMPOSITES["sum"](left=self, right=other)  # type: ignore[call-arg]

    def __mul__(self, other: Any) -> Kernel:
        """``k1 * k2`` (the product kernel) or ``k * c`` (c > 0)."""
        if isinstance(other, Kernel):
            return COMPOSITES["product"](left=self, right=other)  # type: ignore[call-arg]
        return cast("Kernel", COMPOSITES["scaled"].of(other, self))  # type: ignore[attr-defined]

    def __rmul__(self, other: Any) -> Kernel:
        """``c * k`` for a number c > 0."""
        return cast("Kernel", COMPOSITES["scaled"].of(other, self))  # type: ignore[attr-defined]

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
            if far_from_origin(self, Xv, Yv, limit=ANCHOR_ROUND_OFF) is None:
                return self, Xv, Yv
            anchor = lower_median(np.concatenate([Xv, Yv]))
            anchored = self.checked_anchored(anchor) if np.all(np.isfinite(anchor)) else None
            if anchored is None:
                self.warn_if_far_from_origin(Xv, Yv)
                return self, Xv, Yv
            kernel = anchored
        centre = lower_median(np.concatenate([Xv, Yv]))
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
        centre = lower_median(X)
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
        warn_if_far_from_origin(self, X, Y, clipped=clipped)

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
            kernel_work().check_feature_matrix(len(Xv), int(count))
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
        return checked_feature_diameter(self, Z)

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
        :func:`monk_framework.numerics.exp_loops.exp_squared_distance_form`)."""
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
        return check_finite(self, values, sums=sums)

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
        return cast(np.ndarray, values)

    def symmetric_gram(self, X: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """K = k(X, X) of one validated sample, exactly symmetric with ``diag_tile`` on its
        diagonal, built in row bands (:func:`~monk_framework.engine.memory.chunk_rows`), each diagonal block checked
        against the kernel contract. A kernel with a faster symmetric computation (the
        SSK) may override it; the override must return the same exactly symmetric matrix.

        ``run_bands(work, bands)`` calls ``work(start, stop)`` for every band; the default
        runs them here, one after another. The engine passes its own runner, which
        spreads the bands over the machine's cores (every band writes its own entries, so
        the matrix is the same bit for bit).
        """
        return kernel_work().symmetric_gram(self, X, run_bands=run_bands)

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
        warn_if_unresolved(self, X, Y, half, block[0], diag)
        warn_if_blind(self, Z, block, diag)

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
        check_diagonal_block(self, block, diag, offset)

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
            check_whole_symmetric(self, K, X)
        return cast(np.ndarray, K)

    def rectangular_gram(self, X: Sample, Y: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """k(X, Y) of two validated samples, filled in row bands (:func:`~monk_framework.engine.memory.chunk_rows`) after a
        memory check. A kernel with a faster whole-matrix computation may override it.

        ``run_bands(work, bands)`` calls ``work(start, stop)`` for every band of rows, as in
        :meth:`symmetric_gram`; the engine passes a runner that counts them for its
        progress display (every band writes its own rows: the same matrix bit for bit)."""
        return kernel_work().rectangular_gram(self, X, Y, run_bands=run_bands)


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


def _as_gaussian(mean: Any, cov: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    c = np.asarray(cov, dtype=np.float64)
    if c.ndim == 0:
        c = c * np.eye(m.size)
    if m.ndim != 1 or c.shape != (m.size, m.size):
        raise DataError(f"A Gaussian needs a mean of shape (d,) and a covariance of shape (d, d); got {m.shape} and {c.shape}.")
    return m, c
