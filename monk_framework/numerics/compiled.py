"""The compiled loops' machinery: the switch, the lazy compilation with numba, the fallback.

numpy runs each elementwise operation as its own pass over memory: adding the two
norm vectors to a matrix product, clipping at 0 and scaling is four passes over a tile,
which at the sizes of a matrix-free path cost more than the product of the distances
itself. Compiled loops make one pass (:mod:`~monk_framework.numerics.exp_loops`, the
kernel tiles and forms; :mod:`~monk_framework.numerics.product_loops`, the products with
many weight columns; a plugin's own, such as the string kernel's pair programme).

They are compiled by numba on first use and cached on disk (:class:`CompiledLoops`);
``nogil`` lets the threads of a matrix-free reduction run them side by side. Importing
this module does not import numba: the loops are plain functions until first needed.

**A plain twin for each.** Every public routine has a numpy reference of the same name
in :mod:`monk_framework.numerics.reference`, which runs instead when the compiled loops
are switched off (``MONK_COMPILED=0`` in the environment, or :func:`set_compiled` /
:func:`using_compiled` in Python), when numba cannot be imported, or when a loop fails
to compile (then with one :class:`CompiledLoopsWarning`). The tests compare both paths
on random inputs; where the compiled loop does the same operations in the same order the
bits are equal, elsewhere they agree to the round-off each docstring states ("bit for
bit" is a statement about one processor's arithmetic, not a contract across processors).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FunctionType
from typing import Any, TypeVar, cast

from monk_framework.core.errors import ParameterError, from_signal_handler

__all__ = [
    "COMPILED_VARIABLE",
    "CompiledLoops",
    "CompiledLoopsWarning",
    "NOT_RUN",
    "compiled_available",
    "compiled_enabled",
    "compiled_threads",
    "set_compiled",
    "using_compiled",
]


# -- the switch, the lazy compilation and the fallback --------------------------------------

#: the environment variable that switches the compiled loops off ("0", "false", "no", "off")
COMPILED_VARIABLE = "MONK_COMPILED"
#: the values of COMPILED_VARIABLE read as on (unset or empty is on) and as off
_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


class CompiledLoopsWarning(UserWarning):
    """The compiled loops cannot run here (numba is missing, or a loop failed to compile):
    the library computes with the plain numpy references instead, with the same numbers
    to round-off and more time. Issued once per process. Also issued, once, where the
    loops run but numba cannot cache them on disk (they compile again in each process)."""


_LOCK = threading.RLock()
#: the switch set from Python (None: follow the environment variable); numba once
#: imported (None: not tried yet, False: cannot run here); whether the warning was given;
#: whether numba found nowhere to write its disk cache
_STATE: dict[str, Any] = {"switch": None, "numba": None, "warned": False, "no_cache": False}
#: what :meth:`CompiledLoops.run` returns when the loops did not run
NOT_RUN: Any = object()
F = TypeVar("F", bound=Callable[..., Any])


def compiled_enabled() -> bool:
    """Whether the compiled loops are switched on: by :func:`set_compiled`, else by the
    environment variable ``MONK_COMPILED`` (0, false, no or off: off; unset, empty, 1,
    true, yes or on: on; anything else is refused by name)."""
    switch = _STATE["switch"]
    if switch is not None:
        return bool(switch)
    value = os.environ.get(COMPILED_VARIABLE, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    # a typo ('fasle', 'of') must not leave the loops on while the user believes them off
    raise ParameterError(
        f"{COMPILED_VARIABLE}={os.environ[COMPILED_VARIABLE]!r} is not a switch: give 0 (off) or 1 (on, the default); "
        "false/true, no/yes and off/on are read the same way."
    )


def compiled_available() -> bool:
    """Whether the compiled loops run here: switched on, and numba imported (this loads
    it; a loop that later fails to compile switches them off for the process)."""
    return compiled_enabled() and _numba() is not None


def compiled_threads() -> int:
    """The threads the compiled parallel loops run on: numba's, or 1 where the compiled
    loops do not run. Starting them loads numba's threading layer: one that is not
    installed or not known (``NUMBA_THREADING_LAYER=tbb``, a typo) switches the compiled
    loops off for the process, with one :class:`CompiledLoopsWarning`, and gives 1."""
    if not compiled_available():
        return 1
    try:
        return int(_STATE["numba"].get_num_threads())
    except ValueError as exc:
        _threads_failed(exc)
        return 1


def _threads_failed(exc: ValueError) -> None:
    first = (str(exc).strip().splitlines() or [""])[0].rstrip(".")  # numba adds lines of hints
    _fall_back(f"numba cannot start its threads ({first}; check NUMBA_THREADING_LAYER)")


def set_compiled(enabled: bool | None) -> None:
    """Switch the compiled loops on (True) or off (False) for this process; None follows
    ``MONK_COMPILED`` again. Off, every routine here runs its numpy reference
    (:mod:`monk_framework.numerics.reference`)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_compiled takes True, False or None; got {enabled!r}")
    _STATE["switch"] = enabled


