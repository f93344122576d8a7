"""Reading samples from files.

What is read is validated later, by the kernel that uses it
(:mod:`monk_framework.core.samples`). Files: ``.npy`` (numeric arrays; pickled objects are never loaded), ``.csv`` and
``.tsv`` (numbers; a header row is detected when every cell of the first row is
non-numeric; a file written by pandas' ``DataFrame.to_csv``, whose header starts with an
empty cell, has its index column dropped; a missing value or a bad cell is reported
with file, line and column). For string kernels:
``.txt`` (one string per line; the line ending is removed, nothing else; empty lines
are skipped; for a vector kernel, numbers: one point per line, separated by commas or
by runs of spaces and tabs, as ``np.savetxt`` writes and ``np.loadtxt`` reads) and FASTA ``.fa``/``.fasta`` (records start with a ``>`` header line;
a record's sequence is its following lines joined, whitespace removed; ``;`` lines
are comments). Text is UTF-8; a byte-order mark (what spreadsheet programs put at the
start of a "CSV UTF-8" file) is dropped. FASTA is read case-insensitively by default: lowercase letters (which
FASTA files use for soft-masked regions, e.g. repeats) are the same residues as
uppercase ones, so sequences are upper-cased; ``case_sensitive=True`` keeps the case,
for alphabets where it matters. ``.txt`` strings are taken as they are.
"""

from __future__ import annotations

import csv
import errno
import math
import os
import re
import shlex
import string
import warnings
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from monk_framework.core.errors import DataFileError, ParameterError, ReadWarning, lookalike_hint, shown
from monk_framework.core.params import check_flag
from monk_framework.core.resources import check_fits, format_bytes

__all__ = ["DATA_SUFFIXES", "first_data_line", "holds_numbers", "load_sample"]

#: the file types :func:`load_sample` reads
DATA_SUFFIXES = (".csv", ".fa", ".fasta", ".npy", ".tsv", ".txt")


def load_sample(path: str | Path, *, case_sensitive: bool = False, kind: str | None = None, progress: Any = None) -> np.ndarray | list[str]:
    """Read a sample from a ``.npy``, ``.csv``, ``.tsv`` (vectors), ``.txt``, ``.fa`` or ``.fasta`` (strings) file.

    ``kind`` is what the kernel takes, "vector" or "string" (None: not known). A ``.txt``
    file is one string per line, unless ``kind="vector"``: then it holds numbers, one
    point per line (what ``np.savetxt`` writes: separated by commas, or by runs of
    spaces and tabs).
    FASTA sequences are upper-cased unless ``case_sensitive`` (see the module docstring).
    The result is validated later by the kernel that uses it (vectors or strings).
    ``progress(done, total, what)`` hears how far the reading of a table of numbers
    (``.csv``, ``.tsv``, a ``.txt`` file of numbers) has come, in characters of the file;
    the other formats are read in one step.
    """
    if kind is not None and not (isinstance(kind, str) and kind in ("vector", "string")):
        raise ParameterError(f"load_sample: kind must be 'vector', 'string' or None; got {shown(kind)}.")
    check_flag(case_sensitive, "load_sample: case_sensitive")
    p = Path(path)
    _check_regular_file(p)
    suffix = p.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise DataFileError(
            str(p), f"unsupported file type {suffix or '(none)'!r}; use one of " + ", ".join(DATA_SUFFIXES) + "." + _UNSUPPORTED_HINTS.get(suffix, "")
        )
    try:
        return _read_as(p, suffix, kind, case_sensitive=case_sensitive, progress=progress)
    except OSError as exc:  # unreadable: permissions, I/O errors
        raise DataFileError(str(p), f"cannot be read ({exc.strerror or exc}).") from None


def _check_regular_file(p: Path) -> None:
    """Refuse a path that is missing, unreadable, a directory or no regular file (a FIFO,
    socket or device: reading it could block forever or never end), before reading it."""
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
            raise DataFileError(str(p), _missing(p)) from None
        # a name the system refuses outright (too long), an I/O error
        raise DataFileError(str(p), f"cannot be read ({exc.strerror or exc}).") from None
    if p.is_dir():
        raise DataFileError(str(p), "is a directory, not a data file.")
    if not p.is_file():
        raise DataFileError(str(p), "is not a regular file (a pipe, socket or device); save the data to a file.")


