"""Result objects: what an estimator returns, serialisable to JSON and back."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import DataError, MonkError, ParameterError, UnknownNameError, shown
from monk_framework.core.kernels import Kernel, bilinear, weighted_gram
from monk_framework.core.resources import Resources

if TYPE_CHECKING:
    from monk_framework.core.registry import Registry

__all__ = [
    "Embedding",
    "EmbeddingsResult",
    "MMDResult",
    "PermutationTestResult",
    "Result",
    "AggregatedTestResult",
    "RobustTestResult",
    "SplitTestResult",
    "StatisticResult",
    "TestResult",
    "computed_with",
    "dumps",
    "finite",
    "jsonable",
]


#: beyond this many permutations a decision suggests a larger level instead
MAX_SUGGESTED_PERMUTATIONS = 10**7


def _more_permutations(level: float) -> str:
    """What a test that cannot reach ``level`` (p ≥ 1/(B + 1) > level) should change."""
    if level * (MAX_SUGGESTED_PERMUTATIONS + 1) < 1:  # 1/level may overflow (alpha = 1e-320)
        return "use a larger alpha (no practical number of permutations reaches this one)"
    needed = math.ceil(1 / level - 1e-9) - 1
    if needed > MAX_SUGGESTED_PERMUTATIONS:
        return "use a larger alpha (no practical number of permutations reaches this one)"
    return f"use at least {needed}"


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


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _recorded_seed(value: Any) -> bool:
    """What seed_of records: None, the entropy (an int, or a list of them), or
    [entropy, *spawn_key] for a stream below a root."""
    if value is None or _natural(value):
        return True
    if not isinstance(value, list) or not value:
        return False
    entropy, *spawn_key = value
    entropy_ok = _natural(entropy) or (isinstance(entropy, list) and bool(entropy) and all(map(_natural, entropy)))
    return entropy_ok and all(map(_natural, spawn_key))


def _check_seed(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not _recorded_seed(value):
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


def whole(value: Any) -> int:
    """An int field's converter: a whole number (an int, numpy's included, or a float such
    as 30.0), never a truncated 2.7, a bool or a string."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (numbers.Real, str)) and not isinstance(value, bool):
        raise ValueError(f"{shown(value)} is not a whole number")
    raise TypeError(f"{type(value).__name__} is not a whole number")


def _optional_floats(value: Any) -> list[float] | None:
    return None if value is None else [float(v) for v in value]


def certificate_value(value: Any) -> int | None:
    """A certificate: a whole number of points ≥ 0, or None when the test does not reject
    even without corruption (written −1 before 0.2, read as None)."""
    if value is None:
        return None
    count = whole(value)
    return None if count == -1 else count


def optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _short(value: Any) -> str:
    """A value as ``repr`` shows it, in a few dozen characters at most."""
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, precision=4, separator=", ").join(("array(", ")"))
        flat = value.reshape(-1)
        head = ", ".join(f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v) for v in flat[:2])
        return f"array([{head}, ..., {flat[-1]:.4g}], shape={value.shape})"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, Result):
        return f"<{type(value).__name__}>"
    if isinstance(value, list) and len(value) > 3:
        head = ", ".join(item if len(item := repr(v)) <= 30 else item[:26] + " ..." + item[-1] for v in value[:2])
        return f"[{head}, ... ({len(value)} items)]"
    whole_text = repr(value)
    return whole_text if len(whole_text) <= 60 else whole_text[:56] + " ..." + whole_text[-1]


