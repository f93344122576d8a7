"""Validated samples: what a kernel takes as input.

A *sample* is, for vector kernels, an ``(n, d)`` float64 array (a 1-D array is ``n``
points with one feature each); for string kernels a sequence of Python strings.
Everything that enters the library from a user passes through :func:`as_vectors` or
:func:`as_strings`, which reject NaN/inf, empty samples and malformed shapes with a
message that names the sample and the offending point. Reading samples from files is
the work of :mod:`monk_framework.io.loading`.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, cast

import numpy as np

from monk_framework.core.errors import DataError, PrecisionWarning, shown

__all__ = ["Sample", "as_vectors", "as_strings", "check_same_dimension", "owned_result", "read_only", "take"]

#: a validated sample: vectors as an (n, d) array, or strings as a list.
Sample = np.ndarray | list[str]


def take(sample: Sample, idx: np.ndarray) -> Sample:
    """The points ``idx`` of a sample (rows of an array, items of a list of strings)."""
    if isinstance(sample, np.ndarray):
        return cast(Sample, sample[idx])
    return [sample[i] for i in idx]


def owned_result(call: Callable[[], Any]) -> Any:
    """``call()``'s answer (a plugin hook's), as an array the caller alone holds, or None.

    A plugin may keep what it returns (a reused output buffer, a memo) and write into it
    again, on another thread or at its next call; the framework keeps arrays a while
    (tiles beside the next tile, batches of statistics until all are in) and writes into
    some. An array held elsewhere, or viewing memory held elsewhere, is therefore
    copied; a fresh one (what a hook computes and forgets: the usual case) is not. What is
    not an array is converted with ``np.asarray``, and copied if that only viewed it.
    """
    raw = call()
    if raw is None:
        return None
    alone = _unshared(raw)
    values = np.asarray(raw)
    if (values is raw and not alone) or (values is not raw and values.base is not None):
        values = values.copy()
    return values


def _counts(raw: Any) -> tuple[int, int]:
    """References to a caller's local ``raw`` and to the owner of its memory (0: none)."""
    if not hasattr(sys, "getrefcount"):  # an interpreter without reference counts
        return sys.maxsize, sys.maxsize
    base = raw.base if isinstance(raw, np.ndarray) else None
    return sys.getrefcount(raw), (0 if base is None else sys.getrefcount(base))


def _through(raw: Any) -> tuple[int, int]:
    return _counts(raw)  # one frame deep, as in _unshared


def _calibrate() -> tuple[int, int]:
    raw = np.empty(2)[:1]  # a local viewing memory nothing else holds, as a fresh tile does
    return _through(raw)


#: the reference counts of a local array, and of its memory's owner, held nowhere else
_ALONE = _calibrate()


def _unshared(raw: Any) -> bool:
    """True when a caller's local ``raw`` is held nowhere else, nor is its memory (a fresh
    array, or a view of one): then no one else can write into it later."""
    mine, owner = _counts(raw)
    return mine <= _ALONE[0] and owner <= _ALONE[1]


def read_only(sample: Any) -> Any:
    """A view of a vector sample (or any array) that cannot be written into; anything else
    as it is.

    The framework hands plugins read-only views of the data (validated samples, Gram
    tiles' inputs), so a kernel or estimator that writes into its inputs fails at once,
    by name, instead of changing the caller's arrays and every later number. The
    caller's own array keeps its flags: only the view is locked.
    """
    if isinstance(sample, np.ndarray) and sample.flags.writeable:
        view = sample.view()
        view.flags.writeable = False
        return view
    return sample


def _check_container(X: Any, name: str) -> None:
    """Refuse what is no sample whatever its contents: None, an unordered collection (a
    set's order of strings changes from one process to the next, and with it every
    seeded partition), and a one-pass iterator (read once here, gone for the next use)."""
    if X is None:
        raise DataError(f"{name} is None; give the sample (an array of points, or a list of strings).")
    if isinstance(X, (set, frozenset, Mapping)):
        raise DataError(f"{name} is a {type(X).__name__}, which has no order of points (and seeded results depend on it); give a list or an array.")
    if isinstance(X, Iterator):
        raise DataError(f"{name} is a one-pass iterator ({type(X).__name__}); make it a list or an array first, e.g. list({name}).")
    if hasattr(X, "tocsr") and hasattr(X, "nnz") and hasattr(X, "shape"):
        # scipy.sparse: np.asarray makes a 0-d array holding the matrix object
        raise DataError(f"{name} is a sparse matrix ({type(X).__name__}, shape {tuple(X.shape)}); the kernels here take dense arrays: pass {name}.toarray().")