def _read_as(p: Path, suffix: str, kind: str | None, *, case_sensitive: bool, progress: Any) -> np.ndarray | list[str]:
    """The sample of a file of a known suffix, read as its kernel takes it (``kind``)."""
    if suffix in (".fa", ".fasta"):
        return _read_fasta(p, case_sensitive=case_sensitive)
    if suffix == ".npy":
        return _read_npy(p)
    if suffix == ".txt":
        if kind == "vector":
            return _read_delimited(p, delimiter=_numbers_separator(p), numbers_text=True, progress=progress)
        return _read_lines(p)
    if kind == "string":
        # a .csv or .tsv read as numbers: its first strings would be a "header" and the next
        # ones "cannot read 'GGTACCAT' as a number"
        column = "-d, -f2" if suffix == ".csv" else "-f2"  # cut splits at tabs by default
        raise DataFileError(
            str(p),
            f"a {suffix} file is read as numbers (one point a row), but the kernel takes strings: give them "
            "as a .txt file (one string a line) or as FASTA; from a column of this file, e.g. "
            f"cut {column} {shlex.quote(p.name)} > strings.txt (and drop a header line).",
        )
    return _read_delimited(p, progress=progress)


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """The shape, dtype and data offset of a .npy file, read from its header alone.

    Checked before anything is loaded: a file without the NumPy magic is not .npy (numpy
    would take it for a pickle), an object dtype would need unpickling, and a header
    that claims more data than the file holds (or than memory) is refused.
    """
    from numpy.lib import format as npy

    try:
        with path.open("rb") as handle:
            try:
                version = npy.read_magic(handle)
            except ValueError:
                raise DataFileError(str(path), "is not a .npy file (it does not start with the NumPy header).") from None
            reader = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            try:
                shape, _, dtype = reader(handle)
            except ValueError as exc:
                raise DataFileError(str(path), f"has a damaged .npy header ({exc}).") from None
            offset = handle.tell()
    except OSError as exc:
        raise DataFileError(str(path), f"cannot be read ({exc.strerror or exc}).") from None
    return tuple(int(k) for k in shape), np.dtype(dtype), offset


def _read_npy(path: Path) -> np.ndarray:
    shape, dtype, offset = _npy_header(path)
    if dtype.hasobject:
        raise DataFileError(str(path), "holds pickled Python objects, which are never loaded (they can run code); save a numeric array instead.")
    nbytes = math.prod(shape) * dtype.itemsize
    stored = path.stat().st_size - offset
    if nbytes > stored:
        raise DataFileError(
            str(path),
            f"its header claims an array of shape {shape} ({format_bytes(nbytes)}) but the file "
            f"holds only {format_bytes(stored)} of data: it is truncated or damaged.",
        )
    # the array, and its float64 copy when it is validated as vectors
    check_fits(
        nbytes + 8 * math.prod(shape),
        lambda need, avail, _: f"{path}: an array of shape {shape} needs about {need} to load, but only {avail} of memory are available.",
    )
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise DataFileError(str(path), "holds pickled Python objects, which are never loaded (they can run code); save a numeric array instead.") from None
        raise DataFileError(str(path), f"is not a valid .npy file ({exc}).") from None
    except (OSError, EOFError) as exc:
        raise DataFileError(str(path), f"cannot be read as .npy ({exc}).") from None
    if not isinstance(arr, np.ndarray):
        raise DataFileError(str(path), "does not hold a single array.")
    return arr


#: how missing values are spelt in CSV files (pandas' nullable dtypes write <NA>)
MISSING = frozenset({"", "NA", "<NA>", "NAN", "NULL", "NONE", "N/A"})


