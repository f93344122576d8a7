"""Within-block relabelling: the draws keep every point in its block, and the block
reductions equal brute-force sums over the relabelled samples."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import stats

from monk_framework.core.resources import Resources
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.engine.partitions import Partition, pair_partition
from monk_framework.engine.pooled import PooledSample
from monk_framework.engine.within_blocks import block_means_gram, block_members, draw_within_block, relabelled_partition, within_block_sums


def test_relabellings_keep_each_point_in_its_block_with_its_block_sizes(rng):
    n, m = 23, 17
    part = pair_partition(n, m, 4, rng)
    perms = draw_within_block(part, n, 50, rng)
    labels = part.pooled_labels()
    for perm in perms:
        assert sorted(perm) == list(range(n + m))
        new = relabelled_partition(part, perm, n)
        # the same blocks hold the same points, with the same numbers of X and Y
        np.testing.assert_array_equal(new.x_sizes, part.x_sizes)
        np.testing.assert_array_equal(new.y_sizes, part.y_sizes)
        np.testing.assert_array_equal(new.x_labels, labels[perm[:n]])
        for q, (ix, iy) in enumerate(block_members(part, n)):
            block = set(ix) | set(iy)
            assert set(perm[:n][new.x_labels == q]) | set(perm[n:][new.y_labels == q]) == block
    assert len({tuple(p) for p in perms}) == 50


def test_relabellings_are_uniform_over_the_within_block_group():
    # one block of 2 X and 2 Y points: C(4, 2) = 6 labellings, each with probability 1/6
    part = Partition(1, np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64))
    perms = draw_within_block(part, 2, 6000, np.random.default_rng(0))
    counts = Counter(tuple(sorted(p[:2])) for p in perms)
    assert len(counts) == 6
    assert stats.chisquare(list(counts.values())).pvalue > 0.01
    # two blocks are shuffled independently: the pair of labellings is uniform over 6 x 6
    part2 = Partition(2, np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]))
    perms2 = draw_within_block(part2, 4, 36000, np.random.default_rng(1))
    pairs = Counter(tuple(sorted(p[:4])) for p in perms2)
    assert len(pairs) == 36
    assert stats.chisquare(list(pairs.values())).pvalue > 0.01


def _naive_block_sums(kernel, X, Y, part, perm, n):
    """The five sums of each block, from the relabelled samples' own Gram matrices."""
    Z = np.vstack([X, Y])
    new = relabelled_partition(part, perm, n)
    Xr, Yr = Z[perm[:n]], Z[perm[n:]]
    out = []
    for q in range(part.n_blocks):
        A, B = Xr[new.x_labels == q], Yr[new.y_labels == q]
        Kxx, Kyy, Kxy = kernel.gram(A), kernel.gram(B), kernel.gram(A, B)
        out.append((Kxx.sum(), Kyy.sum(), Kxy.sum(), np.trace(Kxx), np.trace(Kyy)))
    return np.array(out)


@pytest.mark.parametrize("stored", [False, True])
def test_within_block_sums_equal_brute_force(registry, rng, stored):
    n, m = 31, 26
    X, Y = rng.normal(size=(n, 2)), rng.normal(0.4, 1.2, size=(m, 2))
    kernel = registry.get_kernel("quadratic")
    Z = np.vstack([X, Y])
    pool = PooledSample(kernel, X, Y, gram=kernel.gram(Z) if stored else None, resources=Resources.of())
    part = pair_partition(n, m, 5, rng)
    perms = np.vstack([np.arange(n + m), draw_within_block(part, n, 6, rng)])
    got = within_block_sums(pool, part, perms)
    for b, perm in enumerate(perms):
        want = _naive_block_sums(kernel, X, Y, part, perm, n)
        have = np.stack([got.xx[b], got.yy[b], got.xy[b], got.trace_x[b], got.trace_y[b]], axis=1)
        np.testing.assert_allclose(have, want, rtol=1e-11)
    # without a stored Gram matrix only the blocks were evaluated
    assert stored or pool._source is None


@pytest.mark.parametrize("matrix_free", [False, True])
def test_block_means_gram_equals_brute_force(registry, rng, monkeypatch, matrix_free):
    n, m = 28, 33
    monkeypatch.setitem(CHUNK_BYTES, "batch", 2 * 8 * (n + m) * 4 * 2)  # batches of 2 relabellings
    X, Y = rng.normal(size=(n, 3)), rng.normal(0.3, 1.0, size=(m, 3))
    kernel = registry.get_kernel("rbf", sigma=1.3)
    pool = PooledSample(kernel, X, Y, matrix_free=matrix_free, resources=Resources.of())
    part = pair_partition(n, m, 4, rng)
    perms = np.vstack([np.arange(n + m), draw_within_block(part, n, 5, rng)])
    got = block_means_gram(pool, part, perms)
    Z = np.vstack([X, Y])
    for b, perm in enumerate(perms):
        new = relabelled_partition(part, perm, n)
        Xr, Yr = Z[perm[:n]], Z[perm[n:]]
        parts = [Xr[new.x_labels == q] for q in range(4)] + [Yr[new.y_labels == q] for q in range(4)]
        want = np.array([[kernel.gram(a, c).mean() for c in parts] for a in parts])
        np.testing.assert_allclose(got[b], want, rtol=1e-11, atol=1e-14)
