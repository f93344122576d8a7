"""Monte-Carlo runs that survive interruption: cells, a journal, and resuming.

An experiment is a list of **cells**: one Monte-Carlo repetition of one setting, with
everything it computes from written in its ``settings`` (data set, kernel, sample size,
estimators, run index, master seed). A cell's **key** is a hash of those settings, and
its seed is derived from them, so a cell computes the same rows wherever and whenever
it runs.

The results directory holds:

* ``manifest.json``: the experiment and its full configuration. A run whose
  configuration differs from the manifest's refuses to write there (results of
  different settings never mix); ``fresh=True`` deletes the old results first: the
  report's files, then the journal, then the manifest (never anything else in the
  directory), so an interrupted fresh start leaves no old results beside a new manifest.
* ``cells.jsonl``: the journal, one JSON line ``{"key", "settings", "rows", "seconds",
  "seq", "sha"}`` per finished cell, appended with one ``write`` and an ``fsync`` as the cell
  finishes. A line torn by a kill is detected and cut off when the journal is read
  again, so a rerun of the same command resumes: finished cells are read, never
  recomputed; the rest run. A lock file keeps two runs out of one directory.

The journal is checked, not trusted, when it is read: ``sha`` is the SHA-256 of the
record's other fields (canonical JSON), ``seq`` its line number (so moved lines are
seen), ``key`` must be the hash of ``settings``, a
record must hold at least one row and every row must agree with its cell's settings on
the fields they share, and two records of one cell must agree. When a run
resumes, every record must belong to its plan. An edited value, a record
moved to another line, rows moved from one record to another, an emptied record or a
record of another plan is refused with its line number; nothing of it reaches the
results.

The tidy results file and the figures are made from the journal when every cell is in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from monk_framework.app.files import write_atomically
from monk_framework.core.errors import MonkError
from monk_framework.core.results import jsonable
from monk_framework.engine.backends import Backend, LocalBackend, one_blas_thread

__all__ = ["Cell", "CellStore", "run_cells", "cell_key", "record_checksum", "saved_cells"]

MANIFEST = "manifest.json"
JOURNAL = "cells.jsonl"
LOCK = ".lock"


def _check_regular(path: Path, *, shown: Path) -> None:
    """Refuse a results file that is not a regular file: a directory cannot be read as
    one, and a pipe would block the run forever. ``shown`` names it in the message."""
    if not path.is_file():
        raise MonkError(
            f"{str(shown)!r} is not a regular file (a directory, pipe or device), so it is not a monkfw result. Use another output directory, or --fresh."
        )


def _canonical(data: Any) -> str:
    return json.dumps(jsonable(data), sort_keys=True, separators=(",", ":"), allow_nan=False)


def cell_key(settings: Mapping[str, Any]) -> str:
    """A short stable hash of a cell's settings (same settings, same key, on any machine)."""
    return hashlib.sha256(_canonical(settings).encode()).hexdigest()[:20]


def record_checksum(record: Mapping[str, Any]) -> str:
    """SHA-256 of a journal record's fields other than ``sha`` (canonical JSON)."""
    return hashlib.sha256(_canonical({k: v for k, v in record.items() if k != "sha"}).encode()).hexdigest()


def _content(record: Mapping[str, Any]) -> str:
    """A record without its position and checksum: what two records of one cell must share."""
    return _canonical({k: v for k, v in record.items() if k not in ("seq", "sha")})


def _record_problem(record: Any) -> str | None:
    """What is wrong with a parsed journal record, or None (see the module docstring)."""
    if not isinstance(record, dict) or set(record) != {"key", "settings", "rows", "seconds", "seq", "sha"}:
        return "not a journal record of this version (fields key, settings, rows, seconds, seq, sha)"
    if not isinstance(record["seq"], int) or isinstance(record["seq"], bool):
        return "its line number is not a number"
    try:
        checksum = record_checksum(record)
    except ValueError:  # NaN or a number beyond float64 (1e400 reads as inf): never written by us
        return "it holds a number that is not finite"
    if record["sha"] != checksum:
        return "its checksum does not match its contents"
    settings, rows = record["settings"], record["rows"]
    if not isinstance(settings, dict) or record["key"] != cell_key(settings):
        return "its key is not the hash of its settings"
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return "it holds no rows"
    for row in rows:
        for name in row.keys() & settings.keys():
            if row[name] != settings[name]:
                return f"a row's {name!r} is {row[name]!r}, its cell's is {settings[name]!r}"
    return None