def _object_numbers(arr: np.ndarray, name: str) -> np.ndarray:
    """An array of Python objects (``df.values`` of a frame with mixed columns, a list
    holding numpy and Python numbers, a database's ``Decimal`` values) as float64 when
    every element is a real number;
    a missing value (None, pandas' NA and NaT) or any other object refused by position."""
    flat = arr.ravel()
    for i, value in enumerate(flat):
        if isinstance(value, numbers.Real):
            continue
        # a database's NUMERIC column holds Decimal: a real number, though not numbers.Real
        # (NaN and infinity pass here, and are named by the finiteness check after)
        if isinstance(value, Decimal) and (not value.is_finite() or math.isfinite(float(value))):
            continue
        where = ", ".join(f"{what} {int(j)}" for what, j in zip(("point", "feature"), np.unravel_index(i, arr.shape)))
        if isinstance(value, Decimal):
            raise DataError(f"{name} holds {shown(value)} at {where}, beyond float64's range (about 1.8e308).")
        if value is None or type(value).__name__ in ("NAType", "NaTType"):
            raise DataError(f"{name} holds a missing value ({value!r}) at {where}; drop or impute the missing values first.")
        raise DataError(f"{name} holds {type(value).__name__} {shown(value, 40)} at {where}, which is not a number.")
    try:
        return arr.astype(np.float64)
    except OverflowError:
        raise DataError(f"{name} holds an integer beyond float64's range (about 1.8e308).") from None


def as_vectors(X: Any, *, name: str = "X", user: str = "this kernel") -> np.ndarray:
    """Validate a vector sample and return it as a C-contiguous ``(n, d)`` float64 array.

    Raises
    ------
    DataError
        if ``X`` is not numeric, not 1-D or 2-D, empty, or holds NaN or inf (the
        message gives the index of the first bad point and feature).
    """
    arr = _points(_numeric_array(X, name, user), name)
    if arr.dtype.kind in "iu" and arr.dtype.itemsize > 4:
        _warn_if_integers_round(arr, name)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        i, j = np.argwhere(~finite)[0]
        bad = "NaN" if math.isnan(arr[i, j]) else "inf"
        count = int((~finite).sum())
        raise DataError(
            f"{name} contains {bad} at point {i}, feature {j} ({count} non-finite value{'s' if count > 1 else ''} in all); remove or impute them first."
        )
    return cast(np.ndarray, read_only(arr))


def _numeric_array(X: Any, name: str, user: str) -> np.ndarray:
    """``X`` as a numpy array of real numbers (any shape), or a DataError saying what it is
    instead: strings, masked values, complex numbers, a structured array, dates."""
    _check_container(X, name)
    if isinstance(X, str) or (isinstance(X, Sequence) and len(X) > 0 and all(isinstance(x, str) for x in X)):
        raise DataError(f"{name} holds strings, but {user} needs numeric vectors.")
    if isinstance(X, np.ma.MaskedArray):
        # np.asarray would take the values under the mask as data
        masked = int(np.count_nonzero(np.ma.getmaskarray(X)))
        if masked:
            raise DataError(
                f"{name} is a masked array with {masked} masked value{'s' if masked > 1 else ''}; a sample has "
                "no missing values. Drop the masked points (X[~X.mask.any(axis=1)]) or fill them first."
            )
        X = np.ma.getdata(X)
    try:
        arr = np.asarray(X)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - an object's own __array__ may fail its own way (a tensor on a GPU)
        why = str(exc) if isinstance(exc, (ValueError, TypeError)) else f"{type(exc).__name__}: {exc}"
        raise DataError(f"{name} cannot be read as a numeric array ({why}).") from None
    if arr.dtype.kind in "US":
        raise DataError(f"{name} holds strings, but {user} needs numeric vectors.")
    if arr.dtype.kind == "O" and arr.size:
        arr = _object_numbers(arr, name)
    if arr.dtype.kind not in "biuf":
        why = {
            "c": "complex numbers are not vectors of reals: put the real and imaginary parts in columns of their own, np.column_stack([z.real, z.imag])",
            "V": "a structured array: stack its numeric fields into columns, np.column_stack([a[f] for f in a.dtype.names])",
            "M": "dates and times are not numbers: convert them, e.g. to seconds, (t - t0) / np.timedelta64(1, 's')",
            "m": "time spans are not numbers: convert them, e.g. to seconds, d / np.timedelta64(1, 's')",
        }.get(arr.dtype.kind, "ragged lists or Python objects are not samples")
        raise DataError(f"{name} must be a numeric array; got dtype {arr.dtype} ({why}).")
    return arr


