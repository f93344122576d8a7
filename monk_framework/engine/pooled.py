"""The pooled sample Z = [X; Y] and its Gram matrix, shared by every relabelling.

A permutation test recomputes a statistic for many relabellings of the pooled sample:
a permutation π of 0..N+M−1 whose first N entries form the new X and the rest the new
Y. The kernel (fitted once on Z, so data-dependent hyperparameters do not move) and the
pooled Gram matrix K do not depend on π; only which rows are called X does. This module
holds that shared part, computes it once, and hands each relabelling a Gram source in
its own coordinates without copying K.

Two reductions serve the classical statistics of many relabellings at once:
with E the (N+M) × B matrix of X-indicators of B relabellings, r = K1 and d = diag K,

    S_xx = diag(EᵀKE),       S_x1 = Eᵀr,   S_xy = S_x1 − S_xx,   S_yy = 1ᵀK1 − S_x1 − S_xy,
    tr_x = Eᵀd,              tr_y = tr K − tr_x,

one product with K for B relabellings (in batches bounded in memory; the quadratic
forms diag(EᵀKE) use only the upper half of the symmetric K, about half the FLOPs of KE).
"""

from __future__ import annotations

import numbers
from decimal import Decimal
from typing import Any, cast

import attrs
import numpy as np

from monk_framework.core.errors import ParameterError, shown
from monk_framework.core.kernel_checks import CONTRACT_RTOL, DIAG_RTOL
from monk_framework.core.kernels import Kernel, check_squared_norm
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample, take
from monk_framework.engine.backends import one_blas_thread
from monk_framework.engine.gram_sources import FeatureGram, GramSource, IndicatorColumns, MatrixFreeGram, PermutedGram, StoredGram, gram_source
from monk_framework.engine.kernel_sums import feature_block_rows, feature_sums, paying_features
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.engine.memory import chunk_rows
from monk_framework.engine.reductions import diagonal_round_off, u_statistic
from monk_framework.numerics.product_loops import PATTERN_POINTS, every_point_patterns, pack_patterns

__all__ = [
    "SHARED_INDICATORS",
    "IndicatorMemo",
    "PooledSample",
    "SampleSums",
    "indicator_columns",
    "far_point_sample_sums",
    "indicator_patterns",
    "off_diagonal_sample_sums",
    "pooled",
    "relabelling_batch",
    "sample_sums",
    "u_statistic",
    "v_statistic",
]


def pooled(X: Sample, Y: Sample) -> Any:
    """Z = [X; Y] (rows for vectors, concatenation for strings)."""
    if isinstance(X, np.ndarray):
        return np.vstack([X, Y])
    return list(X) + list(Y)


#: rows of a precomputed Gram matrix checked at a time (a band and its mirror: 2 x 256 x P values)
GIVEN_GRAM_BAND = 256