@attrs.frozen
class Cell:
    """One Monte-Carlo repetition of one setting; ``settings`` is all it computes from."""

    settings: dict[str, Any] = attrs.field(converter=jsonable)

    @property
    def key(self) -> str:
        return cell_key(self.settings)


class CellStore:
    """The results directory of one experiment configuration (see the module docstring)."""

    def __init__(
        self,
        directory: Path | str,
        experiment: str,
        config: Mapping[str, Any],
        *,
        fresh: bool = False,
        outputs: Sequence[str] = (),
    ):
        #: the directory as given, for messages
        self.directory = Path(directory)
        #: the same, anchored to the working directory at opening: every file operation
        #: goes through it, so that a cell's code that changes directory cannot move
        #: where the journal and the report are written
        self.root = Path(os.path.abspath(self.directory))
        #: the report's files: ``fresh`` deletes them first, so an interrupted fresh start
        #: never leaves old results beside a manifest of the new run
        self.outputs = tuple(outputs)
        self.experiment = experiment
        self.config = jsonable(dict(config))
        self.fresh = fresh
        self.done: dict[str, dict[str, Any]] = {}
        #: the journal line of each finished cell, for messages
        self.lines: dict[str, int] = {}
        #: complete records in the journal (the next one is line count + 1)
        self.count = 0
        self._lock: Any = None

    # -- opening: lock, manifest, journal ------------------------------------------------

    def __enter__(self) -> CellStore:
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> None:
        try:
            if self.root.exists() and not self.root.is_dir():
                raise MonkError(f"Cannot create the results directory {str(self.directory)!r}: it is a file, not a directory.")
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MonkError(f"Cannot create the results directory {str(self.directory)!r}: {exc.strerror}.") from exc
        self._acquire_lock()
        try:
            self._refuse_directories()
            if self.fresh:
                # only what a manifest says is ours: files of the output names in a folder
                # without one are the user's, never deleted
                self._refuse_foreign_outputs()
                # outputs first, the manifest last: at any interruption, what is left is
                # either the old run without (some of) its outputs, which the journal
                # regenerates, or nothing of it
                for name in (*self.outputs, JOURNAL, MANIFEST):
                    (self.root / name).unlink(missing_ok=True)
            self._check_manifest()
            self.done = self._read_journal()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                import fcntl

                fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _acquire_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock, one run at a time is on the user
            return
        lock = self.root / LOCK
        try:
            handle = open(lock, "a+")
        except OSError as exc:
            why = f"its lock file {LOCK} is a directory" if lock.is_dir() else f"{LOCK}: {exc.strerror or exc}"
            raise MonkError(f"Cannot write in the results directory {str(self.directory)!r} ({why}). Give a directory you can write to.") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise MonkError(
                f"Another run is writing to {str(self.directory)!r} (its lock file {LOCK} is held); wait for it, or give another output directory."
            ) from None
        self._lock = handle

    def _refuse_directories(self) -> None:
        """A directory where a result file goes is never a monkfw result: refused before
        any work (the report would fail only after the whole run) and never deleted."""
        for name in (*self.outputs, JOURNAL, MANIFEST):
            path = self.root / name
            if path.is_dir():
                raise MonkError(
                    f"{str(self.shown(path))!r} is a directory where this run writes a file; it is left alone. Move it, or give another output directory."
                )

    def _refuse_foreign_outputs(self) -> None:
        """A folder without a manifest that holds files of the report's names holds
        someone else's files: they are never overwritten or deleted."""
        if (self.root / MANIFEST).exists():
            return
        foreign = [name for name in self.outputs if (self.root / name).exists()]
        if foreign:
            raise MonkError(
                f"{str(self.directory)!r} has no {MANIFEST} but holds {', '.join(foreign)}: files this run would "
                "write, which no monkfw run is known to have written there. They are left alone: move them, or "
                "give another output directory."
            )

    def _check_manifest(self) -> None:
        path = self.root / MANIFEST
        wanted = {"experiment": self.experiment, "config": self.config}
        if not path.exists():
            self._refuse_foreign_outputs()
            if (self.root / JOURNAL).exists():
                raise MonkError(
                    f"{str(self.directory)!r} has a journal {JOURNAL} but no {MANIFEST}: its settings are "
                    "unknown, so it is not resumed. Use another output directory, or fresh=True (--fresh)."
                )
            write_atomically(path, json.dumps(wanted, indent=2, sort_keys=True) + "\n")
            return
        _check_regular(path, shown=self.shown(path))
        try:
            found = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError, RecursionError) as exc:
            raise MonkError(f"Cannot read {str(self.shown(path))!r}: {exc}. Use another output directory, or --fresh.") from None
        if not (isinstance(found, dict) and isinstance(found.get("config"), dict) and set(found) == {"experiment", "config"}):
            raise MonkError(
                f"{str(self.shown(path))!r} is not a manifest of a monkfw experiment (a JSON object with 'experiment' and "
                "'config'). Use another output directory, or --fresh."
            )
        if found == wanted:
            return
        if found.get("experiment") != self.experiment:
            what = f"experiment {found.get('experiment')!r}, not {self.experiment!r}"
        else:
            old = found.get("config", {})
            keys = sorted(set(old) | set(self.config))
            diffs = [f"{k} ({self.config.get(k)!r} here, {old.get(k)!r} there)" for k in keys if old.get(k) != self.config.get(k)]
            what = "settings that differ in " + "; ".join(diffs)
        raise MonkError(
            f"{str(self.directory)!r} holds the results of another run ({what}). Results of different "
            "settings are never mixed: give another output directory, or --fresh to delete the old results."
        )

    def _read_journal(self) -> dict[str, dict[str, Any]]:
        path = self.root / JOURNAL
        self.lines = {}
        self.count = 0
        if not path.exists():
            return {}
        _check_regular(path, shown=self.shown(path))
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MonkError(f"Cannot read {str(self.shown(path))!r}: {exc.strerror or exc}. Use another output directory, or --fresh.") from None
        done: dict[str, dict[str, Any]] = {}
        good = 0  # bytes up to the end of the last complete, readable line
        pos = 0
        for line_no, raw in enumerate(data.splitlines(keepends=True), start=1):
            pos += len(raw)
            if not raw.endswith(b"\n"):
                break  # torn by an interruption: cut off below
            try:
                record = json.loads(raw)
                key = record["key"]
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                if pos == len(data):
                    break  # a torn last line that happened to end in a newline
                self._damaged(line_no, "not a journal record")
            self._check_record(record, key, line_no, done)
            done.setdefault(key, record)
            self.lines.setdefault(key, line_no)
            good = pos
            self.count = line_no
        if good < len(data):
            with open(path, "r+b") as handle:
                handle.truncate(good)
        return done

    def _check_record(self, record: dict[str, Any], key: str, line_no: int, done: dict[str, dict[str, Any]]) -> None:
        """A record read from line ``line_no`` is whole, written as that line, and agrees
        with an earlier record of its cell; else the journal is damaged (said by line)."""
        problem = _record_problem(record)
        if problem is not None:
            self._damaged(line_no, problem)
        if record["seq"] != line_no:
            self._damaged(line_no, f"the record written as line {record['seq']} (lines were moved)")
        if key in done and _content(done[key]) != _content(record):
            self._damaged(line_no, f"a second, different record of the cell of line {self.lines[key]}")

    def _damaged(self, line_no: int, problem: str) -> None:
        raise MonkError(
            f"{str(self.directory / JOURNAL)!r}, line {line_no}: {problem}. The journal was edited or "
            "damaged, so it is not trusted: use another output directory, or --fresh."
        )

    def check_plan(self, cells: Sequence[Cell]) -> None:
        """Every journal record must be a cell of this plan (the manifest matched, so a
        record of another plan means an edited or a swapped-in journal)."""
        keys = {c.key for c in cells}
        for key, line_no in sorted(self.lines.items(), key=lambda item: item[1]):
            if key not in keys:
                self._damaged(line_no, "a cell that is not in this run's plan")

    # -- appending ----------------------------------------------------------------------

    def append(self, cell: Cell, rows: list[dict[str, Any]], seconds: float) -> None:
        """Record a finished cell: one complete line, one write, flushed to disk."""
        if not rows:
            raise MonkError(f"A cell produced no rows (settings {cell.settings}); an experiment cell must give at least one.")
        record: dict[str, Any] = {
            "key": cell.key,
            "settings": cell.settings,
            "rows": jsonable(rows),
            "seconds": round(seconds, 6),
            "seq": self.count + 1,
        }
        record["sha"] = record_checksum(record)
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.root / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # pragma: no cover - a full disk
                raise MonkError(f"Could not write a whole journal record to {str(self.directory / JOURNAL)!r} (disk full?).")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.count += 1
        self.done[cell.key] = record

    def rows(self, cells: Sequence[Cell]) -> list[dict[str, Any]]:
        """The rows of ``cells`` (all finished), in the order of ``cells``."""
        missing = [c for c in cells if c.key not in self.done]
        if missing:
            raise MonkError(f"{len(missing)} of {len(cells)} cells are not finished yet.")
        return [row for c in cells for row in self.done[c.key]["rows"]]

    def path(self, name: str) -> Path:
        """Where the report file ``name`` is written (under :attr:`root`)."""
        return self.root / name

    def shown(self, path: Path) -> Path:
        """``path`` under :attr:`root` named as under :attr:`directory`, as the user gave it."""
        return self.directory / path.relative_to(self.root) if path.is_relative_to(self.root) else path


