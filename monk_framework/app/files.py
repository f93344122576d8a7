"""Files written so that an interruption never leaves a half-written one behind."""

from __future__ import annotations

import csv
import errno
import io
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from monk_framework.core.errors import MonkError, ParameterError

__all__ = ["check_writable", "directory_name_problem", "followed", "write_atomically", "write_csv_atomically"]


def followed(path: Path | str, *, what: str = "the output file") -> Path:
    """``path`` with its symbolic links followed, so that a result written through a link
    updates the file it points to and keeps the link (a rename over the link would
    replace the link itself); a dangling link gives the path it points to, which the
    write creates. A loop of links is refused by name."""
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ParameterError(f"{what} {str(path)!r} is a loop of symbolic links; give a file name.") from None
    return Path(os.path.realpath(path))


#: file name suffixes of other formats than a result's JSON, refused for --output
OTHER_FORMATS = frozenset(
    {
        ".csv",
        ".tsv",
        ".txt",
        ".npy",
        ".npz",
        ".png",
        ".pdf",
        ".svg",
        ".fa",
        ".fasta",
        ".xlsx",
        ".xls",
        ".parquet",
        ".pkl",
        ".pickle",
        ".yaml",
        ".yml",
        ".toml",
        ".h5",
        ".hdf5",
        ".md",
    }
)


def check_writable(path: Path | str, *, what: str = "the output file", inputs: Iterable[Path | str | None] = ()) -> Path:
    """Check, before any work, that a file can be written at ``path``: not a directory,
    not one of the ``inputs`` (the data the result would replace), and its directory
    can be created and written (probed with a temporary file). Symbolic links are
    followed (:func:`followed`): the path returned is the one to write. A name given with
    a trailing separator (``out/``) means a directory, and is refused as one."""
    problem = directory_name_problem(path) if isinstance(path, str) else None
    if problem is not None:
        raise ParameterError(f"{what} {problem}")
    try:
        return _checked_writable(Path(path), what, inputs)
    except OSError as exc:  # a name the system refuses outright (too long, a component it cannot search)
        raise ParameterError(f"{what} {str(path)!r} cannot be written: {exc.strerror or exc}.") from None


def directory_name_problem(text: str) -> str | None:
    """Why a file name given as ``text`` names a directory, or None: ``out/`` (which
    ``Path`` would read as the file ``out``, so the result would be a file named like the
    folder meant) when no such directory exists; an existing one is refused as a directory."""
    if text.endswith(("/", os.sep)) and not Path(text).is_dir():
        return f"{text!r} ends with a separator, so it names a directory; give a file name inside it, e.g. {str(Path(text) / 'result.json')!r}."
    return None


def _checked_writable(given: Path, what: str, inputs: Iterable[Path | str | None]) -> Path:
    if given.suffix.lower() in OTHER_FORMATS:
        # a result file is JSON: out.csv would hold JSON that a spreadsheet cannot read
        raise ParameterError(f"{what} {str(given)!r} names a {given.suffix} file, but a result is saved as JSON; name it {str(given.with_suffix('.json'))!r}.")
    path = followed(given, what=what)
    for source in inputs:
        if source is not None and path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise ParameterError(
                f"{what} {str(given)!r} is the data file {str(source)!r}: the result would overwrite the data. Give another file name, e.g. 'result.json'."
            )
    if path.is_dir():
        raise ParameterError(f"{what} {str(given)!r} is a directory; give a file name inside it, e.g. {str(given / 'result.json')!r}.")
    if path.exists() and not path.is_file():
        # a device, pipe or socket: the result would be renamed over it, not written into it
        raise ParameterError(f"{what} {str(given)!r} is not a regular file (a device, pipe or socket); give a file name.")
    if path.is_file() and path.stat().st_size > 0 and not _holds_a_result(path, what, given):
        # -o names where a result goes; a file there that is not one (data, notes, another
        # tool's output) would be lost to it
        raise ParameterError(
            f"{what} {str(given)!r} exists and is not a monkfw result: it would be overwritten. Give a new file "
            "name (e.g. 'result.json'), or remove the file first if it is not needed."
        )
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ParameterError(f"{what} {str(given)!r} cannot be written: {str(blocker)!r} is a file, not a directory.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".probe")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ParameterError(f"{what} {str(given)!r} cannot be written: {exc.strerror or exc}.") from None
    return path


def _holds_a_result(path: Path, what: str, given: Path) -> bool:
    """Whether a file starts as the JSON of a saved result does (``{"type": ...``):
    the start is enough, and a large data file is not read."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise ParameterError(
            f"{what} {str(given)!r} exists and cannot be read ({exc.strerror or exc}), so whether it holds a result "
            "that may be replaced is unknown. Give a new file name (e.g. 'result.json')."
        ) from None
    return head.lstrip().startswith(b"{") and b'"type"' in head


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``.

    A reader sees the old file or the new one, never a torn one (``os.replace`` is atomic
    on POSIX and Windows within one file system).
    """
    path = followed(path)
    if path.is_dir():
        raise MonkError(f"Cannot write {str(path)!r}: it is a directory.")
    if path.exists() and not path.is_file():
        raise MonkError(f"Cannot write {str(path)!r}: it is not a regular file (a device, pipe or socket).")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise MonkError(f"Cannot write {str(path)!r}: {exc.strerror or exc}.") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise MonkError(f"Cannot write {str(path)!r}: {exc.strerror or exc}.") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_csv_atomically(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """A CSV file with a header row, written atomically; missing fields are left empty."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    write_atomically(path, buffer.getvalue())
