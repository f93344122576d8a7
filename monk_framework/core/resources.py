"""What a call lets the engine use: one :class:`Resources` value, handed down explicitly.

``max_memory`` (bytes, or text such as ``"2GB"``, ``"512MiB"``, ``"64MB"``) bounds what a
computation holds beyond its data: an estimate, an embedding, a permutation, split or
robust test, and ``monkfw run/test --max-memory``. Without it the budget is
:data:`DEFAULT_FRACTION` of the memory available when the work starts (the least of
the machine's free memory, the ``ulimit -v`` room and the cgroup's room).

Within the budget Gram matrices are stored; over it, every path that can works from
tiles of the Gram matrix computed on the fly (a Gram source's bands, the classical
statistics' kernel sums), with the same numbers to round-off.

The same call may name a remote backend (Dask) over whose workers the Gram reductions
of one job are spread. The entrance of the call (``estimate``, ``embed``, each test)
makes one :class:`Resources` from its ``max_memory`` and ``backend`` keywords and passes
it down as an argument: to an estimator's ``compute_estimate`` and
``compute_embedding``, in the pooled sample of a test (``pool.resources``), and from
there to every engine function that chooses between stored, tiled and spread. No
setting reaches the engine any other way: there is no global or context variable.
With the machine's memory probe (:func:`available_memory`) it is everything the engine
learns from the caller besides the mathematics it is asked for.
"""

from __future__ import annotations

import ctypes
import inspect
import math
import numbers
import os
import re
import sys
import warnings
from collections.abc import Callable
from decimal import Decimal
from time import monotonic
from typing import Any, cast

import attrs

from monk_framework.core.errors import MonkDeprecationWarning, ParameterError, ResourceError, mark_from_caller, shown

__all__ = [
    "DEFAULT_FRACTION",
    "STORE_SHARE",
    "ProgressCallback",
    "Resources",
    "available_memory",
    "check_backend",
    "check_fits",
    "check_memory",
    "check_progress",
    "counting",
    "format_bytes",
    "outside_stacklevel",
    "parse_memory",
    "progress_callback",
    "reuse_freed_memory",
]

#: the budget without ``max_memory``: this fraction of the available memory
DEFAULT_FRACTION = 0.5

#: the share of the available memory one stored matrix may take (check_memory), and the
#: most a budget the user gives can reach (Resources.of)
STORE_SHARE = 0.9

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "p": 10**15,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}


def parse_memory(value: Any) -> int:
    """Bytes from a count or a text such as ``"2GB"`` (10⁹), ``"2GiB"`` (2³⁰), ``"64MB"``."""
    if isinstance(value, bool):
        raise ParameterError(f"max_memory must be a number of bytes or a text like '2GB'; got {value!r}.")
    number: int | float
    if isinstance(value, numbers.Integral):
        number, unit = int(value), ""  # exact: a count of bytes past float64's range stays an int
    elif isinstance(value, (numbers.Real, Decimal)):
        try:
            number, unit = float(value), ""
        except OverflowError:  # a Fraction beyond float64
            number, unit = math.inf, ""
    elif isinstance(value, str):
        number, unit = _size_text(value)
    else:
        raise ParameterError(f"max_memory must be a number of bytes or a text like '2GB'; got {type(value).__name__}.")
    total = number * _UNITS[unit]
    if isinstance(total, float) and not math.isfinite(total):  # 1e400, nan: no number of bytes
        raise ParameterError(f"max_memory must be a finite number of bytes; got {shown(value)}.")
    nbytes = int(total)
    if not nbytes > 0:
        raise ParameterError(f"max_memory must be more than 0 bytes; got {shown(value)}.")
    return nbytes


