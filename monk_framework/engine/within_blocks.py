"""Within-block relabelling: one fixed partition, labels permuted inside each block.

A median-of-means statistic is robust because a contaminated point spoils only its own
block. A permutation test that relabels the whole pooled sample moves that point into
other blocks and onto the other side, so its null distribution sees more spoiled blocks
than the observed statistic did. Within-block relabelling keeps the test honest:

* the partition is drawn **once**, stratified: block q holds |S_q| points of X and |T_q|
  points of Y (:func:`monk_framework.engine.partitions.pair_partition`), independently of the data;
* a relabelling permutes the |S_q| + |T_q| pooled points of each block independently and
  calls the first |S_q| of them X, so every point stays in its block and every block keeps
  its sizes;
* every statistic (observed and relabelled) is computed on that one partition.

Under H₀: P = Q with clean data the pooled sample is exchangeable, and the within-block
relabellings form a group (the product of the blocks' symmetric groups) that leaves the
joint law invariant; the partition is independent of the data. So the permutation p-value
(1 + #{T_b ≥ T}) / (1 + B) is valid, as for global relabelling.

A relabelling is stored like a global one (:mod:`monk_framework.engine.pooled`): a permutation π
of 0..N+M−1 whose first N entries are the relabelled X. The partition is given in pooled
coordinates (:meth:`Partition.pooled_labels`); :func:`relabelled_partition` maps it to the
coordinates of a relabelling. Two reductions serve the estimators:

* :func:`within_block_sums`: per block and relabelling, the kernel sums within X, within Y
  and across, and the two traces, from the Q within-block Gram matrices only
  ((N+M)²/Q kernel evaluations in all, never the pooled Gram matrix);
* :func:`block_means_gram`: per relabelling, the 2Q × 2Q Gram matrix of the block-part
  means μ_{S_q}, μ_{T_q} (MONK BCD and the MONK embeddings need cross-block terms), from
  products K E of the pooled Gram matrix with block-restricted indicators;
* :func:`pooled_block_means_gram` and :func:`kept_blocks_mmd2`: the Gram matrix of the
  pooled block means p_q, which no within-block relabelling changes, and the MMD² over a
  set of blocks chosen from it (the trimmed test-time form of the embedding MMD).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from monk_framework.core.kernels import Kernel, check_squared_norm
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample, take
from monk_framework.engine.backends import in_this_process
from monk_framework.engine.gram_sources import GramSource, MatrixFreeGram, PermutedGram, StoredGram, gram_source
from monk_framework.engine.memory import chunk_rows
from monk_framework.engine.partitions import Partition
from monk_framework.engine.pooled import PooledSample, SampleSums, pooled

__all__ = [
    "WITHIN_BLOCK_BAND_ROWS",
    "block_kernel_sums",
    "paired_block_sums",
    "DRAW_CHUNK",
    "BlockGrams",
    "KeptBlocks",
    "block_members",
    "block_means_gram",
    "draw_within_block",
    "kept_blocks_mmd2",
    "pooled_block_means_gram",
    "relabellings",
    "relabelled_partition",
    "within_block_sums",
    "x_indicators",
]

#: relabellings are drawn in chunks of this many, chunk c from the c-th child stream, so
#: relabelling b is the same whatever the batches and whatever the total B.
DRAW_CHUNK = 64


def block_members(partition: Partition, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pooled indices of each block's X part and Y part (Y's points are offset by n)."""
    assert partition.y_labels is not None
    xs = [np.flatnonzero(partition.x_labels == q) for q in range(partition.n_blocks)]
    ys = [n + np.flatnonzero(partition.y_labels == q) for q in range(partition.n_blocks)]
    return list(zip(xs, ys))


