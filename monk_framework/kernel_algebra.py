"""Kernels built from kernels: k₁ + k₂, k₁ · k₂ and c · k.

Sums and products of positive semi-definite kernels are positive semi-definite (Schur's
product theorem for the product), and so is c·k for c > 0; so the results are kernels
for every estimator and test. Write them with operators::

    k = reg.get_kernel("rbf", sigma=1.0) + 0.5 * reg.get_kernel("linear")

Data-dependent hyperparameters (``sigma="median"``) of the parts are fitted on the same
pooled sample. A composite kernel is bounded when its parts are: sup k(x, x) is
κ₁ + κ₂, κ₁κ₂ and cκ. Its JSON form names the parts, ``{"left": {"name": ..., "params":
...}, "right": ...}``, and :func:`kernel_from_spec` rebuilds it.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from .errors import ParameterError
from .kernels import Kernel

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["SumKernel", "ProductKernel", "ScaledKernel", "COMPOSITES", "kernel_from_spec"]


def _as_kernel(value: Any) -> Kernel:
    if isinstance(value, Kernel):
        return value
    if isinstance(value, Mapping) and "name" in value:
        return kernel_from_spec(value["name"], value.get("params", {}))
    raise ParameterError(f"A kernel combination takes kernels; got {type(value).__name__}.")


def _same_input(instance: Any, attribute: attrs.Attribute, value: Kernel) -> None:
    left = instance.left
    if value is not left and value.input_kind != left.input_kind:
        raise ParameterError(
            f"Cannot combine kernel {left.name!r} ({left.input_kind}s) with kernel {value.name!r} ({value.input_kind}s)."
        )


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
    def is_fitted(self) -> bool:
        return self.left.is_fitted and self.right.is_fitted

    def fit(self, X: Any, Y: Any = None) -> Any:
        return attrs.evolve(self, left=self.left.fit(X, Y), right=self.right.fit(X, Y))

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

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        return self.left.gram_tile(X, Y) + self.right.gram_tile(X, Y)

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

    def compute_diag(self, X: Any) -> np.ndarray:
        return self.left.diag_tile(X) * self.right.diag_tile(X)

    def sup_diag(self) -> float | None:
        a, b = self.left.sup_diag(), self.right.sup_diag()
        return None if a is None or b is None else a * b


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (np.isfinite(value) and value > 0):
        raise ParameterError(f"A kernel can be scaled by a finite number > 0 only (c·k stays PSD); got {value!r}.")


@attrs.frozen(kw_only=True)
class ScaledKernel(Kernel):
    """k(x, y) = c · k₀(x, y), c > 0."""

    name: ClassVar[str] = "scaled"
    summary: ClassVar[str] = "A kernel times a constant c > 0."
    formula: ClassVar[str] = "k(x, y) = c * k0(x, y)"

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
    def is_fitted(self) -> bool:
        return self.kernel.is_fitted

    def fit(self, X: Any, Y: Any = None) -> Any:
        return attrs.evolve(self, kernel=self.kernel.fit(X, Y))

    def params(self) -> dict[str, Any]:
        return {"c": self.c, "kernel": _spec_of(self.kernel)}

    def spec(self) -> str:
        return f"{self.c:g} * {self.kernel.spec()}"

    def compute_gram(self, X: Any, Y: Any) -> np.ndarray:
        return self.c * self.kernel.gram_tile(X, Y)

    def compute_diag(self, X: Any) -> np.ndarray:
        return self.c * self.kernel.diag_tile(X)

    def sup_diag(self) -> float | None:
        kappa = self.kernel.sup_diag()
        return None if kappa is None else self.c * kappa

    def gaussian_expectation(self, m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
        return self.c * self.kernel.gaussian_expectation(m1, c1, m2, c2)


#: the combinations by the name their JSON form carries
COMPOSITES: dict[str, type[Kernel]] = {"sum": SumKernel, "product": ProductKernel, "scaled": ScaledKernel}


def kernel_from_spec(name: str, params: Mapping[str, Any], *, registry: Registry | None = None) -> Kernel:
    """A kernel from its name and parameters: a registered kernel, or a combination."""
    if name in COMPOSITES:
        return COMPOSITES[name](**params)
    from .registry import get_registry

    return (registry or get_registry()).get_kernel(name, **params)


def scale(c: Any, kernel: Kernel) -> Kernel:
    """c · k, refusing what is not a number."""
    if isinstance(c, bool) or not isinstance(c, numbers.Real):
        raise ParameterError(f"A kernel can be multiplied by a number or a kernel; got {type(c).__name__}.")
    return ScaledKernel(c=float(c), kernel=kernel)