#: fn(cell settings, shared) -> rows of that cell; module-level, for the Dask backend.
CellFn = Callable[[dict[str, Any], Any], list[dict[str, Any]]]


class _Timed:
    """Picklable wrapper: the rows and the wall time of one cell on its worker.

    The cell runs with one BLAS thread, whatever the backend: a threaded matrix product
    may add in another order (round-off of 1e-16), and a cell must give the same bits
    here and on any Dask worker. The parallelism is across cells.
    """

    def __init__(self, fn: CellFn):
        self.fn = fn

    def __call__(self, settings: dict[str, Any], shared: Any) -> tuple[list[dict[str, Any]], float]:
        start = time.perf_counter()
        with one_blas_thread():
            rows = self.fn(settings, shared)
        return rows, time.perf_counter() - start


def saved_cells(directory: Path | str) -> int:
    """The finished cells a journal holds (its complete lines), for a message after a
    failure: 0 when there is none."""
    path = Path(directory) / "cells.jsonl"
    try:
        if not path.is_file():  # a pipe or a device is never opened: opening a pipe waits for a writer
            return 0
        with open(path, "rb") as journal:
            return sum(1 for line in journal if line.endswith(b"\n") and line.strip())
    except OSError:
        return 0


def run_cells(
    cells: Sequence[Cell],
    fn: CellFn,
    store: CellStore,
    *,
    backend: Backend | None = None,
    shared: Any = None,
    progress: Callable[[float, float, str], None] | None = None,
    costs: Sequence[float] | None = None,
) -> Iterator[Cell]:
    """Run the cells not in the journal yet, appending each as it finishes; yields each
    newly finished cell. ``progress(done, total, what)`` counts finished cells, old and
    new; with ``costs`` (one positive number a cell, e.g. N² for a cell whose work grows
    as N²) it counts the work done in percent, each cell weighted by its cost, so that a
    time left measured from the rate holds when cells of different sizes alternate or a
    resumed run has the small ones done already."""
    backend = backend or LocalBackend()
    store.check_plan(cells)
    seen: set[str] = set()
    todo = []
    for cell in cells:
        if cell.key in seen:
            raise MonkError(f"Two cells of the plan have the same settings: {cell.settings}")
        seen.add(cell.key)
        if cell.key not in store.done:
            todo.append(cell)
    weights = [1.0] * len(cells) if costs is None else [float(c) for c in costs]
    if len(weights) != len(cells) or not all(math.isfinite(w) and w > 0 for w in weights):
        raise MonkError(f"run_cells: costs must be one positive finite number a cell ({len(cells)}); got {len(weights)}.")
    weight = {cell.key: w for cell, w in zip(cells, weights)}
    scale, what = (1.0, "cells") if costs is None else (100.0 / sum(weights), "work in % (cells weighted by their cost)")
    total = len(cells) if costs is None else 100.0
    done = scale * sum(weight[c.key] for c in cells if c.key in store.done)
    if progress is not None:
        progress(done, total, what)
    for i, (rows, seconds) in backend.as_completed(_Timed(fn), [c.settings for c in todo], shared):
        store.append(todo[i], rows, seconds)
        done += scale * weight[todo[i].key]
        if progress is not None:
            progress(min(done, total), total, what)
        yield todo[i]
