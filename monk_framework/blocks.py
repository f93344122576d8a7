"""Partitions into blocks, the median convention, and block reductions of a Gram matrix.

Median-of-means estimators split each sample into Q blocks S_1..S_Q and work with
block means μ_{S_q} = |S_q|⁻¹ Σ_{i∈S_q} φ(x_i). Everything they need from the kernel
is a *block reduction* of the Gram matrix: the block Gram G = Wᵀ K W for a weight
matrix W with one non-zero per point (DESIGN §3), or K v for a vector v supported on
one block. This module provides both, from a stored Gram matrix or matrix-free (the
kernel evaluated on the fly in bounded chunks), with the same numbers either way.

Conventions (documented in docs/estimators.md):

* **Blocks** follow the authors' rule: a uniformly random permutation cut so that the
  first ``N mod Q`` blocks have one extra point.
* **Two samples** (X, Y) are paired block by block: block q of the comparison is
  (S_q ⊂ X, T_q ⊂ Y). With N = M the same permutation cuts both samples (the authors'
  shared block indices); with N ≠ M each sample gets its own permutation.
* **The median** of Q values is the value at sorted position ⌊(Q−1)/2⌋ (0-based): the
  median for odd Q, the *lower* median for even Q. Equivalently it is the largest t
  that a strict majority of ``Q − ⌊(Q−1)/2⌋`` blocks reach, which is what makes the
  sup-of-median problems well defined and robust for every Q ≥ 1.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import numpy as np
import scipy.sparse as sp

from .errors import ParameterError
from .kernels import CHUNK_BYTES, Kernel, available_memory

__all__ = [
    "GramSource",
    "MatrixFreeGram",
    "Partition",
    "StoredGram",
    "block_sizes",
    "block_trace_variances",
    "blocks_min_sample_size",
    "check_n_blocks",
    "majority",
    "median_block",
    "median_position",
    "median_value",
    "pair_partition",
    "random_partition",
    "take",
]


def block_sizes(n: int, n_blocks: int) -> np.ndarray:
    """Sizes of Q near-equal blocks of n points: the first ``n mod Q`` get one extra."""
    base, extra = divmod(n, n_blocks)
    sizes = np.full(n_blocks, base, dtype=np.int64)
    sizes[:extra] += 1
    return sizes


def random_partition(n: int, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Block label of each of n points under a uniformly random partition.

    A permutation of the points is cut into consecutive runs of :func:`block_sizes`;
    ``labels[i]`` is the block of point i.
    """
    pattern = np.repeat(np.arange(n_blocks), block_sizes(n, n_blocks))
    labels = np.empty(n, dtype=np.int64)
    labels[rng.permutation(n)] = pattern
    return labels


@attrs.frozen
class Partition:
    """Paired blocks of two samples: block q is (X[x_labels == q], Y[y_labels == q]).

    For a one-sample partition (mean embeddings) ``y_labels`` is None.
    """

    n_blocks: int
    x_labels: np.ndarray = attrs.field(eq=attrs.cmp_using(eq=np.array_equal))
    y_labels: np.ndarray | None = attrs.field(default=None, eq=attrs.cmp_using(eq=np.array_equal))

    @property
    def x_sizes(self) -> np.ndarray:
        return np.bincount(self.x_labels, minlength=self.n_blocks)

    @property
    def y_sizes(self) -> np.ndarray:
        assert self.y_labels is not None
        return np.bincount(self.y_labels, minlength=self.n_blocks)

    def members(self, q: int) -> dict[str, list[int]]:
        """The indices of block q's points in X (and Y): the "median block" of a result."""
        out = {"x": np.flatnonzero(self.x_labels == q).tolist()}
        if self.y_labels is not None:
            out["y"] = np.flatnonzero(self.y_labels == q).tolist()
        return out

    def difference_weights(self) -> np.ndarray:
        """Weights w on the pooled sample Z = [X; Y] with d_q = Σ_{i∈block q} w_i φ(z_i).

        w_i = 1/|S_q| on X's points of block q and −1/|T_q| on Y's, so that
        d_q = μ_{S_q}(x) − μ_{T_q}(y) (DESIGN §3).
        """
        assert self.y_labels is not None
        wx = 1.0 / self.x_sizes[self.x_labels]
        wy = -1.0 / self.y_sizes[self.y_labels]
        return np.concatenate([wx, wy])

    def pooled_labels(self) -> np.ndarray:
        """Block label of each point of the pooled sample Z = [X; Y]."""
        if self.y_labels is None:
            return self.x_labels
        return np.concatenate([self.x_labels, self.y_labels])

    def mean_weights(self) -> np.ndarray:
        """Weights 1/|S_q| on X's points: μ_{S_q} = Σ_{i∈S_q} w_i φ(x_i)."""
        return 1.0 / self.x_sizes[self.x_labels]

    def weight_matrix(self, weights: np.ndarray) -> sp.csr_array:
        """The sparse n × Q matrix W with W[i, label_i] = weights[i]."""
        labels = self.pooled_labels()
        n = len(labels)
        return sp.csr_array((weights, (np.arange(n), labels)), shape=(n, self.n_blocks))


