"""Within-block relabelling: one fixed partition, labels permuted inside each block.

A median-of-means statistic is robust because a contaminated point spoils only its own
block. A permutation test that relabels the whole pooled sample moves that point into
other blocks and onto the other side, so its null distribution sees more spoiled blocks
than the observed statistic did. Within-block relabelling keeps the test honest:

* the partition is drawn **once**, stratified: block q holds |S_q| points of X and |T_q|
  points of Y (:func:`monk_framework.blocks.pair_partition`), independently of the data;
* a relabelling permutes the |S_q| + |T_q| pooled points of each block independently and
  calls the first |S_q| of them X, so every point stays in its block and every block keeps
  its sizes;
* every statistic (observed and relabelled) is computed on that one partition.

Under H₀: P = Q with clean data the pooled sample is exchangeable, and the within-block
relabellings form a group (the product of the blocks' symmetric groups) that leaves the
joint law invariant; the partition is independent of the data. So the permutation p-value
(1 + #{T_b ≥ T}) / (1 + B) is valid, as for global relabelling.

A relabelling is stored like a global one (:mod:`monk_framework.pooled`): a permutation π
of 0..N+M−1 whose first N entries are the relabelled X. The partition is given in pooled
coordinates (:meth:`Partition.pooled_labels`); :func:`relabelled_partition` maps it to the
coordinates of a relabelling. Two reductions serve the estimators:

* :func:`within_block_sums`: per block and relabelling, the kernel sums within X, within Y
  and across, and the two traces, from the Q within-block Gram matrices only
  ((N+M)²/Q kernel evaluations in all, never the pooled Gram matrix);
* :func:`block_means_gram`: per relabelling, the 2Q × 2Q Gram matrix of the block-part
  means μ_{S_q}, μ_{T_q} (MONK BCD and the MONK embeddings need cross-block terms), from
  products K E of the pooled Gram matrix with block-restricted indicators.
"""

from __future__ import annotations

import numpy as np

from .blocks import Partition
from .pooled import BATCH_BYTES, PooledSample, SampleSums

__all__ = [
    "DRAW_CHUNK",
    "BlockGrams",
    "block_members",
    "block_means_gram",
    "draw_within_block",
    "relabellings",
    "relabelled_partition",
    "within_block_sums",
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
    partition: Partition, n: int, count: int, rng: np.random.Generator,
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


def relabellings(
    partition: Partition, n: int, start: int, stop: int, seq: np.random.SeedSequence
) -> np.ndarray:
    """Within-block relabellings start..stop−1 of a test whose relabelling stream is ``seq``.

    Relabelling b is row b mod :data:`DRAW_CHUNK` of chunk b // DRAW_CHUNK, drawn with
    :func:`draw_within_block` from the chunk's own child of ``seq`` (the child ``spawn``
    would give), so it does not depend on how the relabellings are batched.
    """
    first, last = start // DRAW_CHUNK, (stop - 1) // DRAW_CHUNK
    members = block_members(partition, n)
    chunks = [
        draw_within_block(
            partition, n, DRAW_CHUNK,
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


def _x_indicators(perms: np.ndarray, n: int) -> np.ndarray:
    """B × (N+M) booleans: True where a relabelling calls a pooled point X."""
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
            K = pool.submatrix(idx)
            self.blocks.append((idx, K, K.sum(axis=1), np.diag(K).copy()))

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
        is_x = _x_indicators(perms, int(self.partition.x_sizes.sum()))
        B, Q = len(perms), self.partition.n_blocks
        xx, yy, xy, tx, ty = (np.empty((B, Q)) for _ in range(5))
        for q, (idx, K, r, d) in enumerate(self.blocks):
            E = is_x[:, idx].T.astype(np.float64)  # block size × B
            KE = K @ E
            xx[:, q] = np.einsum("ij,ij->j", E, KE)
            x1 = r @ E
            xy[:, q] = x1 - xx[:, q]
            yy[:, q] = float(r.sum()) - x1 - xy[:, q]
            tx[:, q] = d @ E
            ty[:, q] = float(d.sum()) - tx[:, q]
        return SampleSums(xx=xx, yy=yy, xy=xy, trace_x=tx, trace_y=ty)


def within_block_sums(pool: PooledSample, partition: Partition, perms: np.ndarray) -> SampleSums:
    """Per-block kernel sums of every relabelling, each array of shape B × Q.

    For block q with Gram matrix K_q (its |S_q| + |T_q| pooled points) and E the matrix of
    its X-indicators under the B relabellings, r = K_q 1 and d = diag K_q:

        S_xx = colsum(E ∘ K_q E),  S_xy = Eᵀr − S_xx,  S_yy = 1ᵀK_q 1 − Eᵀr − S_xy,
        tr_x = Eᵀd,  tr_y = tr K_q − tr_x.

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
    (in batches bounded by ``BATCH_BYTES``), stored or matrix-free.
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
    is_x = _x_indicators(perms, pool.n)
    nx = partition.x_sizes.astype(float)
    ny = partition.y_sizes.astype(float)
    out = np.empty((B, 2 * Q, 2 * Q))
    step = max(1, BATCH_BYTES // (2 * 8 * size * Q))
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

