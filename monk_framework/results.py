"""Result objects: what an estimator returns, serialisable to JSON and back."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .errors import DataError, MonkError

if TYPE_CHECKING:
    from .kernels import Kernel
    from .registry import Registry

__all__ = ["MMDResult", "Embedding", "jsonable"]


def jsonable(value: Any) -> Any:
    """Convert numpy scalars and arrays (also nested in dicts and lists) to JSON types."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not math.isfinite(value):
        raise MonkError(
            f"The estimate {attribute.name} = {value!r} is not a finite number: the kernel values "
            "are too large for float64 arithmetic on these data; rescale the data or change the "
            "kernel's parameters."
        )


def _dumps(data: dict[str, Any]) -> str:
    # allow_nan=False: a NaN must never reach a results file silently
    return json.dumps(data, indent=2, allow_nan=False)


@attrs.frozen(kw_only=True)
class MMDResult:
    """An estimate of the maximum mean discrepancy between two samples.

    ``mmd2`` is the estimate of MMD² and ``mmd`` that of MMD. For estimators that can
    return a negative MMD² (the U-statistic), ``mmd`` follows the estimator's
    documented ``root`` rule; ``diagnostics`` says which.
    """

    estimator: str
    estimator_params: dict[str, Any] = attrs.field(converter=jsonable)
    kernel: str
    #: the hyperparameters actually used (e.g. the value the median heuristic gave)
    kernel_params: dict[str, Any] = attrs.field(converter=jsonable)
    #: the hyperparameters as requested (e.g. ``sigma="median"``)
    kernel_params_requested: dict[str, Any] = attrs.field(converter=jsonable)
    mmd2: float = attrs.field(converter=float, validator=_finite)
    mmd: float = attrs.field(converter=float, validator=_finite)
    n_x: int
    n_y: int
    seed: int | None = None
    timings: dict[str, float] = attrs.field(factory=dict, converter=jsonable)
    diagnostics: dict[str, Any] = attrs.field(factory=dict, converter=jsonable)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "mmd", **attrs.asdict(self)}

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MMDResult:
        fields = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    @classmethod
    def from_json(cls, text: str) -> MMDResult:
        return cls.from_dict(json.loads(text))


def _weights(instance: Any, attribute: attrs.Attribute, value: np.ndarray) -> None:
    n = len(instance.sample)
    if value.shape != (n,):
        raise DataError(f"An embedding needs one weight per sample point: {n}; got shape {value.shape}.")
    if not np.isfinite(value).all():
        raise DataError("Embedding weights must be finite.")


def _as_sample(value: Any) -> np.ndarray | list[str]:
    return list(value) if isinstance(value, (list, tuple)) and value and isinstance(value[0], str) else np.asarray(value, dtype=np.float64)


def _sample_eq(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return isinstance(a, list) and isinstance(b, list) and a == b


@attrs.frozen(kw_only=True)
class Embedding:
    """An estimate of a kernel mean embedding: μ̂ = Σ_i w_i k(·, x_i).

    Evaluate it at new points, take its RKHS norm, or its RKHS distance to another
    embedding with the same kernel. The empirical mean embedding has w_i = 1/N.
    """

    kernel: Kernel
    sample: np.ndarray | list[str] = attrs.field(converter=_as_sample, eq=attrs.cmp_using(eq=_sample_eq))
    weights: np.ndarray = attrs.field(
        converter=lambda w: np.asarray(w, dtype=np.float64),
        validator=_weights,
        eq=attrs.cmp_using(eq=np.array_equal),
    )
    estimator: str
    estimator_params: dict[str, Any] = attrs.field(factory=dict, converter=jsonable)
    seed: int | None = None
    timings: dict[str, float] = attrs.field(factory=dict, converter=jsonable)
    diagnostics: dict[str, Any] = attrs.field(factory=dict, converter=jsonable)

    def evaluate(self, Z: Any) -> np.ndarray:
        """μ̂(z) = Σ_i w_i k(z, x_i) for each point z of Z (the "witness" values)."""
        return self.kernel.gram(Z, self.sample) @ self.weights

    def inner(self, other: Embedding) -> float:
        """⟨μ̂, ν̂⟩_H = wᵀ K(X, X') w'."""
        self._check_same_kernel(other)
        if other is self:
            return float(self.weights @ self.kernel.gram(self.sample) @ self.weights)
        return float(self.weights @ self.kernel.gram(self.sample, other.sample) @ other.weights)

    def norm(self) -> float:
        """‖μ̂‖_H = √(wᵀ K w) (clipped at 0 against round-off)."""
        return math.sqrt(max(self.inner(self), 0.0))

    def distance(self, other: Embedding) -> float:
        """‖μ̂ − ν̂‖_H = √(‖μ̂‖² + ‖ν̂‖² − 2⟨μ̂, ν̂⟩), an MMD estimate between the samples."""
        sq = self.inner(self) + other.inner(other) - 2.0 * self.inner(other)
        return math.sqrt(max(sq, 0.0))

    def _check_same_kernel(self, other: Embedding) -> None:
        if self.kernel != other.kernel:
            raise MonkError(
                f"The embeddings use different kernels ({self.kernel.spec()} vs "
                f"{other.kernel.spec()}); their inner product is undefined."
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "embedding",
            "kernel": self.kernel.name,
            "kernel_params": self.kernel.params(),
            "sample": jsonable(self.sample),
            "weights": jsonable(self.weights),
            "estimator": self.estimator,
            "estimator_params": self.estimator_params,
            "seed": self.seed,
            "timings": self.timings,
            "diagnostics": self.diagnostics,
        }

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, registry: Registry | None = None) -> Embedding:
        """Rebuild an embedding; its kernel is looked up by name in the registry."""
        if registry is None:
            from .registry import get_registry

            registry = get_registry()
        kernel = registry.get_kernel(data["kernel"], **data.get("kernel_params", {}))
        return cls(
            kernel=kernel,
            sample=data["sample"],
            weights=data["weights"],
            estimator=data["estimator"],
            estimator_params=data.get("estimator_params", {}),
            seed=data.get("seed"),
            timings=data.get("timings", {}),
            diagnostics=data.get("diagnostics", {}),
        )

    @classmethod
    def from_json(cls, text: str, *, registry: Registry | None = None) -> Embedding:
        return cls.from_dict(json.loads(text), registry=registry)
