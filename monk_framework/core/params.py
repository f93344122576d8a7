"""Parameters of kernels, estimators and data sets.

Every configurable object of the library is an immutable attrs class whose fields
are declared with :func:`parameter`. The validator factories here write messages in
scikit-learn's wording ("The 'sigma' parameter of RBFKernel must be a float > 0.
Got -1.0 instead.") so that an invalid kernel or estimator cannot be constructed and
the user learns what is allowed. :class:`Configurable` gives every such class the
same introspection (:meth:`~Configurable.parameters`) and the one named constructor
through which outside data (CLI strings, JSON) enters (:meth:`~Configurable.from_params`).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar, Self

import attrs
import numpy as np

from monk_framework.core.errors import ParameterError, UnknownNameError, lookalike_hint, shown

__all__ = [
    "Check",
    "Configurable",
    "check_choice",
    "check_flag",
    "finite_real",
    "first_repeat",
    "ParameterInfo",
    "boolean",
    "integer",
    "one_of",
    "parameter",
    "parse_spec",
    "parse_value",
    "spec_label",
    "real",
    "real_or",
    "not_implemented",
    "integer_or",
    "LARGEST_INT",
]


@attrs.frozen
class Check:
    """An attrs validator that knows how to describe what it accepts."""

    description: str
    test: Callable[[Any], bool]
    #: what the refusal of a value says beyond the description ("" for nothing)
    hint: Callable[[Any], str] | None = None

    def __call__(self, instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        ok = False
        try:
            ok = bool(self.test(value))
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float64
            ok = False
        if not ok:
            raise ParameterError(
                f"The {attribute.name!r} parameter of {type(instance).__name__} must be "
                f"{self.description}. Got {shown(value)} instead.{_why_not(value)}"
                f"{self.hint(value) if self.hint else ''}"
            )


def first_repeat(items: Sequence[Any]) -> tuple[int, int] | None:
    """(i, j), i < j, the first two equal items (plugin specs, say), or None when all
    differ: a kernel or an estimator listed twice, under any spelling."""
    seen: dict[Any, int] = {}
    for j, item in enumerate(items):
        if item in seen:
            return seen[item], j
        seen[item] = j
    return None


def finite_real(value: Any) -> float | None:
    """A finite real number as a float, else None: Python's and numpy's ints and floats,
    and the exact numbers a program may hold (``Fraction``, ``Decimal``, which is no
    ``numbers.Real``); never a bool, text, an array, or an int beyond float64."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, Decimal)):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _is_real(value: Any) -> bool:
    return finite_real(value) is not None


def _bounds(gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    lo = f"({gt:g}" if gt is not None else (f"[{ge:g}" if ge is not None else None)
    hi = f"{lt:g})" if lt is not None else (f"{le:g}]" if le is not None else None)
    if lo and hi:
        return f" in {lo}, {hi}"
    if lo:
        return f" {'>' if gt is not None else '>='} {lo[1:]}"
    if hi:
        return f" {'<' if lt is not None else '<='} {hi[:-1]}"
    return ""


def _in_bounds(x: float, gt: float | None, ge: float | None, lt: float | None, le: float | None) -> bool:
    return (gt is None or x > gt) and (ge is None or x >= ge) and (lt is None or x < lt) and (le is None or x <= le)


#: the largest int a parameter may hold: numpy's (int64), which holds every count of
#: points, blocks, iterations or features; past it a count is no size numpy can make
LARGEST_INT = 2**63 - 1


def _why_not(value: Any) -> str:
    """What a refused value's own text does not say: inf and nan are floats to Python
    ("must be a float. Got inf" would be false), and a number typed with a character
    that only looks like part of one."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value):
        return " A parameter's number must be finite."
    return lookalike_hint(value) if isinstance(value, str) else ""


def real(
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Check:
    """A finite real number within the given bounds ("a float > 0")."""
    return Check(
        f"a float{_bounds(gt, ge, lt, le)}",
        lambda v: _is_real(v) and _in_bounds(float(v), gt, ge, lt, le),
    )


def _is_int(v: Any, ge: int | None, le: int | None) -> bool:
    """An int (not a bool) in [ge, le] and at most :data:`LARGEST_INT` (a count of 10^400
    would reach code that converts it to a float or an array size)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) <= LARGEST_INT and _in_bounds(int(v), None, ge, None, le)