def _cell_value(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


#: bytes of memory the reader may need per byte of a CSV file: every value takes 8 bytes
#: and the shortest one ("1,") takes 2 bytes of text, with room for the growth of the buffer
DELIMITED_BYTES_PER_BYTE = 5


def _default_names(cells: list[str]) -> bool:
    """Whether a row is pandas' default column names 0, 1, ..., k − 1."""
    return cells == [str(i) for i in range(len(cells))]


def _pandas_header(first: list[str]) -> bool:
    """Whether a first row with an empty first cell is the header pandas' ``to_csv``
    writes (the unnamed index, then the column names): names that are not numbers, or
    pandas' default names 0, 1, ..., k − 1. A data row whose first value is missing has
    other numbers after it, and is read as data (its missing value is then reported)."""
    names = first[1:]
    if not names or not all(names):
        return False
    return all(_cell_value(n) is None for n in names) or _default_names(names)


def _read_delimited(path: Path, *, delimiter: str | None = None, numbers_text: bool = False, progress: Any = None) -> np.ndarray:
    """The numbers of a CSV/TSV file (or a text file of numbers, ``delimiter=" "``: runs
    of spaces and tabs separate the values, as for ``np.loadtxt``): one point per row,
    streamed into a float64 buffer (8 bytes a value), with the file, line and column of
    any bad cell. ``numbers_text``: a ``.txt`` file of numbers, whose only header lines
    are ``#`` comments (as ``np.savetxt`` writes them). ``progress(done, total, what)``
    hears the characters read, against the file's size, every few megabytes."""
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    check_fits(
        DELIMITED_BYTES_PER_BYTE * path.stat().st_size,
        lambda need, avail, _: (
            f"Reading {str(path)!r} ({format_bytes(path.stat().st_size)}) as numbers may need up to {need}, but only "
            f"{avail} of memory are available; save it as .npy (np.save) or use fewer points."
        ),
        share=0.9,
    )
    reader = _DelimitedRows(path, delimiter, numbers_text)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            for lineno, row in _rows(_counted_lines(handle, path, progress), delimiter):
                reader.read(lineno, row)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    except csv.Error as exc:
        raise DataFileError(str(path), f"malformed CSV ({exc}).") from None
    return reader.result()


class _DelimitedRows:
    """The rows of one delimited file, read one by one into a float64 buffer: the header
    (names, pandas' index and default names, Excel's separator line) told from data, every
    row's width held to the first's, and the first bad cell named by line and column."""

    def __init__(self, path: Path, delimiter: str, numbers_text: bool) -> None:
        self.path, self.delimiter, self.numbers_text = path, delimiter, numbers_text
        self.values = array("d")
        self.width: int | None = None
        self.width_line = 0
        self.index_column = False
        self.seen_first = False
        # a first row 0,1,...,k-1 is pandas' default column names (DataFrame(X).to_csv(path,
        # index=False)) if any later value is not an integer; integer data keep it as a point
        self.default_names = False
        self.fraction_seen = False

    def read(self, lineno: int, row: list[str]) -> None:
        cells = [cell.strip() for cell in row]
        if not any(cells) or cells[0].startswith("#"):
            return
        if not self.seen_first and self.delimiter != " " and row and row[0].strip().lower().startswith("sep="):
            self._separator_line(lineno, row)
            return
        if not self.seen_first:
            self.seen_first = True
            if self._first_row_is_a_header(lineno, cells):
                return
        elif self.default_names and not self.fraction_seen:
            self.fraction_seen = not all(cell.lstrip("+-").isdigit() for cell in cells)
        if self.index_column:
            if not cells[0]:
                raise DataFileError(str(self.path), "a row without its index label (the file's header is pandas').", line=lineno, column=1)
            cells = cells[1:]
        self._check_width(lineno, cells)
        self.values.extend(self._row_values(lineno, cells))

    def _separator_line(self, lineno: int, row: list[str]) -> None:
        """Excel's separator line ("sep=," read as the cells "sep=" and ""): not data, and
        refused when it names another separator than the file's."""
        given = row[0].strip()[4:] or (self.delimiter if len(row) == 2 else "")
        if given == self.delimiter:
            return
        raise DataFileError(
            str(self.path),
            f"is Excel's separator line {shown(','.join(row))}: the values are "
            f"separated by {given!r}, where a {self.path.suffix} file has {self.delimiter!r}; save it "
            "with ',' between values (a .csv) or tabs (a .tsv)"
            + (
                ", and '.' as the decimal point, e.g. pd.read_csv(path, sep=';', decimal=',', skiprows=1).to_csv(new_path, index=False)."
                if given == ";"
                else "."
            ),
            line=lineno,
        )

    def _first_row_is_a_header(self, lineno: int, cells: list[str]) -> bool:
        """Whether the first row is a header to skip (names, or pandas' index header)."""
        if self.numbers_text:
            return False  # np.savetxt's header is a '#' comment: every line is data
        if len(cells) > 1 and not cells[0] and _pandas_header(cells):
            # pandas' DataFrame.to_csv: a header whose first cell is the unnamed index, then
            # each row's index label first; both are dropped
            self.index_column, self.width, self.width_line = True, len(cells) - 1, lineno
            return True
        if all(cell and _cell_value(cell) is None and not _joined_numbers(cell) for cell in cells):
            self.width, self.width_line = len(cells), lineno  # a header: names, not numbers
            return True
        # one column starting at 0 is too common a sample to guess about
        self.default_names = len(cells) > 1 and _default_names(cells)
        return False

    def _check_width(self, lineno: int, cells: list[str]) -> None:
        if self.width is None:
            self.width, self.width_line = len(cells), lineno
        if len(cells) != self.width:
            # a header read whole, then rows of decimal commas: a semicolon-separated file
            semicolons = self.delimiter == "," and _semicolon_numbers(",".join(cells))
            commas = self.delimiter == "\t" and len(cells) == 1 and cells[0].count(",") + 1 == self.width
            raise DataFileError(
                str(self.path),
                f"has {len(cells)} columns where line {self.width_line} has {self.width}.{_SEMICOLON_HINT if semicolons else _COMMAS_IN_TSV if commas else ''}",
                line=lineno,
            )
        if self.width_line == lineno and len(cells) > 1 and not cells[-1] and all(cells[:-1]) and self.delimiter != " ":
            # the first row ends with the separator, as some writers end every line: it
            # reads as a column of missing values
            raise DataFileError(
                str(self.path),
                f"the line ends with {self.delimiter!r}, so its last value is missing: if every line "
                f"does, the file has a trailing separator; remove it (e.g. sed -i 's/{self.delimiter}$//' "
                f"{shlex.quote(self.path.name)}).",
                line=lineno,
                column=len(cells) + int(self.index_column),
            )

    def _row_values(self, lineno: int, cells: list[str]) -> list[float]:
        try:
            row_values = [float(cell) for cell in cells]  # the whole row at once: the common case
        except ValueError:
            row_values = []
        if not row_values or not math.isfinite(sum(row_values)):
            # a cell that is not a number, NaN or inf (or a sum that overflows): cell by
            # cell, so that the first bad one is named by line and column
            row_values = [_checked_cell(self.path, cell, lineno, j + 1 + int(self.index_column), self.numbers_text) for j, cell in enumerate(cells)]
        return row_values

    def result(self) -> np.ndarray:
        """The points read, one per row (pandas' default names dropped, with a warning)."""
        path, width = self.path, self.width
        if not self.seen_first:
            raise DataFileError(str(path), "holds no data rows.")
        if not self.values:
            raise DataFileError(str(path), "holds a header row but no data rows.", line=self.width_line)
        assert width is not None
        out = np.frombuffer(self.values, dtype=np.float64).reshape(-1, width)
        if self.default_names and self.fraction_seen:
            warnings.warn(
                ReadWarning(
                    f"{path}: line {self.width_line} ({','.join(map(str, range(width)))}) is read as pandas' default column names "
                    "(DataFrame(X).to_csv(path, index=False)), not as a point, since the other values are not all integers. "
                    "Write the file with header=False, or name the columns, for no guess to be needed."
                ),
                stacklevel=3,
            )
            return out[1:]
        return out


#: characters read between two progress reports of a file being read
READ_REPORT_CHARS = 4 << 20


def _counted_lines(handle: Any, path: Path, progress: Any) -> Any:
    """The lines of ``handle``, telling ``progress`` how much of the file they cover (a
    character is a byte for the ASCII of numbers; the count never passes the size)."""
    if progress is None:
        yield from handle
        return
    total = max(path.stat().st_size, 1)
    what = f"reading {path.name}"
    done = reported = 0
    for line in handle:
        done += len(line)
        if done - reported >= READ_REPORT_CHARS:
            reported = done
            progress(min(done, total), total, what)
        yield line
    progress(total, total, what)


def _rows(handle: Any, delimiter: str) -> Any:
    """(line number, cells) of each row: CSV rows (quoted cells may span lines), or for
    ``delimiter=" "`` each line split on runs of whitespace."""
    if delimiter == " ":
        for lineno, line in enumerate(handle, start=1):
            yield lineno, line.split()
        return
    reader = csv.reader(handle, delimiter=delimiter)
    for row in reader:
        yield reader.line_num, row


#: what a cell that is numbers joined by ';' means, and what to do about it
_SEMICOLON_HINT = (
    " The values seem separated by ';' (a semicolon-separated file, as spreadsheets with a decimal "
    "comma write them): save it with ',' between values and '.' as the decimal point, e.g. "
    "pd.read_csv(path, sep=';', decimal=',').to_csv(new_path, index=False)."
)
#: what a .tsv file whose values are separated by commas is told
_COMMAS_IN_TSV = " The values seem separated by ',': a .tsv file is read with tabs between values; name it .csv."
#: a number written with ',' between its thousands: 1,000 or -12,345.5
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


def _semicolon_numbers(cell: str) -> bool:
    """Whether a cell is numbers joined by ';' (a semicolon-separated file read with ',',
    as spreadsheets with a decimal comma write them)."""
    parts = [part.strip().strip('"').strip() for part in cell.split(";")]  # quoted cells: '"1,5";"2,5"'
    parts = [part for part in parts if part]
    return ";" in cell and bool(parts) and all(_cell_value(part.replace(",", ".")) is not None for part in parts)


def _blank_separated_numbers(cell: str) -> bool:
    """Whether a cell is numbers separated by tabs or spaces (a tab-separated file, or
    what np.savetxt writes, read with the wrong separator)."""
    parts = cell.split()
    return len(parts) > 1 and all(_cell_value(part) is not None for part in parts)


def _joined_numbers(cell: str) -> bool:
    """Whether a cell is several numbers that the wrong separator left joined."""
    return _semicolon_numbers(cell) or _blank_separated_numbers(cell)


def first_data_line(path: Path | str) -> str | None:
    """The first line of a text file that is neither blank nor a ``#`` comment, stripped
    (None for a file without one)."""
    try:
        with Path(path).open(encoding="utf-8-sig") as handle:
            for line in handle:
                text = line.strip()
                if text and not text.startswith("#"):
                    return text
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    return None


def holds_numbers(path: Path | str) -> bool:
    """Whether a text file's first data line is numbers only (spaces, tabs or commas
    between them): a ``.txt`` file of points rather than of strings."""
    text = first_data_line(path)
    cells = [] if text is None else text.replace(",", " ").replace("\t", " ").split()
    return bool(cells) and all(_cell_value(c) is not None for c in cells)


def _numbers_separator(path: Path) -> str:
    """How a text file of numbers separates its values: the first data line decides
    (a comma, else runs of spaces and tabs, as ``np.savetxt`` writes by default)."""
    text = first_data_line(path) or ""
    return "," if "," in text else " "


def _not_a_number_hint(path: Path, cell: str, numbers_text: bool) -> str:
    """What a cell that is not a number most likely is, and what to do (or nothing)."""
    if _semicolon_numbers(cell):
        return _SEMICOLON_HINT
    lookalike = lookalike_hint(cell)
    if lookalike:
        return lookalike
    if path.suffix.lower() == ".tsv" and "," in cell and all(_cell_value(part) is not None for part in cell.split(",")):
        return _COMMAS_IN_TSV
    if _blank_separated_numbers(cell):
        return (
            " The values seem separated by tabs or spaces: a .csv file is read with ',' between values; "
            "name a tab-separated file .tsv, or a file of numbers separated by spaces .txt."
        )
    if _THOUSANDS.fullmatch(cell.strip()):
        return (
            " It looks like a number with ',' between its thousands: write numbers without thousands "
            "separators (e.g. pd.read_csv(path, thousands=',').to_csv(new_path, index=False))."
        )
    if cell.strip().upper() in ("TRUE", "FALSE", "YES", "NO"):
        return " A yes-or-no value: write it as 1 or 0 (e.g. df.astype(float).to_csv(new_path, index=False))."
    if numbers_text:
        return " A .txt file is read as numbers, one point per line, for a vector kernel; as strings (one per line) for a string kernel such as ssk."
    if cell.strip()[:1].isalpha():
        return (
            " A vector kernel reads numbers: encode a column of categories as numbers first, e.g. one 0/1 "
            "column per category with pd.get_dummies(df, dtype=float)."
        )
    return ""


def _checked_cell(path: Path, cell: str, line: int, column: int, numbers_text: bool = False) -> float:
    value = _cell_value(cell)
    if value is None or math.isnan(value):
        if not cell or cell.upper() in MISSING:
            raise DataFileError(
                str(path),
                f"a missing value ({shown(cell)}; pandas writes NA and NaN as an empty cell or <NA>): "
                "drop or impute the missing values first, e.g. df.dropna().to_csv(path).",
                line=line,
                column=column,
            )
        hint = _not_a_number_hint(path, cell, numbers_text)
        raise DataFileError(str(path), f"cannot read {shown(cell)} as a number.{hint}", line=line, column=column)
    if not math.isfinite(value):
        raise DataFileError(str(path), f"{shown(cell)} is not a finite number.", line=line, column=column)
    return value


_EXPORT = "export the sample to .csv (one point a row) or to .npy (np.save) first."
#: the first bytes of binary formats a data file is often in by mistake: what it is, what
#: to do ({name}: the file's name, {plain}: a name for the text inside)
_BINARY_FORMATS = {
    b"\x1f\x8b": ("gzip-compressed", "decompress it first, e.g. gunzip -c {name} > {plain}"),
    b"BZh": ("bzip2-compressed", "decompress it first, e.g. bunzip2 -c {name} > {plain}"),
    b"\xfd7zXZ\x00": ("xz-compressed", "decompress it first, e.g. unxz -c {name} > {plain}"),
    b"\x28\xb5\x2f\xfd": ("zstd-compressed", "decompress it first, e.g. zstd -dc {name} > {plain}"),
    b"PK\x03\x04": ("a zip archive (as .xlsx, .ods and .npz files are)", "take the data out of it and " + _EXPORT),
    b"\xd0\xcf\x11\xe0": ("an old-style Office file (.xls)", _EXPORT),
    b"\x93NUMPY": ("a NumPy .npy file", "give it a .npy name, which is read as one."),
    b"PAR1": ("a Parquet file", _EXPORT),
    b"\x89HDF\r\n\x1a\n": ("an HDF5 file", _EXPORT),
    b"\x89PNG": ("a PNG image", "give the data file, not a figure."),
    b"%PDF": ("a PDF document", "give the data file, not a document."),
}


def _not_utf8(path: Path | str, exc: UnicodeDecodeError) -> DataFileError:
    """What to do with a text file that is not UTF-8: UTF-16 (what PowerShell's ``>`` and
    spreadsheets' "Unicode text" write) is named, and otherwise the first line that does
    not decode (the error's own offset counts from the start of a buffer, not the file)."""
    with Path(path).open("rb") as handle:
        head = handle.read(8)
        if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
            return DataFileError(str(path), "is UTF-16 text, not UTF-8; save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8).")
        for magic, (kind, what_to_do) in _BINARY_FORMATS.items():
            if head.startswith(magic):
                name = Path(path).name
                plain = shlex.quote(f"{Path(name).stem}-text{Path(name).suffix}")
                return DataFileError(str(path), f"is {kind}, not text (its first bytes say so): " + what_to_do.format(name=shlex.quote(name), plain=plain))
        handle.seek(0)
        # in blocks, not lines: a binary file may have no line end for gigabytes
        lines_before, carry = 0, b""
        while block := handle.read(1 << 20):
            data = carry + block
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as bad:
                if bad.end == len(data) and bad.reason == "unexpected end of data":
                    carry = data[bad.start :]  # a character cut by the block's end
                    lines_before += data[: bad.start].count(b"\n")
                    continue
                return DataFileError(
                    str(path),
                    f"is not UTF-8 text ({bad.reason}); save it as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8 for a Latin-1 file).",
                    line=lines_before + data[: bad.start].count(b"\n") + 1,
                )
            lines_before += data.count(b"\n")
            carry = b""
        if carry:  # the file ends inside a character
            return DataFileError(str(path), "is not UTF-8 text (its last character is cut short); save it as UTF-8.", line=lines_before + 1)
    return DataFileError(str(path), f"is not UTF-8 text ({exc.reason}); save it as UTF-8.")


def _text_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def _read_lines(path: Path) -> list[str]:
    strings = [line for line in _text_lines(path) if line != ""]
    if not strings:
        raise DataFileError(str(path), "holds no strings (every line is empty).")
    return strings


#: what a FASTA sequence line may hold: IUPAC letters (any ASCII letter: proteins use most
#: of them), '-' and '.' for gaps, '*' for a stop
_SEQUENCE_CHARACTERS = frozenset(string.ascii_letters + "-.*")


def _check_sequence_line(path: Path, line: str, text: str, lineno: int) -> None:
    """A FASTA sequence line holds letters (and '-', '.', '*' for gaps and stops) only."""
    if ">" in text:
        raise DataFileError(str(path), "'>' inside a sequence line.", line=lineno, column=line.index(">") + 1)
    digit = next((c for c in text if c.isdigit()), None)
    if digit is not None:
        # no sequence alphabet has digits: position numbers, as GenBank prints beside its
        # sequence lines, would otherwise be read as letters
        raise DataFileError(
            str(path),
            f"the digit {digit!r} inside a sequence line: FASTA sequences are letters only (position numbers, as in a GenBank file? remove them).",
            line=lineno,
            column=line.index(digit) + 1,
        )
    odd = next((c for c in text if not (c in _SEQUENCE_CHARACTERS or c.isspace())), None)
    if odd is not None:
        # '#', ',' or a quotation mark is no residue: read as one, it would be a letter of
        # its own in every string kernel, silently
        raise DataFileError(
            str(path),
            f"the character {odd!r} (U+{ord(odd):04X}) inside a sequence line: FASTA sequence lines hold letters, and '-', '.' and '*' for gaps and stops.",
            line=lineno,
            column=line.index(odd) + 1,
        )


def _read_fasta(path: Path, *, case_sensitive: bool = False) -> list[str]:
    sequences: list[str] = []
    header_line: int | None = None
    parts: list[str] = []

    def close() -> None:
        if header_line is not None:
            if not parts:
                raise DataFileError(str(path), "FASTA record has a header but no sequence.", line=header_line)
            sequence = "".join(parts)
            sequences.append(sequence if case_sensitive else sequence.upper())

    for lineno, line in enumerate(_text_lines(path), start=1):
        text = line.strip()
        if not text or text.startswith(";"):
            continue
        if text.startswith(">"):
            close()
            header_line, parts = lineno, []
            continue
        if header_line is None:
            raise DataFileError(str(path), "sequence data before the first '>' header line (not FASTA?).", line=lineno)
        _check_sequence_line(path, line, text, lineno)
        parts.append("".join(text.split()))
    close()
    if not sequences:
        raise DataFileError(str(path), "holds no FASTA records (no '>' header line).")
    return sequences


#: what to do with the files people most often have instead (read nothing implicitly: a
#: compressed file's size says nothing of the memory its content needs)
_UNSUPPORTED_HINTS = {
    **dict.fromkeys((".gz", ".bz2", ".xz", ".zst", ".zip"), " It is compressed: decompress it first (e.g. gunzip -k FILE), then give the file inside."),
    **dict.fromkeys((".fastq", ".fq"), " FASTQ is not read: convert it to FASTA first (e.g. seqtk seq -a IN.fastq > OUT.fa)."),
    ".npz": " An .npz archive holds several arrays: save the one you mean with np.save('x.npy', archive['name']).",
    **dict.fromkeys(
        (".xlsx", ".xls", ".ods", ".parquet", ".feather", ".h5", ".hdf5", ".pkl", ".pickle"),
        " Export the sample to .csv (one point a row) or to .npy (np.save) first.",
    ),
}


def _missing(p: Path) -> str:
    """Why ``p``, which does not exist as far as Path.exists can tell, cannot be read."""
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links, not a data file."
        if exc.errno == errno.EACCES:
            return f"cannot be reached: {exc.strerror} (a directory on its path may not be searchable)."
        if exc.errno == errno.ENOENT and p.is_symlink():
            return f"is a symbolic link to {os.readlink(p)!r}, which does not exist."
        if exc.errno == errno.ENOTDIR:
            return "no such file (a part of its path is a file, not a directory)."
    return "no such file."