def _size_text(value: str) -> tuple[float, str]:
    """(number, unit) of a size such as ``"2GB"`` or ``"512MiB"`` (the unit in lower case)."""
    match = re.fullmatch(r"\s*([+-]?)([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    if match is not None and match[3].lower() not in _UNITS:
        raise ParameterError(
            f"max_memory: unknown unit {match[3]!r} in {shown(value)}; the units are B, KB, MB, GB, TB, PB "
            "(powers of 1000) and KiB, MiB, GiB, TiB, PiB (powers of 1024)."
        )
    if match is None:
        raise ParameterError(f"max_memory: cannot read {shown(value)}; give bytes or a size such as '2GB', '512MiB', '64MB'.")
    if match[1] == "-":  # not "cannot read '-2GB'": it is read, and it is no budget
        raise ParameterError(f"max_memory must be more than 0 bytes; got {shown(value)}.")
    return float(match[2]), match[3].lower()


def _budget(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ParameterError(f"Resources.budget must be a positive number of bytes or None; got {value!r}.")
    return value


def check_backend(backend: Any) -> Any:
    """``backend`` if it is None or a backend object (``as_completed``, ``remote``); else a
    ParameterError: a name such as "dask" would otherwise run the work here, silently."""
    if backend is None or (hasattr(backend, "as_completed") and hasattr(backend, "remote")):
        return backend
    example = repr(backend) if isinstance(backend, str) and backend in ("dask", "local") else "'dask'"
    raise ParameterError(
        f"backend must be a backend object, e.g. monk_framework.engine.backends.get_backend({example}); got {type(backend).__name__} {shown(backend)}."
    )


def _spread(backend: Any) -> Any:
    # only a remote backend spreads a job; one in this process leaves the work here
    return backend if backend is not None and getattr(backend, "remote", False) else None


def check_progress(progress: Any, arguments: str = "(done, total)") -> None:
    """Refuse a ``progress=`` that is neither None nor callable, before any work starts
    (else it would fail at its first call, deep inside the work)."""
    if progress is not None and not callable(progress):
        raise ParameterError(f"progress must be None or a callable {arguments}; got {type(progress).__name__}.")
    if progress is not None:
        count = arguments.count(",") + 1
        try:
            inspect.signature(progress).bind(*range(count))
        except TypeError:
            raise ParameterError(f"progress must accept {count} arguments {arguments}; {progress!r} does not.") from None
        except ValueError:
            pass  # a builtin without a signature: its first call will tell


#: what every ``progress=`` callback of the library is called with: how much of the work is
#: done, its total, and what the work is ("permutations", "kernel values", ...)
ProgressCallback = Callable[[float, float, str], None]


def progress_callback(progress: Any) -> ProgressCallback | None:
    """A caller's ``progress=`` as the one signature every entry point calls,
    ``progress(done, total, what)``; None stays None.

    A callable that takes only ``(done, total)`` (the tests' signature before 0.2) still
    works for one release: it is wrapped, with a DeprecationWarning naming the new
    signature. Anything else is refused before any work starts."""
    if progress is None:
        return None
    if not callable(progress):
        raise ParameterError(f"progress must be None or a callable (done, total, what); got {type(progress).__name__}.")
    try:
        signature = inspect.signature(progress)
    except (TypeError, ValueError):
        return cast(ProgressCallback | None, progress)  # a builtin without a signature: its first call will tell
    if _accepts(signature, 3):
        return cast(ProgressCallback | None, progress)
    if _accepts(signature, 2):
        warnings.warn(
            "A progress callback with two arguments (done, total) is deprecated; every entry point calls "
            "progress(done, total, what) (what: the work being counted). Add a third argument.",
            MonkDeprecationWarning,
            stacklevel=outside_stacklevel(),
        )
        two = progress
        return lambda done, total, what: two(done, total)
    raise ParameterError(f"progress must accept 3 arguments (done, total, what); {progress!r} does not.")


def outside_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised here that points at the first caller outside
    this package (the user's line, so Python's default filters show a DeprecationWarning
    there), however deep inside the package the warning is raised."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    here = inspect.currentframe()
    frame, level = (here.f_back if here is not None else None), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _accepts(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def counting(progress: ProgressCallback | None, what: str, offset: float = 0.0, total: float | None = None) -> Callable[[float, float], None] | None:
    """The engine's two-argument callback ``tick(done, total)`` that reports to ``progress``
    as ``what``: done shifted by ``offset``, against ``total`` when given (a stage of a
    larger count). None without a progress callback."""
    if progress is None:
        return None
    return lambda done, of: progress(offset + done, of if total is None else total, what)


@attrs.frozen(kw_only=True)
class Resources:
    """What one call lets the engine use.

    ``budget``: the bytes the computation may hold beyond its data (None: unknown, no
    limit), read where a path chooses a stored or a tiled Gram matrix. ``spread``: the
    remote backend over whose workers the Gram reductions of this one job run, or None
    (here). Make it with :meth:`of` from a call's keywords; ``Resources(budget=...)``
    states a budget directly (tests, benchmarks).
    """

    budget: int | None = attrs.field(default=None, converter=_budget)
    spread: Any = attrs.field(default=None, converter=_spread, eq=False)
    #: told ``(done, total, what)`` as long work advances: the bands of a tiled Gram
    #: reduction, a MONK estimator's iterations, BCD-Fast's blocks (None: nobody listens)
    progress: Callable[[float, float, str], None] | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def of(cls, max_memory: Any = None, backend: Any = None, progress: Any = None) -> Resources:
        """The resources of a call: ``max_memory`` parsed (:func:`parse_memory`) and cut
        to :data:`STORE_SHARE` of the memory available now, or, when None,
        :data:`DEFAULT_FRACTION` of it; ``backend`` kept if
        it is remote (Dask), dropped if it runs in this process; ``progress`` a callback
        ``(done, total, what)`` for long work."""
        avail = available_memory()
        if max_memory is not None:
            budget: int | None = parse_memory(max_memory)
            if avail is not None and budget is not None:
                # a budget beyond the machine ('1TB' on 16 GB) would choose stored Gram
                # matrices that check_memory then refuses: cut it to what a store may take,
                # so the work goes matrix-free instead of failing
                budget = min(budget, max(1, int(STORE_SHARE * avail)))
        else:
            budget = None if avail is None else max(1, int(DEFAULT_FRACTION * avail))
        check_backend(backend)
        check_progress(progress, "(done, total, what)")
        return cls(budget=budget, spread=backend, progress=progress)

    def report(self, done: float, total: float, what: str) -> None:
        """Tell the caller's ``progress`` how far ``what`` has come (nothing without one).
        What the callback raises (a way to stop the work) reaches the caller as it is,
        never as a failure of the plugin whose code called this."""
        if self.progress is not None:
            try:
                self.progress(done, total, what)
            except BaseException as exc:
                mark_from_caller(exc)
                raise

    def fits(self, nbytes: float) -> bool:
        """Whether ``nbytes`` fit in the budget (always, when it is unknown)."""
        return self.budget is None or nbytes <= self.budget

    def here(self) -> Resources:
        """The same budget, with the work kept in this process."""
        return attrs.evolve(self, spread=None)

    def silent(self) -> Resources:
        """The same budget and place, telling no one: what travels to workers or is kept
        with data (a callback may hold a display that cannot be pickled)."""
        return attrs.evolve(self, progress=None)


#: glibc's mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: what :func:`reuse_freed_memory` sets: the Dask workers' values (backends.py)
REUSE_TRIM_THRESHOLD = 1 << 30
REUSE_MMAP_THRESHOLD = 1 << 27


def reuse_freed_memory() -> bool:
    """Keep freed large arrays in this process for the next allocation (glibc only).

    By default glibc gives an array above a few hundred kB back to the operating system
    when it is freed, and the next Gram matrix or indicator block of the same size is
    faulted in again page by page: a u-stat test at N = M = 1000, B = 1000 spent about
    10 ms of its 124 on that (docs/performance.md). This raises glibc's mmap threshold to
    128 MB and its trim threshold to 1 GB, so freed memory up to that much stays in the
    process and is reused. The price: the process's resident memory does not shrink
    after a large computation. ``monkfw`` calls it at start; a library user may call it
    once. Returns whether it applied (False where the C library is not glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, REUSE_MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, REUSE_TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


#: a reading of the memory probe serves the calls of the next this many seconds: the
#: probe reads three files (about 80 µs), which a test on a few dozen points asked for
#: three times in its 1.5 ms; memory left 20 ms ago is as good a guide for a refusal
MEMORY_READING_SECONDS = 0.02

_LAST_READING: list[tuple[float, int | None]] = []  # [(monotonic(), bytes)]


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, if known: the least of the
    machine's available memory (Linux MemAvailable), the room left under this
    process's address-space limit (``ulimit -v``) and under its cgroup's memory limit
    (containers), so that a refusal happens before the allocation fails. Read at most
    once every :data:`MEMORY_READING_SECONDS`."""
    now = monotonic()
    last = _LAST_READING[0] if _LAST_READING else None
    if last is not None and 0.0 <= now - last[0] < MEMORY_READING_SECONDS:
        return last[1]
    limits = [v for v in (_mem_available(), _rlimit_room(), _cgroup_room()) if v is not None]
    reading = min(limits) if limits else None
    _LAST_READING[:] = [(now, reading)]
    return reading


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _rlimit_room() -> int | None:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status", encoding="ascii") as handle:
            used = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
        return max(soft - used, 0)
    except (ImportError, OSError, ValueError, StopIteration):
        return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            text = handle.read().strip()
        if text == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            current = int(handle.read().strip())
        return max(int(text) - current, 0)
    except (OSError, ValueError):
        return None


def check_fits(need: float, message: Callable[[str, str, int], str], *, share: float = 0.5) -> None:
    """Refuse, before allocating it, ``need`` bytes beyond ``share`` of the memory available
    now (nothing when that is unknown): a :class:`ResourceError` whose text is
    ``message(need, allowed, available_bytes)``: the size needed and the share allowed
    (with the memory free now) formatted, and the bytes free, saying what
    asked for them and what to change. Every check of a number the user typed against
    the machine's memory goes through here."""
    avail = available_memory()
    if avail is not None and need > share * avail:
        # the share, not all that is free, is what the work may take: a need between the two
        # would otherwise read "needs 22 GiB, but only 23 GiB are available"
        part = "half" if share == 0.5 else f"{share:.0%}"
        allowed = f"{format_bytes(share * avail)} ({part} of the {format_bytes(avail)} free)"
        raise ResourceError(message(format_bytes(need), allowed, avail))


def check_memory(n: int, m: int, *, what: str = "Gram matrix") -> None:
    """Raise :class:`ResourceError` before allocating an n × m float64 matrix that cannot fit."""
    check_fits(
        8 * n * m,
        lambda need, avail, _: (
            f"A {n} x {m} float64 {what} needs {need} but only {avail} of memory are available; use fewer points or a matrix-free estimator."
        ),
        share=STORE_SHARE,
    )


def format_bytes(nbytes: float) -> str:
    """A byte count for messages: "2.50 PiB" and "1.25 TiB" from 1 TiB on, "7.45 GiB",
    "12.0 MiB" below 128 MiB, "3.2 KiB" below 1 MiB and "480 bytes" below 1 KiB (so that no
    size reads "0.0 MiB" or "274658203.12 GiB"). A count from 1000 EiB on (an int a
    user typed, 10**400) is given by its order of magnitude."""
    if isinstance(nbytes, float) and not math.isfinite(nbytes):
        return "more bytes than float64 counts"
    if nbytes >= 1000 * 2**60:  # not "2,361,183,241,434,822,606,848.00 EiB"
        # math.log10 of the int itself: float() of 10**400 overflows, str() of 10**5000 is refused
        return f"10^{int(math.log10(nbytes))} bytes"
    for unit, power in (("EiB", 60), ("PiB", 50), ("TiB", 40)):
        if nbytes >= 2**power:  # not "274658203.12 GiB"
            return f"{nbytes / 2**power:,.2f} {unit}"
    if nbytes >= 2**27:
        return f"{nbytes / 2**30:.2f} GiB"
    if nbytes >= 2**20:
        return f"{nbytes / 2**20:.1f} MiB"
    return f"{nbytes / 2**10:.1f} KiB" if nbytes >= 2**10 else f"{int(nbytes):,} bytes"
