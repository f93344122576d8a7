"""Result objects: what an estimator returns, serialisable to JSON and back."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import DataError, MonkError, ParameterError
from monk_framework.core.kernels import Kernel, bilinear, weighted_gram

if TYPE_CHECKING:
    from monk_framework.core.registry import Registry

__all__ = ["Result", "MMDResult", "Embedding", "jsonable", "dumps", "finite"]


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


def finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """attrs validator: a result's number must be finite (a NaN never reaches a file)."""
    if not math.isfinite(value):
        raise MonkError(
            f"The estimate {attribute.name} = {value!r} is not a finite number: the kernel values "
            "are too large for float64 arithmetic on these data; rescale the data or change the "
            "kernel's parameters."
        )


def dumps(data: Mapping[str, Any]) -> str:
    """Strict JSON: numpy values converted, and allow_nan=False, so that a NaN never
    reaches a results file silently."""
    return json.dumps(jsonable(data), indent=2, allow_nan=False)


def _check_seed(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    ok = value is None or (isinstance(value, int) and value >= 0) or (
        isinstance(value, list) and all(isinstance(v, (int, list)) for v in value)
    )
    if not ok:
        raise ParameterError(f"{type(instance).__name__}.{attribute.name}: not a recorded seed: {value!r}.")


def _array_or_none(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64).reshape(-1)


def _array_eq(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


#: validators shared by the result classes
text = attrs.validators.instance_of(str)
count = attrs.validators.and_(attrs.validators.instance_of(int), attrs.validators.ge(0))
optional_count = attrs.validators.optional(count)
flag = attrs.validators.instance_of(bool)
mapping = attrs.validators.instance_of(dict)
optional_finite = attrs.validators.optional(finite)


def level(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """attrs validator: a test's level α lies in (0, 1)."""
    if not 0 < value < 1:
        raise ParameterError(f"{type(instance).__name__}.{attribute.name} must lie in (0, 1); got {value!r}.")


def pvalue_range(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """attrs validator: a p-value lies in (0, 1] (permutation p-values are never 0)."""
    if not 0 < value <= 1:
        raise MonkError(f"A p-value must lie in (0, 1]; got {value!r}.")


def seed_field() -> Any:
    """The recorded randomness of a result (see :func:`monk_framework.core.randomness.seed_of`)."""
    return attrs.field(default=None, validator=_check_seed)


def null_field() -> Any:
    """The null distribution of a test: a float array, or None when not kept."""
    return attrs.field(default=None, converter=_array_or_none, eq=attrs.cmp_using(eq=_array_eq))


def timings_field() -> Any:
    return attrs.field(factory=dict, converter=jsonable, validator=mapping)


def dict_field(**kwargs: Any) -> Any:
    return attrs.field(converter=jsonable, validator=mapping, **kwargs)


def optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@attrs.frozen(kw_only=True)
class Result:
    """What every result shares: its JSON form, and back.

    A subclass is a frozen attrs class with a class attribute ``kind`` (the ``"type"``
    of its JSON form). ``to_dict()`` gives ``{"type": kind, field: value, ...}`` plus the
    read-only properties named in ``derived`` (such as a test's ``decision``), with numpy
    values as plain JSON types; ``from_dict`` reads that back, ignoring the derived keys,
.
    ``type(r).from_json(r.to_json()) == r`` for every result.
    """

    kind: ClassVar[str] = "result"
    derived: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        for field in attrs.fields(type(self)):
            out[field.name] = jsonable(getattr(self, field.name))
        for name in self.derived:
            out[name] = jsonable(getattr(self, name))
        return out

    def to_json(self) -> str:
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **context: Any) -> Any:
        """Rebuild a result from ``to_dict()``'s form (older field names accepted)."""
        if not isinstance(data, Mapping):
            raise DataError(f"A {cls.kind} result must be a JSON object; got {type(data).__name__}.")
        kind = data.get("type", cls.kind)
        if kind != cls.kind:
            raise DataError(f"This is a {kind!r} result, not a {cls.kind!r} one.")
        fields = {f.name: f for f in attrs.fields(cls)}
        values = dict(data)
        missing = [name for name, f in fields.items() if f.default is attrs.NOTHING and name not in values]
        if missing:
            raise DataError(f"The {cls.kind} result lacks {', '.join(missing)}.")
        return cls(**{k: v for k, v in values.items() if k in fields})

    @classmethod
    def from_json(cls, text: str, **context: Any) -> Any:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"Not a JSON result: {exc}.") from None
        return cls.from_dict(data, **context)


@attrs.frozen(kw_only=True)
class MMDResult(Result):
    """An estimate of the maximum mean discrepancy between two samples.

    ``mmd2`` is the estimate of MMD² and ``mmd`` that of MMD. For estimators that can
    return a negative MMD² (the U-statistic), ``mmd`` follows the estimator's
    documented ``root`` rule; ``diagnostics`` says which.
    """

    kind: ClassVar[str] = "mmd"

    estimator: str = attrs.field(validator=text)
    estimator_params: dict[str, Any] = dict_field()
    kernel: str = attrs.field(validator=text)
    #: the hyperparameters actually used (e.g. the value the median heuristic gave)
    kernel_params: dict[str, Any] = dict_field()
    #: the hyperparameters as requested (e.g. ``sigma="median"``)
    kernel_params_requested: dict[str, Any] = dict_field()
    mmd2: float = attrs.field(converter=float, validator=finite)
    mmd: float = attrs.field(converter=float, validator=finite)
    n_x: int = attrs.field(converter=int, validator=count)
    n_y: int = attrs.field(converter=int, validator=count)
    seed: Any = seed_field()
    timings: dict[str, float] = timings_field()
    diagnostics: dict[str, Any] = dict_field(factory=dict)


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


def _kernel(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, Kernel):
        raise ParameterError(f"An embedding's kernel must be a Kernel; got {type(value).__name__}.")


@attrs.frozen(kw_only=True)
class Embedding(Result):
    """An estimate of a kernel mean embedding: μ̂ = Σ_i w_i k(·, x_i).

    Evaluate it at new points, take its RKHS norm, or its RKHS distance to another
    embedding with the same kernel. The empirical mean embedding has w_i = 1/N.

    Its JSON form names the kernel and its parameters; rebuilding it needs the kernel
    back: ``Embedding.from_dict(data, registry=get_registry())``, or
    ``monk_framework.load_result(text)``, which reads any result.
    """

    kind: ClassVar[str] = "embedding"

    kernel: Kernel = attrs.field(validator=_kernel)
    sample: np.ndarray | list[str] = attrs.field(converter=_as_sample, eq=attrs.cmp_using(eq=_sample_eq))
    weights: np.ndarray = attrs.field(
        converter=lambda w: np.asarray(w, dtype=np.float64),
        validator=_weights,
        eq=attrs.cmp_using(eq=np.array_equal),
    )
    estimator: str = attrs.field(validator=text)
    estimator_params: dict[str, Any] = dict_field(factory=dict)
    seed: Any = seed_field()
    timings: dict[str, float] = timings_field()
    diagnostics: dict[str, Any] = dict_field(factory=dict)

    def evaluate(self, Z: Any) -> np.ndarray:
        """μ̂(z) = Σ_i w_i k(z, x_i) for each point z of Z (the "witness" values).

        Over the memory budget the Gram matrix is computed in row tiles
        (:func:`monk_framework.core.kernels.weighted_gram`), as for :meth:`inner`."""
        Zv, Xv = self.kernel.check_pair(Z, self.sample, names=("Z", "the embedding's sample"))
        return weighted_gram(self.kernel, Zv, Xv, self.weights)

    def inner(self, other: Embedding) -> float:
        """⟨μ̂, ν̂⟩_H = wᵀ K(X, X') w' (in row tiles over the memory budget)."""
        self._check_same_kernel(other)
        if other is self:
            return bilinear(self.kernel, self.sample, None, self.weights, self.weights)
        return bilinear(self.kernel, self.sample, other.sample, self.weights, other.weights)

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
        out = super().to_dict()
        out["kernel"] = self.kernel.name
        return {**out, "kernel_params": self.kernel.params()}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, registry: Registry | None = None, kernel: Kernel | None = None, **context: Any
    ) -> Embedding:
        """Rebuild an embedding; its kernel is looked up by name in ``registry`` (or given)."""
        if not isinstance(data, Mapping) or "kernel" not in data:
            raise DataError("An embedding result names its kernel; this one does not.")
        if kernel is None:
            if registry is None:
                raise ParameterError(
                    "Embedding.from_dict needs the registry to rebuild the kernel: pass "
                    "registry=monk_framework.get_registry(), or use monk_framework.load_result."
                )
            kernel = registry.kernel_from_spec(data["kernel"], data.get("kernel_params", {}))
        elif kernel.name != data["kernel"]:
            raise DataError(f"The embedding was made with kernel {data['kernel']!r}, not {kernel.name!r}.")
        fields = {k: v for k, v in data.items() if k != "kernel_params"}
        return super().from_dict({**fields, "kernel": kernel})