@attrs.frozen(kw_only=True, repr=False)
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
    #: the fields ``repr`` shows (arrays and long values elided, as numpy elides them)
    repr_fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        """``Name(field=value, ...)`` over :attr:`repr_fields`, at most a few lines: long
        arrays elided (``array([0.01, 0.02, ..., 0.3], shape=(1000,))``), long values cut;
        every value is in ``to_dict()``."""
        items = [f"{name}={_short(getattr(self, name))}" for name in self.repr_fields]
        lines, line = [], f"{type(self).__name__}("
        for i, item in enumerate(items):
            piece = item + (", " if i < len(items) - 1 else ")")
            if len(line) + len(piece) > 100 and line.strip():
                lines.append(line.rstrip())
                line = "    "
            line += piece
        if not items:
            line += ")"
        return "\n".join([*lines, line])

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
        given = {k: v for k, v in values.items() if k in fields}
        # a result read back is untrusted input (an edited or damaged file): each field is
        # converted here first, so that a bad one is named, never blamed on a computation
        for name, value in given.items():
            converter = fields[name].converter
            if not callable(converter):
                continue
            try:
                converted = converter(value)
            except (TypeError, ValueError, OverflowError, MonkError) as exc:
                wanted = _CONVERTED_KINDS.get(converter)
                if isinstance(exc, TypeError) and wanted:  # a JSON value of the wrong type
                    raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)} ({_json_kind(type(value))}), where {wanted} belongs.") from None
                raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)}, which is not a valid value ({exc}).") from None
            if isinstance(converted, float) and not math.isfinite(converted):
                raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)}, not a finite number.")
        try:
            return cls(**given)
        except DataError:
            raise
        except (TypeError, ValueError, MonkError) as exc:
            raise DataError(f"The {cls.kind} result{_fault_of(exc)}") from None

    @classmethod
    def from_json(cls, text: str, **context: Any) -> Any:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"Not a JSON result: {exc}.") from None
        return cls.from_dict(data, **context)


#: what a JSON value of each Python type is called in a message
_JSON_KINDS = {str: "a string", dict: "a JSON object", list: "a list", int: "an integer", bool: "true or false", float: "a number", type(None): "null"}


def _json_kind(kind: type) -> str:
    """A Python type as JSON calls its values: "a string", "null"."""
    return _JSON_KINDS.get(kind, kind.__name__)


#: what a field's converter reads, in JSON's words
_CONVERTED_KINDS: dict[Any, str] = {whole: "an integer", float: "a number", optional_float: "a number or null", certificate_value: "an integer or null"}


def _fault_of(exc: BaseException) -> str:
    """The end of "The mmd result ...": which field holds what, in JSON's words, for
    attrs' type checks (``TypeError(message, attribute, type, value)``); the message
    of any other check."""
    args = exc.args
    if isinstance(exc, TypeError) and len(args) == 4 and isinstance(args[1], attrs.Attribute):
        wanted = args[2] if isinstance(args[2], tuple) else (args[2],)
        expected = " or ".join(_json_kind(t) for t in wanted)
        return f"'s {args[1].name!r} holds {shown(args[3])} ({_json_kind(type(args[3]))}), where {expected} belongs."
    reason = args[0] if args and isinstance(args[0], str) else str(exc)
    return f" holds a bad value: {reason}"


