"""The permutation test for any MMD estimator (the statistic and the rejection rule that
every test shares are in :mod:`monk_framework.two_sample.common`).

**Statistic.** Every test uses the estimator's MMD² estimate through the signed root
T = sign(MMD²)·√|MMD²|: the MMD itself for the V-statistic and the MONK estimators
(their MONK objective, which a BCD iterate can leave slightly below 0), and the signed
root of the unbiased MMD² for the U-statistic. It is monotone in MMD², so p-values are
those of MMD², and T − q̂ is on the scale of the paper's Figure 2.

**Permutation test** (:func:`permutation_test`). Under H₀: P = Q the pooled sample is
exchangeable, so T on relabellings of X ∪ Y (B uniformly random permutations, the first
N points called X) samples its null distribution. Median-of-means estimators relabel
*within blocks* by default (``relabel="auto"``): their partition is drawn once, every
relabelling permutes labels inside each block only, and every statistic is computed on
that partition (:mod:`monk_framework.engine.within_blocks`), so an outlier stays in its block.
The p-value is
(1 + #{b : T_b ≥ T}) / (1 + B), valid at every B; the test rejects when p ≤ α, which is
the same as T > q̂ for the order statistic q̂ = T_(B−k) (ascending, 1-based) with
k = ⌊α(B + 1)⌋ − 1 (when k < 0 no p-value can reach α and q̂ is None). The pooled
Gram matrix is computed once; estimators reuse it (:meth:`MMDEstimator.permuted_statistics`).

Randomness: one seed drives everything; each part (the statistic, the partition, the
relabellings, each relabelling's own estimator randomness, each grid point) draws from
its own stream of :mod:`monk_framework.core.randomness`, so results do not depend on batching
or on the rest of a grid, and the statistic with ``relabel="global"`` is the estimate
``estimator.estimate(kernel, X, Y, rng=seed)`` gives.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from monk_framework.core.estimators import MMDEstimator, checked_estimate
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import check_flag
from monk_framework.core.randomness import RNGLike, root, seed_of, stream
from monk_framework.core.resources import Resources, check_backend, check_progress
from monk_framework.core.results import PermutationTestResult, computed_with
from monk_framework.engine.backends import Backend
from monk_framework.engine.relabelling import Progress, check_null_memory, relabelled_statistics
from monk_framework.two_sample.common import (
    check_level,
    check_test_params,
    choose_partition,
    critical_rank,
    exceedances,
    null_quantile,
    resolve,
    signed_root,
)

__all__ = ["permutation_test"]

def permutation_test(
    kernel: Kernel,
    estimator: MMDEstimator,
    X: Any,
    Y: Any,
    *,
    n_permutations: int = 1000,
    alpha: float = 0.05,
    rng: RNGLike = None,
    return_null: bool = True,
    progress: Progress | None = None,
    gram: np.ndarray | None = None,
    backend: Backend | None = None,
    relabel: str = "auto",
    report_estimate: bool = False,
    max_memory: Any = None,
) -> PermutationTestResult:
    """Permutation test of H₀: P = Q with any kernel and any MMD estimator (objects, or
    specs such as ``"rbf"`` and ``"monk-bcd:n_blocks=21"``).

    p = (1 + #{T_b ≥ T}) / (1 + B) over B random relabellings of the pooled sample; the
    pooled Gram matrix is computed once, or given as ``gram`` (the Gram matrix of
    [X; Y], e.g. a slice of one precomputed over a whole data set; the kernel is then
    only named in the result). ``progress(done, total)`` is called as the null sample
    grows; ``backend`` (:mod:`monk_framework.engine.backends`, e.g. Dask) spreads the work over
    its workers, with the same result as in this process: for the classical statistics
    the tiles of the pooled Gram reductions (:mod:`monk_framework.engine.spread`; the
    workers receive the data, never a Gram matrix), for the others the batches of
    relabellings. See the module docstring for the statistic
    and q̂.

    ``relabel``: "auto" relabels within the blocks of the estimator's fixed partition when
    it has one (MONK estimators with a number of blocks) and globally otherwise;
    "within-blocks" insists on it; "global" permutes the whole pooled sample (the
    comparison). A within-block test computes every statistic on one partition, so
    estimators that reshuffle their blocks (BCD, BCD-Fast's iterations) run their
    test-time form without reshuffles (docs/testing.md says what that changes).

    ``max_memory`` (bytes, or e.g. ``"2GB"``) bounds the memory beyond the data
    (:mod:`monk_framework.core.resources`): over it the pooled Gram matrix is used in tiles
    computed on the fly, with the same statistic and p-value.

    ``report_estimate``: also record ``estimate``, the estimator's MMD estimate with the
    same seed, ``estimator.estimate(kernel, X, Y, rng=seed).mmd``, for a within-block test
    (one more estimate); with global relabelling T is that estimate, and ``estimate``
    stays None.
    """
    start = time.perf_counter()
    resources = Resources.of(max_memory)
    check_progress(progress)
    check_backend(backend)  # a name such as 'dask' would run here, silently
    kernel, estimator = resolve(kernel, estimator, form="permutation_test(kernel, estimator, X, Y)")
    estimator = check_test_params(estimator, n_permutations, alpha, return_null)
    alpha = check_level(alpha)
    report_estimate = check_flag(report_estimate, "report_estimate")
    kernel = estimator.check_kernel(kernel)
    view, Xv, Yv = kernel.mmd_view(X, Y)
    estimator.check_size(Xv, "X")
    estimator.check_size(Yv, "Y")
    # before any kernel evaluation: a B that cannot fit is refused at once
    check_null_memory(int(n_permutations), pool_size=len(Xv) + len(Yv), backend=backend, listed=bool(return_null))
    seq = root(rng)
    seed = seed_of(seq)
    partition = choose_partition(estimator, relabel, len(Xv), len(Yv), stream(seq, "partition"))
    stats = relabelled_statistics(estimator, view, Xv, Yv, int(n_permutations), seq, resources=resources,
                                  partition=partition, backend=backend, gram=gram, progress=progress)
    mmd2, fitted, null_s = stats.observed, stats.kernel, stats.seconds
    T, null = float(signed_root(mmd2)), signed_root(stats.null)
    exceed = int(exceedances(null, T))
    q = null_quantile(null, alpha)
    return PermutationTestResult(
        **computed_with(estimator, kernel, fitted, len(Xv), len(Yv), seed),
        statistic=T,
        statistic_mmd2=mmd2,
        pvalue=(1 + exceed) / (1 + n_permutations),
        null_quantile=q,
        alpha=float(alpha),
        reject=exceed <= critical_rank(int(n_permutations), alpha),
        n_permutations=int(n_permutations),
        null_distribution=null if return_null else None,
        timings={"null_s": null_s, "total_s": time.perf_counter() - start},  # null_s includes T
        relabel="global" if partition is None else "within-blocks",
        n_blocks=None if partition is None else partition.n_blocks,
        # with global relabelling T is that estimate already: no second computation
        estimate=_same_seed_estimate(estimator, fitted, Xv, Yv, seq, resources) if report_estimate and partition is not None else None,
    )


def _same_seed_estimate(
    estimator: MMDEstimator, kernel: Kernel, X: Any, Y: Any, seq: np.random.SeedSequence, resources: Resources
) -> float:
    """What ``estimator.estimate(kernel, X, Y, rng=seed).mmd`` reports."""
    rng = np.random.default_rng(stream(seq, "estimate"))
    return float(checked_estimate(estimator, kernel, X, Y, rng, resources).mmd)
