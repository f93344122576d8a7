"""The ``monkfw`` command line: a thin shell over the library.

stdout carries data (tables, or JSON with ``--json``); messages go to stderr. Exit
codes: 0 success, 1 a library error (bad data, a file that cannot be read, a
computation that cannot be done), 2 a usage error (unknown name, bad option or
parameter), 130 interrupted. No traceback unless ``--debug``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
import traceback
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import attrs
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from monk_framework.app import jobs
from monk_framework.app.datasets import DATASETS
from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.runner import saved_cells
from monk_framework.app.files import check_writable, directory_name_problem, write_atomically
from monk_framework.core.errors import DataWarning, MonkDeprecationWarning, MonkError, ParameterError, PrecisionWarning, ReadWarning, UnknownNameError, shown
from monk_framework.core.params import LARGEST_INT, Configurable, parse_spec
from monk_framework.core.registry import PluginEntry, get_registry
from monk_framework.core.resources import parse_memory, reuse_freed_memory
from monk_framework.core.results import dumps
from monk_framework.core.test_results import AggregatedTestResult, RobustTestResult
from monk_framework.core.version import __version__
from monk_framework.engine.backends import check_backend_options, get_backend, quiet_cluster_logs
from monk_framework.numerics.compiled import CompiledLoopsWarning
from monk_framework.two_sample.common import DEFAULT_PERMUTATIONS

__all__ = ["app", "main"]


class _OutputFailed(Exception):
    """Standard output cannot take what the command writes: its reader left (a broken
    pipe, ``monkfw ... | head``) or its device is full (``> /dev/full``)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class _GuardedStdout:
    """sys.stdout as it is at each write (CliRunner swaps it), whose write errors become
    :class:`_OutputFailed`: rich would turn a broken pipe into sys.exit(1), which reads
    as someone else's exit, and a full device into an internal error."""

    def write(self, text: str) -> int:
        try:
            return _open_stream(sys.stdout, "standard output").write(text)
        except OSError as exc:
            raise _OutputFailed(exc) from None

    def flush(self) -> None:
        try:
            _open_stream(sys.stdout, "standard output").flush()
        except OSError as exc:
            raise _OutputFailed(exc) from None

    def isatty(self) -> bool:
        return sys.stdout is not None and sys.stdout.isatty()

    def __getattr__(self, name: str) -> Any:  # fileno, encoding: the stream's own
        if sys.stdout is None:  # closed: as an object without them (rich asks with a default)
            raise AttributeError(name)
        return getattr(sys.stdout, name)


class _TolerantStderr:
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


def _open_stream(stream: Any, name: str) -> Any:
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


def _width() -> int | None:
    """The width to draw at: rich's own choice (the terminal's, else COLUMNS, else 80),
    unless COLUMNS asks for less than :data:`MIN_COLUMNS`."""
    columns = os.environ.get("COLUMNS", "")
    return 80 if columns.isdigit() and int(columns) < MIN_COLUMNS else None


stdout = Console(file=_GuardedStdout(), highlight=False, soft_wrap=False, width=_width())  # type: ignore[arg-type]
stderr = Console(file=_TolerantStderr(), highlight=False, soft_wrap=True, width=_width())  # type: ignore[arg-type]


@attrs.define
class _State:
    debug: bool = False
    quiet: bool = False
    #: a command already said it was interrupted (and what was kept)
    interrupted_said: bool = False
    #: a line to print after an error's (what the failed command kept, say)
    after_error: str = ""
    #: deprecations the command met, said once it has succeeded (a failed one says its error alone)
    deprecations: list[str] = attrs.Factory(list)


STATE = _State()
#: library errors that are really about the command line (exit code 2)
USAGE_ERRORS = (ParameterError, UnknownNameError)


class MonkGroup(TyperGroup):
    """Turns every error into one line on stderr and the documented exit code."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None and not ctx.resilient_parsing:
            _refuse_repeated_options(cmd, type(ctx)(cmd, parent=ctx, info_name=name), rest)
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
        global STATE
        STATE = _State()
        with _stdout_for_the_result_only(), _escaping_what_the_terminal_cannot_encode():
            try:
                with warnings.catch_warnings(), _terminate_as_interrupt():
                    # the library's own warnings (the compiled loops falling back) as one line
                    warnings.showwarning = _one_line_warnings(warnings.showwarning)
                    # a deprecated parameter or method the user typed is said, whatever the caller's filters
                    warnings.simplefilter("default", MonkDeprecationWarning)
                    code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
                    # what is still buffered for stdout is written now, where a full device is one line
                    if sys.stdout is not None:
                        _GuardedStdout().flush()
                    for line in dict.fromkeys(STATE.deprecations):
                        stderr.print(_one_line(f"Warning: {line}"), markup=False)
            except typer.TyperException as exc:  # click usage errors (bad option, missing value)
                code = _usage_error(exc)
            except USAGE_ERRORS as exc:
                code = _fail(str(exc), 2, exc=exc)
            except MonkError as exc:
                code = _fail(str(exc), 1, exc=exc)
            except MemoryError as exc:  # an allocation the budget's checks did not foresee (another process took the room)
                code = _fail(_out_of_memory(exc), 1, exc=exc)
            except (typer.Abort, KeyboardInterrupt):
                code = 130
            except _OutputFailed as exc:
                code = _output_failed(exc)
            except SystemExit as exc:
                # click's own exits are return codes here, but shell completion (--show-completion,
                # --install-completion, the completion requests themselves) ends by sys.exit in
                # typer and click: anywhere else, this is someone's sys.exit
                # (typer vendors click as typer._click; an older typer imports click itself)
                if _raised_in(exc, (typer, *(m for m in (sys.modules.get("click"),) if m is not None))):
                    return _exit(exc.code if isinstance(exc.code, int) else 0, standalone_mode)
                code = _fail(
                    f"the work was ended by a call to sys.exit({exc.code!r}) outside the library (in a plugin?). Rerun with --debug for the traceback.",
                    1,
                    exc=exc,
                )
            except Exception as exc:  # a bug (ours, or a plugin's outside the guarded hooks): one line unless --debug
                code = _fail(_unexpected(exc), 1, exc=exc)
            code = code if isinstance(code, int) else 0
            if code == 130 and not STATE.interrupted_said:
                # Ctrl-C in any command (typer turns it into exit code 130): one line
                stderr.print("Interrupted.", markup=False)
            return _exit(code, standalone_mode)


def _refuse_repeated_options(cmd: Any, ctx: Any, args: list[str]) -> None:
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
            values = ", ".join(repr(v) for v in _values_given(param.opts, args))
            raise ParameterError(f"{'/'.join(param.opts)} was given {times} times ({values}); it takes one value.")


def _values_given(names: Sequence[str], args: Sequence[str]) -> list[str]:
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
def _escaping_what_the_terminal_cannot_encode() -> Any:
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
def _stdout_for_the_result_only() -> Any:
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
        _flush_c_streams()  # what C code buffered for descriptor 1 goes to stderr, where it was written
        sys.stdout = stream
        with contextlib.suppress(OSError):
            os.dup2(saved, 1)
        os.close(saved)


def _flush_c_streams() -> None:
    """fflush(NULL): the C library's buffered output, where there is one to reach."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Any:
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