def draw_within_block(
    partition: Partition,
    n: int,
    count: int,
    rng: np.random.Generator,
    members: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> np.ndarray:
    """``count`` within-block relabellings of the pooled sample, as a count × (N+M) array.

    Row b lists the relabelled X first (block by block: the first |S_q| of block q's
    shuffled pooled points), then the relabelled Y. Each block is shuffled independently,
    so the rows are independent uniform draws from the within-block relabelling group.
    ``members`` (:func:`block_members`) may be passed to save recomputing it.
    """
    members = block_members(partition, n) if members is None else members
    size = sum(len(ix) + len(iy) for ix, iy in members)
    out = np.empty((count, size), dtype=np.int64)
    at_x, at_y = 0, n
    for ix, iy in members:
        block = np.concatenate([ix, iy])
        shuffled = rng.permuted(np.broadcast_to(block, (count, len(block))), axis=1)
        out[:, at_x : at_x + len(ix)] = shuffled[:, : len(ix)]
        out[:, at_y : at_y + len(iy)] = shuffled[:, len(ix) :]
        at_x += len(ix)
        at_y += len(iy)
    return out


def relabellings(partition: Partition, n: int, start: int, stop: int, seq: np.random.SeedSequence) -> np.ndarray:
    """Within-block relabellings start..stop−1 of a test whose relabelling stream is ``seq``.

    Relabelling b is row b mod :data:`DRAW_CHUNK` of chunk b // DRAW_CHUNK, drawn with
    :func:`draw_within_block` from the chunk's own child of ``seq`` (the child ``spawn``
    would give), so it does not depend on how the relabellings are batched.
    """
    first, last = start // DRAW_CHUNK, (stop - 1) // DRAW_CHUNK
    members = block_members(partition, n)
    chunks = [
        draw_within_block(
            partition,
            n,
            DRAW_CHUNK,
            np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, c))),
            members,
        )
        for c in range(first, last + 1)
    ]
    rows = np.vstack(chunks)
    return rows[start - first * DRAW_CHUNK : stop - first * DRAW_CHUNK]


def relabelled_partition(partition: Partition, perm: np.ndarray, n: int) -> Partition:
    """The partition in the coordinates of relabelling ``perm`` (X' = Z[perm[:n]])."""
    labels = partition.pooled_labels()[perm]
    return Partition(partition.n_blocks, labels[:n], labels[n:])


def x_indicators(perms: np.ndarray, n: int) -> np.ndarray:
    """B × (N+M) booleans: True where relabelling b (a row of ``perms``) calls a pooled point X."""
    is_x = np.zeros(perms.shape, dtype=bool)
    np.put_along_axis(is_x, perms[:, :n], True, axis=1)
    return is_x


class BlockGrams:
    """The Q within-block Gram matrices of a pooled sample under one partition, with
    their row sums and diagonals: computed once per test and reused by every batch."""

    def __init__(self, pool: PooledSample, partition: Partition):
        self.partition = partition
        self.blocks = []
        for ix, iy in block_members(partition, pool.n):
            idx = np.concatenate([ix, iy])
            K = pool.submatrix(idx)  # this object's own copy
            d = np.diag(K).copy()
            # the diagonal is kept apart: the sums within X and within Y are added up
            # without it, which an unbounded kernel's k(z, z) can dwarf
            np.fill_diagonal(K, 0.0)
            self.blocks.append((idx, K, K.sum(axis=1), d))

    @classmethod
    def of(cls, pool: PooledSample, partition: Partition) -> BlockGrams:
        """The block Gram matrices of ``partition``, cached on ``pool`` for the test's life."""
        cached = pool.cache.get("block-grams")
        if cached is None or cached.partition is not partition:
            cached = pool.cache["block-grams"] = cls(pool, partition)
        return cached

    def sums(self, perms: np.ndarray) -> SampleSums:
        """Per-block kernel sums of every relabelling in ``perms``, arrays of shape B × Q."""
        perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
        is_x = x_indicators(perms, int(self.partition.x_sizes.sum()))
        B, Q = len(perms), self.partition.n_blocks
        xx, yy, xy, tx, ty = (np.empty((B, Q)) for _ in range(5))
        xx_off, yy_off = np.empty((B, Q)), np.empty((B, Q))
        for q, (idx, K0, r0, d) in enumerate(self.blocks):
            E = is_x[:, idx].T.astype(np.float64)  # block size × B
            xx_off[:, q] = np.einsum("ij,ij->j", E, K0 @ E)
            x1 = r0 @ E
            xy[:, q] = x1 - xx_off[:, q]
            yy_off[:, q] = float(r0.sum()) - x1 - xy[:, q]
            tx[:, q] = d @ E
            ty[:, q] = d @ (1.0 - E)
        xx[...], yy[...] = xx_off + tx, yy_off + ty
        return SampleSums(xx=xx, yy=yy, xy=xy, trace_x=tx, trace_y=ty, xx_off=xx_off, yy_off=yy_off)


