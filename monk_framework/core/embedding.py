"""A mean embedding as a result: μ̂ = Σ_i w_i k(·, x_i), its sample, kernel and weights.

It holds the estimate (kernel, sample, weights) and states the mathematics of its
values at new points, its RKHS norm, inner products and distances with another
embedding of the same kernel; the kernel values behind them, cut in tiles within a
memory budget, are the engine's work (:class:`~monk_framework.core.protocols.KernelWork`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import attrs
import numpy as np

from monk_framework.core.errors import DataError, ParameterError, UnknownNameError
from monk_framework.core.kernels import Kernel
from monk_framework.core.protocols import kernel_work
from monk_framework.core.resources import Resources
from monk_framework.core.results import Result, call_text, dict_field, optional_finite, optional_float, seed_field, spec_text, text, timings_field

if TYPE_CHECKING:
    from monk_framework.core.registry import Registry

__all__ = ["Embedding", "EmbeddingsResult"]


def _weights(instance: Any, attribute: attrs.Attribute[Any], value: np.ndarray) -> None:
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


def _kernel(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Kernel):
        raise ParameterError(f"An embedding's kernel must be a Kernel; got {type(value).__name__}.")


def _float64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


@attrs.frozen(kw_only=True, repr=False)
class Embedding(Result):
    """An estimate of a kernel mean embedding: μ̂ = Σ_i w_i k(·, x_i).

    Evaluate it at new points, take its RKHS norm, or its RKHS distance to another
    embedding with the same kernel. The empirical mean embedding has w_i = 1/N.

    Its JSON form names the kernel and its parameters; rebuilding it needs the kernel
    back: ``Embedding.from_dict(data, registry=get_registry())``, or
    ``monk_framework.load_result(text)``, which reads any result.
    """

    kind: ClassVar[str] = "embedding"
    repr_fields: ClassVar[tuple[str, ...]] = ("kernel", "estimator", "sample", "weights")

    kernel: Kernel = attrs.field(validator=_kernel)
    sample: np.ndarray | list[str] = attrs.field(converter=_as_sample, eq=attrs.cmp_using(eq=_sample_eq))
    weights: np.ndarray = attrs.field(
        converter=_float64,
        validator=_weights,
        eq=attrs.cmp_using(eq=np.array_equal),
    )
    estimator: str = attrs.field(validator=text)
    estimator_params: dict[str, Any] = dict_field(factory=dict)
    seed: Any = seed_field()
    timings: dict[str, float] = timings_field()
    diagnostics: dict[str, Any] = dict_field(factory=dict)

    def __str__(self) -> str:
        w = self.weights
        return "\n".join(
            [
                "Mean embedding",
                f"  kernel     {call_text(self.kernel.name, self.kernel.params())}",
                f"  estimator  {call_text(self.estimator, self.estimator_params)}",
                f"  sample     {len(self.sample)} points; weights sum to {w.sum():.6g}, {int(np.count_nonzero(w))} non-zero",
            ]
        )

    def evaluate(self, Z: Any, *, max_memory: Any = None, progress: Any = None) -> np.ndarray:
        """μ̂(z) = Σ_i w_i k(z, x_i) for each point z of Z (the "witness" values).

        Over the memory budget (``max_memory``, as for ``estimate``) the Gram matrix is
        computed in row tiles (the engine's :meth:`~monk_framework.core.protocols.KernelWork.weighted_gram`).
        ``progress(done, total, "witness values")`` is told the kernel values evaluated."""
        resources = Resources.of(max_memory, progress=progress)
        Zv, Xv = self.kernel.check_pair(Z, self.sample, names=("Z", "the embedding's sample"))
        total = float(len(Zv)) * len(Xv)
        report = None if progress is None else (lambda done: resources.report(done, total, "witness values"))
        return kernel_work().weighted_gram(self.kernel, Zv, Xv, self.weights, resources=resources, report=report)

    def __call__(self, Z: Any, *, max_memory: Any = None) -> np.ndarray:
        """μ̂(Z), the embedding as the function it is: :meth:`evaluate`."""
        return self.evaluate(Z, max_memory=max_memory)

    def inner(self, other: Embedding, *, max_memory: Any = None, progress: Any = None) -> float:
        """⟨μ̂, ν̂⟩_H = wᵀ K(X, X') w' (in row tiles, as :meth:`distance`); ``progress(done,
        total, "inner product")`` is told the kernel values evaluated."""
        self._check_same_kernel(other)
        return self._inner(other, Resources.of(max_memory, progress=progress), progress is not None)

    def norm(self, *, max_memory: Any = None, progress: Any = None) -> float:
        """‖μ̂‖_H = √(wᵀ K w) (clipped at 0 against round-off); ``progress`` as for :meth:`inner`."""
        return math.sqrt(max(self._inner(self, Resources.of(max_memory, progress=progress), progress is not None), 0.0))

    def distance(self, other: Embedding, *, max_memory: Any = None, progress: Any = None) -> float:
        """‖μ̂ − ν̂‖_H = √(‖μ̂‖² + ‖ν̂‖² − 2⟨μ̂, ν̂⟩), an MMD estimate between the samples,
        from row tiles of the kernel (a kernel computed whole, such as the SSK, from its whole
        Gram matrices when they fit).

        ``progress(done, total, "embedding distance")`` is told the kernel values evaluated
        (n(n + 1)/2 + m(m + 1)/2 + nm in all) as the tiles finish."""
        self._check_same_kernel(other)
        resources = Resources.of(max_memory, progress=progress)
        A, B, kernel = self.sample, other.sample, self.kernel
        if math.isclose(float(np.sum(self.weights)), float(np.sum(other.weights)), rel_tol=1e-9):
            # equal total weights: moving the feature map by a constant vector (a common shift
            # of a shift-free kernel's data, or anchoring far from the origin) moves both
            # embeddings by the same vector, so the distance is read as an MMD, where it
            # keeps its digits (Kernel.mmd_view)
            kernel, A, B = self.kernel.mmd_view(A, B)
        wa, wb = self.weights, other.weights
        n, m = len(A), len(B)
        total = n * (n + 1) / 2.0 + m * (m + 1) / 2.0 + float(n) * m

        def told(before: float) -> Callable[[float], None] | None:
            if progress is None:
                return None
            return lambda done: resources.report(before + done, total, "embedding distance")

        bilinear = kernel_work().bilinear
        sq = (
            bilinear(kernel, A, None, wa, wa, resources=resources, report=told(0.0))
            + bilinear(kernel, B, None, wb, wb, resources=resources, report=told(n * (n + 1) / 2.0))
            - 2.0 * bilinear(kernel, A, B, wa, wb, resources=resources, report=told(total - float(n) * m))
        )
        return math.sqrt(max(sq, 0.0))

    def _inner(self, other: Embedding, resources: Resources, told: bool = False) -> float:
        n, m = len(self.sample), len(other.sample)
        total = n * (n + 1) / 2.0 if other is self else float(n) * m
        report = (lambda done: resources.report(done, total, "inner product")) if told else None
        B = None if other is self else other.sample
        return kernel_work().bilinear(self.kernel, self.sample, B, self.weights, other.weights, resources=resources, report=report)

    def _check_same_kernel(self, other: Embedding) -> None:
        if not isinstance(other, Embedding):
            raise ParameterError(
                f"inner and distance take another Embedding; got {type(other).__name__}. (To evaluate this embedding "
                "at points, use evaluate(Z); to compare two samples, estimate(X, Y, kernel=...).)"
            )
        if self.kernel != other.kernel:
            hint = ""
            if type(self.kernel) is type(other.kernel):
                # the common case: embed() resolved the kernel's 'median' bandwidth on each
                # sample apart, so two embeddings made the same way have different kernels
                hint = (
                    " A bandwidth such as sigma='median' is resolved on each embedded sample apart: for embeddings "
                    f"you compare, fix it first, e.g. embed(X, kernel={self.kernel.spec()!r}) for both."
                )
            raise ParameterError(
                f"The embeddings use different kernels ({self.kernel.spec()} vs {other.kernel.spec()}); their inner product is undefined.{hint}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["kernel"] = self.kernel.name
        return {**out, "kernel_params": self.kernel.params()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, registry: Registry | None = None, kernel: Kernel | None = None, **context: Any) -> Embedding:
        """Rebuild an embedding; its kernel is looked up by name in ``registry`` (or given)."""
        if not isinstance(data, Mapping) or "kernel" not in data:
            raise DataError("An embedding result names its kernel; this one does not.")
        if kernel is None:
            if registry is None:
                raise ParameterError(
                    "Embedding.from_dict needs the registry to rebuild the kernel: pass "
                    "registry=monk_framework.get_registry(), or use monk_framework.load_result."
                )
            try:
                kernel = registry.kernel_from_spec(data["kernel"], data.get("kernel_params", {}))
            except UnknownNameError as exc:
                # an embedding cannot be used without its kernel: say what to install
                exc.args = (
                    f"{exc} The embedding was made with this kernel: install (or register) the plugin that "
                    "provides it before loading the embedding, or pass kernel= to Embedding.from_dict.",
                )
                raise
        elif kernel.name != data["kernel"]:
            raise DataError(f"The embedding was made with kernel {data['kernel']!r}, not {kernel.name!r}.")
        fields = {k: v for k, v in data.items() if k != "kernel_params"}
        return cast("Embedding", super().from_dict({**fields, "kernel": kernel}))


@attrs.frozen(kw_only=True, repr=False)
class EmbeddingsResult(Result):
    """The mean embeddings of X (and of Y) by one estimator with one kernel, fitted on
    X ∪ Y, and ‖μ̂_X − μ̂_Y‖_H, the RKHS distance between them (an MMD estimate)."""

    kind: ClassVar[str] = "embeddings"
    repr_fields: ClassVar[tuple[str, ...]] = ("distance", "x", "y")

    x: Embedding = attrs.field(validator=attrs.validators.instance_of(Embedding))
    y: Embedding | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Embedding)))
    distance: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    seed: Any = seed_field()
    timings: dict[str, float] = dict_field(factory=dict)

    def __str__(self) -> str:
        x = self.x
        lines = [
            "Mean embeddings" if self.y is not None else "Mean embedding",
            f"  kernel     {call_text(x.kernel.name, x.kernel.params())}",
            f"  estimator  {call_text(x.estimator, x.estimator_params)}",
            f"  X          {len(x.sample)} points",
        ]
        if self.y is not None:  # no norms here: each is a pass over a Gram matrix
            lines.append(f"  Y          {len(self.y.sample)} points")
        if self.distance is not None:
            lines.append(f"  distance   {self.distance:.6g} (the RKHS distance between them, an MMD estimate)")
        return "\n".join(lines)

    def estimator_record(self) -> tuple[dict[str, Any], dict[str, float]]:
        """(diagnostics, timings) as the estimator recorded them for X: what its
        :meth:`~monk_framework.core.estimators.Estimator.report_rows` reads."""
        return self.x.diagnostics, self.x.timings

    def report_table(self, diagnostic_rows: Sequence[tuple[str, str]] = ()) -> tuple[str, list[tuple[str, str]]]:
        """The title and rows of the table ``monkfw run`` prints for mean embeddings: the
        norms, the distance between the two, and the estimator's ``diagnostic_rows`` for X."""
        x, y = self.x, self.y
        rows = [
            ("estimator", spec_text(x.estimator, x.estimator_params)),
            ("kernel", x.kernel.spec()),
            ("N", str(len(x.weights))),
            ("||mu_X||", f"{x.norm():.10g}"),
            *diagnostic_rows,
        ]
        if y is not None:
            rows += [("M", str(len(y.weights))), ("||mu_Y||", f"{y.norm():.10g}"), ("||mu_X - mu_Y||", f"{self.distance:.10g}")]
        return f"{x.estimator} with {x.kernel.name}", rows

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["x"] = self.x.to_dict()
        out["y"] = None if self.y is None else self.y.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, registry: Registry | None = None, **context: Any) -> EmbeddingsResult:
        """Rebuild the embeddings; their kernel is looked up by name in ``registry``
        (``monk_framework.load_result`` passes the installed one)."""
        if registry is None:
            raise ParameterError(
                "EmbeddingsResult.from_dict needs the registry to rebuild the kernel: pass "
                "registry=monk_framework.get_registry(), or use monk_framework.load_result."
            )
        reg = registry
        if not isinstance(data, Mapping) or not isinstance(data.get("x"), Mapping):
            raise DataError("An embeddings result holds the embedding of X under 'x'; this one does not.")
        x = Embedding.from_dict(data["x"], registry=reg)
        y = None if data.get("y") is None else Embedding.from_dict(data["y"], registry=reg)
        return cast("EmbeddingsResult", super().from_dict({**data, "x": x, "y": y}))