def _output_failed(exc: _OutputFailed) -> int:
    """A reader that left is no error (as for any Unix tool: no message, 141); a full or
    failing device is one line. What was saved with -o is whole either way."""
    import errno
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        # nothing more reaches stdout, not even the interpreter's last flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if exc.error.errno == errno.EPIPE:
        return BROKEN_PIPE_EXIT
    return _fail(f"cannot write to standard output: {exc}.", 1, exc=exc)


def _exit(code: int, standalone_mode: bool) -> int:
    if standalone_mode:
        sys.exit(code)
    return code


def _raised_in(exc: BaseException, packages: tuple[Any, ...]) -> bool:
    """Whether ``exc`` was raised by code of one of ``packages`` (its innermost frame)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = Path(tb.tb_frame.f_code.co_filename).resolve()
    return any(Path(package.__file__).resolve().parent in where.parents for package in packages)


def _one_line_warnings(show: Any) -> Any:
    """``warnings.showwarning`` that prints the library's CompiledLoopsWarning,
    PrecisionWarning, ReadWarning and DataWarning as one "Warning: ..." line on stderr, keeps a
    MonkDeprecationWarning to say once the command has succeeded, and leaves every other
    warning to ``show``."""

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        if issubclass(category, MonkDeprecationWarning):
            STATE.deprecations.append(str(message))
        elif issubclass(category, (CompiledLoopsWarning, PrecisionWarning, ReadWarning, DataWarning)):
            stderr.print(_one_line(f"Warning: {message}"), markup=False)
        else:
            show(message, category, filename, lineno, file, line)

    return one_line


def _plugin_frame(exc: BaseException) -> tuple[Any, str] | None:
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


def _unexpected(exc: Exception) -> str:
    """The message of an exception nothing expected: the third-party plugin whose code
    raised it (the innermost frame of the traceback that is a plugin's); a file the
    system refused (an OSError that names it); else an internal error of monkfw."""
    found = _plugin_frame(exc)
    if found is not None:
        return f"the plugin {found[0]} failed in {found[1]}: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot use {str(exc.filename)!r}: {exc.strerror or exc}."
    return f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"


def _out_of_memory(exc: MemoryError) -> str:
    """An allocation that failed although the budget's checks let the work start
    (another process took the room), or a plugin's own MemoryError, named as such."""
    found = _plugin_frame(exc)
    what = str(exc) or "an allocation failed"
    if found is not None:
        return (
            f"the plugin {found[0]} ran out of memory in {found[1]} ({what}). Give --max-memory a smaller budget "
            "(the plugin then gets smaller tiles), or use fewer points."
        )
    return f"out of memory ({what}). Give --max-memory a smaller budget (the work then runs in tiles that fit), or use fewer points."


def _usage_error(exc: Exception) -> int:
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare `monkfw`: show the help, not an error
        stderr.print(message, markup=False)
        return 2
    return _fail(message, int(getattr(exc, "exit_code", 2)), hint=_help_hint(exc))


def _help_hint(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    return f" (see '{ctx.command_path} --help')" if ctx is not None else ""


def _plugin_prints_to_stderr() -> contextlib.AbstractContextManager[Any]:
    """Where the library (and a plugin's own ``print``) runs: stdout carries only the
    result, so what plugin code prints goes to stderr instead of into the table or the
    JSON."""
    return contextlib.redirect_stdout(_TolerantStderr())


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _one_line(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``): a
    file named with a newline or a terminal escape would split a message or recolour
    the terminal, where every message is one line."""
    if text.isprintable():
        return text
    return "".join(_ESCAPES.get(c, f"\\x{ord(c):02x}") if unicodedata.category(c) == "Cc" else c for c in text)


def _fail(message: str, code: int, *, exc: BaseException | None = None, hint: str = "") -> int:
    if STATE.debug and exc is not None:
        traceback.print_exception(exc, file=_TolerantStderr())
    stderr.print(_one_line(f"Error: {message}{hint}"), markup=False)
    if STATE.after_error:
        stderr.print(_one_line(STATE.after_error), markup=False)
    return code


app = typer.Typer(
    cls=MonkGroup,
    name="monkfw",
    help="Outlier-robust kernel mean embeddings and MMD by median-of-means (MONK).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"monkfw {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide notes and progress on stderr.")] = False,
) -> None:
    """Outlier-robust kernel mean embeddings and MMD by median-of-means (MONK)."""
    STATE.debug = debug
    STATE.quiet = quiet
    reuse_freed_memory()  # one command, large arrays of the same sizes again and again


def _samples(files: list[Path] | None, x: Path | None, y: Path | None) -> tuple[Path | None, Path | None]:
    """--x and --y, or the files given as arguments (``monkfw test X.csv Y.csv``)."""
    if not files:
        return x, y
    if x is not None or y is not None:
        raise ParameterError("Give the samples either as arguments or with --x/--y, not both.")
    if len(files) > 2:
        raise ParameterError(f"Give at most two sample files (X and Y); got {len(files)}: {' '.join(map(str, files))}.")
    return files[0], (files[1] if len(files) == 2 else None)


def _quiet(quiet: bool, debug: bool = False) -> None:
    """-q and --debug after the subcommand do what they do before it (an error's "rerun
    with --debug" is most often followed by adding it at the end of the command)."""
    if quiet:
        STATE.quiet = True
    if debug:
        STATE.debug = True


def _note(message: str) -> None:
    if not STATE.quiet:
        stderr.print(_one_line(message), markup=False)


def _print_json(data: Any) -> None:
    _GuardedStdout().write(dumps(data) + "\n")


def _complete(kind: str) -> Any:
    """Shell completion of kernel, estimator, data set (or all) names."""

    def complete(incomplete: str) -> list[str]:
        try:
            reg = get_registry()
        except Exception:  # completion must never break the shell
            return []
        names = {
            "kernel": [e.name for e in reg.kernels()],
            "estimator": [e.name for e in reg.estimators()],
            "dataset": list(DATASETS),
        }.get(kind, reg.names() + list(DATASETS))
        return sorted(n for n in names if n.startswith(incomplete))

    return complete


def _path(text: str) -> Path:
    """A path option's value; an empty one (an unset shell variable, say) is refused
    rather than read as the current directory."""
    if not text.strip():
        raise typer.BadParameter("is empty; give a path (an unset shell variable?).")
    return Path(text)


def _spec_text(text: str) -> str:
    """A kernel or estimator option's value: an empty one (an unset shell variable, say)
    is refused by the option's name, before any plugin is looked up."""
    if not text.strip():
        raise typer.BadParameter("is empty; give a name, listed by monkfw plugins.")
    return text


def _file_path(text: str) -> Path:
    """:func:`_path` for a file to write: ``out/`` names a directory, which ``Path``
    would read as the file ``out``."""
    path = _path(text)
    problem = directory_name_problem(text)
    if problem is not None:
        raise typer.BadParameter(problem)
    return path


# options shared by the commands that take two samples (run, test)
KernelOption = Annotated[
    str | None,
    typer.Option(
        "--kernel",
        "-k",
        parser=_spec_text,
        help="Kernel name (see 'monkfw plugins'); default: rbf for vectors (sigma by the median heuristic), ssk for strings.",
        autocompletion=_complete("kernel"),
        show_default=False,
    ),
]
EstimatorOption = Annotated[
    str, typer.Option("--estimator", "-e", parser=_spec_text, help="Estimator name (see 'monkfw plugins').", autocompletion=_complete("estimator"))
]
XOption = Annotated[Path | None, typer.Option("--x", "-x", parser=_path, help="Sample X: .npy, .csv, .tsv or .txt (vectors), .txt or FASTA (strings).")]
YOption = Annotated[Path | None, typer.Option("--y", "-y", parser=_path, help="Sample Y, in the same formats as --x.")]
SamplesArgument = Annotated[list[Path] | None, typer.Argument(parser=_path, help="The files of X and Y (the same as --x X --y Y).", show_default=False)]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Hide notes and progress on stderr (as monkfw -q).")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors (as monkfw --debug).")]
CaseOption = Annotated[
    bool,
    typer.Option(
        "--case-sensitive", help="Keep the case of FASTA sequences (by default they are upper-cased: lowercase marks soft-masked residues, not other letters)."
    ),
]
DatasetOption = Annotated[str | None, typer.Option("--dataset", "-d", help="Built-in data set (see 'monkfw datasets').", autocompletion=_complete("dataset"))]
ParamOption = Annotated[
    list[str] | None, typer.Option("--param", "-p", help="key=value for the kernel or estimator (repeatable); prefix kernel. or estimator. to choose.")
]
DataParamOption = Annotated[list[str] | None, typer.Option("--data-param", help="key=value for the data set, e.g. n=500 (repeatable).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
MaxMemoryOption = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="Memory the work may hold beyond the data, e.g. 2GB or 512MiB (default: half the "
        "available memory); over it Gram matrices are computed in tiles, with the same numbers.",
        show_default=False,
    ),
]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", parser=_file_path, help="Also save the JSON result to this file (written atomically).")]


# -- monkfw plugins -----------------------------------------------------------------


def _entries_tables(title: str, entries: list[PluginEntry]) -> list[Table]:
    """One table per distribution, so that a provider is a short module name that never
    breaks across lines; estimators say whether they estimate MMD or embeddings only."""
    groups: dict[tuple[str | None, str | None], list[PluginEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.provider.distribution, entry.provider.version), []).append(entry)
    tables = []
    for (dist, version), group in groups.items():
        where = f"from {dist} {version}" if dist else "registered by a script"
        table = Table(title=f"{title} {where}", title_justify="left")
        estimators = group[0].plugin_type == "estimator"
        table.add_column("name", no_wrap=True)
        if estimators:
            table.add_column("estimates", no_wrap=True)
        table.add_column("plugin", no_wrap=True)
        table.add_column("summary", overflow="fold", ratio=1)
        for entry in group:
            name = entry.name + "".join(f"\n({alias})" for alias in entry.cls.aliases)
            kind = ["MMD" if entry.details.get("estimates") == "mmd" else "embedding only"] if estimators else []
            plugin = entry.provider.entry_point or entry.provider.module
            table.add_row(escape(name), *kind, escape(plugin), escape(entry.summary))
        tables.append(table)
    return tables


@app.command()
def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """List the installed kernels and estimators with their providers, and plugin problems."""
    _quiet(quiet, debug)
    reg = get_registry()
    if as_json:
        _print_json(
            {
                "kernels": [e.to_dict() for e in reg.kernels()],
                "estimators": [e.to_dict() for e in reg.estimators()],
                "problems": [p.to_dict() for p in reg.problems()],
            }
        )
        return
    for table in _entries_tables("Kernels", reg.kernels()) + _entries_tables("Estimators", reg.estimators()):
        stdout.print(table)
    for problem in reg.problems():
        _note(f"Plugin problem: {problem.provider}: {problem.message}")


# -- monkfw datasets ----------------------------------------------------------------


@app.command()
def datasets(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """List the built-in data sets (generated from --seed)."""
    _quiet(quiet, debug)
    if as_json:
        _print_json([_describe_dict(cls, "monk-framework") for cls in DATASETS.values()])
        return
    table = Table(title="Data sets", title_justify="left")
    for column in ("name", "summary"):
        table.add_column(column, overflow="fold")
    for cls in DATASETS.values():
        table.add_row(escape(cls.name), escape(cls.summary))
    stdout.print(table)


# -- monkfw describe ----------------------------------------------------------------


def _describe_dict(cls: type[Configurable], provider: str) -> dict[str, Any]:
    return {
        "name": cls.name,
        "type": cls.plugin_type,
        "summary": cls.summary,
        "formula": cls.formula,
        "parameters": [p.to_dict() for p in cls.parameters()],
        "provider": provider,
    }


@app.command()
def describe(
    name: Annotated[str, typer.Argument(help="A kernel, estimator or data set name (or a spec, e.g. rbf:sigma=2).", autocompletion=_complete("any"))],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Show a kernel's, estimator's or data set's formula, parameters and defaults."""
    _quiet(quiet, debug)
    reg = get_registry()
    spec = name
    if ":" in spec or "(" in spec or ")" in spec:  # a spec, as -k and -e take them: its plugin is described
        name = parse_spec(spec)[0]
    found = [_describe_dict(e.cls, str(e.provider)) for e in reg.find(name)]
    if name in DATASETS:
        found.append(_describe_dict(DATASETS[name], "monk-framework (built-in data set)"))
    if not found:
        # an experiment's name is no plugin's: say where it is described ("Unknown ... 'exp1'" left it there)
        try:
            get_experiment(name)
            note = f" {name!r} is an experiment: 'monkfw experiment {name} --help'."
        except UnknownNameError:
            note = ""
        raise UnknownNameError("kernel, estimator or data set", name, reg.names() + list(DATASETS), note=note)
    if spec != name:
        _note(f"{spec!r} is {name!r} with parameters; here is {name!r} with all of its parameters.")
    if as_json:
        _print_json(found if len(found) > 1 else found[0])
        return
    for info in found:
        stdout.print(f"[bold]{escape(info['name'])}[/bold] ({info['type']}, from {escape(info['provider'])})")
        stdout.print(info["summary"], markup=False)
        stdout.print(f"  {info['formula']}", markup=False)
        table = Table(title_justify="left")
        for column in ("parameter", "default", "allowed", "meaning"):
            table.add_column(column, overflow="fold")
        for p in info["parameters"]:
            table.add_row(*(escape(s) for s in (p["name"], repr(p["default"]), p["allowed"], p["doc"])))
        if info["parameters"]:
            stdout.print(table)
        else:
            stdout.print("  (no parameters)")


# -- monkfw run ---------------------------------------------------------------------


@app.command()
def run(
    files: SamplesArgument = None,
    kernel: KernelOption = None,
    estimator: Annotated[
        str | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="Estimator name (see 'monkfw plugins'); default: u-stat.",
            autocompletion=_complete("estimator"),
            show_default=False,
        ),
    ] = None,
    x: XOption = None,
    y: YOption = None,
    case_sensitive: CaseOption = False,
    dataset: DatasetOption = None,
    param: ParamOption = None,
    data_param: DataParamOption = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random choice (data set draw, blocks).")] = 0,
    as_json: JsonOption = False,
    output: OutputOption = None,
    max_memory: MaxMemoryOption = None,
    trace: Annotated[
        bool, typer.Option("--trace", help="Record the objective at every iteration (estimators with a 'trace' parameter, e.g. monk-bcd).")
    ] = False,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Estimate MMD (or mean embeddings) with any kernel and any estimator.

    Without --x/--y or --dataset, runs on the default built-in data set and says which.
    """
    _quiet(quiet, debug)
    x, y = _samples(files, x, y)
    if output is not None:
        check_writable(output, what="--output", inputs=(x, y))  # before the work, not after it
    target = _anchored(output)
    if max_memory is not None:
        parse_memory(max_memory)  # a bad size is refused before any data is read
    check_backend_options(backend, scheduler, workers)
    with _plugin_prints_to_stderr():
        kernel, estimator, notes = jobs.with_defaults(kernel, estimator, x, dataset, y=y)
        assert estimator is not None
        with _ProgressBar("data") as reading:  # a large table of numbers takes seconds to read
            job = jobs.prepare(
                kernel,
                estimator,
                params=param or [],
                x=x,
                y=y,
                dataset=dataset,
                data_params=data_param or [],
                seed=seed,
                case_sensitive=case_sensitive,
                trace=trace,
                progress=reading,
            )
        for note in (*notes, *job.notes):
            _note(note)
        with _backend(backend, scheduler, workers) as runner, _ProgressBar("estimate") as bar:
            result = jobs.run(job, max_memory=max_memory, backend=runner, progress=bar)
        rows = _run_rows(job, result)  # the estimator's diagnostic_rows: plugin code too
    _deliver(job.payload(result), output, as_json, _table(f"{job.estimator.name} with {job.kernel.name}", rows), target=target)


def _kernel_text(name: str, params: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in params.items())})"


def _run_rows(job: jobs.Job, result: Any) -> list[tuple[str, str]]:
    est = job.estimator
    if isinstance(result, jobs.EmbeddingsResult):
        emb_x, emb_y = result.x, result.y
        rows = [
            ("estimator", est.spec()),
            ("kernel", emb_x.kernel.spec()),
            ("N", str(len(emb_x.weights))),
            ("||mu_X||", f"{emb_x.norm():.10g}"),
            *est.report_rows(emb_x.diagnostics, emb_x.timings),
        ]
        if emb_y is not None:
            rows += [("M", str(len(emb_y.weights))), ("||mu_Y||", f"{emb_y.norm():.10g}"), ("||mu_X - mu_Y||", f"{result.distance:.10g}")]
        return rows
    return [
        ("estimator", est.spec()),
        ("kernel", _kernel_text(result.kernel, result.kernel_params)),
        ("N, M", f"{result.n_x}, {result.n_y}"),
        ("MMD^2", f"{result.mmd2:.10g}"),
        ("MMD", f"{result.mmd:.10g}"),
        *est.report_rows(result.diagnostics, result.timings),
        ("time", f"{result.timings['total_s']:.4f} s"),
    ]


def _table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(show_header=False, title=title, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    for row in rows:
        table.add_row(*(escape(str(v)) for v in row))
    return table


def _anchored(path: Path | None) -> Path | None:
    """``path`` made absolute against the working directory the command started in, so
    that plugin code which changes directory during the work cannot move where a result
    is saved. Messages keep naming the path as the user gave it."""
    return None if path is None else Path(os.path.abspath(path))


def _deliver(payload: dict[str, Any], output: Path | None, as_json: bool, table: Table, footer: str | None = None, *, target: Path | None) -> None:
    """Save the result if asked (to ``target``, the anchored ``output``), then print it as
    JSON or as a table (and a footer line). A save that fails (a full disk) still prints
    the result before the error: the work is not lost with the file."""
    if output is not None:
        assert target is not None  # _anchored(output), taken before the work
        try:
            write_atomically(target, dumps(payload) + "\n")
        except MonkError:
            _print_result(payload, as_json, table, footer)
            raise
        # a .csv or .txt name does not make it a table: say what the file holds
        kind = "" if output.suffix.lower() in ("", ".json") else " (as JSON, whatever its suffix: read it with load_result)"
        _note(f"Result saved to {output}{kind}.")
    _print_result(payload, as_json, table, footer)


def _print_result(payload: dict[str, Any], as_json: bool, table: Table, footer: str | None) -> None:
    if as_json:
        _print_json(payload)
        return
    stdout.print(table)
    if footer is not None:
        stdout.print(footer, markup=False)


# -- monkfw test --------------------------------------------------------------------


#: seconds between two plain progress lines (stderr not a terminal: a log file, a batch
#: job, CI): a line once this has passed at the next report, so that with reports a few
#: tenths of a second apart the lines are at most 5 s apart
PLAIN_PROGRESS_EVERY = 4.5
#: seconds before the first plain line: a job shorter than this prints none
PLAIN_PROGRESS_FIRST = 2.0


def _counts(done: float, total: float) -> str:
    """ "done/total" for a bar, large counts shortened (the characters of a file read, the
    kernel values of a Gram matrix): 16.8M/70.7M rather than 16777279/70674009."""

    def short(value: float) -> str:
        for size, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
            if total >= size:
                return f"{value / size:.1f}{unit}"
        return f"{int(value):,}" if float(value).is_integer() else f"{value:.1f}"

    return f"{short(done)}/{short(total)}"


class _ProgressBar:
    """Progress of long work on stderr (silent with --quiet): a rich bar with the time
    left on a terminal; elsewhere (a log file, a batch job) a plain line at most every
    :data:`PLAIN_PROGRESS_EVERY` seconds, with the same estimate.

    Called as ``bar(done, total)`` or ``bar(done, total, what)``: a new ``what`` starts a
    new stage. The display starts with the first report, so an error raised before any
    work (a bad option found once the data are read) stays a single line on stderr.
    """

    def __init__(self, label: str):
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.plain = not stderr.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}", style="progress.download"),
            TimeRemainingColumn(),
            console=stderr,
            transient=True,
            disable=STATE.quiet or self.plain,
        )
        self.label = label
        self.what: str | None = None
        self.task: Any = None
        self.started = time.monotonic()
        self.stage_started = self.started
        self.last_report = self.started  # a stage's work began when the previous one last reported
        #: the stage's first report (time, done): later rates are measured from it, past the
        #: warm-up its first step may carry (threads starting, a matrix's pages faulted in)
        self.first_report: tuple[float, float] | None = None
        self.last_line = self.started
        self.lines = 0  # plain lines printed
        self.lock = threading.Lock()  # the engine reports from its threads too

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.task is not None and not self.plain:
            self.progress.__exit__(*exc)

    def __call__(self, done: float, total: float, what: str | None = None) -> None:
        with self.lock:
            self._update(done, total, what)

    def _update(self, done: float, total: float, what: str | None) -> None:
        if what is not None and what != self.what:
            # its first report may come after much of its work (a stage of few steps), so
            # the stage is timed from the end of the one before, not from that report
            self.what, self.stage_started, self.first_report = what, self.last_report, None
            if self.task is not None and not self.plain:
                self.progress.reset(self.task, total=total, description=f"{self.label}: {what}", count=_counts(0, total))
        self.last_report = time.monotonic()
        if self.first_report is None:
            self.first_report = (self.last_report, done)
        if self.plain:
            self._line(done, total)
            return
        if self.task is None:
            self.progress.__enter__()
            self.task = self.progress.add_task(self.label if what is None else f"{self.label}: {what}", total=total, count=_counts(done, total))
        self.progress.update(self.task, completed=done, total=total, count=_counts(done, total))

    @staticmethod
    def _duration(seconds: float) -> str:
        """A span read at a glance: "42 s", "12 min", "5.2 h", "3.1 days", and past ten
        years "more than ten years" (n_iter = 10**18 once read "about 4965338753307636888
        s left")."""
        for limit, unit, size, digits in ((90, "s", 1, 0), (90 * 60, "min", 60, 0), (48 * 3600, "h", 3600, 1), (3650 * 86400, "days", 86400, 1)):
            if seconds < limit:
                return f"{seconds / size:.{digits}f} {unit}"
        return "more than ten years"

    def _line(self, done: float, total: float) -> None:
        now = time.monotonic()
        wait = PLAIN_PROGRESS_EVERY if self.lines else PLAIN_PROGRESS_FIRST
        if STATE.quiet or now - self.last_line < wait:
            return
        self.last_line, self.lines = now, self.lines + 1
        share = done / total if total else 1.0
        left = ""
        first_at, first_done = self.first_report or (now, done)
        if 0 < share < 1 and done > first_done and now > first_at:
            left = f", about {self._duration((total - done) * (now - first_at) / (done - first_done))} left"
        elif 0.1 <= share < 1:
            # one report yet, but a coarse step (1 of 3 matrices): timed from the stage's start;
            # a fine first step (a band of 600) would carry the warm-up into the estimate
            left = f", about {self._duration((now - self.stage_started) * (1 - share) / share)} left"
        count = f"{int(done):,}/{int(total):,}" if float(done).is_integer() and float(total).is_integer() else ""
        stage = self.label if self.what is None else f"{self.label}: {self.what}"
        stderr.print(f"{stage}{' ' + count if count else ''} ({100 * share:.0f}%), {self._duration(now - self.started)} elapsed{left}", markup=False)


BackendOption = Annotated[
    str,
    typer.Option("--backend", help="Where the work runs: 'local' (this process) or 'dask' (dask.distributed; an embedded LocalCluster unless --scheduler)."),
]
SchedulerOption = Annotated[
    str | None,
    typer.Option("--scheduler", help="With --backend dask: the address of an existing cluster's scheduler, e.g. tcp://host:8786.", show_default=False),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        max=LARGEST_INT,
        help="With --backend dask and no --scheduler: worker processes of the LocalCluster (default: one per core).",
        show_default=False,
    ),
]


def _backend(name: str, scheduler: str | None, workers: int | None) -> Any:
    return get_backend(name, scheduler=scheduler, n_workers=workers)


ContaminationOption = Annotated[
    str | None,
    typer.Option(
        "--contamination",
        help="A robust test whose level holds with up to R corrupted points of X and Y (a count, e.g. 10, "
        "or a fraction below 0.5, e.g. 0.02); reports the certificate c: the rejection stays valid if up to c points were corrupted.",
        show_default=False,
    ),
]


@app.command("test")
def test_command(
    files: SamplesArgument = None,
    kernel: Annotated[
        list[str] | None,
        typer.Option(
            "--kernel",
            "-k",
            parser=_spec_text,
            help="Kernel name (see 'monkfw plugins'); default: rbf "
            "for vectors (sigma by the median heuristic), ssk for strings. With --aggregate, repeat it for a collection: a -k "
            "without sigma stands for its family at --bandwidths (or at 10 over the pooled distances).",
            autocompletion=_complete("kernel"),
            show_default=False,
        ),
    ] = None,
    estimator: Annotated[
        str | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="MMD estimator (see 'monkfw plugins'); default: u-stat (with --contamination: v-stat, as dc and clip need).",
            autocompletion=_complete("estimator"),
            show_default=False,
        ),
    ] = None,
    x: XOption = None,
    y: YOption = None,
    case_sensitive: CaseOption = False,
    dataset: DatasetOption = None,
    param: ParamOption = None,
    data_param: DataParamOption = None,
    permutations: Annotated[int, typer.Option("--permutations", "-B", min=1, max=LARGEST_INT, help="Number of permutations B.")] = DEFAULT_PERMUTATIONS,
    alpha: Annotated[float, typer.Option("--alpha", help="Level of the test, in (0, 1).")] = 0.05,
    alternative: Annotated[
        str,
        typer.Option(
            "--alternative",
            help="Permutation test: 'greater' (a large MMD speaks against "
            "H0), 'less' (samples more alike than relabellings: duplicated or stratified data) or 'two-sided'.",
        ),
    ] = "greater",
    relabel: Annotated[
        str,
        typer.Option(
            "--relabel", help="Permutation test: 'auto' (within the blocks of a MONK estimator's fixed partition, else global), 'within-blocks' or 'global'."
        ),
    ] = "auto",
    contamination: ContaminationOption = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="With --contamination: 'auto', 'dc' (dcMMD, bounded kernels), 'clip' "
            "(dcMMD on clipped features, any kernel) or 'mom' (median of block p-values, any kernel).",
        ),
    ] = "auto",
    clip: Annotated[
        float | None,
        typer.Option(
            "--clip",
            help="With --contamination and clip: the radius c of the clipped "
            "features, in sqrt(k(x, x)) units, fixed without these data (default: the median pooled norm, "
            "accounted for in the guarantee).",
            show_default=False,
        ),
    ] = None,
    aggregate: Annotated[
        str | None,
        typer.Option(
            "--aggregate",
            help="An aggregated test over many kernels: 'agg' (MMDAgg) or "
            "'fuse' (MMD-FUSE); default kernels: Gaussian and Laplace at 10 bandwidths each. With --contamination: "
            "robust aggregation (agg, fixed --bandwidths).",
            show_default=False,
        ),
    ] = None,
    bandwidths: Annotated[
        str | None,
        typer.Option(
            "--bandwidths",
            help="With --aggregate: the bandwidths sigma, e.g. 0.25,0.5,1,2 (of each -k kernel without sigma, or of the default Gaussian and Laplace kernels).",
            show_default=False,
        ),
    ] = None,
    blocks: Annotated[
        int | None,
        typer.Option(
            "--blocks",
            min=1,
            max=LARGEST_INT,
            help="With --contamination and mom: the number of blocks Q (default: about 2 sqrt(min(N, M)), at least 4R + 1).",
            show_default=False,
        ),
    ] = None,
    split: Annotated[
        bool, typer.Option("--split", help="The paper's three-way split test (Algorithm 3): tune on part 1, null quantile on part 2, statistic on part 3.")
    ] = False,
    grid: Annotated[
        list[str] | None, typer.Option("--grid", help="With --split: kernel hyperparameter values to try on part 1, key=v1,v2,... (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random choice (data set draw, split, permutations, blocks).")] = 0,
    null: Annotated[bool, typer.Option("--null", help="Include the B permuted statistics in the JSON result.")] = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    max_memory: MaxMemoryOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Two-sample test of P = Q: a permutation test with any kernel and MMD estimator.

    The p-value is (1 + #{T_b >= T}) / (1 + B) over B relabellings of the pooled
    sample (within the blocks of a MONK estimator's partition). With --contamination R,
    a robust test whose level holds with up to R corrupted points; with --split, the
    paper's three-way split test.
    """
    _quiet(quiet, debug)
    x, y = _samples(files, x, y)
    if output is not None:
        check_writable(output, what="--output", inputs=(x, y))  # before the work, not after it
    target = _anchored(output)
    check_backend_options(backend, scheduler, workers)
    if max_memory is not None:
        parse_memory(max_memory)
    options: dict[str, Any] = dict(
        contamination=contamination,
        split=split,
        method=method,
        blocks=blocks,
        alpha=alpha,
        n_permutations=permutations,
        relabel=relabel,
        aggregate=aggregate,
        bandwidths=bandwidths,
        clip=clip,
        alternative=alternative,
    )
    with _plugin_prints_to_stderr():
        with _ProgressBar("data") as reading:  # a large table of numbers takes seconds to read
            job = jobs.prepare_test(
                kernel,
                estimator,
                grid=grid or [],
                params=param or [],
                x=x,
                y=y,
                dataset=dataset,
                data_params=data_param or [],
                seed=seed,
                case_sensitive=case_sensitive,
                progress=reading,
                **options,
            )
        for note in job.notes:
            _note(note)
        # the library names each stage: permutations; kernels x permutations (L·B relabelled
        # statistics); grid points, then permutations
        with _backend(backend, scheduler, workers) as runner, _ProgressBar("test") as bar:
            result = jobs.test(
                job,
                **options,
                estimator_given=estimator is not None,
                return_null=null,
                progress=bar,
                backend=runner,
                max_memory=max_memory,
            )

    kernel_text = _kernel_text(result.kernel, result.kernel_params)
    if isinstance(result, AggregatedTestResult):
        name = "MMDAgg" if result.method == "agg" else "MMD-FUSE"
        r = result.contamination
        robust = f", robust to {r} corrupted point{'s' if r != 1 else ''}" if r else ""
        count = len(result.kernel_specs)
        rows, title = _aggregated_rows(result), f"Aggregated two-sample test ({name}{robust}) over {count} kernel{'s' * (count != 1)}"
    elif isinstance(result, RobustTestResult):
        rows, title = _robust_rows(result, kernel_text), f"Robust two-sample test ({result.method}) with {job.kernel.name}"
    else:
        rows, title = _test_rows(result, job.estimator, kernel_text, split), f"Two-sample test: {job.estimator.name} with {job.kernel.name}"
    rows.append(("time", f"{result.timings['total_s']:.3f} s"))
    _deliver(job.payload(result), output, as_json, _table(title, rows), footer=result.decision, target=target)


def _test_rows(result: Any, est: Any, kernel_text: str, split: bool) -> list[tuple[str, str]]:
    test = "three-way split (Algorithm 3)" if split else "permutation"
    if not split and result.relabel == "within-blocks":
        test += f", relabelled within {result.n_blocks} blocks"
    rows = [
        ("test", test),
        ("estimator", est.spec()),
        ("kernel", kernel_text),
        ("N, M", f"{result.n_x}, {result.n_y}"),
        ("statistic T", f"{result.statistic:.6g}"),
        (
            "null quantile",
            "none (two-sided: two quantiles)"
            if getattr(result, "alternative", "") == "two-sided"
            else "none (too few permutations)"
            if result.null_quantile is None
            else f"{result.null_quantile:.6g}",
        ),
    ]
    if not split and result.relabel == "within-blocks" and result.estimate is not None:
        # T is the test-time form on the fixed blocks; the estimate is what monkfw run reports
        rows.insert(5, ("MMD estimate (run)", f"{result.estimate:.6g}"))
    if split:
        rows.append(("T - q", "n/a" if result.excess is None else f"{result.excess:.6g}"))
        for item in result.tuning:
            rows.append((f"part 1: {item['params'] or 'no grid'}", f"T = {item['statistic']:.6g}"))
    else:
        rows.append(("p-value", f"{result.pvalue:.4g}"))
    rows.append(("alpha, B", f"{result.alpha:g}, {result.n_permutations}"))
    return rows


def _aggregated_rows(result: AggregatedTestResult) -> list[tuple[str, str]]:
    rows = [("estimator", result.estimator), ("N, M", f"{result.n_x}, {result.n_y}")]
    for ell, spec in enumerate(result.kernel_specs):
        mark = " *" if result.kernel_rejects is not None and result.kernel_rejects[ell] else ""
        sigma = result.bandwidths[ell]
        if sigma is not None:  # the table shows σ to 4 digits; --json has every digit
            name, _, params = spec.partition(":")
            rounded = [f"sigma={sigma:.4g}" if p.startswith("sigma=") else p for p in params.split(",")]
            spec = f"{name}:{','.join(rounded)}"
        rows.append((spec, f"statistic {result.kernel_statistics[ell]:.4g}, p = {result.kernel_pvalues[ell]:.4g}{mark}"))
    rows += [
        ("statistic", f"{result.statistic:.6g}"),
        ("p-value", f"{result.pvalue:.4g}"),
    ]
    if result.method == "agg" and result.reject:
        rows.append(("rejected by (*)", f"{len(result.rejecting_kernels)} of {len(result.kernel_specs)} kernels"))
    if result.contamination:
        certificate = result.certificate
        rows.append(("certificate", "does not reject" if certificate is None else _corrupted(certificate)))
    rows.append(("alpha, B", f"{result.alpha:g}, {result.n_permutations}"))
    return rows


def _corrupted(count: int) -> str:
    return f"{count} corrupted point{'s' if count != 1 else ''}"


def _robust_rows(result: Any, kernel_text: str) -> list[tuple[str, str]]:
    rows = [
        ("method", {"dc": "dcMMD (bounded kernel)", "clip": "dcMMD on clipped features", "mom": "median of block p-values"}[result.method]),
        ("estimator", result.estimator),
        ("kernel", kernel_text),
        ("N, M", f"{result.n_x}, {result.n_y}"),
        ("contamination R", str(result.contamination)),
    ]
    if result.method == "clip":
        slack = f" (moves at most {result.clip_slack:.4g} under R corrupted points)" if result.clip_slack else " (given)"
        rows.append(("clip radius c", f"{result.clip_radius:.6g}{slack}"))
    if result.method in ("dc", "clip"):
        rows += [
            ("MMD (V-statistic)", f"{result.statistic:.6g}"),
            ("sensitivity", f"{result.sensitivity:.6g} per corrupted point"),
            ("null quantile", "none (too few permutations)" if result.null_quantile is None else f"{result.null_quantile:.6g}"),
            ("threshold q + margin" if result.method == "clip" else "threshold q + 2R delta", "n/a" if result.threshold is None else f"{result.threshold:.6g}"),
        ]
    else:
        rows += [
            ("blocks Q, order k", f"{result.n_blocks}, {result.order}"),
            ("median block p-value", f"{result.statistic:.4g}"),
        ]
    rows += [
        ("p-value", f"{result.pvalue:.4g}"),
        ("certificate", "does not reject" if result.certificate is None else _corrupted(result.certificate)),
        ("alpha, B", f"{result.alpha:g}, {result.n_permutations}"),
    ]
    return rows


def _int_list(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ParameterError(f"{option} takes comma-separated integers, e.g. 200,400,600; got {shown(text)}.") from None
    return values


@app.command("experiment")
def experiment_command(
    name: Annotated[str, typer.Argument(help="exp1 (paper Figure 1: estimation error) or exp2 (Figure 2: split test on splice DNA).", show_default=False)],
    quick: Annotated[bool, typer.Option("--quick", help="A reduced grid that runs in well under a minute.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", parser=_path, help="Directory of the results, journal and figures (default: monk-results/NAME, or NAME-quick).", show_default=False
        ),
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1, max=LARGEST_INT, help="Monte-Carlo runs per setting (default: 100 for exp1, 400 for exp2).", show_default=False),
    ] = None,
    sizes: Annotated[str | None, typer.Option("--sizes", help="Sample sizes N, comma-separated (per sample).", show_default=False)] = None,
    estimators: Annotated[
        list[str] | None,
        typer.Option(
            "--estimator",
            "-e",
            parser=_spec_text,
            help="An estimator spec, e.g. monk-bcd:n_blocks=21 (repeatable; replaces the default list).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Master seed: every cell's seed derives from it and the cell's settings.")] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Delete the results already in --out and start over (otherwise a run resumes).")] = False,
    backend: BackendOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Reproduce one of the paper's experiments: a tidy results.csv, summary.csv and PNG figures.

    Each Monte-Carlo cell is saved in OUT/cells.jsonl the moment it finishes. If a run is
    interrupted, the same command resumes it: finished cells are never recomputed.
    """
    _quiet(quiet, debug)
    check_backend_options(backend, scheduler, workers)
    overrides: dict[str, Any] = {"runs": runs, "sizes": _int_list(sizes, "--sizes"), "seed": seed}
    if estimators:
        overrides["estimators"] = tuple(estimators)
    exp = get_experiment(name, quick=quick, **overrides)
    directory = out if out is not None else Path("monk-results") / (f"{name}-quick" if quick else name)
    with _backend(backend, scheduler, workers) as runner, _ProgressBar(name) as bar, _plugin_prints_to_stderr():
        again = "the same command again without --fresh (with it, the saved cells are deleted)" if fresh else "the same command again"
        try:
            done = run_experiment(exp, directory, backend=runner, fresh=fresh, progress=bar)
        except KeyboardInterrupt:
            bar.progress.stop()
            _note(f"Interrupted. Every finished cell is saved in {directory / 'cells.jsonl'}; run {again} to resume.")
            STATE.interrupted_said = True
            raise typer.Exit(130) from None
        except Exception:
            finished = saved_cells(directory)
            if finished:
                # a failure part-way (a lost Dask worker, memory): what is done is kept
                STATE.after_error = (
                    f"The {finished:,} finished cell{'s are' if finished != 1 else ' is'} saved in "
                    f"{directory / 'cells.jsonl'}; once the error is fixed, {again} resumes."
                )
            raise
    _note(
        f"{name}: {done.cells} cells ({done.computed} computed now, {done.resumed} from an earlier run) in {done.seconds:.1f} s on the {runner.name} backend."
    )
    for path in done.files:
        stdout.print(str(path), markup=False)


def main() -> NoReturn:
    """Entry point of the ``monkfw`` console script."""
    app()
    raise SystemExit(0)  # pragma: no cover - app() always exits
