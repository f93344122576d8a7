"""Gram sources: the block reductions of a Gram matrix K, from a stored K, matrix-free
(the kernel evaluated on the fly in bounded tiles) or a stored K read through a
permutation, with the same numbers every way.

Median-of-means estimators work with block means μ_{S_q} = |S_q|⁻¹ Σ_{i∈S_q} φ(x_i).
Everything they need from the kernel is a *block reduction* of K: the block Gram
G = Wᵀ K W for a weight matrix W with one non-zero per point, K v for a vector v, or a
combination of rows of K.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, cast

import numpy as np
import scipy.sparse as sp

from monk_framework.core.kernels import Kernel
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample, take
from monk_framework.engine.backends import Backend, LocalBackend, for_bands, in_order, in_this_process, one_blas_thread
from monk_framework.engine.band_reductions import IndicatorColumns, band_reduction, band_reduction_of, dense_columns
from monk_framework.engine.kernel_sums import paying_features
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.engine.memory import chunk_rows
from monk_framework.numerics.product_loops import add_indicator_product

__all__ = ["FeatureGram", "GramSource", "IndicatorColumns", "MatrixFreeGram", "PermutedGram", "StoredGram", "dense_columns", "gram_source", "one_row"]


class GramSource:
    """What block reductions need from the Gram matrix K of a pooled sample Z.

    ``kernel_s`` accumulates the seconds spent evaluating the kernel, so that results
    can report Gram building separately from iterating.
    """

    n: int
    kernel_s: float = 0.0
    #: how K is held ("stored", "matrix-free", "features", "spread"): a diagnostic that
    #: results report, never a choice a plugin makes
    storage: ClassVar[str] = "stored"
    #: told the share of a walk through the bands done (0 to 1) after each band: one pass
    #: over a large matrix-free K takes seconds, and a test reports within it
    on_band: Callable[[float], None] | None = None

    def band(self, start: int, stop: int) -> np.ndarray:
        """Rows start:stop of K, columns start: (the upper band of a row chunk)."""
        raise NotImplementedError

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """Σ_k coef_k K[idx_k, :] = K[:, idx] @ coef (K is symmetric)."""
        raise NotImplementedError

    def _band_rows(self) -> int:
        return chunk_rows(8 * max(self.n, 1), at_least=64)

    def band_bounds(self) -> list[tuple[int, int]]:
        """The row bands (start, stop) that the reductions below walk through, in order."""
        step = self._band_rows()
        return [(a, min(a + step, self.n)) for a in range(0, self.n, step)]

    def band_results(self, op: str, W: Any) -> Iterator[tuple[int, int, Any]]:
        """(start, stop, :func:`band_reduction` of that band) for every band, in order.
        A source that spreads the bands over workers overrides this alone."""
        for start, stop in self.band_bounds():
            yield start, stop, band_reduction(op, self.band(start, stop), start, stop, W)

    def walk(self, op: str, W: Any) -> Iterator[tuple[int, int, Any]]:
        """:meth:`band_results`, telling :attr:`on_band` the share of the upper triangle's
        kernel values done after each band."""
        if self.on_band is None:
            yield from self.band_results(op, W)
            return
        total, done = self.n * (self.n + 1) / 2.0, 0.0
        for start, stop, share in self.band_results(op, W):
            yield start, stop, share
            done += (stop - start) * (self.n - start) - (stop - start) * (stop - start - 1) / 2.0
            self.on_band(min(1.0, done / total))

    def row_sums(self) -> np.ndarray:
        """K 1, in symmetric bands."""
        out = np.zeros(self.n)
        for start, stop, (own, later) in self.walk("row_sums", None):
            out[start:stop] += own
            out[stop:] += later  # the part right of the diagonal square sums into later rows
        return out

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """K w for a dense vector (or n × B matrix) w, in symmetric bands."""
        out = np.zeros((self.n, *w.shape[1:]))
        for start, stop, (own, later) in self.walk("matvec", w):
            out[start:stop] += own
            out[stop:] += later
        return out

    def quadratic_forms(self, E: np.ndarray | IndicatorColumns) -> np.ndarray:
        """diag(Eᵀ K E) = (e_bᵀ K e_b)_b for the columns of an n × B matrix E (dense, or
        0/1 columns packed as :class:`IndicatorColumns`, whose products add subset sums).

        K is symmetric, so each row band of its upper part is used once: a band of rows
        a:b contributes 2·e[a:b]ᵀ K[a:b, a:] e[a:] − e[a:b]ᵀ K[a:b, a:b] e[a:b] (its
        diagonal block counted once). That is about half the FLOPs of the product K E,
        and a matrix-free source evaluates each tile of K once for all B columns.
        """
        out = np.zeros(E.shape[1])
        for _, _, part in self.walk("quadratic_forms", E):
            out += part
        return out

    def forms_and_last(self, W: np.ndarray | IndicatorColumns) -> tuple[np.ndarray, np.ndarray]:
        """(diag(Wᵀ K W), Wᵀ K w) for an n × C matrix W and w its last column, from one
        walk through the bands.

        With W = [E, 1] these are every relabelling's e_bᵀ K e_b and e_bᵀ K 1, and 1ᵀ K 1,
        all from the products K W: the row sums K 1 are never formed, so a matrix-free
        source makes no pass over its tiles besides the product. A band a:b contributes
        w_bᵀ (D w_last + R w_last) + w_lastᵀ R w_b for its diagonal block D and the part
        R right of it (K is symmetric: R's transpose is the lower part).
        """
        forms, cross = np.zeros(W.shape[1]), np.zeros(W.shape[1])
        for _, _, (f, c) in self.walk("forms_and_last", W):
            forms += f
            cross += c
        return forms, cross

    def block_gram(self, W: sp.csr_array | np.ndarray) -> np.ndarray:
        """G = Wᵀ K W for an n × Q weight matrix (sparse or dense), from the upper bands of K only."""
        G = np.zeros((W.shape[1], W.shape[1]))
        for _, _, part in self.walk("block_gram", W):
            G += part
        return G


class StoredGram(GramSource):
    """Block reductions of a Gram matrix held in memory (computed once)."""

    def __init__(
        self,
        kernel: Kernel,
        Z: Sample,
        *,
        K: np.ndarray | None = None,
        report: Callable[[float, float, str], None] | None = None,
    ):
        self.n = len(Z)
        start = time.perf_counter()
        self.K = gram_matrix(kernel, Z, report=report) if K is None else K
        self.kernel_s = time.perf_counter() - start

    def band(self, start: int, stop: int) -> np.ndarray:
        return self.K[start:stop, start:]

    def matvec(self, w: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, self.K @ w)

    def row_sums(self) -> np.ndarray:
        # one streaming pass over the stored matrix beats the symmetric bands here
        return cast(np.ndarray, self.K.sum(axis=1))

    def quadratic_forms(self, E: np.ndarray | IndicatorColumns) -> np.ndarray:
        K = self.K
        # subset sums read K's rows in place: a K given in another layout (a precomputed
        # Gram matrix in Fortran order, say) takes the BLAS products
        if isinstance(E, IndicatorColumns) and K.dtype == np.float64 and K.strides[1] == 8 and K.strides[0] > 0 and K.strides[0] % 8 == 0:
            return _subset_sum_forms(K, E)
        # halves rather than bands: square products run at the full GEMM rate, thin bands
        # do not (measured at n = 2000, B = 1000: 30 ms against 45 ms for K E)
        return _halved_forms(K, dense_columns(E), 0, self.n)

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        # a sparse row vector times K reads only the |idx| rows it needs, without the
        # copy that fancy indexing K[idx] makes (measured: about 2x faster; splitting
        # the rows between two threads was measured too and gained nothing reliable:
        # reading the rows from memory is the whole cost)
        return cast(np.ndarray, (one_row(idx, coef, self.n) @ self.K).ravel())


class MatrixFreeGram(GramSource):
    """Block reductions with the kernel evaluated on the fly, in bounded chunks.

    Memory stays O(n · chunk) instead of O(n²); each call re-evaluates the kernel
    values it needs. Diagonal entries come from the kernel's ``diag`` as in a stored
    Gram matrix, so both sources give the same numbers up to round-off.
    """

    storage: ClassVar[str] = "matrix-free"

    def __init__(self, kernel: Kernel, Z: Sample, *, diag: np.ndarray | None = None, band_rows: int | None = None):
        self.kernel = kernel
        self.Z = Z
        self.n = len(Z)
        self.band_rows = band_rows
        start = time.perf_counter()
        self.diag = kernel.diag_tile(Z) if diag is None else diag
        self.kernel_s = time.perf_counter() - start

    def _band_rows(self) -> int:
        return self.band_rows or MATRIX_FREE_BAND_ROWS

    def block_gram(self, W: sp.csr_array | np.ndarray) -> np.ndarray:
        """G = Wᵀ K W; for a few dense columns on one thread, from the kernel's direct form
        when it has one (:meth:`Kernel.direct_block_gram`), else from the tiles."""
        # the direct form runs on one thread: it replaces the tiles when they would too
        # (a within-block sum on a pool thread or a worker, or a few bands), at about
        # 2 ns a pair against 3-4.5 for tiles of d = 10 (docs/performance.md)
        narrow = isinstance(W, np.ndarray) and W.ndim == 2 and W.shape[1] <= DIRECT_FORM_COLUMNS
        if narrow and isinstance(for_bands(len(self.band_bounds())), LocalBackend):
            tick = time.perf_counter()
            G = self.kernel.direct_block_gram(self.Z, W, self.diag)
            if G is not None:
                self.kernel_s += time.perf_counter() - tick
                return G
        return super().block_gram(W)

    def band_results(self, op: str, W: Any) -> Iterator[tuple[int, int, Any]]:
        # the bands are reduced tile by tile (a band of a large sample is never held whole),
        # on every core when there are enough of them, and added in band order

        bounds = self.band_bounds()
        backend = for_bands(len(bounds))
        tasks = [(a, b, op) for a, b in bounds]
        tick = time.perf_counter()
        shares = in_order(backend.as_completed(reduce_band, tasks, ((self.kernel, self.Z, self.diag), W)))
        for (a, b), share in zip(bounds, shares):
            yield a, b, share
        self.kernel_s += time.perf_counter() - tick  # kernel and reduction: inseparable here

    def _eval(self, A: Any, B: Any) -> np.ndarray:
        start = time.perf_counter()
        out = self.kernel.gram_tile(A, B)
        self.kernel_s += time.perf_counter() - start
        return out

    def band(self, start: int, stop: int) -> np.ndarray:
        tick = time.perf_counter()
        band = matrix_free_band(self.kernel, self.Z, self.diag, start, stop)
        self.kernel_s += time.perf_counter() - tick
        return band

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        step = chunk_rows(8 * max(len(idx), 1), at_least=64)
        tasks = [(a, min(a + step, self.n)) for a in range(0, self.n, step)]
        # chunks of rows are independent: on every core when there are enough of them
        backend = for_bands(len(tasks))
        shared = (self.kernel, self.Z, self.diag, idx, take(self.Z, idx), coef)
        out = np.empty(self.n)
        tick = time.perf_counter()
        for i, values in backend.as_completed(_combination_rows, tasks, shared):
            out[tasks[i][0] : tasks[i][1]] = values
        self.kernel_s += time.perf_counter() - tick
        return out


def _combination_rows(task: tuple[int, int], shared: tuple[Any, ...]) -> np.ndarray:
    """Rows start:stop of K[:, idx] @ coef, evaluated from the data."""
    kernel, Z, diag, idx, cols, coef = shared
    start, stop = task
    chunk = kernel.gram_tile(Z[start:stop], cols)
    # the entries K[i, i] (i in idx) as a stored Gram matrix has them (kernel.diag), not
    # as the generic formula gives them (round-off apart)
    inside = np.flatnonzero((idx >= start) & (idx < stop))
    chunk[idx[inside] - start, inside] = diag[idx[inside]]
    return cast(np.ndarray, chunk @ coef)


#: rows of a matrix-free band (its tiles, of the "tile" size of engine.memory.CHUNK_BYTES,
#: are bounded whatever the sample size: small enough for the passes over them (distances,
#: exp, the products) to run in cache; measured at n = 200 000, d = 10, 101 columns: about
#: 6 ns per kernel entry with 2-8 MB tiles, 17 ns with whole 256-row bands (400 MB))
MATRIX_FREE_BAND_ROWS = 256


#: weight columns up to which a kernel's direct Wᵀ K W (one multiply-add a pair and
#: column) replaces the tiles and their BLAS products
DIRECT_FORM_COLUMNS = 4


def reduce_band(task: tuple[int, int, str], shared: tuple[Any, Any]) -> Any:
    """One task of a matrix-free reduction (here, on a thread or on a Dask worker): the
    band start:stop of K evaluated from the data and reduced tile by tile."""
    (kernel, Z, diag), W = shared
    start, stop, op = task
    return tiled_band_reduction(op, kernel, Z, diag, start, stop, W)


def tiled_band_reduction(op: str, kernel: Kernel, Z: Sample, diag: np.ndarray, start: int, stop: int, W: Any) -> Any:
    """The reduction ``op`` of the band K[start:stop, start:], evaluated tile by tile from
    the data (the diagonal block first, then column tiles, :func:`~monk_framework.engine.memory.chunk_rows`
    of ``work="tile"``): the same reductions as a stored K's, up to the order of the additions."""
    width, n = stop - start, len(Z)
    cols = chunk_rows(8 * max(width, 1), work="tile", at_least=64)
    reduction = band_reduction_of(op, W, start, stop, kernel.check_finite)
    block = kernel.gram_tile(Z[start:stop], Z[start:stop])
    block[np.arange(width), np.arange(width)] = diag[start:stop]
    reduction.diagonal(block)
    tiles = [(c, min(c + cols, n)) for c in range(stop, n, cols)]
    if reduction.transposed:
        # the tiles transposed (a tile's points as rows, the band's points as lanes,
        # padded to a multiple of 8 with copies of the last point, whose sums are dropped):
        # each point's values are one contiguous row for the subset sums
        lanes = -(-width // 8) * 8
        band_points = Z[start:stop] if lanes == width else take(Z, np.minimum(np.arange(start, start + lanes), stop - 1))
        for c, d in tiles:
            # (a plugin's compute_gram may return a tile in Fortran order)
            reduction.right_transposed(np.ascontiguousarray(kernel.gram_tile(Z[c:d], band_points, check=False)), c, d)
    else:
        for c, d in tiles:
            reduction.right(kernel.gram_tile(Z[start:stop], Z[c:d], check=not reduction.checks_its_results), c, d)
    return reduction.result()


def matrix_free_band(kernel: Kernel, Z: Sample, diag: np.ndarray, start: int, stop: int) -> np.ndarray:
    """K[start:stop, start:] evaluated from the data, with ``diag`` on its diagonal (as a
    stored Gram matrix has it)."""
    band = kernel.gram_tile(Z[start:stop], Z[start:])
    width = stop - start
    band[np.arange(width), np.arange(width)] = diag[start:stop]
    return band


class PermutedGram(GramSource):
    """K[π][:, π] of a stored K, read through the permutation (K itself is never copied)."""

    def __init__(self, K: np.ndarray, perm: np.ndarray):
        self.K = K
        self.perm = np.asarray(perm, dtype=np.int64)
        self.n = len(self.perm)
        self.kernel_s = 0.0

    def band(self, start: int, stop: int) -> np.ndarray:
        return self.K[np.ix_(self.perm[start:stop], self.perm[start:])]

    def submatrix(self, idx: np.ndarray) -> np.ndarray:
        """K'[idx][:, idx] in the permuted coordinates."""
        orig = self.perm[idx]
        return self.K[np.ix_(orig, orig)]

    def row_sums(self) -> np.ndarray:
        return cast(np.ndarray, self.K.sum(axis=1)[self.perm])

    def matvec(self, w: np.ndarray) -> np.ndarray:
        v = np.empty_like(w)
        v[self.perm] = w
        return cast(np.ndarray, (self.K @ v)[self.perm])

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        # Σ_k coef_k K'[idx_k, :] = (Σ_k coef_k K[π(idx_k), :])[π]
        return cast(np.ndarray, (one_row(self.perm[idx], coef, self.n) @ self.K).ravel()[self.perm])


#: below this many rows, :func:`_halved_forms` takes the whole product (measured best
#: between 256 and 512 on 2 cores)
HALVING_LEAF = 320
#: rows of one task of :func:`_halved_forms`: a fixed size, so that every sum is added in
#: one order however many threads run the tasks (n = 2000, B = 1000, medians of 11 on 2
#: cores: 54 ms with 512 or 1000 rows, 57 with 256, 59 with 128)
FORM_TASK_ROWS = 512


def _halved_forms(K: np.ndarray, E: np.ndarray, a: int, b: int) -> np.ndarray:
    """diag(E[a:b]ᵀ K[a:b, a:b] E[a:b]) by halving: with h the midpoint,
    e₁ᵀK₁₁e₁ + e₂ᵀK₂₂e₂ + 2·e₁ᵀK₁₂e₂, the two diagonal parts recursively, down to
    squares of at most HALVING_LEAF rows taken whole.

    The products of every level are cut into row chunks of FORM_TASK_ROWS and run on
    the cores (:func:`~monk_framework.engine.backends.in_this_process`), each with one BLAS
    thread, and the chunks' forms are added in a fixed order: the result is the same
    bits on any number of threads. Keeping OpenBLAS's own threads out of it also keeps
    them from spinning after the call, on the core the next test's draw needs
    (docs/performance.md).
    """
    blocks: list[tuple[int, int, int, int]] = []  # (rows r0:r1, columns c0:c1) of K

    def plan(a: int, b: int) -> None:
        if b - a <= HALVING_LEAF:
            blocks.append((a, b, a, b))
            return
        h = (a + b) // 2
        blocks.append((a, h, h, b))
        plan(a, h)
        plan(h, b)

    plan(a, b)
    tasks = [(r, min(r + FORM_TASK_ROWS, r1), c0, c1) for r0, r1, c0, c1 in blocks for r in range(r0, r1, FORM_TASK_ROWS)]
    # the widest products first, so that the last ones to start are short
    order = sorted(range(len(tasks)), key=lambda i: -(tasks[i][3] - tasks[i][2]))
    backend = in_this_process() if len(tasks) > 1 else LocalBackend()
    parts: list[Any] = [None] * len(tasks)
    with one_blas_thread():  # in this thread too, when the tasks run here
        for i, part in backend.as_completed(_form_chunk, [tasks[i] for i in order], (K, E)):
            parts[order[i]] = part
    forms: dict[tuple[int, int], np.ndarray] = {}  # (r0, c0) of each block: its form
    chunks = iter(parts)  # in the order of the blocks, each block's chunks in row order
    for r0, r1, c0, _ in blocks:
        total = next(chunks)
        for _ in range(r0 + FORM_TASK_ROWS, r1, FORM_TASK_ROWS):
            total = total + next(chunks)
        forms[r0, c0] = total

    def combine(a: int, b: int) -> np.ndarray:
        if b - a <= HALVING_LEAF:
            return forms[a, a]
        h = (a + b) // 2
        return cast(np.ndarray, combine(a, h) + combine(h, b) + 2.0 * forms[a, h])

    return combine(a, b)


def _form_chunk(task: tuple[int, int, int, int], shared: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """diag(E[r0:r1]ᵀ K[r0:r1, c0:c1] E[c0:c1]), one task of :func:`_halved_forms`."""
    K, E = shared
    r0, r1, c0, c1 = task
    return cast(np.ndarray, np.einsum("ij,ij->j", E[r0:r1], K[r0:r1, c0:c1] @ E[c0:c1]))


#: rows of one band of :func:`_subset_sum_forms`: a fixed size, so that every sum is added
#: in one order however many threads run the bands
SUBSET_FORM_ROWS = 256


def _subset_sum_forms(K: np.ndarray, E: IndicatorColumns) -> np.ndarray:
    """diag(Eᵀ K E) for 0/1 columns by subset sums, in row bands of the upper half: a band
    r0:r1 with diagonal block D and the part R right of it contributes
    e[r0:r1]ᵀ (D e[r0:r1] + 2·R e[r1:]). Subset sums cost the same for thin bands as for
    squares, so the halving that BLAS needs is not used: each band's rows are read once.

    The bands run on the cores (:func:`~monk_framework.engine.backends.in_this_process`), the
    widest first, and their forms are added in band order: the same bits on any number
    of threads.
    """
    n = len(K)
    tasks = [(r, min(r + SUBSET_FORM_ROWS, n)) for r in range(0, n, SUBSET_FORM_ROWS)]
    backend = in_this_process() if len(tasks) > 1 else LocalBackend()
    parts: list[Any] = [None] * len(tasks)
    for i, part in backend.as_completed(_subset_form_band, tasks, (K, E)):
        parts[i] = part
    out = np.zeros(E.shape[1])
    for part in parts:
        out += part
    return out


def _subset_form_band(task: tuple[int, int], shared: tuple[np.ndarray, IndicatorColumns]) -> np.ndarray:
    """e[r0:r1]ᵀ (D e[r0:r1] + 2·R e[r1:]) for the band r0:r1, one task of :func:`_subset_sum_forms`."""
    K, E = shared
    r0, r1 = task
    sums = np.zeros((E.patterns.shape[1], r1 - r0))
    # K is symmetric: the rows r1: of K's columns r0:r1 are R's transpose
    done = add_indicator_product(sums, K[r1:, r0:r1], E.patterns, r1)
    sums *= 2.0
    if not (add_indicator_product(sums, K[r0:r1, r0:r1], E.patterns, r0) and done):
        raise RuntimeError("subset sums declined K's rows")  # pragma: no cover - StoredGram checks K's layout first
    dense = E.dense[r0:r1]
    return cast(np.ndarray, np.einsum("ji,ij->j", sums[: dense.shape[1]], dense))


def one_row(idx: np.ndarray, coef: np.ndarray, n: int) -> sp.csr_array:
    """The 1 × n sparse row with ``coef`` at columns ``idx``, built directly in CSR form
    (skipping the COO conversion saves about 40 µs per BCD iteration)."""
    return sp.csr_array((coef, idx, np.array([0, len(idx)])), shape=(1, n))


class SpreadGram(MatrixFreeGram):
    """A matrix-free Gram source whose band reductions run as tasks on ``backend``."""

    storage: ClassVar[str] = "spread"

    def __init__(self, kernel: Kernel, Z: Sample, backend: Backend, *, diag: np.ndarray | None = None, band_rows: int | None = None):
        super().__init__(kernel, Z, diag=diag, band_rows=band_rows or MATRIX_FREE_BAND_ROWS)
        self.backend = backend
        self._data = backend.share((kernel, Z, self.diag))

    def band_results(self, op: str, W: Any) -> Iterator[tuple[int, int, Any]]:
        bounds = self.band_bounds()
        tasks = [(a, b, op) for a, b in bounds]
        shares = in_order(self.backend.as_completed(reduce_band, tasks, (self._data, self.backend.share(W))))
        for (a, b), share in zip(bounds, shares):
            yield a, b, share


class FeatureGram(GramSource):
    """Reductions of K = ΦΦᵀ from the kernel's explicit features Φ (n × D), where a
    matrix-free source would evaluate tiles: every product with K is two with Φ,
    K W = Φ (Φᵀ W), O(n·D) a column instead of O(n²). The same numbers as the tiles
    to round-off; the diagonal is the kernel's own (``diag``), as in the other sources."""

    storage: ClassVar[str] = "features"

    def __init__(self, kernel: Kernel, Z: Sample, features: np.ndarray, *, diag: np.ndarray | None = None):
        self.kernel, self.Z, self.n = kernel, Z, len(Z)
        self.features = features
        start = time.perf_counter()
        self.diag = kernel.diag_tile(Z) if diag is None else diag
        self.kernel_s = time.perf_counter() - start

    def band(self, start: int, stop: int) -> np.ndarray:
        return cast(np.ndarray, self.features[start:stop] @ self.features[start:].T)

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, self.features @ (self.features[idx].T @ coef))

    def row_sums(self) -> np.ndarray:
        return cast(np.ndarray, self.features @ self.features.sum(axis=0))

    def matvec(self, w: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, self.features @ (self.features.T @ w))

    def quadratic_forms(self, E: np.ndarray | IndicatorColumns) -> np.ndarray:
        P = self.features.T @ dense_columns(E)
        return cast(np.ndarray, np.einsum("ij,ij->j", P, P))

    def forms_and_last(self, W: np.ndarray | IndicatorColumns) -> tuple[np.ndarray, np.ndarray]:
        P = self.features.T @ dense_columns(W)
        return np.einsum("ij,ij->j", P, P), P.T @ P[:, -1]

    def block_gram(self, W: sp.csr_array | np.ndarray) -> np.ndarray:
        A = np.asarray(W.T @ self.features)  # Q × D: each column's feature sum
        return cast(np.ndarray, A @ A.T)

    def permuted(self, perm: np.ndarray) -> FeatureGram:
        """The source of Z[perm], from the same features."""
        return FeatureGram(self.kernel, take(self.Z, perm), self.features[perm], diag=self.diag[perm])


def gram_source(kernel: Kernel, Z: Sample, *, resources: Resources, matrix_free: bool | str = "auto") -> GramSource:
    """A stored Gram matrix if it fits in the budget of ``resources``, else matrix-free:
    from the kernel's explicit features where they pay (:class:`FeatureGram`), else
    tiles evaluated on the fly; when ``resources`` spreads over a remote backend,
    matrix-free with its bands on the workers (:class:`SpreadGram`)."""
    n = len(Z)
    remote = resources.spread
    if remote is not None:
        # the workers evaluate its bands from the data: a Gram matrix never travels
        return SpreadGram(kernel, Z, remote)
    if matrix_free == "auto":
        matrix_free = not resources.fits(8.0 * n * n)
    if not matrix_free:
        return StoredGram(kernel, Z, report=resources.report)
    # a stored Gram matrix keeps its place where it fits: the numbers of the paper's
    # experiments stay the stored matrix's
    features = paying_features(kernel, (Z,), resources)
    return MatrixFreeGram(kernel, Z) if features is None else FeatureGram(kernel, Z, features[0])