def _points(arr: np.ndarray, name: str) -> np.ndarray:
    """A numeric array as points × features: 1-D is one feature per point; a single
    number, more than two dimensions, no points or no features are refused."""
    if arr.ndim == 0:
        raise DataError(f"{name} is a single number; a sample needs a 1-D or 2-D array.")
    if arr.ndim == 1:
        arr = arr[:, None]
    elif arr.ndim > 2:
        raise DataError(
            f"{name} has {arr.ndim} dimensions (shape {arr.shape}); a sample is a 1-D array (one feature per point) or a 2-D array (points x features)."
        )
    if arr.shape[0] == 0:
        raise DataError(f"{name} is empty: it has no points.")
    if arr.shape[1] == 0:
        raise DataError(f"{name} has points with no features (shape {arr.shape}).")
    return arr


def _warn_if_integers_round(arr: np.ndarray, name: str) -> None:
    """float64, what every kernel computes with, holds each integer up to 2^53; beyond it
    neighbours merge (2^53 + 1 becomes 2^53) and the data change without a word."""
    top = float(np.max(np.abs(arr.astype(np.float64))))
    if top > 2.0**53:
        warnings.warn(
            PrecisionWarning(
                f"{name} holds integers up to {top:.4g}, beyond 2^53 = 9.007e15: as float64, which every kernel "
                "computes with, they are rounded and neighbouring values can become equal. Subtract a common "
                "offset (or rescale) first if their last digits matter."
            ),
            stacklevel=4,
        )


def as_strings(X: Any, *, name: str = "X", user: str = "this kernel") -> list[str]:
    """Validate a string sample (a non-empty sequence of Python strings)."""
    _check_container(X, name)
    if isinstance(X, str):
        raise DataError(f"{name} is a single string; a sample is a sequence of strings.")
    if isinstance(X, np.ndarray) and X.dtype.kind in "biuf":
        raise DataError(f"{name} holds numbers, but {user} needs strings.")
    try:
        items = list(X)
    except TypeError:
        raise DataError(f"{name} must be a sequence of strings; got {type(X).__name__}.") from None
    if not items:
        raise DataError(f"{name} is empty: it has no points.")
    if all(_one_string(item) for item in items):
        # a column of strings, shape (N, 1): a data frame's df[["seq"]].values
        items = [item[0] for item in items]
    for i, item in enumerate(items):
        if not isinstance(item, str):
            hint = " (bytes: decode them first, e.g. [s.decode() for s in X])" if isinstance(item, bytes) else ""
            raise DataError(f"{name}[{i}] is {type(item).__name__} {shown(item)}, but {user} needs strings.{hint}")
    return items


def _one_string(item: Any) -> bool:
    """Whether ``item`` is a row of one string (a list, tuple or array of length 1)."""
    return isinstance(item, (list, tuple, np.ndarray)) and len(item) == 1 and isinstance(item[0], str)


def check_same_dimension(X: np.ndarray, Y: np.ndarray, *, names: tuple[str, str] = ("X", "Y")) -> None:
    """Raise a :class:`DataError` if two vector samples differ in their number of features."""
    if X.shape[1] != Y.shape[1]:
        hint = ""
        for (a, b), (name, _) in (((X, Y), names), ((Y, X), names[::-1])):
            if a.shape[1] == 1 and len(a) == b.shape[1]:
                # a 1-D array is points of one feature: the common slip for a single point
                hint = (
                    f" ({name} may be one point given as a 1-D array of {len(a)} numbers, which reads as {len(a)} "
                    f"points of one feature: write it as [[...]], shape (1, {len(a)}).)"
                )
                break
        raise DataError(f"{names[0]} has {X.shape[1]} feature(s) per point but {names[1]} has {Y.shape[1]}; both samples must live in the same space.{hint}")
