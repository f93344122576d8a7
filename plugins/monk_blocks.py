"""BCD-Fast's block statistics: the inner products of each block's two directions.

Block q of a paired partition has the all-ones direction 1_q on its points and the
direction v_q = [1/|S_q| on X; −1/|T_q| on Y] of d_q = μ_{S_q}(x) − μ_{T_q}(y); BCD-Fast
(paper Algorithm 2) iterates on their inner products under K + εI, computed from the
within-block kernel sums (:func:`monk_framework.plugin.paired_block_sums`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from monk_framework import check_squared_norm
from monk_framework.plugin import Pool, paired_block_sums

__all__ = ["BlockStats", "block_stats", "checked_block_stats", "within_block_stats"]


@attrs.frozen
class BlockStats:
    """Inner products of the two per-block directions under K + εI.

    1_q is all-ones on block q's points; v_q = [1/|S_q| on X; −1/|T_q| on Y] is the
    direction of d_q. ``v_v[q]`` = ‖d_q‖² (+ ridge) is block q's V-statistic MMD².
    """

    one_one: np.ndarray
    one_v: np.ndarray
    v_v: np.ndarray

    @property
    def inv_norm_v(self) -> np.ndarray:
        return np.where(self.v_v > 0, 1.0 / np.sqrt(np.maximum(self.v_v, 1e-300)), 0.0)


def within_block_stats(pool: Pool, parts: list[Any], ridge: float) -> list[BlockStats]:
    """The block statistics of each partition, from Σ k over S_q×S_q, T_q×T_q and S_q×T_q
    (:func:`~monk_framework.plugin.paired_block_sums`: the within-block Gram sums, or, on
    a relabelling of a stored pooled Gram matrix, one product for all partitions)."""
    return [checked_block_stats(pool, block_stats(part, *s, ridge), ridge) for part, s in zip(parts, paired_block_sums(pool, parts))]


def checked_block_stats(pool: Pool, stats: BlockStats, ridge: float) -> BlockStats:
    """The block statistics, after checking their squared norms (negative: K is not PSD)."""
    dmax = float(pool.diag.max()) + ridge
    check_squared_norm(pool.kernel, float(np.min(stats.v_v)), 4.0 * dmax, "a block's ||d_q||^2")
    check_squared_norm(pool.kernel, float(np.min(stats.one_one)), pool.size**2 * dmax, "a block's 1'K1")
    return stats


def block_stats(part: Any, A: np.ndarray, B: np.ndarray, C: np.ndarray, ridge: float) -> BlockStats:
    nq = part.x_sizes.astype(float)
    mq = part.y_sizes.astype(float)

    def inner(p: Any, r: Any, p2: Any, r2: Any) -> np.ndarray:
        # uᵀ(K + εI)u' for u = [p on S_q; r on T_q], u' = [p2; r2]
        return p * p2 * A + r * r2 * B + (p * r2 + r * p2) * C + ridge * (nq * p * p2 + mq * r * r2)

    one_one = inner(1.0, 1.0, 1.0, 1.0)
    one_v = inner(1.0, 1.0, 1.0 / nq, -1.0 / mq)
    v_v = inner(1.0 / nq, -1.0 / mq, 1.0 / nq, -1.0 / mq)
    return BlockStats(one_one, one_v, v_v)
