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
from monk_framework.core.params import check_choice, check_flag
from monk_framework.core.randomness import RNGLike, root, seed_of, stream
from monk_framework.core.resources import ProgressCallback, Resources, counting
from monk_framework.core.results import computed_with
from monk_framework.core.test_results import PermutationTestResult
from monk_framework.engine.backends import Backend
from monk_framework.engine.relabelling import check_null_memory, relabelled_statistics
from monk_framework.two_sample.common import (
    ALTERNATIVES,
    DEFAULT_PERMUTATIONS,
    check_level,
    check_relabel,
    check_test_call,
    choose_partition,
    critical_rank,
    exceedances,
    null_quantile,
    permutation_pvalue,
    previous_form,
    shortfalls,
    signed_root,
)

__all__ = ["check_permutation_test", "permutation_test"]


@previous_form("permutation_test", ("kernel", "estimator", "X", "Y"), "permutation_test(X, Y, kernel=..., estimator=...)")
def permutation_test(
    X: Any,
    Y: Any,
    *,
    kernel: Kernel | str | None = None,
    estimator: MMDEstimator | str | None = None,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alpha: float = 0.05,
    alternative: str = "greater",
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
    backend: Backend | None = None,
    return_null: bool = True,
    relabel: str = "auto",
    gram: np.ndarray | None = None,
    report_estimate: bool = False,
) -> PermutationTestResult:
    """Permutation test of H₀: P = Q with any kernel and any MMD estimator.

    p = (1 + #{T_b ≥ T}) / (1 + B) over B random relabellings of the pooled sample, T
    the estimator's statistic (module docstring); the pooled Gram matrix is computed once.

    Parameters
    ----------
    X, Y : array_like or sequence of str
        The samples, ``(N, d)`` and ``(M, d)`` arrays (or lists of strings).
    kernel : Kernel or str, optional
        An object or a spec such as ``"rbf:sigma=1"``; default ``"rbf"`` with σ by the
        median heuristic of the pooled sample (``"ssk"`` for strings).
    estimator : MMDEstimator or str, optional
        An object or a spec such as ``"monk-bcd:n_blocks=21"``; default ``"u-stat"``.
    n_permutations : int
        B, the number of relabellings (default 1000, as ``monkfw test -B``).
    alpha : float
        The level: ``reject == (pvalue <= alpha)``.
    alternative : {"greater", "less", "two-sided"}
        "greater" (default): a large MMD speaks against H₀. "less": the samples are
        more alike than relabellings of them (duplicated or stratified data), with p =
        (1 + #{T_b ≤ T}) / (1 + B); "two-sided": twice the smaller of the two, at most 1.
    rng : int, SeedSequence or Generator, optional
        The seed of every random choice (relabellings, partition, estimator).
    progress : callable, optional
        ``progress(done, total, what)``, called as the relabellings advance (and as the
        bands of one large pass of the Gram matrix do).
    max_memory : int or str, optional
        Bytes beyond the data (e.g. ``"2GB"``); over it the pooled Gram matrix is used in
        tiles computed on the fly, with the same statistic and p-value.
    backend : Backend, optional
        Spreads the work over a backend's workers (e.g. Dask), with the same result.
    return_null : bool
        Keep the B relabelled statistics in ``null_distribution``.
    relabel : {"auto", "within-blocks", "global"}
        "auto" relabels within the blocks of the estimator's fixed partition when it has
        one (MONK estimators with a number of blocks), so an outlier stays in its block,
        and globally otherwise.
    gram : ndarray, optional
        The Gram matrix of [X; Y], precomputed (the kernel is then only named).
    report_estimate : bool
        Also record ``estimate``, the estimator's MMD estimate with the same seed, for a
        within-block test (whose T is the estimator's form on one fixed partition).

    Returns
    -------
    PermutationTestResult
        ``statistic``, ``pvalue``, ``null_distribution``, ``reject``, and the kernel and
        estimator used; unpacks as ``statistic, pvalue = result``.
    """
    start = time.perf_counter()
    kernel, estimator, report = check_permutation_test(
        X,
        kernel=kernel,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        alternative=alternative,
        relabel=relabel,
        return_null=return_null,
        report_estimate=report_estimate,
        progress=progress,
        backend=backend,
    )
    alpha = check_level(alpha)  # checked above; a Decimal or a numpy float read as a float
    resources = Resources.of(max_memory)
    view, Xv, Yv = kernel.mmd_view(X, Y)
    estimator.check_size(Xv, "X")
    estimator.check_size(Yv, "Y")
    # before any kernel evaluation: a B that cannot fit is refused at once
    check_null_memory(int(n_permutations), pool_size=len(Xv) + len(Yv), backend=backend, listed=bool(return_null))
    seq = root(rng)
    seed = seed_of(seq)
    partition = choose_partition(estimator, relabel, len(Xv), len(Yv), stream(seq, "partition"))
    stats = relabelled_statistics(
        estimator,
        view,
        Xv,
        Yv,
        int(n_permutations),
        seq,
        resources=resources,
        partition=partition,
        backend=backend,
        gram=gram,
        progress=counting(report, "permutations"),
        building=counting(report, "Gram matrix"),
    )
    mmd2, fitted, null_s = stats.observed, stats.kernel, stats.seconds
    T, null = float(signed_root(mmd2)), signed_root(stats.null)
    pvalue = permutation_pvalue(null, T, alternative)
    return PermutationTestResult(
        **computed_with(estimator, kernel, fitted, len(Xv), len(Yv), seed),
        statistic=T,
        statistic_mmd2=mmd2,
        pvalue=pvalue,
        null_quantile=_critical_value(null, alpha, alternative),
        alpha=float(alpha),
        alternative=alternative,
        reject=_rejects(null, T, alpha, alternative),
        n_permutations=int(n_permutations),
        null_distribution=null if return_null else None,
        timings={"null_s": null_s, "total_s": time.perf_counter() - start},  # null_s includes T
        relabel="global" if partition is None else "within-blocks",
        n_blocks=None if partition is None else partition.n_blocks,
        # with global relabelling T is that estimate already: no second computation
        estimate=_same_seed_estimate(estimator, fitted, Xv, Yv, seq, resources) if report_estimate and partition is not None else None,
    )


