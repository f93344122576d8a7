"""Method "mom" of the robust test: the median of block p-values, within the blocks of one partition.

Each of Q blocks gets its own permutation p-value from within-block relabellings of its
statistic (an estimator's ``mmd2_from_sums``); with at most r corrupted blocks the
(m − r)-th order statistic of the p-values, m = (Q + 1)/2, is valid
(:func:`median_pvalue`). Deprecated in favour of dc and clip, which have more power
everywhere measured.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from monk_framework.core.errors import ParameterError, PluginFailure, plugin_code, shown
from monk_framework.core.estimators import MMDEstimator
from monk_framework.engine.partitions import check_n_blocks, median_position
from monk_framework.engine.pooled import PooledSample
from monk_framework.engine.relabelling import Progress, real_statistics, within_block_batch
from monk_framework.engine.within_blocks import relabellings, within_block_sums
from monk_framework.two_sample.common import TIE_RTOL

__all__ = ["MOM_BLOCKS_PER_ROOT", "auto_blocks", "block_exceedances", "check_blocks", "median_pvalue"]

#: "mom" with n_blocks="auto": Q ≈ MOM_BLOCKS_PER_ROOT · √min(N, M), at least 4r + 1
#: (measured best among 21..251 blocks at N = 200 and 1000; docs/studies/robustness.md).
MOM_BLOCKS_PER_ROOT = 2.0


def auto_blocks(n: int, m: int, r: int) -> int:
    """The default Q of "mom": odd, about 2√min(N, M), at least 4r + 1, at most min(N, M)/2.

    More blocks make the median of the block p-values more precise and tolerate more
    corruption; fewer make each block's test stronger. With r corrupted blocks the median
    needs at least r + 1 clean blocks below it, so Q ≥ 4r + 1 keeps three quarters of the
    blocks clean. Raises when even min(N, M)/2 blocks of two points cannot reach 2r + 1.
    """
    small = min(n, m)
    top = small // 2
    q = max(int(math.ceil(MOM_BLOCKS_PER_ROOT * math.sqrt(small))), 4 * r + 1)
    q = min(q, top)
    if q % 2 == 0:
        q -= 1
    if q < 2 * r + 1:
        raise ParameterError(
            f"method='mom' cannot tolerate contamination = {r}: the median of Q block p-values needs "
            f"Q >= 2r + 1 = {2 * r + 1} blocks, but blocks of at least 2 points of each sample allow at "
            f"most {top} with min(N, M) = {small}. Use fewer corrupted points, more data, or "
            "method='dc' with a bounded kernel."
        )
    return max(q, 1)


def median_pvalue(block_pvalues: np.ndarray, r: int) -> float:
    """P(Binomial(Q, p_(k)) ≥ k − r), k = ⌊(Q − 1)/2⌋ + 1: valid with up to r corrupted blocks.

    p_(k) is the k-th smallest block p-value; at most r of the k smallest are corrupted,
    so p_(k) is at least the (k − r)-th smallest of the uncorrupted p-values, which are
    independent and super-uniform under H₀. 1 when k ≤ r.
    """
    p = np.sort(np.asarray(block_pvalues, dtype=float))
    k = median_position(len(p)) + 1
    if k - r < 1:
        return 1.0
    from scipy.stats import binom  # 0.4 s to import: only when a robust test runs

    return float(binom.sf(k - r - 1, len(p), p[k - 1]))


def check_blocks(n_blocks: Any, n: int, m: int) -> int:
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, (int, np.integer)) or n_blocks < 1:
        raise ParameterError(f"n_blocks must be 'auto' or an int >= 1; got {shown(n_blocks)}.")
    check_n_blocks(int(n_blocks), {"X": n, "Y": m}, estimator="robust_test(method='mom')")
    return int(n_blocks)


def block_exceedances(
    estimator: MMDEstimator,
    pool: PooledSample,
    partition: Any,
    B: int,
    seq: np.random.SeedSequence,
    progress: Progress | None,
) -> np.ndarray:
    """#{b : s_{q,b} ≥ s_q} for every block q over B within-block relabellings."""
    nx, ny = partition.x_sizes.astype(float), partition.y_sizes.astype(float)
    identity = np.arange(pool.size)[None, :]

    def statistic(sums: Any, rows: int) -> np.ndarray:
        # a plugin's statistic, checked as every answer a test uses is: a NaN never
        # reaches a relabelled value (a NaN counted as below T gave p = 5e-19 on null data)
        with plugin_code(estimator, "mmd2_from_sums"):
            raw = estimator.mmd2_from_sums(sums, nx, ny)
        values = real_statistics(estimator, "mmd2_from_sums", raw)
        if values.shape != (rows, partition.n_blocks):
            raise PluginFailure(
                f"{estimator.plugin_label()}: mmd2_from_sums returned shape {values.shape} for {rows} relabelling(s) of "
                f"{partition.n_blocks} blocks; it must return one MMD^2 per relabelling and block, shape "
                f"({rows}, {partition.n_blocks})."
            )
        if not np.isfinite(values).all():
            raise PluginFailure(
                f"{estimator.plugin_label()}: mmd2_from_sums returned {float(values[~np.isfinite(values)][0])} "
                "for these kernel sums; an MMD^2 must be a finite number."
            )
        return values

    observed = statistic(within_block_sums(pool, partition, identity), 1)[0]
    counts = np.zeros(partition.n_blocks)
    step = within_block_batch(pool, B)
    if progress is not None:
        progress(0, B)
    for done in range(0, B, step):
        stop = min(done + step, B)
        perms = relabellings(partition, pool.n, done, stop, seq)
        values = statistic(within_block_sums(pool, partition, perms), stop - done)
        # a relabelled value equal to the observed one up to round-off counts as reaching it
        counts += np.count_nonzero(values >= observed - TIE_RTOL * np.abs(observed), axis=0)
        if progress is not None:
            progress(stop, B)
    return counts
