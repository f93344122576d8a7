"""Kernels on vectors: linear, polynomial, quadratic, RBF, exponential, Laplace, energy.

Inputs are ``(n, d)`` float64 arrays (a 1-D array is n points with one feature).
Gram matrices are computed with BLAS-backed formulas in chunks by the framework
(:class:`monk_framework.Kernel`); each class here only says how to fill one chunk.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations_with_replacement
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework import Kernel, KernelOverflowError, MonkError, hookimpl, parameter
from monk_framework.plugin import (
    VALUE_LIMIT,
    boolean,
    distances,
    exp_scaled_squared_distances,
    exp_squared_distance_form,
    homogeneous_pairwise,
    integer,
    magnitude,
    median_distance,
    one_of,
    power_of_two,
    real,
    real_or,
    row_norms,
    scaled_distances,
    scaled_l1_distances,
)

#: exp(x) exceeds the largest kernel value the library sums (VALUE_LIMIT, 2^983) above this
#: value (it overflows float64 itself above 709.8)
EXP_LIMIT = math.log(VALUE_LIMIT)


def _row_norms_sq(X: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", X, X)


_NORMALIZE_DOC = (
    "divide by sqrt(k(x, x) k(y, y)): the cosine of the feature vectors, a bounded kernel (|k| <= 1) that robust_test(method='dc') can use; 0 where k(x, x) = 0"
)


def _unit_augmented(X: np.ndarray, scale: float, offset: float) -> np.ndarray:
    """The rows (√scale·x, √offset) made unit length (the last column only when offset > 0):
    for b(x, y) = scale·⟨x, y⟩ + offset, b(x, y)/√(b(x, x) b(y, y)) = ⟨ũ_x, ũ_y⟩, a cosine.

    Each row is first divided by the power of two of its own size, the larger of
    √scale·max|x| and √offset (``np.ldexp``: exact, with no intermediate overflow), so no
    square overflows or underflows: a point at 1e200 among ordinary ones leaves them their
    digits (one scale for the whole tile had sent their values to 0 / 0). A zero row stays
    zero."""
    n, d = X.shape
    largest = np.abs(X).max(axis=1) if d else np.zeros(n)
    exponents = np.frexp(largest)[1] + np.frexp(math.sqrt(scale))[1]
    if offset > 0:
        exponents = np.maximum(exponents, np.frexp(math.sqrt(offset))[1])
    A = np.empty((n, d + (offset > 0)))
    A[:, :d] = np.ldexp(X, -exponents[:, None])
    A[:, :d] *= math.sqrt(scale)
    if offset > 0:
        A[:, d] = np.ldexp(math.sqrt(offset), -exponents)
    return _unit_rows(A, row_norms(A))


def _normalised_base(X: np.ndarray, Y: np.ndarray, scale: float, offset: float) -> np.ndarray:
    """b(x, y)/√(b(x, x) b(y, y)) for b = scale·⟨x, y⟩ + offset: the cosines of the unit
    augmented rows (:func:`_unit_augmented`), within [−1, 1]."""
    out = _unit_augmented(X, scale, offset) @ _unit_augmented(Y, scale, offset).T
    np.clip(out, -1.0, 1.0, out=out)
    return out


@attrs.frozen(kw_only=True)
class LinearKernel(Kernel):
    """k(x, y) = ⟨x, y⟩ (normalised: ⟨x, y⟩ / (‖x‖ ‖y‖))."""

    name: ClassVar[str] = "linear"
    summary: ClassVar[str] = "Linear kernel <x, y>; its MMD is the distance between the means."
    formula: ClassVar[str] = "k(x, y) = <x, y>; normalize: <x, y> / (|x| |y|)"
    has_features: ClassVar[bool] = True

    normalize: bool = parameter(False, doc=_NORMALIZE_DOC, check=boolean())

    def sup_diag(self) -> float | None:
        return 1.0 if self.normalize else None

    def shift_free_mmd(self) -> bool:
        return not self.normalize  # φ(x) = x; a cosine depends on the origin

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        if self.normalize:
            return _normalised_base(X, Y, 1.0, 0.0)  # cosines of unit rows, at any magnitude
        return X @ Y.T

    def compute_diag(self, X: np.ndarray) -> np.ndarray:
        if self.normalize:
            return (np.abs(X).max(axis=1) > 0).astype(np.float64)  # 1 for x != 0, without squaring
        return _row_norms_sq(X)

    def compute_feature_count(self, d: int) -> int:
        return d

    def compute_features(self, X: np.ndarray) -> np.ndarray:
        if self.normalize:
            return _unit_augmented(X, 1.0, 0.0)
        return X.copy()

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        if self.normalize:
            raise MonkError("The normalised linear kernel has no closed-form MMD between Gaussians.")
        return float(m1 @ m2)


def _anchored_power(W: np.ndarray, lu: np.ndarray, lv: np.ndarray, A: float, p: int) -> np.ndarray:
    """k_z(u, v) = k(z + u, z + v) − k(z + u, z) − k(z, z + v) + k(z, z) for
    k(x, y) = (s⟨x, y⟩ + c)^p, from W = s⟨u, v⟩, ℓ(u) = s⟨z, u⟩, ℓ(v) and A = s‖z‖² + c,
    where k(z + u, z + v) = (A + ℓ(u) + ℓ(v) + W)^p. With B = A + ℓ(u) + ℓ(v),

        k_z(u, v) = [(B + W)^p − B^p] + [(A + ℓ(u) + ℓ(v))^p − (A + ℓ(u))^p − (A + ℓ(v))^p + A^p]
                  = Σ_{i=1}^{p} C(p, i) B^(p−i) W^i
                    + Σ_{i, j ≥ 1, i + j ≤ p} p!/(i! j! (p − i − j)!) A^(p−i−j) ℓ(u)^i ℓ(v)^j,

    sums of products that subtract nothing near k(z, z) ≈ A^p: each term is a genuine part
    of the value. The first sum by Horner's rule in W. ``lu`` and ``lv`` broadcast against W
    (a column and a row for a tile; two equal vectors for a diagonal)."""
    if p == 1:
        return W  # s⟨u, v⟩: the linear kernel's features move with the origin
    B = (A + lu) + lv
    acc = W + p * B  # Horner's first step: 1·W + C(p, p − 1) B
    B_power = B.copy() if p > 2 else B
    for i in range(p - 2, 0, -1):
        B_power *= B
        acc *= W
        acc += math.comb(p, i) * B_power
    acc *= W
    for i in range(1, p):
        # Σ_j p!/(i! j! (p − i − j)!) A^(p−i−j) ℓ(v)^j, for this power i of ℓ(u) (a row or a vector)
        inner = sum(
            math.factorial(p) // (math.factorial(i) * math.factorial(j) * math.factorial(p - i - j)) * A ** (p - i - j) * lv**j for j in range(1, p - i + 1)
        )
        acc += lu**i * inner
    return acc


class _PolynomialCore:
    """(scale·⟨x, y⟩ + offset)^power, shared by ``polynomial`` and ``quadratic``.

    Normalised, k(x, y)/√(k(x, x) k(y, y)) = [b(x, y)/√(b(x, x) b(y, y))]^power with
    b = scale·⟨x, y⟩ + offset: the base is normalised before the power, so no intermediate
    value overflows.

    Unnormalised, the kernel has an anchored form (:meth:`Kernel.anchored`), which every MMD
    path uses on data far from the origin: k_z(u, v) = ⟨φ(z + u) − φ(z), φ(z + v) − φ(z)⟩ on
    the data moved by −z (:func:`_anchored_power`), whose values are as large as the MMD's
    terms, where k's own values near z are larger by a factor ρ² (ρ: the distance to the
    origin in spreads).
    """

    scale: float
    offset: float
    normalize: bool
    _anchor: tuple[float, ...]

    def anchored(self, anchor: np.ndarray) -> Any:
        if self.normalize:
            return None  # cosines near 1 far from the origin: no form here that keeps their digits
        start = np.asarray(self._anchor, dtype=np.float64) if self._anchor else 0.0
        return attrs.evolve(self, anchor=tuple(float(v) for v in anchor + start))  # type: ignore[misc]

    def _anchored_values(self, U: np.ndarray, V: np.ndarray | None) -> np.ndarray:
        """k_z on the moved data: the tile k_z(U, V), or the diagonal k_z(u, u) when V is None."""
        z, s = np.asarray(self._anchor, dtype=np.float64), self.scale
        A = s * float(z @ z) + self.offset
        lu = s * (U @ z)
        if V is None:
            return _anchored_power(s * _row_norms_sq(U), lu, lu, A, self.power)
        W = U @ V.T
        W *= s
        return _anchored_power(W, lu[:, None], s * (V @ z)[None, :], A, self.power)

    @property
    def power(self) -> int:
        raise NotImplementedError

    def feature_diameter(self) -> float | None:
        # normalised, |k| <= 1; an even power is a square, so k >= 0 and D = sqrt(2)
        if not self.normalize:
            return None
        return math.sqrt(2.0) if self.power % 2 == 0 else 2.0

    def sup_diag(self) -> float | None:
        return 1.0 if self.normalize else None

    def _base_diag(self, X: np.ndarray, offset: float | None = None) -> np.ndarray:
        return self.scale * _row_norms_sq(X) + (self.offset if offset is None else offset)

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        if self._anchor:
            return self._anchored_values(X, Y)
        if self.normalize:
            # the base b(x, y) = scale⟨x, y⟩ + offset normalised is the cosine of the rows
            # (√scale·x, √offset), made unit length row by row: finite and exact at any
            # magnitude, and a base of norm 0 gives 0
            out = _normalised_base(X, Y, self.scale, self.offset)
        else:
            out = X @ Y.T
            out *= self.scale
            out += self.offset
        if self.power == 2:
            np.square(out, out=out)
        elif self.power > 1:
            np.power(out, self.power, out=out)
        return out

    def compute_diag(self, X: np.ndarray) -> np.ndarray:
        if self.normalize:
            # 1 where b(x, x) = scale‖x‖² + offset > 0, computed without squaring x
            return ((self.offset > 0) | (np.abs(X).max(axis=1) > 0) & (self.scale > 0)).astype(np.float64)
        if self._anchor:
            return self._anchored_values(X, None)
        return self._base_diag(X) ** self.power

    def _degrees(self) -> list[tuple[int, float]]:
        """(k, C(p, k) c^(p−k) s^k) for the degrees k of monomials with a nonzero weight."""
        p, s, c = self.power, np.float64(self.scale), np.float64(self.offset)
        # in float64: a weight beyond it is inf (its features are then refused as values
        # beyond float64, by name), where Python's floats raise OverflowError
        with np.errstate(over="ignore"):
            pairs = [(k, float(math.comb(p, k) * c ** (p - k) * s**k)) for k in range(p + 1)]
        return [(k, w) for k, w in pairs if w != 0.0]

    def compute_feature_count(self, d: int) -> int:
        if self.normalize:
            # the multisets of size p of the d + 1 coordinates of (√s·x, √c) (d when c = 0)
            return math.comb(d + (self.offset > 0) + self.power - 1, self.power)
        # the multisets of size k of d coordinates, for each degree k kept
        return sum(math.comb(d + k - 1, k) for k, _ in self._degrees())

    def compute_features(self, X: np.ndarray) -> np.ndarray:
        # (s<x,y> + c)^p = sum_k C(p,k) c^(p-k) s^k <x,y>^k and
        # <x,y>^k = sum over multisets alpha of size k of multinomial(alpha) x^alpha y^alpha.
        # Normalised, the kernel is <u_x, u_y>^p for the unit rows u of (√s·x, √c): the
        # degree-p monomials of u, whose last coordinate stands for the offset (the same
        # count: multisets of size p of d + 1 coordinates, or of d when c = 0)
        n, d = X.shape
        anchor = np.asarray(self._anchor, dtype=np.float64) if self._anchor else None
        if self.normalize:
            X = _unit_augmented(X, self.scale, self.offset)
            d = X.shape[1]
            degrees = [(self.power, 1.0)]
        else:
            # anchored, φ_z(u) = φ(z + u) − φ(z): each monomial's difference (the constant is 0)
            degrees = self._degrees()
        columns = []
        for k, weight in degrees:
            for alpha in combinations_with_replacement(range(d), k):
                multinomial = math.factorial(k)
                for times in Counter(alpha).values():
                    multinomial //= math.factorial(times)
                factor = math.sqrt(weight * multinomial)
                if anchor is None:
                    column = np.full(n, factor)
                    for i in alpha:
                        column = column * X[:, i]
                else:
                    # x^α − z^α for x = z + u, one factor at a time: with D the difference and
                    # P the anchor's product so far, (D + P)(z_i + u_i) − P z_i = D x_i + P u_i
                    column, start = np.zeros(n), 1.0
                    for i in alpha:
                        column = column * (anchor[i] + X[:, i]) + start * X[:, i]
                        start *= anchor[i]
                    column *= factor
                columns.append(column)
        return np.column_stack(columns)

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        if self.normalize:
            raise MonkError("The normalised polynomial kernels have no closed-form MMD between Gaussians.")
        if self._anchor:
            # E k_z(U, V) = E k(z + U, z + V) − E k(z + U, z) − E k(z, z + V) + k(z, z)
            z, none = np.asarray(self._anchor), np.zeros_like(c1)
            base = attrs.evolve(self, anchor=())  # type: ignore[misc]
            return float(
                base.gaussian_expectation(z + m1, c1, z + m2, c2)
                - base.gaussian_expectation(z + m1, c1, z, none)
                - base.gaussian_expectation(z, none, z + m2, c2)
                + base.gaussian_expectation(z, none, z, none)
            )
        s, c = self.scale, self.offset
        if self.power == 1:
            return float(s * (m1 @ m2) + c)
        if self.power == 2:
            # E<x,y>^2 = tr(M1 M2) with second-moment matrices Mi = Ci + mi mi^T
            M1 = c1 + np.outer(m1, m1)
            M2 = c2 + np.outer(m2, m2)
            return float(s**2 * np.sum(M1 * M2) + 2 * s * c * (m1 @ m2) + c**2)
        raise MonkError("The closed-form Gaussian MMD is implemented for polynomial degree <= 2 only.")


@attrs.frozen(kw_only=True)
class PolynomialKernel(_PolynomialCore, Kernel):
    """k(x, y) = (scale·⟨x, y⟩ + offset)^degree."""

    name: ClassVar[str] = "polynomial"
    summary: ClassVar[str] = "Polynomial kernel (scale <x, y> + offset)^degree; unbounded."
    formula: ClassVar[str] = "k(x, y) = (scale * <x, y> + offset)^degree; normalize: k(x, y) / sqrt(k(x, x) k(y, y))"
    has_features: ClassVar[bool] = True

    degree: int = parameter(3, doc="the power p", check=integer(ge=1), kind="int")
    scale: float = parameter(1.0, doc="the factor s of <x, y>", check=real(gt=0), kind="float")
    offset: float = parameter(1.0, doc="the constant c (>= 0 keeps the kernel PSD)", check=real(ge=0), kind="float")
    normalize: bool = parameter(False, doc=_NORMALIZE_DOC, check=boolean())
    # the point the kernel is anchored at (Kernel.anchored; none: the kernel as defined),
    # no parameter: results name the kernel as asked
    _anchor: tuple[float, ...] = attrs.field(default=(), repr=False)

    @property
    def power(self) -> int:
        return self.degree


@attrs.frozen(kw_only=True)
class QuadraticKernel(_PolynomialCore, Kernel):
    """k(x, y) = (scale·⟨x, y⟩ + offset)², the paper's quadratic kernel (xy + 1)²."""

    name: ClassVar[str] = "quadratic"
    summary: ClassVar[str] = "Quadratic kernel (scale <x, y> + offset)^2, the MONK paper's (xy + 1)^2."
    formula: ClassVar[str] = "k(x, y) = (scale * <x, y> + offset)^2; normalize: k(x, y) / sqrt(k(x, x) k(y, y))"
    has_features: ClassVar[bool] = True
    nonnegative: ClassVar[bool] = True  # a square

    scale: float = parameter(1.0, doc="the factor s of <x, y>", check=real(gt=0), kind="float")
    offset: float = parameter(1.0, doc="the constant c (the paper's 1)", check=real(ge=0), kind="float")
    normalize: bool = parameter(False, doc=_NORMALIZE_DOC, check=boolean())
    # the point the kernel is anchored at (Kernel.anchored; none: the kernel as defined),
    # no parameter: results name the kernel as asked
    _anchor: tuple[float, ...] = attrs.field(default=(), repr=False)

    @property
    def power(self) -> int:
        return 2


