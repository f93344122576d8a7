"""Kernels built from kernels: k1 + k2, k1 * k2, c * k and the clipped-feature kernel.

Sums and products of positive semi-definite kernels are positive semi-definite (Schur's
product theorem for the product), and so is c·k for c > 0; so the results are kernels for
every estimator and test. Data-dependent hyperparameters of the parts are fitted on the
same pooled sample. A composite is bounded when its parts are: sup k(x, x) is κ₁ + κ₂,
κ₁κ₂ and cκ. Its JSON form names the parts, {"left": {"name": ..., "params": ...},
"right": ...}; Registry.kernel_from_spec rebuilds it. The operators of :class:`Kernel`
(``k1 + k2``, ``k1 * k2``, ``c * k``) build them through :data:`COMPOSITES`, which this
module fills.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any, ClassVar, cast

import attrs
import numpy as np

from monk_framework.core.errors import ParameterError, shown
from monk_framework.core.kernels import COMPOSITES, Kernel
from monk_framework.core.params import finite_real
from monk_framework.core.samples import take

__all__ = ["COMPOSITES", "RADIUS_RANGE", "ClippedKernel", "ProductKernel", "ScaledKernel", "SumKernel", "scale"]


def _as_kernel(value: Any) -> Kernel:
    if isinstance(value, Kernel):
        return value
    raise ParameterError(
        f"A kernel combination takes kernels; got {type(value).__name__} (a kernel's JSON form is rebuilt by monk_framework.core.registry.kernel_from_spec)."
    )


def _same_input(instance: Any, attribute: attrs.Attribute[Any], value: Kernel) -> None:
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
        return cast(np.ndarray, self.left.gram_tile(X, Y) + self.right.gram_tile(X, Y))

    def compute_features(self, X: Any) -> np.ndarray:
        # ⟨[φ₁(x), φ₂(x)], [φ₁(y), φ₂(y)]⟩ = k₁(x, y) + k₂(x, y)
        return np.hstack([self.left.features(X), self.right.features(X)])

    def compute_feature_count(self, d: int) -> int | None:
        a, b = self.left.compute_feature_count(d), self.right.compute_feature_count(d)
        return None if a is None or b is None else a + b

    def compute_diag(self, X: Any) -> np.ndarray:
        return cast(np.ndarray, self.left.diag_tile(X) + self.right.diag_tile(X))

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
        return cast(np.ndarray, self.left.gram_tile(X, Y) * self.right.gram_tile(X, Y))

    def compute_features(self, X: Any) -> np.ndarray:
        # ⟨φ₁(x) ⊗ φ₂(x), φ₁(y) ⊗ φ₂(y)⟩ = k₁(x, y) · k₂(x, y)
        F, G = self.left.features(X), self.right.features(X)
        return cast(np.ndarray, (F[:, :, None] * G[:, None, :]).reshape(len(F), -1))

    def compute_feature_count(self, d: int) -> int | None:
        a, b = self.left.compute_feature_count(d), self.right.compute_feature_count(d)
        return None if a is None or b is None else a * b

    def compute_diag(self, X: Any) -> np.ndarray:
        return cast(np.ndarray, self.left.diag_tile(X) * self.right.diag_tile(X))

    def sup_diag(self) -> float | None:
        a, b = self.left.sup_diag(), self.right.sup_diag()
        return None if a is None or b is None else a * b


#: the radii a :class:`ClippedKernel` takes: those whose c² is a normal float64 number
#: (its kernel values, bounded by c², would otherwise overflow or vanish)
RADIUS_RANGE = (math.sqrt(np.finfo(np.float64).tiny), math.sqrt(np.finfo(np.float64).max))


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
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

    @classmethod
    def of(cls, c: Any, kernel: Kernel) -> ScaledKernel:
        """c · k, refusing what is not a number > 0: what ``c * kernel`` builds."""
        return scale(c, kernel)

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
            return cast(np.ndarray, np.minimum(1.0, self.c / root_diag))

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
        return cast(np.ndarray, out)

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


def scale(c: Any, kernel: Kernel) -> ScaledKernel:
    """c · k, refusing what is not a number."""
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, (numbers.Real, Decimal)):
        raise ParameterError(f"A kernel can be multiplied by a number or a kernel; got {type(c).__name__}.")
    value = finite_real(c)  # a Decimal or a Fraction as a float; an int beyond float64 refused by name
    if value is None:
        raise ParameterError(f"A kernel can be scaled by a finite number > 0 only (c·k stays PSD); got {shown(c)}.")
    return ScaledKernel(c=value, kernel=kernel)


#: the combinations by the name their JSON form carries (declared with Kernel, filled here)
COMPOSITES.update(sum=SumKernel, product=ProductKernel, scaled=ScaledKernel, clipped=ClippedKernel)