def check_permutation_test(
    X: Any = None,
    *,
    kernel: Any = None,
    estimator: Any = None,
    n_permutations: Any = DEFAULT_PERMUTATIONS,
    alpha: Any = 0.05,
    alternative: Any = "greater",
    relabel: Any = "auto",
    return_null: Any = True,
    report_estimate: Any = False,
    progress: Any = None,
    backend: Any = None,
) -> tuple[Kernel, MMDEstimator, ProgressCallback | None]:
    """Every argument of :func:`permutation_test` that can be checked without the data,
    checked once (the command line calls it before reading files): the kernel and the
    estimator (defaults by the kind of ``X``), B, α, the alternative, the relabelling and
    the callbacks. Returns the kernel, the estimator and the progress callback."""
    kernel, estimator, report = check_test_call(
        X,
        kernel=kernel,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        return_null=return_null,
        progress=progress,
        backend=backend,
    )
    check_choice(alternative, "alternative", ALTERNATIVES)
    check_flag(report_estimate, "report_estimate")
    check_relabel(estimator, relabel)
    return estimator.check_kernel(kernel), estimator, report


def _rejects(null: np.ndarray, T: float, alpha: float, alternative: str) -> bool:
    """p ≤ α, counted in relabellings as :func:`critical_rank` counts them (so that 0.05 ·
    1000 is 50, not 50.000000000000007): at most k relabellings as extreme as T."""
    B = len(null)
    if alternative == "greater":
        return int(exceedances(null, T)) <= critical_rank(B, alpha)
    if alternative == "less":
        return int(shortfalls(null, T)) <= critical_rank(B, alpha)
    return min(int(exceedances(null, T)), int(shortfalls(null, T))) <= critical_rank(B, alpha / 2)


def _critical_value(null: np.ndarray, alpha: float, alternative: str) -> float | None:
    """q̂ with ``reject == (T > q̂)`` for "greater", ``reject == (T < q̂)`` for "less"
    (None when no p-value can reach α, and for "two-sided", which has two)."""
    if alternative == "greater":
        return null_quantile(null, alpha)
    if alternative == "less":
        k = critical_rank(len(null), alpha)
        return None if k < 0 else float(np.sort(null)[k])
    return None


def _same_seed_estimate(estimator: MMDEstimator, kernel: Kernel, X: Any, Y: Any, seq: np.random.SeedSequence, resources: Resources) -> float:
    """What ``estimator.estimate(kernel, X, Y, rng=seed).mmd`` reports."""
    rng = np.random.default_rng(stream(seq, "estimate"))
    return float(checked_estimate(estimator, kernel, X, Y, rng, resources).mmd)
