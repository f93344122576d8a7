"""The exceptions of monk_framework.

Every error the library raises on purpose derives from :class:`MonkError`, so a
script (or the CLI) can catch one class and show the message: each message names
what is wrong (a parameter, a file and line, a sample) and, where it can, what is
allowed instead.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import re
import signal
import sys
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "MonkDeprecationWarning",
    "shown",
    "shown_count",
    "MonkError",
    "ParameterError",
    "UnknownNameError",
    "DataError",
    "DataFileError",
    "PluginError",
    "PluginFailure",
    "DuplicateNameError",
    "KernelOverflowError",
    "ResourceError",
    "PrecisionWarning",
    "ReadWarning",
    "did_you_mean",
    "from_signal_handler",
    "lookalike_hint",
    "mark_from_caller",
    "plugin_code",
]


class MonkError(Exception):
    """Base class of every error raised on purpose by monk_framework."""


class ParameterError(MonkError, ValueError):
    """A kernel, estimator or data set parameter is out of its allowed range."""


class UnknownNameError(MonkError, LookupError):
    """A kernel, estimator, data set or parameter name is not known.

    ``str(err)`` lists the known names and suggests the closest one.
    """

    def __init__(self, what: str, name: str, known: Iterable[str], *, note: str = "", is_a: str | None = None) -> None:
        """``is_a``: the role ``name`` has instead (a "kernel" named where an estimator goes)."""
        self.what = what
        self.name = name
        self.known = sorted(known)
        if is_a is not None:
            # a name of another role (a kernel where the estimator goes): no look-alike guess
            listing = ", ".join(self.known) if self.known else "(none)"
            super().__init__(f"{shown(name)} is {_article(is_a)}, not {_article(what)}. Known {what}s: {listing}.{note}")
        else:
            super().__init__(f"Unknown {what} {shown(name)}.{did_you_mean(name, self.known)}{note}")

    def __str__(self) -> str:
        # LookupError would quote the message like a KeyError does; keep it plain.
        return str(self.args[0])


class DataError(MonkError, ValueError):
    """Input data are unusable: NaN/inf, empty, wrong shape, too few points, ..."""


class DataFileError(DataError):
    """A data file cannot be read; names the file and, where known, line and column."""

    def __init__(self, path: str, message: str, *, line: int | None = None, column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        where = path
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column}"
        super().__init__(f"{where}: {message}")


class PluginError(MonkError):
    """A plugin cannot be registered (bad hook, bad class, import failure)."""


class DuplicateNameError(PluginError):
    """Two providers register a kernel or estimator under the same name."""


class PluginFailure(MonkError):
    """A kernel's or an estimator's own code failed while computing (it raised, or tried
    to end the process): names the plugin, the method and the original error."""


#: set on an exception raised by the caller's own callback (``progress``) while plugin code
#: ran: it is the caller's, and passes through :func:`plugin_code` as it is
_FROM_CALLER = "_monk_from_caller"


def mark_from_caller(exc: BaseException) -> None:
    """Mark ``exc``, raised by the caller's own callback (e.g. a ``progress`` that stops
    the work on purpose), so that plugin code it passes through is not blamed for it."""
    try:
        setattr(exc, _FROM_CALLER, True)
    except AttributeError:  # an exception type without attributes: it is wrapped, as before
        pass


def from_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a Python signal handler the program installed (the
    ``signal.alarm`` timeout pattern): it interrupts whatever code runs, and is the
    program's, not the plugin's it happened to interrupt."""
    codes = set()
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except (OSError, ValueError):
            continue
        code = getattr(handler, "__code__", None) or getattr(getattr(handler, "__func__", None), "__code__", None)
        if code is not None:
            codes.add(code)
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code in codes:
            return True
        frame = frame.tb_next
    return False


@contextlib.contextmanager
def plugin_code(owner: Any, method: str) -> Iterator[None]:
    """Run a plugin's method inside: an error it raises on purpose (a :class:`MonkError`)
    passes as it is, and so do running out of memory and Ctrl-C; anything else, and
    ``sys.exit``, becomes a :class:`PluginFailure` naming the plugin (``owner``'s
    ``plugin_label()``, e.g. "kernel 'rq' (my_pkg.RQKernel)", made only then: this runs
    around every Gram tile) and ``method``, so that a user sees whose code failed, and a
    plugin cannot end the program behind the framework's back."""
    try:
        yield
    except (MonkError, MemoryError, RecursionError, NotImplementedError):
        # on purpose, out of memory, or a core method the plugin class did not implement
        # (that message names the class already)
        raise
    except SystemExit as exc:
        if getattr(exc, _FROM_CALLER, False):
            raise
        raise PluginFailure(
            f"{owner.plugin_label()}: {method} tried to end the process (sys.exit({exc.code!r})); a plugin must raise an exception instead."
        ) from None
    except Exception as exc:
        if getattr(exc, _FROM_CALLER, False) or from_signal_handler(exc):
            raise  # the caller's callback (or signal handler: a timeout) raised it, not the plugin
        hint = ""
        if isinstance(exc, ValueError) and "read-only" in str(exc):
            hint = " (its inputs are read-only views of the caller's data: copy before writing into them)"
        raise PluginFailure(f"{owner.plugin_label()}: {method} failed: {type(exc).__name__}: {exc}{hint}") from exc


