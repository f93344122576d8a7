"""Partitions into blocks, and the median convention.

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

from typing import cast

import attrs
import numpy as np
import scipy.sparse as sp

from monk_framework.core.errors import ParameterError

__all__ = [
    "Partition",
    "block_sizes",
    "blocks_min_sample_size",
    "check_n_blocks",
    "majority",
    "median_block",
    "median_position",
    "median_value",
    "pair_partition",
    "random_partition",
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
        d_q = μ_{S_q}(x) − μ_{T_q}(y).
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
        return cast(np.ndarray, 1.0 / self.x_sizes[self.x_labels])

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
    return cast(np.ndarray, np.take(np.partition(values, k, axis=axis), k, axis=axis))


def blocks_min_sample_size(n_blocks: int | str) -> tuple[int, str]:
    """The fewest points a sample needs for Q blocks of at least 2 points ("auto": 2)."""
    if n_blocks == "auto":
        return 2, "each block needs at least 2 points"
    return 2 * int(n_blocks), f"n_blocks={n_blocks} blocks of at least 2 points each"


def check_n_blocks(n_blocks: int, sizes: dict[str, int], *, estimator: str) -> None:
    """Require 1 ≤ Q ≤ n/2 for every sample (each block needs at least two points)."""
    for name, n in sizes.items():
        if n_blocks > n // 2:
            raise ParameterError(
                f"The 'n_blocks' parameter of estimator {estimator!r} must satisfy "
                f"1 <= n_blocks <= N/2 = {n // 2} for sample {name} of {n} points "
                f"(each block needs at least 2 points). Got {n_blocks} instead."
            )