@contextmanager
def using_compiled(enabled: bool) -> Iterator[None]:
    """Run the ``with`` block with the compiled loops switched on or off."""
    before = _STATE["switch"]
    set_compiled(enabled)
    try:
        yield
    finally:
        _STATE["switch"] = before


def _fall_back(reason: str) -> None:
    with _LOCK:
        _STATE["numba"] = False
        if not _STATE["warned"]:
            _STATE["warned"] = True
            warnings.warn(
                f"{reason}; monk_framework computes with its numpy references instead (the same numbers to "
                f"round-off, slower). Set {COMPILED_VARIABLE}=0 to choose them and silence this warning.",
                CompiledLoopsWarning,
                stacklevel=4,
            )


def _numba() -> Any:
    """The numba module, imported once; None (after one :class:`CompiledLoopsWarning`)
    where it cannot be imported or a loop failed to compile."""
    with _LOCK:
        if _STATE["numba"] is None:
            try:
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    import numba
                    import numba.extending
            except Exception as exc:  # ImportError, or an installation that fails on import
                if from_signal_handler(exc):
                    raise  # the program's own timeout, which happened to interrupt the import
                _fall_back(f"numba cannot be imported ({type(exc).__name__}: {exc})")
            else:
                _pass_on(said)
                if getattr(numba.config, "DISABLE_JIT", False):
                    # njit then returns the plain Python function: the loops would run
                    # interpreted, a thousand times slower, and cannot be specialised
                    _fall_back("numba's compiler is switched off (NUMBA_DISABLE_JIT=1)")
                else:
                    _STATE["numba"] = numba
        return _STATE["numba"] or None


def _pass_on(said: list[warnings.WarningMessage]) -> None:
    """What numba warned while it was imported, as one line each: a setting it could not
    read (``NUMBA_NUM_THREADS=abc``) comes with the text of a traceback, which a user
    should not see."""
    for record in said:
        first = str(record.message).strip().splitlines()[0]
        warnings.warn(CompiledLoopsWarning(f"numba: {first} (numba ignores it)"), stacklevel=4)


def _njit(numba: Any, function: Callable[..., Any], options: dict[str, Any]) -> Any:
    """``numba.njit(cache=True, **options)(function)``, or without the disk cache where numba
    finds nowhere to write it: a read-only installation (a container's site-packages)
    with no writable home or ``NUMBA_CACHE_DIR``, where numba refuses to compile at all
    ("cannot cache function ...: no locator available"). The loops then compile again in
    each process, about a second, and one :class:`CompiledLoopsWarning` says how to
    keep them."""
    if not _STATE["no_cache"]:
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError as exc:
            if "cannot cache" not in str(exc):
                raise
            _STATE["no_cache"] = True
            warnings.warn(
                "numba finds no writable directory for its cache of compiled loops (the installation is "
                "read-only and so is the home directory); they are compiled again in each process, about a "
                "second. Set NUMBA_CACHE_DIR to a writable directory to keep them.",
                CompiledLoopsWarning,
                stacklevel=5,
            )
    return numba.njit(cache=False, **options)(function)