class _BandwidthCore:
    """Shared by the distance-based kernels: k(x, x) = 1, sigma may be the median heuristic."""

    sigma: Any

    @property
    def _sigma(self) -> float:
        return float(self.sigma)  # only called once fitted, when sigma is a number

    def compute_diag(self, X: np.ndarray) -> np.ndarray:
        return np.ones(len(X))

    def sup_diag(self) -> float:
        # k(x, x) = exp(0) = 1 whatever sigma, so the bound holds before fitting too
        return 1.0

    @property
    def is_fitted(self) -> bool:
        return self.sigma != "median"

    #: the distance the median heuristic takes the median of
    metric: ClassVar[str] = "l2"

    def fit(self, X: Any, Y: Any = None) -> Any:
        if self.sigma != "median":
            return self
        Xv = self.check_sample(X)  # type: ignore[attr-defined]
        Yv = None if Y is None else self.check_sample(Y, name="Y")  # type: ignore[attr-defined]
        return attrs.evolve(self, sigma=median_distance(Xv, Yv, metric=self.distance_metric))  # type: ignore[misc]

    @property
    def distance_metric(self) -> str:
        return self.metric


_SIGMA_DOC = "the bandwidth σ > 0, or 'median' (the default, as in hyppo and alibi-detect) for the median pairwise distance of the pooled sample"