def _past_largest_int(value: Any) -> str:
    """What an int parameter's refusal adds: the largest int, or how to write a whole
    number typed as a float (``n=1e6``, which the command line reads as 1000000.0)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) > LARGEST_INT:
        return f" An int parameter is at most 2^63 - 1 = {LARGEST_INT:,}, numpy's largest integer."
    if isinstance(value, float) and value.is_integer() and abs(value) <= LARGEST_INT:
        return f" Write the whole number without a decimal point or exponent: {int(value)}."
    return ""


def integer(*, ge: int | None = None, le: int | None = None) -> Check:
    """An integer (not a bool) within the given bounds ("an int >= 1"), and at most
    :data:`LARGEST_INT`."""
    return Check(f"an int{_bounds(None, ge, None, le)}", lambda v: _is_int(v, ge, le), _past_largest_int)


def boolean() -> Check:
    """True or False."""
    return Check("a bool (true or false)", lambda v: isinstance(v, bool))


def one_of(*choices: Any) -> Check:
    """One of a fixed set of values. A bool matches only a bool: Python's ``1 == True``
    would let ``trace=1`` through a check of ``(True, False)`` as a different value."""
    listing = ", ".join(repr(c) for c in choices)
    return Check(
        f"one of {listing}",
        lambda v: any(v == c and isinstance(v, (bool, np.bool_)) == isinstance(c, bool) for c in choices),
    )


def real_or(
    *choices: str,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Check:
    """A bounded real number or one of a few named rules ("a float > 0 or 'median'")."""
    listing = " or ".join(repr(c) for c in choices)
    return Check(
        f"a float{_bounds(gt, ge, lt, le)} or {listing}",
        lambda v: (isinstance(v, str) and v in choices) or (_is_real(v) and _in_bounds(float(v), gt, ge, lt, le)),
    )


def integer_or(*choices: str, ge: int | None = None, le: int | None = None) -> Check:
    """A bounded integer or one of a few named rules ("an int >= 1 or 'auto'")."""
    listing = " or ".join(repr(c) for c in choices)
    return Check(
        f"an int{_bounds(None, ge, None, le)} or {listing}",
        lambda v: (isinstance(v, str) and v in choices) or _is_int(v, ge, le),
        _past_largest_int,
    )


def check_flag(value: Any, name: str) -> bool:
    """A yes-or-no argument (``return_null``, ``report_estimate``) as a bool; else a
    ParameterError naming it. Truthiness would read ``"false"`` as yes and fail on an
    array ("the truth value of an array ... is ambiguous")."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False; got {shown(value)}.")
    return bool(value)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of a few named options (``method``, ``relabel``); else a ParameterError listing
    them. The type comes first: an array compared with a string fails in ``in``."""
    if not (isinstance(value, str) and value in choices):
        raise ParameterError(f"{name} must be one of {', '.join(map(repr, choices))}; got {shown(value)}.")
    return value


def _to_float(value: Any) -> Any:
    """Store real numbers as Python floats; leave anything else for the validator."""
    if isinstance(value, (numbers.Real, Decimal)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int beyond float64: left for the validator to refuse by name
            return value
    return value


def _to_int(value: Any) -> Any:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def parameter(
    default: Any,
    *,
    doc: str,
    check: Check | None = None,
    kind: str = "any",
) -> Any:
    """Declare a documented, validated parameter field of an attrs class.

    ``kind`` ("float", "int", "any") picks a converter so that numpy scalars and ints
    given for a float parameter are stored as plain Python numbers (JSON-friendly).
    """
    converter = {"float": _to_float, "int": _to_int}.get(kind)
    return attrs.field(
        default=default,
        validator=check,
        converter=converter,
        metadata={"doc": doc, "allowed": check.description if check else "any value"},
    )


@attrs.frozen
class ParameterInfo:
    """What a parameter is: its name, default, meaning and allowed values."""

    name: str
    default: Any
    doc: str
    allowed: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class Configurable:
    """Mixin of every plugin class: a name, a summary, a formula and parameters.

    Subclasses are ``@attrs.frozen(kw_only=True)`` classes whose fields are declared
    with :func:`parameter`; each must have a default so that ``cls()`` is valid.
    """

    #: kebab-case name used by the registry, the CLI and JSON results.
    name: ClassVar[str] = ""
    #: one line saying what the plugin is.
    summary: ClassVar[str] = ""
    #: the defining formula, in plain text (shown by ``monkfw describe``).
    formula: ClassVar[str] = ""
    #: what kind of plugin this is: "kernel" or "estimator" (set by the base classes).
    plugin_type: ClassVar[str] = ""
    #: other names the registry accepts for this plugin (e.g. "gaussian" for "rbf").
    aliases: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parameters(cls) -> tuple[ParameterInfo, ...]:
        """The parameters of this class, in declaration order."""
        return tuple(
            ParameterInfo(
                name=f.name,
                default=f.default,
                doc=f.metadata.get("doc", ""),
                allowed=f.metadata.get("allowed", "any value"),
            )
            for f in attrs.fields(cls)  # type: ignore[arg-type]
            if f.init and not f.name.startswith("_")
        )

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Self:
        """Build from outside data (a JSON dict, parsed CLI ``key=value`` pairs).

        Unknown parameter names raise :class:`~monk_framework.core.errors.UnknownNameError`
        listing the valid ones; values are validated by the class.
        """
        given = {**(params or {}), **kwargs}
        known = [p.name for p in cls.parameters()]
        for key in given:
            if key not in known:
                raise UnknownNameError(f"parameter of {cls.plugin_type} {cls.name!r}:", key, known)
        return cls(**given)

    def params(self) -> dict[str, Any]:
        """The parameter values of this object, JSON-friendly."""
        return {p.name: getattr(self, p.name) for p in self.parameters()}

    def spec(self) -> str:
        """``name(key=value, ...)``: how this object is shown in tables and logs."""
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({inner})"


def not_implemented(obj: Any, method: str) -> NotImplementedError:
    """The error a plugin class gets for a core method it must implement and did not."""
    return NotImplementedError(f"{type(obj).__qualname__} must implement {method}().")


def parse_value(text: str, name: str | None = None) -> Any:
    """Turn a command-line value into a Python value.

    ``true``/``false`` become bools, integers ints, other numbers floats; anything
    else stays a string (validators then say whether it is allowed). ``name``: what the
    value is given for (``--data-param n``), named in an error.
    """
    where = f"{name}: " if name else ""
    lowered = text.strip().lower()
    if lowered in {"true", "yes", "on"}:
        return True
    if lowered in {"false", "no", "off"}:
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text.strip()
    # a literal beyond float64 would reach the validators as 0 or inf, which the user never typed
    mantissa = lowered.partition("e")[0]
    if value == 0.0 and any(c in "123456789" for c in mantissa):
        raise ParameterError(f"{where}{shown(text.strip())} is below float64's smallest positive number (about 4.9e-324): it would be read as 0.")
    if math.isinf(value) and "inf" not in lowered:
        sign = "-" if value < 0 else ""
        raise ParameterError(f"{where}{shown(text.strip())} is beyond float64's largest number (about 1.8e308): it would be read as {sign}infinity.")
    return value


#: the form :meth:`Configurable.spec` shows in tables and logs, ``rbf(sigma=0.68)``
_SHOWN_SPEC = re.compile(r"^\s*([\w.-]+)\s*\((.*)\)\s*$", re.DOTALL)


def parse_spec(text: str) -> tuple[str, dict[str, Any]]:
    """ "name" or "name:key=value,key=value" -> (name, params), e.g. "monk-bcd:n_blocks=11".

    The form results show, ``rbf(sigma=0.68)`` or ``u-stat(root='clip')``, is read too:
    a user copies it from a table into the next command."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterError(f"A plugin spec must be a non-empty string like 'monk-bcd:n_blocks=11'; got {shown(text)}.")
    shown_form = _SHOWN_SPEC.match(text) if ":" not in text.partition("(")[0] else None
    if not shown_form and ("(" in text or ")" in text) and ":" not in text.partition("(")[0]:
        # half of the shown form (a parenthesis lost in copying): not a name to look up
        raise ParameterError(
            f"Cannot read spec {shown(text)}: write it as name(key=value, ...), with both parentheses, or as "
            "name:key=value,... (e.g. rbf(sigma=2) or rbf:sigma=2)."
        )
    if shown_form:
        name, rest, quoted = shown_form.group(1), shown_form.group(2), True
    else:
        name, _, rest = text.strip().partition(":")
        quoted = False
    params: dict[str, Any] = {}
    if rest.strip():
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ParameterError(f"Bad parameter {shown(item)} in spec {shown(text)}: expected key=value.")
            if key.strip() in params:
                raise ParameterError(f"Parameter {shown(key.strip())} is given twice in spec {shown(text)}; give it once.")
            value = value.strip()
            if quoted and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                params[key.strip()] = value[1:-1]  # a string as repr shows it: 'median'
            else:
                params[key.strip()] = parse_value(value, f"{key.strip()} in spec {shown(text)}")
    return name.strip(), params


def spec_label(name: str, params: Mapping[str, Any]) -> str:
    """The canonical text of a spec (its label in results files and figures)."""
    if not params:
        return name
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items())