def _check_given_gram(K: np.ndarray) -> None:
    """The contract a precomputed Gram matrix K of the pooled sample must meet, checked on
    every entry in bands of rows (no P x P temporary): symmetry, a diagonal k(z, z) >= 0
    and Cauchy–Schwarz |K_ij| <= sqrt(K_ii K_jj), which every PSD kernel's matrix obeys.
    A ParameterError names the entries: the matrix was given, no kernel computed it."""
    size = len(K)
    diag = np.diagonal(K).copy()
    scale = max(float(np.abs(K).max(initial=0.0)), 1e-300)
    if diag.min(initial=0.0) < -DIAG_RTOL * scale:
        i = int(np.argmin(diag))
        raise ParameterError(f"The precomputed Gram matrix is not positive semi-definite: K[{i}, {i}] = {diag[i]:.6g} < 0.")
    root = np.sqrt(np.maximum(diag, 0.0))
    for a in range(0, size, GIVEN_GRAM_BAND):
        b = min(a + GIVEN_GRAM_BAND, size)
        band = K[a:b]
        gap = np.abs(band - K[:, a:b].T)
        if gap.max() > CONTRACT_RTOL * scale:
            i, j = (int(v) for v in np.unravel_index(int(np.argmax(gap)), gap.shape))
            raise ParameterError(f"The precomputed Gram matrix is not symmetric: K[{a + i}, {j}] = {K[a + i, j]:.6g} but K[{j}, {a + i}] = {K[j, a + i]:.6g}.")
        excess = np.abs(band) - np.outer(root[a:b], root)
        if excess.max() > DIAG_RTOL * scale:
            i, j = (int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
            raise ParameterError(
                f"The precomputed Gram matrix is not positive semi-definite: |K[{a + i}, {j}]| = {abs(K[a + i, j]):.6g} "
                f"exceeds sqrt(K[{a + i}, {a + i}] K[{j}, {j}]) = {root[a + i] * root[j]:.6g} (Cauchy-Schwarz)."
            )


class PooledSample:
    """Z = [X; Y] with a fitted kernel; its Gram source, diagonal and row sums, each computed once.

    ``resources`` (its memory budget, and whether the Gram reductions spread over a remote
    backend) and ``matrix_free`` are passed to
    :func:`~monk_framework.engine.gram_sources.gram_source`: "auto" stores K when it fits
    in the budget. The pool hands ``resources`` on to whatever is computed from it
    (``pool.resources``).
    """

    def __init__(
        self,
        kernel: Kernel,
        X: Sample,
        Y: Sample,
        *,
        resources: Resources,
        matrix_free: bool | str = "auto",
        gram: np.ndarray | None = None,
        source: GramSource | None = None,
        diag: np.ndarray | None = None,
        row_sums: np.ndarray | None = None,
        parent: tuple[PooledSample, np.ndarray] | None = None,
    ):
        if not isinstance(resources, Resources):
            raise TypeError(f"PooledSample: resources must be a Resources; got {type(resources).__name__}")
        self.kernel = kernel
        self.resources = resources
        self.n, self.m = len(X), len(Y)
        self._parts = (X, Y)
        self._Z: Any = None
        self.matrix_free = matrix_free
        # parts already known (e.g. a relabelling's view of another pool's) are taken as given
        self._source: GramSource | None = source
        self._diag: np.ndarray | None = diag
        self._row_sums: np.ndarray | None = row_sums
        #: (the pool, the permutation) this one relabels: its diagonal and row sums are
        #: the parent's, read through the permutation when first asked for
        self._parent = parent
        #: reductions that a test reuses across its batches of relabellings (e.g. the
        #: within-block Gram matrices of its partition); they live as long as the pool
        self.cache: dict[str, Any] = {}
        #: told the share (0 to 1) of each walk through the source's bands, while a test
        #: listens (:func:`~monk_framework.engine.relabelling.null_statistics`)
        self.band_listener: Any = None
        if gram is not None:
            self._use_gram(gram)
            self.cache["features"] = None  # the caller's Gram matrix is read, not the kernel's features
            self.cache["features-given"] = True
        elif source is None:
            # the one place a test's kernel values start from: its contract, whichever
            # estimator will read them
            kernel.check_contract(X, Y)

    def _use_gram(self, K: Any) -> None:
        """Take a precomputed Gram matrix of Z (e.g. a slice of one over a whole data set)."""
        try:
            given = np.asarray(K)
            numbers_only = given.dtype.kind != "O" or all(isinstance(v, (numbers.Real, Decimal)) and not isinstance(v, bool) for v in given.flat)
            if given.dtype.kind not in "biufO" or not numbers_only:  # text, complex (float() drops its imaginary part)
                raise TypeError
            K = given.astype(float)
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(f"The precomputed Gram matrix must be a {self.size} x {self.size} array of real numbers; got {shown(K)}.") from None
        if K.shape != (self.size, self.size):
            raise ParameterError(f"The precomputed Gram matrix must be {self.size} x {self.size} (the pooled sample); got shape {K.shape}.")
        if not np.all(np.isfinite(K)):
            raise ParameterError("The precomputed Gram matrix has NaN or infinite entries.")
        _check_given_gram(K)
        self._source = StoredGram(self.kernel, self.Z, K=K)
        self._diag = np.diag(K).copy()

    @property
    def Z(self) -> Any:
        """[X; Y], copied together on first use: a within-block estimate at 10⁶ + 10⁶
        points never needs it (0.4 s of its 3)."""
        if self._Z is None:
            self._Z = pooled(*self._parts)
        return self._Z

    @property
    def size(self) -> int:
        return self.n + self.m

    @property
    def X(self) -> Any:
        return self._parts[0]

    @property
    def Y(self) -> Any:
        return self._parts[1]

    @property
    def gram(self) -> GramSource:
        """The Gram matrix of Z (:class:`~monk_framework.core.protocols.GramMatrix`): the
        source, made on first use."""
        return self.source

    @property
    def kernel_seconds(self) -> float:
        """Seconds the pool's Gram source has spent evaluating the kernel (0 before it is made)."""
        return 0.0 if self._source is None else self._source.kernel_s

    @property
    def reads_features(self) -> bool:
        """Whether the classical sums come from the kernel's explicit features."""
        return self.features is not None or self.feature_total is not None

    def relabelling(self, perm: np.ndarray) -> PooledSample:
        """The pool of one relabelling, Z[perm] with its first N points as X: its Gram
        source reads this pool's (:meth:`permuted_source`: a stored K is never copied),
        and its diagonal and row sums are this pool's read through ``perm``, computed
        here on first use (the same numbers as the parent's, bit for bit)."""
        perm = np.asarray(perm, dtype=np.int64)
        X, Y = self.relabelled(perm)
        return PooledSample(self.kernel, X, Y, resources=self.resources, source=self.permuted_source(perm), parent=(self, perm))

    @property
    def source(self) -> GramSource:
        if self._source is None:
            # a stored Gram matrix's build is one long step too: told to the band listener
            told = attrs.evolve(self.resources, progress=self._gram_built)
            self._source = gram_source(self.kernel, self.Z, resources=told, matrix_free=self.matrix_free)
            self._source.on_band = self._band_done
        return self._source

    def _band_done(self, share: float) -> None:
        if self.band_listener is not None:
            self.band_listener(share)

    def _gram_built(self, done: float, total: float, what: str) -> None:
        """The Gram matrix's build reported as the pool's resources report it, and to the
        band listener as a share."""
        self.resources.report(done, total, what)
        if self.band_listener is not None and total:
            self.band_listener(min(1.0, done / total))

    @property
    def features(self) -> np.ndarray | None:
        """Φ(Z), the kernel's explicit features of the pooled points, when they make the
        classical sums cheaper than the Gram matrix (:func:`~monk_framework.core.kernels.paying_features`);
        else None. Computed once."""
        if "features" not in self.cache:
            found = paying_features(self.kernel, self._parts, self.resources)
            self.cache["features"] = None if found is None else np.vstack(found)
        features: np.ndarray | None = self.cache["features"]
        return features

    @property
    def feature_total(self) -> np.ndarray | None:
        """Σ_z φ(z) over the pooled points when the kernel's features pay but their matrix
        does not fit the budget (:func:`~monk_framework.core.kernels.feature_sums`, which
        checks them): the classical sums of a test then read the features in blocks of
        rows, batch by batch (:func:`sample_sums`). None otherwise, and for a given Gram
        matrix. Computed once."""
        if "feature-total" not in self.cache:
            total = None
            if self.features is None and self.cache.get("features-given") is None:
                summed = feature_sums(self.kernel, self._parts, self.resources)
                total = None if summed is None else summed[0] + summed[1]
            self.cache["feature-total"] = total
        found: np.ndarray | None = self.cache["feature-total"]
        return found

    @property
    def made_source(self) -> GramSource | None:
        """The Gram source if it has been made already, else None (nothing is computed)."""
        return self._source

    @property
    def stored(self) -> bool:
        return isinstance(self.source, StoredGram)

    @property
    def diag(self) -> np.ndarray:
        if self._diag is None:
            if self._parent is not None:
                parent, perm = self._parent
                self._diag = parent.diag[perm]
            else:
                # k(z, z) point by point: the same values from X and Y as from Z
                X, Y = self._parts
                self._diag = np.concatenate([self.kernel.diag_tile(X), self.kernel.diag_tile(Y)])
        return self._diag

    @property
    def row_sums(self) -> np.ndarray:
        if self._row_sums is None:
            if self._parent is not None:
                parent, perm = self._parent
                self._row_sums = parent.row_sums[perm]
            else:
                self._row_sums = self.source.row_sums()
        return self._row_sums

    def submatrix(self, idx: np.ndarray) -> np.ndarray:
        """K[idx][:, idx]: read from the stored Gram matrix when there is one, else evaluated
        for these points only (within-block tests never need the whole pooled Gram matrix)."""
        if isinstance(self._source, StoredGram):
            return cast(np.ndarray, self._source.K[np.ix_(idx, idx)])
        return gram_matrix(self.kernel, take(self.Z, idx))

    def relabelled(self, perm: np.ndarray) -> tuple[Any, Any]:
        """The samples (X', Y') of a relabelling: Z[perm[:N]] and Z[perm[N:]]."""
        return take(self.Z, perm[: self.n]), take(self.Z, perm[self.n :])

    def permuted_source(self, perm: np.ndarray) -> GramSource:
        """The Gram source of Z[perm], without copying a stored K."""
        src = self.source
        if isinstance(src, StoredGram):
            return PermutedGram(src.K, perm)
        if isinstance(src, FeatureGram):
            return src.permuted(perm)
        return MatrixFreeGram(self.kernel, take(self.Z, perm), diag=self.diag[perm])


@attrs.frozen
class SampleSums:
    """Kernel sums of B relabellings: within X, within Y, across, and the two traces; and
    where they were added up without the diagonal, the sums within X and within Y over
    i ≠ j (``xx_off``, ``yy_off``; else None, and S_xx − tr_x stands for them)."""

    xx: np.ndarray
    yy: np.ndarray
    xy: np.ndarray
    trace_x: np.ndarray
    trace_y: np.ndarray
    xx_off: np.ndarray | None = None
    yy_off: np.ndarray | None = None


def batch_size(rows: int) -> int:
    """Relabellings per batch so that E and KE of ``rows`` points take at most one batch
    (:func:`~monk_framework.engine.memory.chunk_rows` of ``work="batch"``)."""
    return chunk_rows(2 * 8 * max(rows, 1), work="batch")


def relabelling_batch(pool: PooledSample) -> int:
    """Relabellings per product with the Gram matrix: :func:`batch_size` for a stored one;
    for a matrix-free one as many as a quarter of the memory budget holds in E (every
    batch evaluates the kernel over the whole pooled sample again)."""
    if pool.features is not None or pool.feature_total is not None or pool.stored:
        return batch_size(pool.size)

    return max(batch_size(pool.size), chunk_rows(8 * max(pool.size, 1), work="batch", share=0.25, resources=pool.resources))


def indicator_columns(perms: np.ndarray, n: int, size: int, *, ones: bool = False, order: str = "C") -> np.ndarray:
    """The size × B matrix E of 0/1 floats with E[i, b] = 1 where relabelling b (a row of
    ``perms``) calls pooled point i an X point: its first ``n`` entries. With ``ones``, a
    last column of ones follows (size × (B + 1)). ``order="F"`` stores each column
    contiguously, as the matrix-free products want it (:func:`monk_framework.numerics.product_loops.add_tile_product`)."""
    if order not in ("C", "F"):
        raise ValueError(f"indicator_columns: order must be 'C' or 'F', got {order!r}")
    B = len(perms)
    width = B + 1 if ones else B
    by_columns = order == "F"
    # on a 64-byte boundary (numpy's large arrays start 16 bytes past one): the compiled
    # product's vector loads then split no cache line when size is a multiple of 8
    buffer = np.zeros(width * size + 8)
    skip = (-buffer.ctypes.data % 64) // 8
    stored = buffer[skip : skip + width * size].reshape((width, size) if by_columns else (size, width))
    # one flat index per one, a single scatter, about twice as fast as indexing by
    # (row, column) pairs: point i and column b at i·width + b in row-major order, at
    # b·size + i in column-major order
    point_step, column_step = (1, size) if by_columns else (width, 1)
    flat = perms[:, :n] * point_step + (column_step * np.arange(B))[:, None]
    stored.ravel()[flat.ravel()] = 1.0
    E = stored.T if by_columns else stored
    if ones:
        E[:, B] = 1.0
    return E


def indicator_patterns(perms: np.ndarray, n: int, size: int) -> np.ndarray:
    """The indicator matrix E of :func:`indicator_columns` packed four points to a byte,
    with a last column of ones: a ⌈size/4⌉ × (B + 1) uint8 array P whose bit t of P[g, b]
    is E[4g + t, b] (relabelling b calls point 4g + t an X point), and whose last column
    has the bits of all ``size`` points. :func:`monk_framework.numerics.product_loops.add_indicator_product`
    multiplies by E through it."""
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    B = len(perms)
    if B and n and (perms[:, :n].min() < 0 or perms[:, :n].max() >= size):
        raise ValueError(f"indicator_patterns: relabellings must hold points 0..{size - 1}")
    P = np.zeros((-(-size // PATTERN_POINTS), B + 1), dtype=np.uint8)
    pack_patterns(P, perms, n)
    P[:, B] = every_point_patterns(size)
    return P


#: the key of a pool's cache under which an :class:`IndicatorMemo` is shared with the
#: pools of other kernels tested on the same relabellings
SHARED_INDICATORS = "shared-indicators"


class IndicatorMemo:
    """The indicator matrices of batches of relabellings that several kernels' tests read
    (an aggregated test): E (:func:`indicator_columns`) and its packed patterns
    (:func:`indicator_patterns`) are functions of a batch's rows only, so the first kernel
    makes them and the others read them, up to ``max_bytes`` in all.

    A batch is known by where its rows lie in ``rows``, the read-only array of every
    relabelling that the kernels share: rows taken from anywhere else (a copy, another
    test's) are computed as usual. What is kept is read-only: every kernel sees the same
    values.
    """

    def __init__(self, rows: np.ndarray, max_bytes: int):
        if rows.flags.writeable or rows.dtype != np.int64 or rows.ndim != 2 or not rows.flags.c_contiguous:
            raise ValueError("IndicatorMemo: rows must be a read-only, C-contiguous int64 matrix")
        self.rows = rows
        self._owner = rows if rows.base is None else rows.base
        self._room = int(max_bytes)
        self._kept: dict[tuple[Any, ...], np.ndarray] = {}

    def _where(self, perms: np.ndarray) -> tuple[int, int] | None:
        """(first row, count) of ``perms`` within ``rows``, or None if they are not a
        contiguous run of its rows."""
        if perms.base is not self._owner or perms.ndim != 2 or not perms.flags.c_contiguous:
            return None
        offset = perms.ctypes.data - self.rows.ctypes.data
        row_bytes = self.rows.strides[0]
        if offset < 0 or offset % row_bytes or perms.shape[1] != self.rows.shape[1]:
            return None
        first = offset // row_bytes
        return (first, len(perms)) if first + len(perms) <= len(self.rows) else None

    def _kept_or_made(self, key: tuple[Any, ...] | None, make: Any) -> np.ndarray:
        if key is None:
            return cast(np.ndarray, make())
        found = self._kept.get(key)
        if found is None:
            found = make()
            if found.nbytes <= self._room:
                found.flags.writeable = False
                self._kept[key] = found
                self._room -= found.nbytes
        return found

    def columns(self, perms: np.ndarray, n: int, size: int, *, ones: bool = False, order: str = "C") -> np.ndarray:
        """:func:`indicator_columns` of ``perms``, made once for every kernel."""
        where = self._where(perms)
        key = None if where is None else ("columns", *where, n, size, ones, order)
        return self._kept_or_made(key, lambda: indicator_columns(perms, n, size, ones=ones, order=order))

    def patterns(self, perms: np.ndarray, n: int, size: int) -> np.ndarray:
        """:func:`indicator_patterns` of ``perms``, made once for every kernel."""
        where = self._where(perms)
        key = None if where is None else ("patterns", *where, n, size)
        return self._kept_or_made(key, lambda: indicator_patterns(perms, n, size))


def sample_sums(pool: PooledSample, perms: np.ndarray) -> SampleSums:
    """The within and across kernel sums of every relabelling in ``perms`` (B × (N+M)).

    One product per batch, diag(Eᵀ K E) from the symmetric half of K (the module
    docstring gives the identities).
    """
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    B, size = perms.shape
    if pool.features is not None:
        return _feature_sums(pool, pool.features, perms)
    if pool.feature_total is not None:
        return _feature_block_sums(pool, pool.feature_total, perms)
    # A stored K gives K 1 in one streaming pass, and a matrix-free source whose K 1 is
    # known already (a MONK estimator needed it) is not walked again for it. Otherwise
    # each batch's product with [E, 1] gives e_bᵀ K e_b, e_bᵀ K 1 and 1ᵀ K 1 at once
    # (GramSource.forms_and_last): the tiles are never summed apart from the product.
    products_only = pool._row_sums is None and not pool.stored
    r, d = (None if products_only else pool.row_sums), pool.diag
    xx, x1, tx = np.empty(B), np.empty(B), np.empty(B)
    total = None if r is None else float(r.sum())
    step = relabelling_batch(pool)
    # 0/1 columns: a stored or matrix-free source adds K's values up by subset sums, from
    # E packed four points to a byte (the dense E, column by column, serves the rest)
    packable = isinstance(pool.source, (StoredGram, MatrixFreeGram))
    order = "F" if packable else "C"
    # The products with K run on the library's threads (the sources' reductions); the
    # small ones here stay on one BLAS thread, so that OpenBLAS's own threads, which spin
    # for about 0.1 s after each parallel call, stay asleep for the next test.
    memo: IndicatorMemo | None = pool.cache.get(SHARED_INDICATORS)
    columns = indicator_columns if memo is None else memo.columns
    patterns = indicator_patterns if memo is None else memo.patterns
    with one_blas_thread():
        for start in range(0, B, step):
            stop = min(start + step, B)
            E = columns(perms[start:stop], pool.n, size, ones=products_only, order=order)
            W = IndicatorColumns(E, patterns(perms[start:stop], pool.n, size)) if packable else E
            if r is None:
                forms, cross = pool.source.forms_and_last(W)
                xx[start:stop], x1[start:stop] = forms[:-1], cross[:-1]
                total = float(forms[-1])  # 1ᵀ K 1: the same tiles in the same order every batch
                tx[start:stop] = d @ E[:, :-1]
            else:
                xx[start:stop] = pool.source.quadratic_forms(W)
                x1[start:stop], tx[start:stop] = np.stack([r, d]) @ E
    assert total is not None  # B >= 1
    return _with_the_rest(pool, xx, x1, tx, total, d, perms)


def _feature_sums(pool: PooledSample, Phi: np.ndarray, perms: np.ndarray) -> SampleSums:
    """:func:`sample_sums` from the pooled features Φ (K = ΦΦᵀ): with P = Φᵀ E, the sums
    of relabelling b are e_bᵀ K e_b = ‖P_b‖² and e_bᵀ K 1 = ⟨P_b, Φᵀ 1⟩, O(size·D) a
    relabelling; the traces come from the kernel's diagonal, as on every other path."""
    B, size = perms.shape
    d = pool.diag
    s = Phi.sum(axis=0)
    total = float(s @ s)
    xx, x1, tx = np.empty(B), np.empty(B), np.empty(B)
    step = batch_size(size)
    for start in range(0, B, step):
        stop = min(start + step, B)
        E = indicator_columns(perms[start:stop], pool.n, size)
        P = Phi.T @ E
        xx[start:stop] = np.einsum("ij,ij->j", P, P)
        x1[start:stop], tx[start:stop] = s @ P, d @ E
    return _with_the_rest(pool, xx, x1, tx, total, d, perms)


def _feature_block_sums(pool: PooledSample, total: np.ndarray, perms: np.ndarray) -> SampleSums:
    """:func:`_feature_sums` for features whose matrix does not fit the budget: P = Φᵀ E
    is added up over blocks of rows of each sample's features, computed again for every
    batch of relabellings (O(size·D) a batch, against the O(size·D·B) of the products; the
    tiles of kernel values would cost O(size²·B)). ``total`` is Φᵀ1."""
    B, size = perms.shape
    d = pool.diag
    xx, x1, tx = np.empty(B), np.empty(B), np.empty(B)
    step = relabelling_batch(pool)
    for start in range(0, B, step):
        stop = min(start + step, B)
        E = indicator_columns(perms[start:stop], pool.n, size)
        (P,) = _features_times(pool, len(total), E)
        xx[start:stop] = np.einsum("ij,ij->j", P, P)
        x1[start:stop], tx[start:stop] = total @ P, d @ E
    return _with_the_rest(pool, xx, x1, tx, float(total @ total), d, perms)


def _features_times(pool: PooledSample, D: int, *weights: np.ndarray) -> list[np.ndarray]:
    """Φᵀ W for each size × B matrix W, with the D features of the pooled points computed
    block by block (rows of :func:`~monk_framework.core.kernels.feature_block_rows`) and
    never held whole: for features whose matrix does not fit the budget."""
    X, Y = pool._parts
    rows = max(1, feature_block_rows(pool.resources, D))
    out = [np.zeros((D, W.shape[1])) for W in weights]
    for part, offset in ((X, 0), (Y, pool.n)):
        for a in range(0, len(part), rows):
            block = pool.kernel.features(part[a : a + rows])
            at = slice(offset + a, offset + a + len(block))
            for P, W in zip(out, weights):
                P += block.T @ W[at]
    return out


def _with_the_rest(pool: PooledSample, xx: np.ndarray, x1: np.ndarray, tx: np.ndarray, total: float, d: np.ndarray, perms: np.ndarray) -> SampleSums:
    """Every relabelling's sums from e_bᵀ K e_b, e_bᵀ K 1, its X trace and 1ᵀ K 1."""
    xy = x1 - xx
    yy = total - x1 - xy
    # every relabelling's V-statistic MMD² is a squared norm: negative proves K is not PSD
    vstat = xx / pool.n**2 + yy / pool.m**2 - 2.0 * xy / (pool.n * pool.m)
    worst = int(np.argmin(vstat))
    what = "the V-statistic MMD^2"
    if vstat[worst] < 0 and not np.array_equal(np.sort(perms[worst, : pool.n]), np.arange(pool.n)):
        # whose MMD² it is: the estimate of the samples as given may well be positive
        what += " of a relabelling (the pooled points shuffled between X and Y)"
    check_squared_norm(pool.kernel, float(vstat[worst]), 4.0 * float(d.max()), what)
    return SampleSums(xx=xx, yy=yy, xy=xy, trace_x=tx, trace_y=float(d.sum()) - tx)


def v_statistic(sums: Any, n: Any, m: Any) -> Any:
    """MMD_V² = S_xx/N² + S_yy/M² − 2 S_xy/(NM) from kernel sums (elementwise over arrays)."""
    return sums.xx / (n * n) + sums.yy / (m * m) - 2.0 * sums.xy / (n * m)


def off_diagonal_sample_sums(pool: PooledSample, perms: np.ndarray) -> SampleSums:
    """:func:`sample_sums` with the sums within X and within Y added up without the
    diagonal: e_bᵀ K₀ e_b and (1 − e_b)ᵀ K₀ (1 − e_b) for K₀ = K with a zero diagonal, and
    e_bᵀ K (1 − e_b), in bands of rows (read from a stored K, else evaluated from the
    data). The diagonal never enters a sum, so nothing is lost when k(z, z) dwarfs the
    values between points, where S_xx − tr_x keeps only the diagonal's digits. It reads
    all of K and takes two products per band, about twice :func:`sample_sums`; the
    U-statistic asks for it only where those sums lose digits
    (:func:`~monk_framework.engine.reductions.loses_to_diagonal`).
    """
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    B, size = perms.shape
    d = pool.diag
    E = indicator_columns(perms, pool.n, size)
    F = 1.0 - E
    xx, yy, xy = np.zeros(B), np.zeros(B), np.zeros(B)
    rows = chunk_rows(8 * size, work="double-band", at_most=size)
    stored = pool.source.K if pool.stored else None  # type: ignore[attr-defined]
    for a in range(0, size, rows):
        b = min(a + rows, size)
        if stored is not None:
            band = np.array(stored[a:b])
        else:
            band = pool.kernel.gram_tile(take(pool.Z, np.arange(a, b)), pool.Z)
        band[np.arange(b - a), np.arange(a, b)] = 0.0
        KF = band @ F
        xx += np.einsum("ij,ij->j", E[a:b], band @ E)
        xy += np.einsum("ij,ij->j", E[a:b], KF)
        yy += np.einsum("ij,ij->j", F[a:b], KF)
    tx, ty = d @ E, d @ F
    return SampleSums(xx=xx + tx, yy=yy + ty, xy=xy, trace_x=tx, trace_y=ty, xx_off=xx, yy_off=yy)


def far_point_sample_sums(pool: PooledSample, perms: np.ndarray, h: int) -> tuple[SampleSums, np.ndarray]:
    """:func:`off_diagonal_sample_sums` for a pool read through the kernel's features
    (``pool.features``, or ``pool.feature_total`` in blocks of rows), in O(size·(D + h))
    a relabelling: the h points of largest k(z, z) are taken apart. The rest's sums come
    from their features, Φ_Lᵀ e_b, with their own diagonal subtracted (it no longer
    dwarfs anything); the pairs with a point apart from its kernel values k(z_h, ·),
    evaluated in chunks of columns, its own value left out. Also returns each
    relabelling's bound on what subtracting the rest's diagonal may cost,
    10ε(tr_L,x/(N(N − 1)) + tr_L,y/(M(M − 1))), for the caller to check against
    |MMD_U²|."""
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    B, size = perms.shape
    n, m = pool.n, pool.m
    d = pool.diag
    far = np.sort(np.argsort(-d, kind="stable")[:h])
    E = indicator_columns(perms, n, size)
    F = 1.0 - E
    Ez, Fz = E.copy(), F.copy()
    Ez[far], Fz[far] = 0.0, 0.0  # the rest: every point not apart
    if pool.features is not None:
        PE, PF = pool.features.T @ Ez, pool.features.T @ Fz
    else:
        PE, PF = _features_times(pool, len(pool.feature_total), Ez, Fz)  # type: ignore[arg-type]
    # k(z_h, ·) over the rest, times E and F, in chunks of columns
    cols = chunk_rows(8 * max(h, 1), work="double-band")
    KE, KF = np.zeros((len(far), B)), np.zeros((len(far), B))
    apart = take(pool.Z, far)
    for c in range(0, size, cols):
        stop = min(c + cols, size)
        tile = pool.kernel.gram_tile(apart, take(pool.Z, np.arange(c, stop)))
        KE += tile @ Ez[c:stop]
        KF += tile @ Fz[c:stop]
    among = pool.kernel.gram_tile(apart, apart)
    np.fill_diagonal(among, 0.0)
    eH, fH = E[far], F[far]
    near_d = d.copy()
    near_d[far] = 0.0
    lx, ly = near_d @ E, near_d @ F
    xx_off = np.einsum("ij,ij->j", PE, PE) - lx + 2.0 * np.einsum("ij,ij->j", eH, KE) + np.einsum("ij,ij->j", eH, among @ eH)
    yy_off = np.einsum("ij,ij->j", PF, PF) - ly + 2.0 * np.einsum("ij,ij->j", fH, KF) + np.einsum("ij,ij->j", fH, among @ fH)
    xy = np.einsum("ij,ij->j", PE, PF) + np.einsum("ij,ij->j", eH, KF) + np.einsum("ij,ij->j", fH, KE) + np.einsum("ij,ij->j", eH, among @ fH)
    tx, ty = d @ E, d @ F
    bound = diagonal_round_off(lx, ly, n, m)
    sums = SampleSums(xx=xx_off + tx, yy=yy_off + ty, xy=xy, trace_x=tx, trace_y=ty, xx_off=xx_off, yy_off=yy_off)
    return sums, bound
