"""Reductions of a symmetric Gram matrix K band by band, written once for every Gram source.

A band of rows a:b of K contributes to a reduction through its diagonal block and the part
right of it, which a stored K gives whole and a matrix-free source as tiles evaluated on
the fly; each reduction here (row sums, products K W, quadratic forms diag WᵀKW with or
without the last column's products, block Gram matrices WᵀKW) says what a band adds, so
that every source gives the same numbers up to the order of the additions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, cast

import attrs
import numpy as np
import scipy.sparse as sp

from monk_framework.numerics.product_loops import PATTERN_POINTS, add_indicator_product, add_tile_product, every_point_patterns

__all__ = ["BandReduction", "BlockGram", "Forms", "IndicatorColumns", "MatVec", "RowSums", "band_reduction", "band_reduction_of", "dense_columns"]


def _check_patterns(instance: IndicatorColumns, attribute: attrs.Attribute[Any], patterns: np.ndarray) -> None:
    n, C = instance.dense.shape
    groups = -(-n // PATTERN_POINTS)
    if patterns.dtype != np.uint8 or patterns.ndim != 2 or patterns.shape[0] != groups or patterns.shape[1] not in (C, C + 1):
        raise ValueError(
            f"IndicatorColumns: patterns must be uint8 of shape ({groups}, {C} or {C + 1}) for {n} × {C} columns, got {patterns.dtype} {patterns.shape}"
        )
    # the last column picks every point, so that every tile value reaches a sum (the
    # finiteness check); with as many columns as ``dense``, it is dense's own
    if not np.array_equal(patterns[:, -1], every_point_patterns(n)) or (patterns.shape[1] == C and not (instance.dense[:, -1] == 1.0).all()):
        raise ValueError("IndicatorColumns: the patterns' last column must pick every point (and be dense's last column when they have as many columns)")


@attrs.frozen(eq=False)
class IndicatorColumns:
    """An n × C matrix of 0s and 1s (the X indicators of relabellings), held two ways:
    ``dense``, its values, and ``patterns``, its rows packed four to a byte
    (:func:`monk_framework.engine.pooled.indicator_patterns`), with which a matrix-free source
    adds up its tiles' products by subset sums (:func:`monk_framework.numerics.product_loops.add_indicator_product`).
    The patterns' last column picks every point: it is ``dense``'s last column (of ones)
    or one more, so that a non-finite kernel value reaches at least one sum (the
    products' finiteness check). Every reduction accepts it where it accepts a dense W."""

    dense: np.ndarray = attrs.field(validator=attrs.validators.instance_of(np.ndarray))
    patterns: np.ndarray = attrs.field(validator=[attrs.validators.instance_of(np.ndarray), _check_patterns])

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dense.shape


def dense_columns(W: Any) -> Any:
    """W's values: the dense matrix of an :class:`IndicatorColumns`, anything else as it is."""
    return W.dense if isinstance(W, IndicatorColumns) else W


def _forms_and_last(own: np.ndarray, inner: np.ndarray, across: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A band's shares of diag(Wᵀ K W) and Wᵀ K w_last from own = W[a:b], inner = D own
    (D its diagonal block) and across = R W[b:] (R the part right of D)."""
    forms = np.einsum("ij,ij->j", own, inner + 2.0 * across)
    cross = own.T @ (inner[:, -1] + across[:, -1]) + own[:, -1] @ across
    return forms, cross


class BandReduction:
    """One reduction of the symmetric K by row bands, written once for every source.

    A band a:b contributes through its diagonal block D = K[a:b, a:b] (:meth:`diagonal`,
    first) and the part right of it, R = K[a:b, b:], which arrives whole (a stored K)
    or as column tiles R_c = K[a:b, c:d] evaluated on the fly (:meth:`right`, in order
    of c); :meth:`result` is the band's share. ``check(values)`` returns values after
    checking them finite (the kernel's :meth:`~monk_framework.core.kernels.Kernel.check_finite`;
    the identity for a stored K, checked when it was made). A reduction that sets
    ``checks_its_results`` checks what it derives from the tiles (a NaN or an infinity
    in a tile reaches every sum of its row) instead of each tile.
    """

    checks_its_results: ClassVar[bool] = False
    #: whether it takes the tiles transposed (:meth:`right_transposed`, the band's points
    #: as lanes), with packed 0/1 columns: subset sums instead of products
    transposed: bool = False

    def __init__(self, W: Any, start: int, stop: int, check: Callable[[np.ndarray], np.ndarray]) -> None:
        self.W, self.start, self.stop, self.check = W, start, stop, check

    def diagonal(self, D: np.ndarray) -> None:
        raise NotImplementedError

    def right(self, R: np.ndarray, c: int, d: int) -> None:
        raise NotImplementedError

    def right_transposed(self, RT: np.ndarray, c: int, d: int) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


class RowSums(BandReduction):
    """(the band's row sums, the column sums of R, which belong to the later rows)."""

    checks_its_results = True

    def diagonal(self, D: np.ndarray) -> None:
        self.own = D.sum(axis=1)
        self.later: list[np.ndarray] = []

    def right(self, R: np.ndarray, c: int, d: int) -> None:
        self.own += R.sum(axis=1)
        self.later.append(R.sum(axis=0))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        self.check(self.own)
        return self.own, np.concatenate(self.later) if self.later else np.zeros(0)


class MatVec(BandReduction):
    """(K[a:b, a:] W[a:], Rᵀ W[a:b]) for the rows a:b and the later rows."""

    def diagonal(self, D: np.ndarray) -> None:
        self.W = dense_columns(self.W)
        self.own = D @ self.W[self.start : self.stop]
        self.later: list[np.ndarray] = []

    def right(self, R: np.ndarray, c: int, d: int) -> None:
        self.own += R @ self.W[c:d]
        self.later.append(R.T @ self.W[self.start : self.stop])

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        later = np.concatenate(self.later) if self.later else np.zeros((0, *self.own.shape[1:]))
        return self.own, later


class Forms(BandReduction):
    """diag(Wᵀ K W)'s share, 2·diag(W[a:b]ᵀ R W[b:]) + diag(W[a:b]ᵀ D W[a:b]), and with
    ``with_last`` also Wᵀ K w's share for w = W's last column, from the products alone.

    R W[b:] is summed by a compiled loop that reads each tile in place (W in Fortran
    order), or, for 0/1 columns packed as :class:`IndicatorColumns` and tiles taken
    transposed, by subset sums four points at a time. Either way every tile value is
    multiplied into, or added to, the all-ones-like last sums, so a NaN or an infinity
    anywhere makes the band's results non-finite: they are checked once, not each tile.
    """

    checks_its_results = True

    def __init__(self, W: Any, start: int, stop: int, check: Callable[[np.ndarray], np.ndarray], *, with_last: bool, packed: bool = True) -> None:
        super().__init__(W, start, stop, check)
        self.with_last = with_last
        self.patterns = W.patterns if packed and isinstance(W, IndicatorColumns) else None
        self.transposed = self.patterns is not None
        self.W = dense_columns(W)

    def diagonal(self, D: np.ndarray) -> None:
        width = self.stop - self.start
        self.own = self.W[self.start : self.stop]
        self.inner = D @ self.own
        if self.transposed:
            assert self.patterns is not None
            self.sums = np.zeros((self.patterns.shape[1], -(-width // 8) * 8))  # lanes: the band's points, padded to 8
        else:
            self.across = np.zeros((width, self.W.shape[1]))

    def right(self, R: np.ndarray, c: int, d: int) -> None:
        if not add_tile_product(self.across, R, self.W.T, c):
            self.across += self.check(R) @ self.W[c:d]

    def right_transposed(self, RT: np.ndarray, c: int, d: int) -> None:
        assert self.patterns is not None
        if not add_indicator_product(self.sums, RT, self.patterns, c):
            raise RuntimeError(f"add_indicator_product declined a {d - c} × {RT.shape[1]} tile at {c}")  # pragma: no cover - laid out by the caller

    def result(self) -> Any:
        if self.transposed:
            across = self.sums[:, : self.stop - self.start].T
            self.check(across)
            across = across[:, : self.W.shape[1]]
        else:
            across = self.check(self.across)
        if self.with_last:
            return _forms_and_last(self.own, self.inner, across)
        # the diagonal block once, the part right of it twice (K is symmetric)
        return np.einsum("ij,ij->j", self.own, self.inner + 2.0 * across)


class BlockGram(BandReduction):
    """Wᵀ K W's share (W sparse or dense): Wᵀ D W + (W[a:b]ᵀ R W[b:]) + its transpose."""

    def diagonal(self, D: np.ndarray) -> None:
        W = self.W
        self.sparse = sp.issparse(W)
        self.Wst = sp.csr_array(W[self.start : self.stop].T) if self.sparse else W[self.start : self.stop].T
        self.G = np.asarray(self.Wst @ D) @ self._rows(self.start, self.stop)

    def _rows(self, a: int, b: int | None) -> Any:
        return self.W[a:b].toarray() if self.sparse else self.W[a:b]

    def right(self, R: np.ndarray, c: int, d: int) -> None:
        off = np.asarray(self.Wst @ R) @ self._rows(c, d)
        self.G += off + off.T

    def result(self) -> np.ndarray:
        return cast(np.ndarray, self.G)


def band_reduction_of(op: str, W: Any, start: int, stop: int, check: Callable[[np.ndarray], np.ndarray], *, packed: bool = True) -> BandReduction:
    """The reduction ``op`` ("row_sums", "matvec", "quadratic_forms", "forms_and_last",
    "block_gram") of the band start:stop with weights W."""
    if op == "row_sums":
        return RowSums(W, start, stop, check)
    if op == "matvec":
        return MatVec(W, start, stop, check)
    if op in ("quadratic_forms", "forms_and_last"):
        return Forms(W, start, stop, check, with_last=op == "forms_and_last", packed=packed)
    if op == "block_gram":
        return BlockGram(W, start, stop, check)
    raise ValueError(f"unknown band reduction {op!r}")


def _unchecked(values: np.ndarray) -> np.ndarray:
    return values


def band_reduction(op: str, band: np.ndarray, start: int, stop: int, W: Any) -> Any:
    """The reduction ``op`` of a whole band K[start:stop, start:] of a stored K: its
    diagonal block, then the part right of it as one tile."""
    width = stop - start
    reduction = band_reduction_of(op, W, start, stop, _unchecked, packed=False)
    reduction.diagonal(band[:, :width])
    if band.shape[1] > width:
        reduction.right(band[:, width:], stop, stop + band.shape[1] - width)
    return reduction.result()