def _count(number: int, noun: str) -> str:
    """ "1 permutation", "100 permutations"."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _call_text(name: str, params: Mapping[str, Any]) -> str:
    """``rbf(sigma=1.63054)``: a kernel or an estimator with its parameters, for a summary."""
    shown = (f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in params.items())
    return f"{name}({', '.join(shown)})"


def computed_with(estimator: Any, requested: Kernel, used: Kernel, n_x: int, n_y: int, seed: Any) -> dict[str, Any]:
    """The fields of :class:`StatisticResult` for a computation: the estimator with its
    parameters, the kernel as asked (``requested``) and as used (``used``, e.g. fitted by
    the median heuristic), the sample sizes and the seed."""
    return {
        "estimator": estimator.name,
        "estimator_params": estimator.params(),
        "kernel": requested.name,
        "kernel_params": used.params(),
        "kernel_params_requested": requested.params(),
        "n_x": n_x,
        "n_y": n_y,
        "seed": seed,
    }


@attrs.frozen(kw_only=True, repr=False)
class StatisticResult(Result):
    """What every MMD estimate and every two-sample test records, declared once: the
    estimator and the kernel with their parameters (``kernel_params`` as used, e.g. the
    value the median heuristic gave; ``kernel_params_requested`` as asked, e.g.
    ``sigma="median"``), the sample sizes, the seed and the timings.

    ``print(result)`` shows a short summary (:meth:`summary_rows`, at most 15 lines); the
    full record is ``to_dict()`` / ``to_json()``.
    """

    estimator: str = attrs.field(validator=text)
    estimator_params: dict[str, Any] = dict_field(factory=dict)
    kernel: str = attrs.field(validator=text)
    kernel_params: dict[str, Any] = dict_field(factory=dict)
    kernel_params_requested: dict[str, Any] = dict_field(factory=dict)
    n_x: int = attrs.field(converter=whole, validator=count)
    n_y: int = attrs.field(converter=whole, validator=count)
    seed: Any = seed_field()
    timings: dict[str, float] = timings_field()

    #: the summary's first line
    title: ClassVar[str] = "Result"

    def summary_rows(self) -> list[tuple[str, str]]:
        """(label, text) rows of the summary, after the title: what a reader needs first."""
        return []

    def _kernel_text(self) -> str:
        rules = [key for key, value in self.kernel_params_requested.items() if value == "median" and self.kernel_params.get(key) != "median"]
        chosen = f" ({', '.join(rules)} by the median heuristic)" if rules else ""
        return _call_text(self.kernel, self.kernel_params) + chosen

    def __str__(self) -> str:
        rows = [
            *self.summary_rows(),
            ("kernel", self._kernel_text()),
            ("estimator", _call_text(self.estimator, self.estimator_params)),
            ("sizes", f"N = {self.n_x}, M = {self.n_y}"),
        ]
        width = max(len(label) for label, _ in rows)
        return "\n".join([self.title, *(f"  {label:<{width}}  {value}" for label, value in rows)])


@attrs.frozen(kw_only=True, repr=False)
class MMDResult(StatisticResult):
    """An estimate of the maximum mean discrepancy between two samples.

    ``mmd2`` is the estimate of MMD² and ``mmd`` that of MMD. For estimators that can
    return a negative MMD² (the U-statistic), ``mmd`` follows the estimator's
    documented ``root`` rule; ``diagnostics`` says which.
    """

    kind: ClassVar[str] = "mmd"
    repr_fields: ClassVar[tuple[str, ...]] = ("mmd", "mmd2", "kernel", "kernel_params", "estimator", "n_x", "n_y")
    title: ClassVar[str] = "MMD estimate"

    mmd2: float = attrs.field(converter=float, validator=finite)
    mmd: float = attrs.field(converter=float, validator=finite)
    diagnostics: dict[str, Any] = dict_field(factory=dict)

    def summary_rows(self) -> list[tuple[str, str]]:
        return [("MMD^2", f"{self.mmd2:.10g}"), ("MMD", f"{self.mmd:.10g}")]


@attrs.frozen(kw_only=True, repr=False)
class TestResult(StatisticResult):
    """What every two-sample test result shares, in scipy.stats' names: ``statistic``,
    ``pvalue``, ``null_distribution`` (the relabelled statistics, an array; None only
    when the caller asked not to keep them), ``alternative`` ("greater": a large MMD
    speaks against H₀), and unpacking as ``statistic, pvalue = result``.
    ``reject == (pvalue <= alpha)``."""

    derived: ClassVar[tuple[str, ...]] = ("decision",)
    title: ClassVar[str] = "Two-sample test"
    repr_fields: ClassVar[tuple[str, ...]] = (
        "statistic",
        "pvalue",
        "reject",
        "alpha",
        "kernel",
        "kernel_params",
        "estimator",
        "n_x",
        "n_y",
        "n_permutations",
    )

    statistic: float = attrs.field(converter=float, validator=finite)
    pvalue: float = attrs.field(converter=float, validator=pvalue_range)
    alpha: float = attrs.field(converter=float, validator=level)
    reject: bool = attrs.field(validator=flag)
    n_permutations: int = attrs.field(converter=whole, validator=count)
    null_distribution: np.ndarray | None = null_field()
    alternative: str = attrs.field(default="greater", validator=attrs.validators.in_(("greater", "less", "two-sided")))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.statistic, self.pvalue))

    @property
    def decision(self) -> str:
        raise NotImplementedError

    def _too_few_points(self, share: float | None = None) -> str | None:
        """The decision when the sample sizes alone keep a permutation test from rejecting
        at level α (or, with ``share``, a kernel from rejecting at its share of α), or None.

        The pooled N + M points split into N and M points in C(N + M, N) ways, the
        observed split among them; every relabelling (global, or within blocks: a subset
        of the splits) is one of them, so even the exact permutation p-value, over every
        split, is at least 1/C(N + M, N) for a statistic of the data alone. No number of
        permutations helps when that exceeds the level (an estimator with randomness of
        its own could fall below it by that randomness only, which is no evidence)."""
        level = self.alpha if share is None else share
        n, m = self.n_x, self.n_y
        if n < 1 or m < 1:
            return None
        # log C(N + M, N) first: the exact count only when it is small enough to matter
        if math.lgamma(n + m + 1) - math.lgamma(n + 1) - math.lgamma(m + 1) > -math.log(level) + 1:
            return None
        splits = math.comb(n + m, n)
        if splits * level >= 1:
            return None
        return (
            f"No evidence of a difference at level {self.alpha:g}"
            f"{'' if share is None else f' (a kernel rejects at {share:.3g})'}, and none is possible with N = {n} and "
            f"M = {m}: the {n + m} points split into {n} and {m} in only {splits} way{'s' if splits != 1 else ''}, the "
            f"observed split one of them, so a statistic of the data has no permutation p-value below 1/{splits} = "
            f"{1 / splits:.3g}; a test at this level needs more points."
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        return [
            ("statistic", f"{self.statistic:.6g}"),
            ("p-value", f"{self.pvalue:.4g} ({_count(self.n_permutations, 'relabelling')})"),
            ("decision", self.decision),
        ]


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
        converter=lambda w: np.asarray(w, dtype=np.float64),
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
                f"  kernel     {_call_text(self.kernel.name, self.kernel.params())}",
                f"  estimator  {_call_text(self.estimator, self.estimator_params)}",
                f"  sample     {len(self.sample)} points; weights sum to {w.sum():.6g}, {int(np.count_nonzero(w))} non-zero",
            ]
        )

    def evaluate(self, Z: Any, *, max_memory: Any = None, progress: Any = None) -> np.ndarray:
        """μ̂(z) = Σ_i w_i k(z, x_i) for each point z of Z (the "witness" values).

        Over the memory budget (``max_memory``, as for ``estimate``) the Gram matrix is
        computed in row tiles (:func:`monk_framework.core.kernels.weighted_gram`).
        ``progress(done, total, "witness values")`` is told the kernel values evaluated."""
        resources = Resources.of(max_memory, progress=progress)
        Zv, Xv = self.kernel.check_pair(Z, self.sample, names=("Z", "the embedding's sample"))
        total = float(len(Zv)) * len(Xv)
        report = None if progress is None else (lambda done: resources.report(done, total, "witness values"))
        return weighted_gram(self.kernel, Zv, Xv, self.weights, resources=resources, report=report)

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
        if other is self:
            return bilinear(self.kernel, self.sample, None, self.weights, self.weights, resources=resources, report=report)
        return bilinear(self.kernel, self.sample, other.sample, self.weights, other.weights, resources=resources, report=report)

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
        return super().from_dict({**fields, "kernel": kernel})


@attrs.frozen(kw_only=True, repr=False)
class PermutationTestResult(TestResult):
    """The outcome of a permutation two-sample test of H₀: P = Q.

    ``statistic`` is T = sign(MMD²)√|MMD²| of the estimator on (X, Y);
    ``null_distribution`` holds the B values on relabellings;
    ``null_quantile`` is q̂ with ``reject == (statistic > null_quantile) == (pvalue <= alpha)``.
    ``relabel`` says how the relabellings were drawn ("global" or "within-blocks"),
    ``n_blocks`` the number of blocks of a within-block test's partition.
    """

    kind: ClassVar[str] = "permutation-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "alternative", "null_distribution")
    title: ClassVar[str] = "Permutation test"

    statistic_mmd2: float = attrs.field(converter=float, validator=finite)
    null_quantile: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    relabel: str = attrs.field(default="global", validator=attrs.validators.in_(("global", "within-blocks")))
    n_blocks: int | None = attrs.field(default=None, validator=optional_count)
    #: a within-block test's estimator MMD estimate with the same seed (``report_estimate=True``)
    estimate: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)

    @property
    def decision(self) -> str:
        """The decision in words."""
        side = {"greater": "exceeds", "less": "is below"}.get(self.alternative)
        against = "" if self.alternative == "greater" else f" ({self.alternative})"
        if self.reject:
            beyond = (
                f"; the statistic {self.statistic:.6g} {side} the null quantile {self.null_quantile:.6g}"
                if side is not None and self.null_quantile is not None
                else ""
            )
            return f"Reject H0 (same distribution) at level {self.alpha:g}{against}: p = {self.pvalue:.4g} <= {self.alpha:g}{beyond}."
        smallest = (2 if self.alternative == "two-sided" else 1) / (self.n_permutations + 1)
        if smallest > self.alpha * (1 + 1e-9):
            return (
                f"Cannot reject at level {self.alpha:g}{against} with {_count(self.n_permutations, 'permutation')}: the "
                f"smallest attainable p-value is {2 if self.alternative == 'two-sided' else 1}/{self.n_permutations + 1}; "
                f"{_more_permutations(self.alpha / (2 if self.alternative == 'two-sided' else 1))}."
            )
        if (too_few := self._too_few_points()) is not None:
            return too_few
        quantile = f", null quantile {self.null_quantile:.6g}" if self.null_quantile is not None else ""
        return (
            f"No evidence of a difference at level {self.alpha:g}{against}: p = {self.pvalue:.4g} > {self.alpha:g} (statistic {self.statistic:.6g}{quantile})."
        )


@attrs.frozen(kw_only=True, repr=False)
class SplitTestResult(TestResult):
    """The outcome of the three-way split test (paper Algorithm 3).

    ``parts`` lists the indices of X and Y in each stage ("tune", "calibrate", "test");
    ``tuning`` the statistic of every grid point on part 1; ``kernel_params`` the
    hyperparameters chosen there (data-dependent rules resolved on part 1).
    ``statistic`` is T on part 3, ``null_quantile`` q̂ from part 2's relabellings and
    ``excess`` T − q̂ (the paper's Figure 2); ``pvalue`` = (1 + #{T_b ≥ T}) / (1 + B) is
    T's rank among them, so that ``reject == (T > q̂) == (pvalue <= alpha)``.
    """

    kind: ClassVar[str] = "split-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "null_quantile", "null_distribution")
    title: ClassVar[str] = "Split test (the paper's Algorithm 3)"

    grid: dict[str, list[Any]] = dict_field()
    tuning: list[dict[str, Any]] = attrs.field(converter=jsonable, validator=attrs.validators.instance_of(list))
    null_quantile: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    excess: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    parts: dict[str, dict[str, list[int]]] = dict_field()

    @property
    def decision(self) -> str:
        chosen = _call_text(self.kernel, self.kernel_params)
        if self.null_quantile is None:
            return f"Cannot reject at level {self.alpha:g} with {_count(self.n_permutations, 'permutation')} ({_more_permutations(self.alpha)})."
        verdict = "Reject H0 (same distribution)" if self.reject else "No evidence of a difference"
        return (
            f"{verdict} at level {self.alpha:g}: T - q = {self.excess:.6g} (T = {self.statistic:.6g} on part 3, "
            f"q = {self.null_quantile:.6g} from part 2; kernel {chosen} chosen on part 1)."
        )


@attrs.frozen(kw_only=True, repr=False)
class RobustTestResult(TestResult):
    """The outcome of a robust two-sample test of H₀: P = Q under contamination.

    ``statistic`` and ``pvalue`` follow scipy's convention (the result unpacks as
    ``statistic, pvalue = result``): for "dc" the V-statistic MMD and the permutation
    p-value of MMD − 2rΔ; for "clip" the same with the clipped kernel and its margin
    2s(r) in place of 2rΔ (``threshold`` = q̂ + 2s(r)); for "mom" the median block p-value p_(k) and
    P(Binomial(Q, p_(k)) ≥ k − r). ``pvalue`` is valid when at most ``contamination``
    points are corrupted, and ``reject == (pvalue <= alpha)``. ``certificate`` c is the
    largest budget under which this test still rejects (None: it does not reject): the
    rejection stays valid if up to c points were corrupted, and rerunning with the same
    ``n_blocks`` (reported for "mom", also when it was chosen by "auto") and any
    ``contamination`` r ≤ c rejects.
    """

    kind: ClassVar[str] = "robust-test"
    repr_fields: ClassVar[tuple[str, ...]] = (*TestResult.repr_fields, "method", "contamination", "certificate")
    title: ClassVar[str] = "Robust two-sample test"

    method: str = attrs.field(validator=attrs.validators.in_(("dc", "clip", "mom")))
    contamination: int = attrs.field(converter=whole, validator=count)
    certificate: int | None = attrs.field(default=None, converter=certificate_value, validator=optional_count)
    #: "dc": the sensitivity Δ, the permutation quantile q̂ and the threshold q̂ + 2rΔ
    sensitivity: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    null_quantile: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    threshold: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "clip": the radius c of the clipped features, and how far r corrupted points could
    #: have moved it (0 for a radius given by the caller)
    clip_radius: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    clip_slack: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "dc" with the median heuristic: the bandwidths the uncorrupted data's (snapped) median
    #: heuristic could give; the test rejects only when it rejects at each of them
    bandwidths: list[float] | None = attrs.field(default=None, converter=_optional_floats)
    #: "mom": the number of blocks Q, the order k of the median and every block's p-value
    n_blocks: int | None = attrs.field(default=None, validator=optional_count)
    order: int | None = attrs.field(default=None, validator=optional_count)
    block_pvalues: np.ndarray | None = null_field()

    def _kernel_text(self) -> str:
        if self.bandwidths is None:
            return super()._kernel_text()
        count = len(self.bandwidths)
        return (
            f"{_call_text(self.kernel, self.kernel_params)} (sigma by the median heuristic made robust; "
            f"{'the one candidate' if count == 1 else f'rejects only at each of {count} candidates'})"
        )

    def summary_rows(self) -> list[tuple[str, str]]:
        return [
            *super().summary_rows(),
            ("method", f"{self.method}, valid with up to {self.contamination} corrupted point{'s' if self.contamination != 1 else ''}"),
            ("certificate", "not rejected" if self.certificate is None else f"valid with up to {_count(self.certificate, 'corrupted point')}"),
        ]

    @property
    def decision(self) -> str:
        """The decision in words, with the certificate."""
        r = self.contamination
        guard = f"with up to {r} corrupted point{'s' if r != 1 else ''}" if r else "without corruption"
        if self.reject:
            survives = f"the rejection stays valid if up to {self.certificate} point{'s were' if self.certificate != 1 else ' was'} corrupted"
            return f"Reject H0 (same distribution) at level {self.alpha:g}, valid {guard} ({self.method}: p = {self.pvalue:.4g}); {survives}."
        if self.method != "mom" and (too_few := self._too_few_points()) is not None:
            return too_few
        if self.certificate is not None:
            return (
                f"No evidence of a difference at level {self.alpha:g} {guard} ({self.method}: p = "
                f"{self.pvalue:.4g}); the test would reject with at most {self.certificate} corrupted "
                f"point{'s' if self.certificate != 1 else ''}."
            )
        return f"No evidence of a difference at level {self.alpha:g} ({self.method}: p = {self.pvalue:.4g}); the test does not reject even without corruption."


def _text_list(value: Any) -> list[str]:
    return [str(v) for v in value]


def _float_list(value: Any) -> list[float | None]:
    return [None if v is None else float(v) for v in value]


def _flag_array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=bool).reshape(-1)


@attrs.frozen(kw_only=True, repr=False)
class AggregatedTestResult(TestResult):
    """The outcome of an aggregated two-sample test over a collection of kernels.

    ``method`` "agg" (MMDAgg): ``statistic`` is S = max_l log(L·w_l / p_l), p_l kernel
    l's permutation p-value among the B + 1 relabellings (the identity included), and
    ``pvalue`` the permutation p-value of S: the smallest α at which the test rejects
    (up to the 1/(B + 1) grid). Kernel l rejects when log(L·w_l / p_l) exceeds the
    null quantile q̂ of S, i.e. when p_l < L·w_l·exp(−q̂) (``kernel_levels``), and the
    test rejects exactly when one kernel does. ``method`` "fuse" (MMD-FUSE):
    ``statistic`` is its authors' log Σ_l w_l exp(λ·MMD²_l / N_l) (λ = n(n − 1),
    n = min(N, M); N_l in ``kernel_scales``) and
    ``pvalue`` its permutation p-value; it makes no per-kernel decision
    (``kernel_rejects`` is None).

    ``kernel_specs``, ``bandwidths`` (σ of each kernel, None for a kernel without
    one), ``weights``, ``kernel_statistics`` (each kernel's statistic on the samples as
    given) and ``kernel_pvalues`` (each kernel's own permutation p-value) are in the
    order of the collection. With ``contamination`` r > 0 ("agg" over bounded kernels)
    ``kernel_pvalues`` are each kernel's dcMMD p-value at budget r, kernel l rejects when
    its p-value is at most α·w_l (``kernel_levels``), ``statistic`` is max_l log(w_l / p_l)
    and ``pvalue`` = min(1, min_l p_l / w_l), valid under any r corrupted points (there is
    no null distribution to return); ``certificate`` is the largest r under which it still
    rejects (None: it does not reject).
    """

    kind: ClassVar[str] = "aggregated-test"
    repr_fields: ClassVar[tuple[str, ...]] = (
        "statistic",
        "pvalue",
        "reject",
        "alpha",
        "method",
        "kernel_specs",
        "kernel_pvalues",
        "estimator",
        "n_x",
        "n_y",
        "n_permutations",
    )
    title: ClassVar[str] = "Aggregated two-sample test"

    method: str = attrs.field(validator=attrs.validators.in_(("agg", "fuse")))
    kernel_specs: list[str] = attrs.field(converter=_text_list)
    bandwidths: list[float | None] = attrs.field(converter=_float_list)
    weights: np.ndarray = null_field()
    kernel_statistics: np.ndarray = null_field()
    kernel_pvalues: np.ndarray = null_field()
    kernel_rejects: np.ndarray | None = attrs.field(default=None, converter=_flag_array, eq=attrs.cmp_using(eq=_array_eq))
    kernel_levels: np.ndarray | None = null_field()
    null_quantile: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    #: "fuse": each kernel's permutation-invariant scale N_l and the inverse temperature λ
    kernel_scales: np.ndarray | None = null_field()
    temperature: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    contamination: int = attrs.field(default=0, converter=whole, validator=count)
    certificate: int | None = attrs.field(default=None, converter=certificate_value, validator=optional_count)
    #: kernel l's sensitivity Δ_l (robust aggregation)
    sensitivities: np.ndarray | None = null_field()

    def __attrs_post_init__(self) -> None:
        sizes = {len(self.kernel_specs), len(self.bandwidths), len(self.weights), len(self.kernel_statistics), len(self.kernel_pvalues)}
        if len(sizes) != 1:
            raise DataError(f"An aggregated test result needs one entry per kernel in each list; got lengths {sorted(sizes)}.")

    @property
    def rejecting_kernels(self) -> list[str]:
        """The specs of the kernels that rejected ("agg"); empty for "fuse"."""
        if self.kernel_rejects is None:
            return []
        return [spec for spec, flag in zip(self.kernel_specs, self.kernel_rejects) if flag]

    @property
    def collection(self) -> str:
        """The collection in words: "rbf and laplace at 10 bandwidths each"."""
        groups: dict[str, list[str]] = {}
        names = [spec.split(":")[0] for spec in self.kernel_specs]
        for spec, name, sigma in zip(self.kernel_specs, names, self.bandwidths):
            # a family by its name; a kernel without a bandwidth by its name when no other has it
            groups.setdefault(name if sigma is not None or names.count(name) == 1 else spec, []).append(spec)
        parts, sizes = [], set()
        for name, specs in groups.items():
            if len(specs) > 1:
                parts.append(name)
                sizes.add(len(specs))
            else:
                parts.append(name if self.bandwidths[self.kernel_specs.index(specs[0])] is None else specs[0])
                sizes.add(0)
        if len(sizes) == 1 and (size := sizes.pop()) > 0:
            joined = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
            return f"{joined} at {size} bandwidths{' each' if len(parts) > 1 else ''}"
        described = [f"{part} at {len(specs)} bandwidths" if len(specs) > 1 else part for part, specs in zip(parts, groups.values())]
        return described[0] if len(described) == 1 else f"{', '.join(described[:-1])} and {described[-1]}"

    @property
    def most_significant(self) -> str:
        """The spec of the kernel with the smallest p-value relative to its weight (for
        MMDAgg, the kernel that drives the decision; the first of equals)."""
        return self.kernel_specs[int(np.argmin(self.kernel_pvalues / self.weights))]

    def _kernel_text(self) -> str:
        return f"{self.collection} ({self._over()})"

    def _over(self) -> str:
        count = len(self.kernel_specs)
        return f"{count} kernel{'s' if count != 1 else ''}"

    def summary_rows(self) -> list[tuple[str, str]]:
        name = "MMDAgg" if self.method == "agg" else "MMD-FUSE"
        best = int(np.argmin(self.kernel_pvalues / self.weights))
        statistic = "MMD" if self.contamination else "signed MMD"
        spec, sigma = self.kernel_specs[best], self.bandwidths[best]
        if sigma is not None:  # σ to 4 digits here; to_dict() has every digit
            family, _, params = spec.partition(":")
            spec = f"{family}:{','.join(f'sigma={sigma:.4g}' if p.startswith('sigma=') else p for p in params.split(','))}"
        rows = [("most significant", f"{spec}: {statistic} {self.kernel_statistics[best]:.4g}, its own p = {self.kernel_pvalues[best]:.4g}")]
        if self.method == "fuse":
            rows.append(("FUSE statistic", f"{self.statistic:.6g}"))
        rows += [
            ("p-value", f"{self.pvalue:.4g} ({name}, for the whole collection; {_count(self.n_permutations, 'relabelling')})"),
            ("decision", self.decision),
        ]
        if self.contamination:
            rows.append(("certificate", "not rejected" if self.certificate is None else f"valid with up to {_count(self.certificate, 'corrupted point')}"))
        return rows

    @property
    def decision(self) -> str:
        """The decision in words."""
        name = "MMDAgg" if self.method == "agg" else "MMD-FUSE"
        r = self.contamination
        guard = f", valid with up to {r} corrupted point{'s' if r != 1 else ''}" if r else ""
        if self.reject:
            which = ""
            if self.method == "agg":
                which = f"; rejected by {len(self.rejecting_kernels)} of {len(self.kernel_specs)} kernels"
            cert = ""
            if self.contamination:
                cert = f"; the rejection stays valid if up to {self.certificate} point{'s were' if self.certificate != 1 else ' was'} corrupted"
            return f"Reject H0 (same distribution) at level {self.alpha:g}{guard} ({name} over {self._over()}: p = {self.pvalue:.4g}){which}{cert}."
        if self.contamination and float(np.max(self.weights)) * self.alpha * (self.n_permutations + 1) < 1:
            return (
                f"Cannot reject at level {self.alpha:g}{guard} with {_count(self.n_permutations, 'permutation')}: a kernel "
                f"rejects when its p-value is at most alpha·w_l = {self.alpha * float(np.max(self.weights)):.3g}, "
                f"below the smallest attainable 1/{self.n_permutations + 1}; "
                f"{_more_permutations(self.alpha * float(np.max(self.weights)))}."
            )
        if self.null_quantile is None and not self.contamination:
            return (
                f"Cannot reject at level {self.alpha:g} with {_count(self.n_permutations, 'permutation')}: the smallest "
                f"attainable p-value is 1/{self.n_permutations + 1}; {_more_permutations(self.alpha)}."
            )
        # with a budget, a kernel rejects at its share α·w_l
        share = self.alpha * float(np.max(self.weights)) if self.contamination else None
        if (too_few := self._too_few_points(share)) is not None:
            return too_few
        return f"No evidence of a difference at level {self.alpha:g}{guard} ({name} over {self._over()}: p = {self.pvalue:.4g} > {self.alpha:g})."


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
            f"  kernel     {_call_text(x.kernel.name, x.kernel.params())}",
            f"  estimator  {_call_text(x.estimator, x.estimator_params)}",
            f"  X          {len(x.sample)} points",
        ]
        if self.y is not None:  # no norms here: each is a pass over a Gram matrix
            lines.append(f"  Y          {len(self.y.sample)} points")
        if self.distance is not None:
            lines.append(f"  distance   {self.distance:.6g} (the RKHS distance between them, an MMD estimate)")
        return "\n".join(lines)

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
        return super().from_dict({**data, "x": x, "y": y})
