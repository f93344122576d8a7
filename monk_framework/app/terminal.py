"""The command line's boundary with the terminal: streams, exit codes and one-line errors.

stdout carries data only (a plugin that prints goes to stderr); a failed write to either
stream is one line and an exit code, never a traceback; every error becomes one line on
stderr with the documented exit code (:class:`MonkGroup`): 0 success, 1 a library error,
2 a usage error, 130 interrupted; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import traceback
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import typer
from rich.console import Console
from typer.core import TyperGroup

from monk_framework.core.errors import DataWarning, MonkDeprecationWarning, MonkError, ParameterError, PrecisionWarning, ReadWarning, UnknownNameError
from monk_framework.core.registry import get_registry
from monk_framework.engine.backends import quiet_cluster_logs
from monk_framework.numerics.compiled import CompiledLoopsWarning


class OutputFailed(Exception):
    """Standard output cannot take what the command writes: its reader left (a broken
    pipe, ``monkfw ... | head``) or its device is full (``> /dev/full``)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class GuardedStdout:
    """sys.stdout as it is at each write (CliRunner swaps it), whose write errors become
    :class:`OutputFailed`: rich would turn a broken pipe into sys.exit(1), which reads
    as someone else's exit, and a full device into an internal error."""

    def write(self, text: str) -> int:
        try:
            return open_stream(sys.stdout, "standard output").write(text)
        except OSError as exc:
            raise OutputFailed(exc) from None

    def flush(self) -> None:
        try:
            open_stream(sys.stdout, "standard output").flush()
        except OSError as exc:
            raise OutputFailed(exc) from None

    def isatty(self) -> bool:
        return sys.stdout is not None and sys.stdout.isatty()

    def __getattr__(self, name: str) -> Any:  # fileno, encoding: the stream's own
        if sys.stdout is None:  # closed: as an object without them (rich asks with a default)
            raise AttributeError(name)
        return getattr(sys.stdout, name)


class TolerantStderr:
    """sys.stderr as it is at each write, whose write errors are dropped: notes,
    warnings and progress are not the result, and a full or closed stderr
    (``2>/dev/full``) must not end the work whose result goes to stdout or a file."""

    def write(self, text: str) -> int:
        with contextlib.suppress(OSError, ValueError):
            if sys.stderr is not None:
                return sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if sys.stderr is not None:
                sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr is not None and sys.stderr.isatty()

    def __getattr__(self, name: str) -> Any:  # fileno, encoding: the stream's own
        if sys.stderr is None:
            raise AttributeError(name)
        return getattr(sys.stderr, name)


def open_stream(stream: Any, name: str) -> Any:
    """``stream``, or OSError(EBADF) when the process was started with it closed
    (``>&-``: Python then sets it to None)."""
    if stream is None:
        import errno

        raise OSError(errno.EBADF, f"{name} is closed")
    return stream


#: exit code when the reader of stdout left: as a process killed by SIGPIPE (128 + 13)
BROKEN_PIPE_EXIT = 141


#: the narrowest output the tables are drawn for: a COLUMNS below it (COLUMNS=0 drew
#: nothing at all, COLUMNS=5 one letter a line) is not a width anyone reads
MIN_COLUMNS = 40


def width() -> int | None:
    """The width to draw at: rich's own choice (the terminal's, else COLUMNS, else 80),
    unless COLUMNS asks for less than :data:`MIN_COLUMNS`."""
    columns = os.environ.get("COLUMNS", "")
    return 80 if columns.isdigit() and int(columns) < MIN_COLUMNS else None


stdout = Console(file=GuardedStdout(), highlight=False, soft_wrap=False, width=width())  # type: ignore[arg-type]


stderr = Console(file=TolerantStderr(), highlight=False, soft_wrap=True, width=width())  # type: ignore[arg-type]


@attrs.define
class State:
    debug: bool = False
    quiet: bool = False
    #: a command already said it was interrupted (and what was kept)
    interrupted_said: bool = False
    #: a line to print after an error's (what the failed command kept, say)
    after_error: str = ""
    #: deprecations the command met, said once it has succeeded (a failed one says its error alone)
    deprecations: list[str] = attrs.Factory(list)

    def reset(self) -> None:
        """Every field back to its default: each command starts from a clean state."""
        fresh = State()
        for field in attrs.fields(State):
            setattr(self, field.name, getattr(fresh, field.name))