def within_block_sums(pool: PooledSample, partition: Partition, perms: np.ndarray) -> SampleSums:
    """Per-block kernel sums of every relabelling, each array of shape B × Q.

    For block q with Gram matrix K_q (its |S_q| + |T_q| pooled points), K₀ = K_q with a
    zero diagonal, E the matrix of its X-indicators under the B relabellings, r₀ = K₀ 1
    and d = diag K_q:

        S_xx⁰ = colsum(E ∘ K₀ E),  S_xy = Eᵀr₀ − S_xx⁰,  S_yy⁰ = 1ᵀK₀ 1 − Eᵀr₀ − S_xy,
        tr_x = Eᵀd,  tr_y = (1 − E)ᵀd,  S_xx = S_xx⁰ + tr_x,  S_yy = S_yy⁰ + tr_y,

    the sums without the diagonal (⁰) added up without it.

    Only the within-block Gram matrices are evaluated (from the pooled sample's stored Gram
    matrix when it has one), once per test (:class:`BlockGrams`, cached on ``pool``), so
    the cost is (N+M)²/Q kernel evaluations and one product K_q E per block and batch.
    """
    return BlockGrams.of(pool, partition).sums(perms)


def block_means_gram(pool: PooledSample, partition: Partition, perms: np.ndarray) -> np.ndarray:
    """The B × 2Q × 2Q Gram matrices of the block-part means of every relabelling.

    Entry (q, r) of relabelling b is ⟨μ_{S_q}, μ_{S_r}⟩, entry (q, Q + r) is
    ⟨μ_{S_q}, μ_{T_r}⟩ and (Q + q, Q + r) is ⟨μ_{T_q}, μ_{T_r}⟩, with S_q and T_q the
    relabelled X and Y parts of block q. With L the (N+M) × Q block indicators and E_b
    its restriction to relabelling b's X, F_b = L − E_b, so every entry comes from
    E_bᵀ K E_b, E_bᵀ K L and Lᵀ K L: one product K [E_1 … E_B] of the pooled Gram matrix
    (in batches of the engine's batch size), stored or matrix-free.
    """
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    B, size = perms.shape
    Q = partition.n_blocks
    labels = partition.pooled_labels()
    L = np.zeros((size, Q))
    L[np.arange(size), labels] = 1.0
    src = pool.source
    KL = src.matvec(L)
    LKL = L.T @ KL
    is_x = x_indicators(perms, pool.n)
    nx = partition.x_sizes.astype(float)
    ny = partition.y_sizes.astype(float)
    out = np.empty((B, 2 * Q, 2 * Q))
    step = chunk_rows(2 * 8 * size * Q, work="batch", resources=pool.resources)
    for start in range(0, B, step):
        stop = min(start + step, B)
        E = np.zeros((size, (stop - start) * Q))
        for j, b in enumerate(range(start, stop)):
            rows = np.flatnonzero(is_x[b])
            E[rows, j * Q + labels[rows]] = 1.0
        KE = src.matvec(E)
        for j, b in enumerate(range(start, stop)):
            Eb, KEb = E[:, j * Q : (j + 1) * Q], KE[:, j * Q : (j + 1) * Q]
            EKE = Eb.T @ KEb
            EKL = Eb.T @ KL
            EKF = EKL - EKE
            FKF = LKL - EKL - EKL.T + EKE
            out[b, :Q, :Q] = EKE / np.outer(nx, nx)
            out[b, :Q, Q:] = EKF / np.outer(nx, ny)
            out[b, Q:, :Q] = EKF.T / np.outer(ny, nx)
            out[b, Q:, Q:] = FKF / np.outer(ny, ny)
    return out


def pooled_block_means_gram(pool: PooledSample, partition: Partition) -> np.ndarray:
    """The Q × Q Gram matrix of the pooled block means p_q = mean of φ(z) over block q's
    |S_q| + |T_q| points, ⟨p_q, p_r⟩ = Σ_{i∈q, j∈r} K_ij / (n_q n_r).

    A within-block relabelling moves points only inside their blocks, so p_q, and anything
    chosen from these means, is the same for the observed labelling and for every
    relabelling of the test: a choice of blocks made from them treats T and its null alike.
    """
    labels = partition.pooled_labels()
    pooled_part = Partition(partition.n_blocks, labels)
    return pool.source.block_gram(pooled_part.weight_matrix(pooled_part.mean_weights()))