@attrs.frozen(kw_only=True)
class RBFKernel(_BandwidthCore, Kernel):
    """k(x, y) = exp(−‖x − y‖² / (2σ²)), the Gaussian kernel."""

    name: ClassVar[str] = "rbf"
    aliases: ClassVar[tuple[str, ...]] = ("gaussian",)
    translation_invariant: ClassVar[bool] = True
    summary: ClassVar[str] = "Gaussian (RBF) kernel exp(-|x-y|^2 / (2 sigma^2)); bounded and characteristic."
    formula: ClassVar[str] = "k(x, y) = exp(-||x - y||^2 / (2 sigma^2))"
    nonnegative: ClassVar[bool] = True

    sigma: float | str = parameter("median", doc=_SIGMA_DOC, check=real_or("median", gt=0), kind="float")

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        # ‖x − y‖²/σ² computed without overflow: 1e200-scale data with σ = 1e200 are fine
        return exp_scaled_squared_distances(X, Y, self._sigma, factor=-0.5)

    def compute_block_gram(self, Z: np.ndarray, W: np.ndarray, diag: np.ndarray) -> np.ndarray | None:
        # exp(−½‖z/σ − z'/σ‖²) pair by pair in one compiled loop; the points are scaled
        # first, so 1e200-scale data with σ = 1e200 stay finite as in compute_gram
        with np.errstate(over="ignore", under="ignore"):
            scaled = Z / self._sigma
        if not np.isfinite(scaled).all():
            return None  # σ so small that a point overflows: the tiles handle it
        return exp_squared_distance_form(scaled, W, -0.5, diag)

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        # E k(x, y) = sigma^d / sqrt(det S) exp(-1/2 D^T S^-1 D), S = C1 + C2 + sigma^2 I
        d = m1.size
        S = c1 + c2 + self._sigma**2 * np.eye(d)
        delta = m1 - m2
        _, logdet = np.linalg.slogdet(S)
        return float(np.exp(d * math.log(self._sigma) - 0.5 * logdet - 0.5 * delta @ np.linalg.solve(S, delta)))

    def spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray:
        # exp(−‖δ‖²/(2σ²)) is the characteristic function of N(0, σ⁻² I)
        return rng.standard_normal((n_features, d)) / self._sigma

    def compute_pair_values(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        # k(a_l, b_l) directly, one difference a pair; a difference beyond float64 gives inf
        # and exp(-inf) = 0, the kernel's value in float64
        with np.errstate(over="ignore"):
            diff = (A - B) / self._sigma
            sq = np.einsum("ij,ij->i", diff, diff)
        return np.exp(-0.5 * sq)


@attrs.frozen(kw_only=True)
class LaplaceKernel(_BandwidthCore, Kernel):
    """k(x, y) = exp(−‖x − y‖ / σ), with the Euclidean norm ‖·‖₂ by default, or the L1
    norm ‖·‖₁ with ``norm="l1"`` (scikit-learn's ``laplacian_kernel``, with γ = 1/σ)."""

    name: ClassVar[str] = "laplace"
    summary: ClassVar[str] = "Laplace kernel exp(-|x-y| / sigma), Euclidean norm (or L1 with norm=l1); bounded and characteristic."
    formula: ClassVar[str] = "k(x, y) = exp(-||x - y||_2 / sigma), or exp(-||x - y||_1 / sigma) with norm='l1'"
    nonnegative: ClassVar[bool] = True
    translation_invariant: ClassVar[bool] = True

    sigma: float | str = parameter("median", doc=_SIGMA_DOC + " (in the chosen norm)", check=real_or("median", gt=0), kind="float")
    norm: str = parameter(
        "l2",
        doc="the norm of x - y: 'l2' (Euclidean, the default) or 'l1' (the sum of absolute differences, scikit-learn's laplacian_kernel with gamma = 1/sigma)",
        check=one_of("l2", "l1"),
    )

    @property
    def distance_metric(self) -> str:
        return self.norm

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        out = scaled_distances(X, Y, self._sigma) if self.norm == "l2" else scaled_l1_distances(X, Y, self._sigma)
        out *= -1.0
        np.exp(out, out=out)
        return out

    def compute_pair_values(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        # k(a_l, b_l) directly, one difference a pair (the incomplete U-statistic's pairs);
        # a distance beyond float64 gives inf and exp(-inf) = 0, the kernel's value in
        # float64, and one below its range gives exp(-0) = 1, as exp(-tiny) is
        with np.errstate(over="ignore", under="ignore"):
            diff = np.subtract(A, B)
            diff /= self._sigma
            if self.norm == "l2":
                dist = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            else:
                dist = np.abs(diff, out=diff).sum(axis=1)
        dist *= -1.0
        return np.exp(dist, out=dist)

    def spectral_frequencies(self, d: int, n_features: int, rng: np.random.Generator) -> np.ndarray:
        if self.norm == "l1":
            # exp(−‖δ‖₁/σ) = Π_j exp(−|δ_j|/σ): independent Cauchy(0, 1/σ) coordinates
            return rng.standard_cauchy((n_features, d)) / self._sigma
        # exp(−‖δ‖₂/σ) is the characteristic function of the multivariate Cauchy (Student t,
        # one degree of freedom) scaled by 1/σ: z / |g| with z ~ N(0, I), g ~ N(0, 1)
        z = rng.standard_normal((n_features, d))
        g = np.abs(rng.standard_normal((n_features, 1)))
        return z / (g * self._sigma)


@attrs.frozen(kw_only=True)
class ExponentialKernel(Kernel):
    """k(x, y) = exp(⟨x, y⟩ / σ²), the MONK paper's unbounded exponential kernel."""

    name: ClassVar[str] = "exponential"
    summary: ClassVar[str] = "Exponential kernel exp(<x, y> / sigma^2); unbounded, overflow is detected."
    formula: ClassVar[str] = "k(x, y) = exp(<x, y> / sigma^2)"

    sigma: float = parameter(1.0, doc="the scale σ > 0", check=real(gt=0), kind="float")

    def _exp(self, inner: Any, *arrays: np.ndarray) -> np.ndarray:
        """exp(⟨x, y⟩/σ²) from ``inner(X, Y)`` = the inner products of the given arrays.

        With moderate data and σ that is ``inner / σ²``; otherwise the data are divided by
        a power of two s first and the products multiplied by (s/σ)², so that the overflow
        test and the σ it suggests never see an intermediate inf or a σ² of 0.
        """
        sigma = float(self.sigma)
        scale = magnitude(*arrays)
        if 1e-100 < sigma < 1e100 and scale < 1e100:
            s = 1.0
            out = inner(*arrays)
            out /= sigma**2
        else:
            s = power_of_two(scale)
            out = inner(*(a / s for a in arrays))  # ⟨x, y⟩/s², moderate
            with np.errstate(over="ignore", under="ignore"):
                out *= (np.float64(s) / np.float64(sigma)) ** 2
        top = float(out.max(initial=-np.inf))
        if top > EXP_LIMIT:
            # the σ that brings the largest ⟨x, y⟩/σ² to the limit, from the rescaled products
            s = power_of_two(scale)
            rescaled = float(inner(*(a / s for a in arrays)).max())  # max ⟨x, y⟩/s², finite
            need = math.sqrt(rescaled / EXP_LIMIT) * s
            raise KernelOverflowError(
                f"The exponential kernel exp(<x, y>/sigma^2) is too large here: the largest <x, y>/sigma^2 is "
                f"{top:.4g} > {EXP_LIMIT:.1f} (beyond it, sums of kernel values could overflow float64). Use "
                f"sigma >= {need:.4g} or rescale the data."
            )
        np.exp(out, out=out)
        return out

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return self._exp(lambda A, B: A @ B.T, X, Y)

    def compute_diag(self, X: np.ndarray) -> np.ndarray:
        return self._exp(_row_norms_sq, X)


@attrs.frozen(kw_only=True)
class EnergyKernel(Kernel):
    """k(x, y) = ½(‖x‖ + ‖y‖ − ‖x − y‖), the distance-induced kernel.

    Its V-statistic MMD² is half the energy distance 2E‖X − Y‖ − E‖X − X'‖ − E‖Y − Y'‖
    (Sejdinovic et al., 2013), so results can be checked against energy-statistics
    packages such as dcor.
    """

    name: ClassVar[str] = "energy"
    summary: ClassVar[str] = "Distance-induced kernel (|x| + |y| - |x-y|)/2: MMD^2 = energy distance / 2."
    formula: ClassVar[str] = "k(x, y) = (||x|| + ||y|| - ||x - y||) / 2"

    def shift_free_mmd(self) -> bool:
        return True  # moving the origin to c gives (||x - c|| + ||y - c|| - ||x - y||) / 2, the same MMD

    def compute_gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        # homogeneous of degree 1: computed per block of magnitude groups on data divided
        # by an exact power of two and scaled back, so that nothing overflows on the way and
        # one point at 1e200 leaves the ordinary pairs their digits (one scale for the whole
        # tile had made their norms and distances underflow to 0: every value 0)
        return homogeneous_pairwise(_energy_values, X, Y, 1)

    def compute_diag(self, X: np.ndarray) -> np.ndarray:
        return row_norms(X)


def _energy_values(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """½(‖x‖ + ‖y‖ − ‖x − y‖) for data of moderate magnitude (or divided by a power of
    two: see :meth:`EnergyKernel.compute_gram`).

    With a = ‖x‖, b = ‖y‖, c = ‖x − y‖, ½(a + b − c) is a difference of nearly equal
    numbers when one point is far (a point at 10²⁰ gave k = 1.58 where it is 0.081).
    Multiplied by a + b + c it is ab + ⟨x, y⟩ = ab(1 + cos θ), so
        k(x, y) = a · b/(a + b + c) · (1 + ⟨x/a, y/b⟩),
    whose only difference, 1 + cos θ, errs by ε absolutely: k errs by about ε·min(a, b),
    where the difference above errs by ε·max(a, b). The norms are taken row by row
    without underflow (:func:`row_norms`): a point 1e-200 times the block's largest
    keeps its norm."""
    a, b = row_norms(X), row_norms(Y)
    out = distances(X, Y)
    out += a[:, None]
    out += b[None, :]
    # a + b + c = 0 only for two zero points, whose value a·b·(…) is 0
    np.maximum(out, np.finfo(float).tiny, out=out)
    np.divide(b[None, :], out, out=out)
    out *= a[:, None]
    cos = _unit_rows(X, a) @ _unit_rows(Y, b).T
    np.clip(cos, -1.0, 1.0, out=cos)
    cos += 1.0
    out *= cos
    return out


def _unit_rows(X: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """The rows of X divided by their norms (a zero row stays zero)."""
    return np.divide(X, norms[:, None], out=np.zeros_like(X, dtype=float), where=norms[:, None] > 0)


@hookimpl
def monk_kernels() -> list[type[Kernel]]:
    return [
        LinearKernel,
        PolynomialKernel,
        QuadraticKernel,
        RBFKernel,
        ExponentialKernel,
        LaplaceKernel,
        EnergyKernel,
    ]