#: the state of the command being run, one object that every module of the command line reads
STATE = State()


#: library errors that are really about the command line (exit code 2)
USAGE_ERRORS = (ParameterError, UnknownNameError)


class MonkGroup(TyperGroup):
    """Turns every error into one line on stderr and the documented exit code."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None and not ctx.resilient_parsing:
            refuse_repeated_options(cmd, type(ctx)(cmd, parent=ctx, info_name=name), rest)
        return name, cmd, rest

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        STATE.reset()
        with stdout_for_the_result_only(), escaping_what_the_terminal_cannot_encode():
            try:
                code = self._run(args, prog_name, complete_var, windows_expand_args, **extra)
            except SystemExit as exc:
                # click's own exits are return codes here, but shell completion (--show-completion,
                # --install-completion, the completion requests themselves) ends by sys.exit in
                # typer and click: anywhere else, this is someone's sys.exit
                # (typer vendors click as typer._click; an older typer imports click itself)
                if raised_in(exc, (typer, *(m for m in (sys.modules.get("click"),) if m is not None))):
                    return leave(exc.code if isinstance(exc.code, int) else 0, standalone_mode)
                code = fail_with(
                    f"the work was ended by a call to sys.exit({exc.code!r}) outside the library (in a plugin?). Rerun with --debug for the traceback.",
                    1,
                    exc=exc,
                )
            except BaseException as exc:  # noqa: BLE001 - every error is one line and an exit code (failure_code)
                code = failure_code(exc)
            code = code if isinstance(code, int) else 0
            if code == 130 and not STATE.interrupted_said:
                # Ctrl-C in any command (typer turns it into exit code 130): one line
                stderr.print("Interrupted.", markup=False)
            return leave(code, standalone_mode)

    def _run(self, args: Sequence[str] | None, prog_name: str | None, complete_var: str | None, windows_expand_args: bool, **extra: Any) -> Any:
        """The command, with the library's warnings as one line each and the deprecations it
        met said once it has succeeded; stdout flushed while a full device is still one line."""
        with warnings.catch_warnings(), terminate_as_interrupt():
            # the library's own warnings (the compiled loops falling back) as one line
            warnings.showwarning = one_line_warnings(warnings.showwarning)
            # a deprecated parameter or method the user typed is said, whatever the caller's filters
            warnings.simplefilter("default", MonkDeprecationWarning)
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
            if sys.stdout is not None:
                GuardedStdout().flush()
            for line in dict.fromkeys(STATE.deprecations):
                stderr.print(one_line(f"Warning: {line}"), markup=False)
        return code


def failure_code(exc: BaseException) -> int:
    """The exit code of a command that raised ``exc``, after its one line on stderr: 2 a
    usage error, 1 a library error (or running out of memory, or a bug: one line unless
    --debug), 130 interrupted, and what a failed write to stdout or stderr calls for."""
    if isinstance(exc, typer.TyperException):  # click usage errors (bad option, missing value)
        return usage_error(exc)
    if isinstance(exc, USAGE_ERRORS):
        return fail_with(str(exc), 2, exc=exc)
    if isinstance(exc, MonkError):
        return fail_with(str(exc), 1, exc=exc)
    if isinstance(exc, MemoryError):  # an allocation the budget's checks did not foresee (another process took the room)
        return fail_with(out_of_memory(exc), 1, exc=exc)
    if isinstance(exc, (typer.Abort, KeyboardInterrupt)):
        return 130
    if isinstance(exc, OutputFailed):
        return output_failed(exc)
    if not isinstance(exc, Exception):
        raise exc  # GeneratorExit and the like are no command's failure
    return fail_with(unexpected(exc), 1, exc=exc)  # a bug (ours, or a plugin's outside the guarded hooks)


def refuse_repeated_options(cmd: Any, ctx: Any, args: list[str]) -> None:
    """click keeps the last value of an option given twice, without a word: `-k rbf -k
    laplace` ran laplace alone. An option that takes one value is refused when given
    more than once, with the values given."""
    try:
        _, _, order = cmd.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # noqa: BLE001 - a malformed command line: the command's own parse says how
        return
    seen: dict[Any, int] = {}
    for param in order:
        if getattr(param, "param_type_name", "") == "option" and not (param.multiple or param.count or param.is_flag):
            seen[param] = seen.get(param, 0) + 1
    for param, times in seen.items():
        if times > 1:
            values = ", ".join(repr(v) for v in values_given(param.opts, args))
            raise ParameterError(f"{'/'.join(param.opts)} was given {times} times ({values}); it takes one value.")


def values_given(names: Sequence[str], args: Sequence[str]) -> list[str]:
    """The values given to an option of ``names`` on a command line, in order."""
    values = []
    for i, token in enumerate(args):
        if token == "--":
            break
        for name in names:
            if token == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif name.startswith("--") and token.startswith(name + "="):
                values.append(token[len(name) + 1 :])
            elif len(name) == 2 and not token.startswith("--") and token.startswith(name) and len(token) > 2:
                values.append(token[2:])  # -krbf
    return values


@contextlib.contextmanager
def escaping_what_the_terminal_cannot_encode() -> Any:
    """While a command runs, a stdout whose encoding lacks a character the output has (σ
    in a formula, a file name's é; LANG=C on an old system, PYTHONIOENCODING=ascii, a
    Windows console) gets it as ``\u03c3``, as Python's own stderr does, instead of a
    UnicodeEncodeError that ends the command; the streams' own rule comes back after.
    JSON is unaffected: it is ASCII already."""
    changed: list[Any] = []
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            with contextlib.suppress(Exception):  # a stream that cannot change keeps its own rule
                reconfigure(errors="backslashreplace")
                changed.append(stream)
    try:
        yield
    finally:
        for changed_stream in changed:
            with contextlib.suppress(Exception):
                changed_stream.reconfigure(errors="strict")


@contextlib.contextmanager
def stdout_for_the_result_only() -> Any:
    """While a command runs, file descriptor 1 points at stderr, and ``sys.stdout`` at a
    copy of the real standard output: what compiled code or a plugin writes to the
    descriptor itself (``os.write(1, ...)``, C's ``printf``), which no redirection of
    ``sys.stdout`` catches, lands among the messages, never inside the table or the
    JSON. Only for a process whose ``sys.stdout`` is descriptor 1 (not under a test
    runner), and only when stderr is open; both come back after."""
    stream = sys.stdout
    try:
        real = stream.fileno() == 1
    except (AttributeError, OSError, ValueError):  # no descriptor (CliRunner), or closed
        real = False
    saved = -1
    if real:
        try:
            os.fstat(2)  # open: else os.dup(1) would take descriptor 2 itself
            stream.flush()
            saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:  # stderr closed (2>&-), or stdout gone: everything stays where it is
            if saved >= 0:
                os.close(saved)
            saved = -1
    if saved < 0:
        yield
        return
    # buffered as the stream it stands for (unbuffered under python -u or PYTHONUNBUFFERED)
    raw = io.FileIO(saved, "w", closefd=False)
    unbuffered = getattr(stream, "write_through", False) and isinstance(getattr(stream, "buffer", None), io.FileIO)
    result = io.TextIOWrapper(
        raw if unbuffered else io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
        write_through=bool(getattr(stream, "write_through", False)),
    )
    sys.stdout = result
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            result.flush()
        flush_c_streams()  # what C code buffered for descriptor 1 goes to stderr, where it was written
        sys.stdout = stream
        with contextlib.suppress(OSError):
            os.dup2(saved, 1)
        os.close(saved)


def flush_c_streams() -> None:
    """fflush(NULL): the C library's buffered output, where there is one to reach."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def terminate_as_interrupt() -> Any:
    """SIGTERM (what batch schedulers and ``kill`` send) ends a command as Ctrl-C does:
    the same one line, what was saved said, an embedded Dask cluster shut down, exit 130;
    Python's default would die at once, silently. The previous handler comes back after."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        quiet_cluster_logs()  # the workers got the signal too: their loss is not news
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def output_failed(exc: OutputFailed) -> int:
    """A reader that left is no error (as for any Unix tool: no message, 141); a full or
    failing device is one line. What was saved with -o is whole either way."""
    import errno
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        # nothing more reaches stdout, not even the interpreter's last flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if exc.error.errno == errno.EPIPE:
        return BROKEN_PIPE_EXIT
    return fail_with(f"cannot write to standard output: {exc}.", 1, exc=exc)


def leave(code: int, standalone_mode: bool) -> int:
    if standalone_mode:
        sys.exit(code)
    return code


def raised_in(exc: BaseException, packages: tuple[Any, ...]) -> bool:
    """Whether ``exc`` was raised by code of one of ``packages`` (its innermost frame)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = Path(tb.tb_frame.f_code.co_filename).resolve()
    return any(Path(package.__file__).resolve().parent in where.parents for package in packages)


def one_line_warnings(show: Any) -> Any:
    """``warnings.showwarning`` that prints the library's CompiledLoopsWarning,
    PrecisionWarning, ReadWarning and DataWarning as one "Warning: ..." line on stderr, keeps a
    MonkDeprecationWarning to say once the command has succeeded, and leaves every other
    warning to ``show``."""

    def shown_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        if issubclass(category, MonkDeprecationWarning):
            STATE.deprecations.append(str(message))
        elif issubclass(category, (CompiledLoopsWarning, PrecisionWarning, ReadWarning, DataWarning)):
            stderr.print(one_line(f"Warning: {message}"), markup=False)
        else:
            show(message, category, filename, lineno, file, line)

    return shown_warning


def plugin_frame(exc: BaseException) -> tuple[Any, str] | None:
    """(provider, function) of the innermost frame of ``exc``'s traceback that is a
    third-party plugin's code, or None."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    try:
        registry = get_registry()
        for frame in reversed(frames):
            provider = registry.provider_of(str(frame.f_globals.get("__name__", "")))
            if provider is not None:
                return provider, frame.f_code.co_name
    except Exception:  # noqa: BLE001 - the message of an error must not fail in turn
        pass
    return None


def unexpected(exc: Exception) -> str:
    """The message of an exception nothing expected: the third-party plugin whose code
    raised it (the innermost frame of the traceback that is a plugin's); a file the
    system refused (an OSError that names it); else an internal error of monkfw."""
    found = plugin_frame(exc)
    if found is not None:
        return f"the plugin {found[0]} failed in {found[1]}: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot use {str(exc.filename)!r}: {exc.strerror or exc}."
    return f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"


def out_of_memory(exc: MemoryError) -> str:
    """An allocation that failed although the budget's checks let the work start
    (another process took the room), or a plugin's own MemoryError, named as such."""
    found = plugin_frame(exc)
    what = str(exc) or "an allocation failed"
    if found is not None:
        return (
            f"the plugin {found[0]} ran out of memory in {found[1]} ({what}). Give --max-memory a smaller budget "
            "(the plugin then gets smaller tiles), or use fewer points."
        )
    return f"out of memory ({what}). Give --max-memory a smaller budget (the work then runs in tiles that fit), or use fewer points."


def usage_error(exc: Exception) -> int:
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare `monkfw`: show the help, not an error
        stderr.print(message, markup=False)
        return 2
    return fail_with(message, int(getattr(exc, "exit_code", 2)), hint=help_hint(exc))


def help_hint(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    return f" (see '{ctx.command_path} --help')" if ctx is not None else ""


def plugin_prints_to_stderr() -> contextlib.AbstractContextManager[Any]:
    """Where the library (and a plugin's own ``print``) runs: stdout carries only the
    result, so what plugin code prints goes to stderr instead of into the table or the
    JSON."""
    return contextlib.redirect_stdout(TolerantStderr())


ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``): a
    file named with a newline or a terminal escape would split a message or recolour
    the terminal, where every message is one line."""
    if text.isprintable():
        return text
    return "".join(ESCAPES.get(c, f"\\x{ord(c):02x}") if unicodedata.category(c) == "Cc" else c for c in text)


def fail_with(message: str, code: int, *, exc: BaseException | None = None, hint: str = "") -> int:
    if STATE.debug and exc is not None:
        traceback.print_exception(exc, file=TolerantStderr())
    stderr.print(one_line(f"Error: {message}{hint}"), markup=False)
    if STATE.after_error:
        stderr.print(one_line(STATE.after_error), markup=False)
    return code