class KeptBlocks:
    """The points of a fixed set K of blocks and their Gram source, for :func:`kept_blocks_mmd2`.

    Computed once per test (:meth:`of`, cached on the pool): the submatrix of a stored
    pooled Gram matrix, or a source of the kept points alone that follows the memory
    budget (matrix-free over it).
    """

    def __init__(self, pool: PooledSample, partition: Partition, keep: np.ndarray):
        self.partition = partition
        self.keep = np.sort(np.asarray(keep, dtype=np.int64))
        labels = partition.pooled_labels()
        self.members = np.flatnonzero(np.isin(labels, self.keep))
        self.labels = labels[self.members]
        Zk = take(pool.Z, self.members)
        self.source: GramSource
        if pool.stored:
            self.source = StoredGram(pool.kernel, Zk, K=pool.submatrix(self.members))
        else:
            self.source = gram_source(pool.kernel, Zk, resources=pool.resources, matrix_free=pool.matrix_free)
        self.dmax = float(pool.diag.max()) if pool.size else 0.0

    @classmethod
    def of(cls, pool: PooledSample, partition: Partition, keep: np.ndarray) -> KeptBlocks:
        cached = pool.cache.get("kept-blocks")
        if cached is None or cached.partition is not partition or not np.array_equal(cached.keep, np.sort(keep)):
            cached = pool.cache["kept-blocks"] = cls(pool, partition, keep)
        return cached