def pair_partition(n: int, m: int, n_blocks: int, rng: np.random.Generator) -> Partition:
    """A random partition of X (n points) and Y (m points) into Q paired blocks.

    With n = m one permutation cuts both samples (the authors' shared block indices);
    with n ≠ m each sample is cut by its own permutation.
    """
    x_labels = random_partition(n, n_blocks, rng)
    y_labels = x_labels.copy() if m == n else random_partition(m, n_blocks, rng)
    return Partition(n_blocks, x_labels, y_labels)


def median_position(n_blocks: int) -> int:
    """Sorted position (0-based) of the median of Q values: ⌊(Q−1)/2⌋."""
    return (n_blocks - 1) // 2


def majority(n_blocks: int) -> int:
    """How many blocks reach the median at least: Q − ⌊(Q−1)/2⌋, a strict majority."""
    return n_blocks - median_position(n_blocks)


def median_block(values: np.ndarray) -> int:
    """The block attaining the (lower) median of the block values.

    Ties are broken by block index (a stable sort), so the choice is reproducible.
    """
    values = np.asarray(values)
    return int(np.argsort(values, kind="stable")[median_position(len(values))])


def median_value(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """The (lower) median along an axis: the value at sorted position ⌊(Q−1)/2⌋."""
    values = np.asarray(values)
    k = median_position(values.shape[axis])
    return np.take(np.partition(values, k, axis=axis), k, axis=axis)


def blocks_min_sample_size(n_blocks: int | str) -> tuple[int, str]:
    """The fewest points a sample needs for Q blocks of at least 2 points ("auto": 2)."""
    if n_blocks == "auto":
        return 2, "each block needs at least 2 points"
    return 2 * int(n_blocks), f"n_blocks={n_blocks} blocks of at least 2 points each"


def block_trace_variances(
    source: GramSource, labels: np.ndarray, n_blocks: int, diag: np.ndarray
) -> np.ndarray:
    """Per-block trace variance of φ: mean_{S_q} k(x, x) − ‖μ_{S_q}‖², made unbiased.

    ``labels`` gives the block of each point of the source's sample (blocks of X and Y
    may be told apart by distinct labels); the factor |S_q|/(|S_q| − 1) removes the
    within-block bias. Its median over blocks is a robust scale (Lepski's radii).
    """
    sizes = np.bincount(labels, minlength=n_blocks).astype(float)
    W = sp.csr_array((1.0 / sizes[labels], (np.arange(len(labels)), labels)), shape=(len(labels), n_blocks))
    M = source.block_gram(W)
    mean_diag = np.bincount(labels, weights=diag, minlength=n_blocks) / sizes
    return np.maximum(mean_diag - np.diag(M), 0.0) * sizes / np.maximum(sizes - 1, 1)


def check_n_blocks(n_blocks: int, sizes: dict[str, int], *, estimator: str) -> None:
    """Require 1 ≤ Q ≤ n/2 for every sample (each block needs at least two points)."""
    for name, n in sizes.items():
        if n_blocks > n // 2:
            raise ParameterError(
                f"The 'n_blocks' parameter of estimator {estimator!r} must satisfy "
                f"1 <= n_blocks <= N/2 = {n // 2} for sample {name} of {n} points "
                f"(each block needs at least 2 points). Got {n_blocks} instead."
            )


# -- Gram sources: the same block reductions from a stored or a matrix-free Gram ------


class GramSource:
    """What block reductions need from the Gram matrix K of a pooled sample Z.

    ``kernel_s`` accumulates the seconds spent evaluating the kernel, so that results
    can report Gram building separately from iterating.
    """

    n: int
    kernel_s: float = 0.0

    def band(self, start: int, stop: int) -> np.ndarray:
        """Rows start:stop of K, columns start: (the upper band of a row chunk)."""
        raise NotImplementedError

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """Σ_k coef_k K[idx_k, :] = K[:, idx] @ coef (K is symmetric)."""
        raise NotImplementedError

    def _band_rows(self) -> int:
        return max(64, CHUNK_BYTES // (8 * max(self.n, 1)))

    def row_sums(self) -> np.ndarray:
        """K 1, in symmetric bands."""
        out = np.zeros(self.n)
        step = self._band_rows()
        for start in range(0, self.n, step):
            stop = min(start + step, self.n)
            band = self.band(start, stop)
            out[start:stop] += band.sum(axis=1)
            # the part right of the diagonal square also sums into the later rows
            out[stop:] += band[:, stop - start :].sum(axis=0)
        return out

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """K w for a dense vector (or n × B matrix) w, in symmetric bands."""
        out = np.zeros((self.n, *w.shape[1:]))
        step = self._band_rows()
        for start in range(0, self.n, step):
            stop = min(start + step, self.n)
            band = self.band(start, stop)
            out[start:stop] += band @ w[start:]
            out[stop:] += band[:, stop - start :].T @ w[start:stop]
        return out

    def block_gram(self, W: sp.csr_array | np.ndarray) -> np.ndarray:
        """G = Wᵀ K W for an n × Q weight matrix (sparse or dense), from the upper bands of K only."""
        Q = W.shape[1]
        G = np.zeros((Q, Q))
        sparse = sp.issparse(W)
        Wt: Any = sp.csr_array(W.T) if sparse else W.T

        def rows(a: int, b: int | None) -> np.ndarray:
            part: Any = W[a:b]
            return part.toarray() if sparse else part

        step = self._band_rows()
        for start in range(0, self.n, step):
            stop = min(start + step, self.n)
            band = self.band(start, stop)
            T = Wt[:, start:stop] @ band  # Q × (n − start)
            width = stop - start
            G += T[:, :width] @ rows(start, stop)
            off = T[:, width:] @ rows(stop, None)
            G += off + off.T
        return G


class StoredGram(GramSource):
    """Block reductions of a Gram matrix held in memory (computed once)."""

    def __init__(self, kernel: Kernel, Z: Any, *, K: np.ndarray | None = None):
        self.n = len(Z)
        start = time.perf_counter()
        self.K = kernel.gram(Z) if K is None else K
        self.kernel_s = time.perf_counter() - start

    def band(self, start: int, stop: int) -> np.ndarray:
        return self.K[start:stop, start:]

    def matvec(self, w: np.ndarray) -> np.ndarray:
        return self.K @ w

    def row_sums(self) -> np.ndarray:
        # one streaming pass over the stored matrix beats the symmetric bands here
        return self.K.sum(axis=1)

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        # a sparse row vector times K reads only the |idx| rows it needs, without the
        # copy that fancy indexing K[idx] makes (measured: about 2x faster; splitting
        # the rows between two threads was measured too and gained nothing reliable:
        # reading the rows from memory is the whole cost)
        return (one_row(idx, coef, self.n) @ self.K).ravel()


class MatrixFreeGram(GramSource):
    """Block reductions with the kernel evaluated on the fly, in bounded chunks.

    Memory stays O(n · chunk) instead of O(n²); each call re-evaluates the kernel
    values it needs. Diagonal entries come from the kernel's ``diag`` as in a stored
    Gram matrix, so both sources give the same numbers up to round-off.
    """

    def __init__(
        self, kernel: Kernel, Z: Any, *, diag: np.ndarray | None = None, band_rows: int | None = None
    ):
        self.kernel = kernel
        self.Z = Z
        self.n = len(Z)
        self.band_rows = band_rows
        start = time.perf_counter()
        self.diag = kernel.diag_tile(Z) if diag is None else diag
        self.kernel_s = time.perf_counter() - start

    def _band_rows(self) -> int:
        return self.band_rows or super()._band_rows()

    def _eval(self, A: Any, B: Any) -> np.ndarray:
        start = time.perf_counter()
        out = self.kernel.gram_tile(A, B)
        self.kernel_s += time.perf_counter() - start
        return out

    def band(self, start: int, stop: int) -> np.ndarray:
        band = self._eval(self.Z[start:stop], self.Z[start:])
        width = stop - start
        band[np.arange(width), np.arange(width)] = self.diag[start:stop]
        return band

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        cols = take(self.Z, idx)
        out = np.empty(self.n)
        step = max(64, CHUNK_BYTES // (8 * max(len(idx), 1)))
        for start in range(0, self.n, step):
            stop = min(start + step, self.n)
            chunk = self._eval(self.Z[start:stop], cols)
            # the entries K[i, i] (i in idx) as a stored Gram matrix has them
            # (kernel.diag), not as the generic formula gives them (round-off apart)
            inside = np.flatnonzero((idx >= start) & (idx < stop))
            chunk[idx[inside] - start, inside] = self.diag[idx[inside]]
            out[start:stop] = chunk @ coef
        return out


def one_row(idx: np.ndarray, coef: np.ndarray, n: int) -> sp.csr_array:
    """The 1 × n sparse row with ``coef`` at columns ``idx``, built directly in CSR form
    (skipping the COO conversion saves about 40 µs per BCD iteration)."""
    return sp.csr_array((coef, idx, np.array([0, len(idx)])), shape=(1, n))


def take(sample: Any, idx: np.ndarray) -> Any:
    """The points ``idx`` of a sample (rows of an array, items of a list of strings)."""
    if isinstance(sample, np.ndarray):
        return sample[idx]
    return [sample[i] for i in idx]


def gram_source(
    kernel: Kernel, Z: Any, *, matrix_free: bool | str = "auto", budget: float = 0.5
) -> GramSource:
    """A stored Gram matrix if it fits in ``budget`` of the free memory, else matrix-free."""
    n = len(Z)
    if matrix_free == "auto":
        avail = available_memory()
        matrix_free = avail is not None and 8.0 * n * n > budget * avail
    return MatrixFreeGram(kernel, Z) if matrix_free else StoredGram(kernel, Z)


def gram_bytes(n: int) -> float:
    """Bytes of an n × n float64 Gram matrix."""
    return 8.0 * n * n


def geometric_grid(max_blocks: int) -> list[int]:
    """The odd geometric grid Q = 2^k − 1 (1, 3, 7, 15, 31, …) up to ``max_blocks``.

    Odd values keep the median a single block value; the ratio ≈ 2 is the usual
    choice for Lepski's method (the paper's footnote).
    """
    grid = []
    q = 1
    while q <= max_blocks:
        grid.append(q)
        q = 2 * q + 1
    return grid


def lepski(
    grid: list[int], radii: list[float], distance: Any
) -> int:
    """Lepski's choice among estimates θ̂_Q on a grid of increasing Q (paper footnote).

    Larger Q tolerates more outliers but has a wider deviation radius r_Q. Returns the
    position of the smallest Q whose estimate is compatible with every larger one:
    distance(i, j) ≤ r_i + r_j for all j > i. The largest Q always qualifies.
    """
    for i in range(len(grid)):
        if all(distance(i, j) <= radii[i] + radii[j] for j in range(i + 1, len(grid))):
            return i
    return len(grid) - 1
