"""Result objects: what an estimator or a test returns, serialisable to JSON and back.

:class:`Result` gives every result its validators, its JSON round trip, its ``repr`` and
``print``; :class:`MMDResult` is an estimate's, :class:`TestResult` the common part of
every test's (:mod:`~monk_framework.core.test_results`), and an embedding's is in
:mod:`~monk_framework.core.embedding`.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import DataError, MonkError, ParameterError, shown
from monk_framework.core.kernels import Kernel

__all__ = [
    "MMDResult",
    "Result",
    "StatisticResult",
    "TestResult",
    "array_eq",
    "call_text",
    "certificate_value",
    "computed_with",
    "count",
    "count_text",
    "dict_field",
    "dumps",
    "finite",
    "jsonable",
    "more_permutations",
    "null_field",
    "optional_count",
    "optional_finite",
    "optional_float",
    "optional_floats",
    "seed_field",
    "spec_text",
    "text",
    "timings_field",
    "whole",
]


#: beyond this many permutations a decision suggests a larger level instead
MAX_SUGGESTED_PERMUTATIONS = 10**7


def more_permutations(level: float) -> str:
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


def finite(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
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


def _check_seed(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not _recorded_seed(value):
        raise ParameterError(f"{type(instance).__name__}.{attribute.name}: not a recorded seed: {value!r}.")


def _array_or_none(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64).reshape(-1)


def array_eq(a: Any, b: Any) -> bool:
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


def level(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    """attrs validator: a test's level α lies in (0, 1)."""
    if not 0 < value < 1:
        raise ParameterError(f"{type(instance).__name__}.{attribute.name} must lie in (0, 1); got {value!r}.")


def pvalue_range(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    """attrs validator: a p-value lies in (0, 1] (permutation p-values are never 0)."""
    if not 0 < value <= 1:
        raise MonkError(f"A p-value must lie in (0, 1]; got {value!r}.")


def seed_field() -> Any:
    """The recorded randomness of a result (see :func:`monk_framework.core.randomness.seed_of`)."""
    return attrs.field(default=None, validator=_check_seed)


def null_field() -> Any:
    """The null distribution of a test: a float array, or None when not kept."""
    return attrs.field(default=None, converter=_array_or_none, eq=attrs.cmp_using(eq=array_eq))


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


def optional_floats(value: Any) -> list[float] | None:
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
            cls._check_field(name, value, fields[name].converter)
        try:
            return cls(**given)
        except DataError:
            raise
        except (TypeError, ValueError, MonkError) as exc:
            raise DataError(f"The {cls.kind} result{_fault_of(exc)}") from None

    @classmethod
    def _check_field(cls, name: str, value: Any, converter: Any) -> None:
        """A field read back converts (its JSON type, then its value) to a finite number
        where one belongs, else a DataError naming the field and what belongs there."""
        if not callable(converter):
            return
        try:
            converted = converter(value)
        except (TypeError, ValueError, OverflowError, MonkError) as exc:
            wanted = _CONVERTED_KINDS.get(converter)
            if isinstance(exc, TypeError) and wanted:  # a JSON value of the wrong type
                raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)} ({_json_kind(type(value))}), where {wanted} belongs.") from None
            raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)}, which is not a valid value ({exc}).") from None
        if isinstance(converted, float) and not math.isfinite(converted):
            raise DataError(f"The {cls.kind} result's {name!r} holds {shown(value)}, not a finite number.")

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


def count_text(number: int, noun: str) -> str:
    """ "1 permutation", "100 permutations"."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def spec_text(name: str, params: Mapping[str, Any]) -> str:
    """``rbf(sigma=1.6305411928)``: a kernel or an estimator with every digit of its parameters, as its ``spec()``."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in params.items())})"


def call_text(name: str, params: Mapping[str, Any]) -> str:
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
        return call_text(self.kernel, self.kernel_params) + chosen

    def __str__(self) -> str:
        rows = [
            *self.summary_rows(),
            ("kernel", self._kernel_text()),
            ("estimator", call_text(self.estimator, self.estimator_params)),
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

    def estimator_record(self) -> tuple[dict[str, Any], dict[str, float]]:
        """(diagnostics, timings) as the estimator recorded them: what its
        :meth:`~monk_framework.core.estimators.Estimator.report_rows` reads."""
        return self.diagnostics, self.timings

    def report_table(self, diagnostic_rows: Sequence[tuple[str, str]] = ()) -> tuple[str, list[tuple[str, str]]]:
        """The title and rows of the table ``monkfw run`` prints, with the estimator's own
        ``diagnostic_rows`` (:meth:`~monk_framework.core.estimators.Estimator.report_rows`)
        after the estimate."""
        rows = [
            ("estimator", spec_text(self.estimator, self.estimator_params)),
            ("kernel", spec_text(self.kernel, self.kernel_params)),
            ("N, M", f"{self.n_x}, {self.n_y}"),
            ("MMD^2", f"{self.mmd2:.10g}"),
            ("MMD", f"{self.mmd:.10g}"),
            *diagnostic_rows,
            ("time", f"{self.timings['total_s']:.4f} s"),
        ]
        return f"{self.estimator} with {self.kernel}", rows


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
            ("p-value", f"{self.pvalue:.4g} ({count_text(self.n_permutations, 'relabelling')})"),
            ("decision", self.decision),
        ]

    def report_table(self) -> tuple[str, list[tuple[str, str]]]:
        """The title and the (label, text) rows of the table ``monkfw test`` prints: every
        number a reader checks, to a few digits (``--json`` has every digit); the decision
        follows the table. Each kind of test says what it shows."""
        raise NotImplementedError

    def _timed(self, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [*rows, ("alpha, B", f"{self.alpha:g}, {self.n_permutations}"), ("time", f"{self.timings['total_s']:.3f} s")]