class KernelOverflowError(MonkError, ArithmeticError):
    """A kernel value does not fit in float64 (e.g. the exponential kernel)."""


class KernelContractError(MonkError, ValueError):
    """A kernel's values break the kernel contract: a Gram block or diagonal of the wrong
    shape, an asymmetric Gram matrix, or values no positive semi-definite kernel can give
    (a negative k(x, x), a negative squared norm ‖Σ c_i φ(z_i)‖²). Names the plugin."""


class ResourceError(MonkError, MemoryError):
    """A computation would need more memory than the machine has available."""


class MonkDeprecationWarning(DeprecationWarning):
    """A call form or a name that still works for one release, with the new spelling in
    the message (a DeprecationWarning, so Python's filters treat it as one)."""


class PrecisionWarning(UserWarning):
    """A result is computed, but float64 round-off leaves it fewer significant digits
    than it seems to have (e.g. an origin-dependent kernel on data far from the origin);
    the message says how much and what to do."""


class DataWarning(UserWarning):
    """The data are valid and the result is computed, but the kernel cannot see part of
    them as the data suggest (strings shorter than the subsequence kernel's n have no
    features at all); the message says how many and what to change."""


class ReadWarning(UserWarning):
    """A data file was read by a guess that could, rarely, be wrong (a first row read as
    pandas' default column names); the message says which guess, and how to write the
    file so that no guess is needed."""


def _article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'? Known: a, b, c."`` for an error message."""
    known = sorted(known)
    # the case first ("RBF", "U-STAT"): difflib weighs every changed letter
    same_case = [k for k in known if k.lower() == str(name).strip().lower()]
    close = same_case or difflib.get_close_matches(str(name).lower(), known, n=3, cutoff=0.6)
    if len(close) > 1:
        # every name as close as the closest ('rbff': rbf or rff), not whichever sorts first
        ratio = [difflib.SequenceMatcher(None, str(name).lower(), c).ratio() for c in close]
        close = [c for c, r in zip(close, ratio) if r == max(ratio)]
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    head, _, rest = str(name).strip().partition(" ")
    if head in known and "=" in rest:
        # "rbf sigma=1": a spec written with a space, where the name ends at ':'
        hint = f" Did you mean {head + ':' + ','.join(rest.split())!r}? A spec is name:key=value,key=value."
    listing = ", ".join(known) if known else "(none)"
    return f"{hint} Known: {listing}."


def optional_import(module: str, extra: str, purpose: str) -> Any:
    """Import an optional dependency, or say which extra to install for ``purpose``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MonkError(f"{purpose} need {module}, which is not installed: pip install 'monk-framework[{extra}]'.") from exc


def shown(value: Any, most: int = 80) -> str:
    """``repr(value)`` for a message, or its start and length when it is longer than
    ``most`` characters (a list of a million numbers, 10**400 and its 401 digits)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > sys.float_info.max:
        return f"an int of about 10^{int(math.log10(abs(int(value))))} (beyond float64)"
    text = repr(value)
    if len(text) <= most:
        return text
    return f"{text[: most // 2]}... ({len(text):,} characters)"


def shown_count(count: int) -> str:
    """A count a user typed, for a message: with thousands separators ("1,000,000"), or as
    :func:`shown` gives it past 10^19 (not 10**400's 534 characters of digits and commas)."""
    return f"{count:,}" if abs(count) < 10**19 else shown(count)


#: characters that look like part of a number but are not one Python reads: what word
#: processors, spreadsheets and typesetting put in place of '-', ' ' and '.'
LOOKALIKES = {
    "\u2212": "'\u2212' (U+2212, the typographic minus sign)",
    "\u2013": "'\u2013' (U+2013, an en dash)",
    "\u2014": "'\u2014' (U+2014, an em dash)",
    "\u2010": "'\u2010' (U+2010, a hyphen)",
    "\u00a0": "a no-break space (U+00A0)",
    "\u202f": "a narrow no-break space (U+202F)",
    "\u2009": "a thin space (U+2009)",
    "\u00b7": "'\u00b7' (U+00B7, a middle dot)",
}
_FORTRAN_EXPONENT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[dD][+-]?\d+$")


def lookalike_hint(cell: str) -> str:
    """Why text that looks like a number is not one (a file's cell, a parameter's value):
    a character that only resembles '-', ' ' or '.', or Fortran's D exponent; "" when
    neither. The hint starts with a space, to follow a sentence."""
    found = [text for char, text in LOOKALIKES.items() if char in cell]
    if found:
        return f" It holds {', '.join(found)}, which only looks like part of a number: replace it (a minus sign with '-', a space-like character with nothing)."
    if _FORTRAN_EXPONENT.match(cell.strip()):
        return " Its exponent is written with 'D' (Fortran's double precision): write 'E' instead (1.5D3 is 1.5E3)."
    return ""