class CompiledLoops:
    """The numba loops of one module: plain functions until first needed, then compiled
    (and cached on disk) together, behind one switch and one fallback.

    A module marks its loops with :meth:`loop` and names, with :meth:`bind`, what numba
    supplies inside them (``numba.literally``, ``numba.prange``, an intrinsic: the module
    defines a plain stand-in of each). ``run(call)`` calls ``call`` with the loops
    compiled and returns its result, or :data:`NOT_RUN` when the loops are switched off,
    numba cannot be imported or a loop fails to compile (then with one
    :class:`CompiledLoopsWarning` for the process); the caller then computes its
    reference. :meth:`plain` gives a loop as plain Python, calling the plain versions of
    the others: its own reference, where numpy has no better one. Plugins may use this
    for their own loops.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._options: dict[str, dict[str, Any]] = {}
        self._bindings: dict[str, Callable[[Any], Any]] = {}
        self._stand_ins: dict[str, Any] = {}
        self._compiled = False
        self._plain: dict[str, Any] | None = None

    def loop(self, **options: Any) -> Callable[[F], F]:
        """Mark a module-level function as a loop for ``numba.njit(cache=True, **options)``."""

        def mark(function: F) -> F:
            self._options[function.__name__] = options
            return function

        return mark

    def bind(self, name: str, make: Callable[[Any], Any]) -> None:
        """When the loops are compiled, the module's ``name`` becomes ``make(numba)``."""
        self._bindings[name] = make
        self._stand_ins[name] = self._namespace.get(name)

    def _compile(self) -> bool:
        numba = _numba()
        if numba is None:
            return False
        with _LOCK:
            if not self._compiled:
                self._plain_namespace()  # kept before the names are rebound
                # all rebound at once, so that a failure here leaves the plain functions whole
                compiled = {name: make(numba) for name, make in self._bindings.items()}
                compiled.update({name: _njit(numba, self._namespace[name], options) for name, options in self._options.items()})
                self._namespace.update(compiled)
                self._compiled = True
        return True

    def run(self, call: Callable[[], Any]) -> Any:
        """``call()`` on the compiled loops, or :data:`NOT_RUN`. Compiling happens before a
        loop writes anything, so a loop that fails to compile leaves nothing half done."""
        if not compiled_enabled() or not self._compile():
            return NOT_RUN
        numba = _STATE["numba"]
        try:
            return call()
        except (numba.core.errors.NumbaError, RuntimeError) as exc:  # LLVM's errors come as RuntimeError
            first = str(exc).splitlines()[0] if str(exc) else ""
            _fall_back(f"a compiled loop failed to compile ({type(exc).__name__}: {first})")
            return NOT_RUN
        except ValueError as exc:
            # a parallel loop's threads start at its first call, before it computes
            # anything: a threading layer that is not installed or not known
            # (NUMBA_THREADING_LAYER=tbb, a typo) fails there
            if "threading layer" not in str(exc):
                raise
            _threads_failed(exc)
            return NOT_RUN

    def plain(self, name: str) -> Callable[..., Any]:
        """The loop ``name`` as plain Python, calling the plain versions of the others."""
        return cast(Callable[..., Any], self._plain_namespace()[name])

    def _plain_namespace(self) -> dict[str, Any]:
        with _LOCK:
            if self._plain is None:
                plain = dict(self._namespace)
                plain.update(self._stand_ins)
                for name in self._options:
                    function = self._namespace[name]
                    plain[name] = FunctionType(function.__code__, plain, name, function.__defaults__, function.__closure__)
                self._plain = plain
        return self._plain