def kept_blocks_mmd2(pool: PooledSample, partition: Partition, keep: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """‖(1/k) Σ_{q∈K} (μ_{S_q} − μ_{T_q})‖² for every relabelling in ``perms``, K = ``keep`` (k blocks).

    The mean of the kept blocks' differences of X- and Y-part means, with the relabelled
    parts S_q, T_q of each block: c_bᵀ K c_b with c_b = ±1/(k|S_q|) or ∓1/(k|T_q|) on the
    kept points (a V-statistic with the cross-block pairs). All relabellings of a batch
    come from one pass over the kept points' Gram matrix (:meth:`GramSource.quadratic_forms`).
    With every block kept and one block it is the V-statistic MMD².
    """
    kept = KeptBlocks.of(pool, partition, keep)
    perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
    is_x = x_indicators(perms, pool.n)[:, kept.members].T  # kept points × B
    k = len(kept.keep)
    nx = partition.x_sizes.astype(float)[kept.labels][:, None]
    ny = partition.y_sizes.astype(float)[kept.labels][:, None]
    C = np.where(is_x, 1.0 / (k * nx), -1.0 / (k * ny))
    out = kept.source.quadratic_forms(C)
    # Σ|c_i| = 2, so the terms are at most 4 max k(z, z)
    check_squared_norm(pool.kernel, float(out.min()), 4.0 * kept.dmax, "the kept blocks' MMD^2")
    return out


#: rows per band of a within-block Gram matrix, at least (measured at 364 points, d = 10:
#: one square 0.85 ms, bands of 182 rows 0.58 ms, 121 rows 0.38 ms, 91 rows 0.40 ms); a
#: quarter of a larger block (at 10^6 + 10^6 points, Q = 1001, blocks of 2000: 128 rows
#: 6.9 s, 512 rows 5.5 s, 2048 rows 8.0 s)
WITHIN_BLOCK_BAND_ROWS = 128


def block_kernel_sums(
    kernel: Kernel,
    X: Sample,
    Y: Sample,
    x_labels: np.ndarray,
    y_labels: np.ndarray,
    n_blocks: int,
    diag_x: np.ndarray,
    diag_y: np.ndarray,
    *,
    resources: Resources,
    cache: dict[str, Any] | None = None,
    what: str = "block sums",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A_q = Σ k over S_q×S_q, B_q = Σ k over T_q×T_q and C_q = Σ k over S_q×T_q for every
    block q of a paired partition (block q: X[x_labels == q] and Y[y_labels == q]), from
    each block's own Gram matrix, never the pooled one.

    K is symmetric, so each pair is needed once: a kernel with a direct form (the RBF
    kernel's compiled loop, :meth:`Kernel.compute_block_gram`) evaluates exactly the upper
    half; others walk the upper bands, about 60 % of each square. The blocks run on this
    machine's threads, or, when ``resources`` spreads over a remote backend, on its
    workers, which receive the
    samples once per ``cache`` (a dict the caller keeps for the estimate).
    """
    remote = resources.spread
    backend = remote or in_this_process()
    data: Any = (kernel, X, Y, diag_x, diag_y)
    if remote is not None:
        cache = {} if cache is None else cache
        if "spread_data" not in cache:
            cache["spread_data"] = remote.share(data)
        data = cache["spread_data"]
    tasks = list(zip(_members(x_labels, n_blocks), _members(y_labels, n_blocks)))
    found: dict[int, Any] = {}
    for i, share in backend.as_completed(_one_block_sums, tasks, data):
        found[i] = share
        resources.report(len(found), len(tasks), what)
    sums = np.array([found[i] for i in range(len(tasks))]).reshape(-1, 3)
    return sums[:, 0].copy(), sums[:, 1].copy(), sums[:, 2].copy()


def _members(labels: np.ndarray, n_blocks: int) -> list[np.ndarray]:
    """The indices of each block, ascending (one stable sort, not a scan per block)."""
    # the same order from 16-bit keys, which numpy sorts by radix (10⁶ labels: 17 against 112 ms)
    keys = labels.astype(np.uint16) if n_blocks <= np.iinfo(np.uint16).max + 1 else labels
    order = np.argsort(keys, kind="stable")
    return np.split(order, np.cumsum(np.bincount(labels, minlength=n_blocks))[:-1])


def _one_block_sums(task: tuple[np.ndarray, np.ndarray], data: tuple[Any, ...]) -> tuple[float, float, float]:
    """Σ k over S_q×S_q, T_q×T_q and S_q×T_q of one block (module level: it runs on workers)."""
    kernel, X, Y, dx, dy = data
    ix, iy = task
    n = len(ix)
    # indicators of the block's X part and Y part, as columns
    E = np.zeros((n + len(iy), 2))
    E[:n, 0] = 1.0
    E[n:, 1] = 1.0
    source = MatrixFreeGram(
        kernel,
        pooled(take(X, ix), take(Y, iy)),
        diag=np.concatenate([dx[ix], dy[iy]]),
        band_rows=max(WITHIN_BLOCK_BAND_ROWS, (n + len(iy)) // 4),
    )
    S = source.block_gram(E)
    return float(S[0, 0]), float(S[1, 1]), float(S[0, 1])


def paired_block_sums(pool: PooledSample, partitions: list[Partition]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(A_q, B_q, C_q) of every paired partition of the pool's samples: Σ k over S_q×S_q,
    over T_q×T_q and over S_q×T_q for each block q (BCD-Fast's block statistics).

    The pool of a relabelling of a stored pooled Gram matrix (a permutation test's,
    :meth:`PooledSample.relabelling`) gives them all from one product K W, W the
    indicators of every block's X and Y parts at the pooled indices the relabelling maps
    them to; any other pool from each block's own Gram matrix
    (:func:`block_kernel_sums`, N²/Q-order kernel evaluations, never the pooled one).
    """
    shared = pool.made_source
    if isinstance(shared, PermutedGram):
        return _shared_block_sums(shared, partitions)
    return [
        block_kernel_sums(
            pool.kernel,
            pool.X,
            pool.Y,
            part.x_labels,
            part.y_labels,  # type: ignore[arg-type]
            part.n_blocks,
            pool.diag[: pool.n],
            pool.diag[pool.n :],
            resources=pool.resources,
            cache=pool.cache,
            what=f"block sums, partition {i + 1} of {len(partitions)}",
        )
        for i, part in enumerate(partitions)
    ]


def _shared_block_sums(shared: PermutedGram, parts: list[Partition]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A_q, B_q, C_q of every partition from one product K W of the stored pooled K.

    Column 2Q·p + q of W indicates X's part of block q in partition p, column
    2Q·p + Q + q its Y part, at the pooled indices the relabelling maps them to.
    """
    Q = parts[0].n_blocks
    # partitions per product, so that W and K W take at most one batch
    per = chunk_rows(2 * 8 * shared.n * 2 * Q, work="batch")
    out = []
    for first in range(0, len(parts), per):
        chunk = parts[first : first + per]
        W = np.zeros((shared.n, 2 * Q * len(chunk)))
        for p, part in enumerate(chunk):
            assert part.y_labels is not None
            labels = np.concatenate([part.x_labels, part.y_labels + Q]) + 2 * Q * p
            W[shared.perm, labels] = 1.0
        S = W.T @ (shared.K @ W)
        for p in range(len(chunk)):
            block = S[2 * Q * p : 2 * Q * (p + 1), 2 * Q * p : 2 * Q * (p + 1)]
            d = np.diag(block)
            out.append((d[:Q].copy(), d[Q:].copy(), np.diag(block[:Q, Q:]).copy()))
    return out
