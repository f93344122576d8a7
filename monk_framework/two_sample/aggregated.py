"""Aggregated two-sample tests: power without choosing a kernel.

One kernel at the median heuristic smooths away a difference that lives at another
scale. An aggregated test computes the MMD of every kernel of a collection k_1..k_L
(by default Gaussian and Laplace kernels at bandwidths spread over the pooled pairwise
distances, :func:`default_kernels`) on the samples and on the *same* B relabellings, and
calibrates one decision over all of them by those relabellings, so its level holds
without splitting the data. docs/studies/tests.md has the proofs.

Write V_0 for the kernels' statistics on the samples as given and V_1..V_B for those of
B uniformly random relabellings of the pooled sample (each a vector over the L kernels).
Under H₀: P = Q the B + 1 vectors are exchangeable (Hemerik & Goeman, 2018): with σ a
uniform permutation independent of everything, (Zσ, Zσπ_1, ..., Zσπ_B) has the law of
(Z, Zπ_1, ...) and its B + 1 permutations σ, σπ_1, ... are i.i.d. uniform. So any score
S_i = F(V_i; {V_0, ..., V_B}) that treats the B + 1 vectors alike gives the exact
p-value #{i : S_i ≥ S_0} / (B + 1).

* ``method="agg"`` (MMDAgg, Schrab et al., JMLR 2023): p_l(i) = #{j : V_jl ≥ V_il}/(B + 1)
  is kernel l's permutation p-value of relabelling i, and S_i = max_l log(L·w_l / p_l(i)).
  Rejecting when S_0 exceeds the permutation quantile of S is MMDAgg's rule "some kernel
  l has p_l ≤ u·w_l" with u the largest level whose permutation estimate of
  P(any kernel rejects) stays ≤ α, computed from the same relabellings exactly instead
  of by bisection on a second set.
* ``method="fuse"`` (MMD-FUSE, Biggs, Schrab & Gretton, NeurIPS 2023), as its authors'
  code computes it: S_i = log Σ_l w_l exp(λ·V_il / N_l), with V the unbiased MMD²,
  n = min(N, M), λ = n(n − 1) and N_l = √(Σ_{i≠j} k_l(z_i, z_j)² / (n(n − 1))) over the
  pooled sample, a permutation-invariant normaliser (:func:`fuse_normaliser`).

**Robust aggregation** (``contamination=r``, bounded kernels fixed before the data).
Each kernel's V-statistic MMD moves by at most Δ_l = D_l / min(N, M) per corrupted
point, on the samples and on every relabelling, so each kernel's dcMMD p-value p_l
(its permutation p-value of V_0l − 2rΔ_l) is valid under any r corrupted points.
MMDAgg's rule "some p_l ≤ u·w_l" with u = α, the level at which the union bound needs
no relabelling to calibrate it, then keeps the level: the p-value is min(1, min_l p_l / w_l).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from monk_framework.core.errors import DataError, ParameterError, shown, shown_count
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import check_choice, check_flag
from monk_framework.core.randomness import RNGLike, root, seed_of, stream
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import ProgressCallback, Resources, check_backend, counting, progress_callback
from monk_framework.core.samples import Sample
from monk_framework.core.test_results import AggregatedTestResult
from monk_framework.engine.backends import Backend, is_remote
from monk_framework.engine.memory import reserve_memory
from monk_framework.engine.pooled import pooled
from monk_framework.engine.reductions import squared_kernel_sum
from monk_framework.engine.relabelling import Progress, SharedRelabellings, check_null_memory, relabelled_statistics
from monk_framework.two_sample.collection import (
    BANDWIDTH_MAX_POINTS,
    DEFAULT_FAMILIES,
    N_BANDWIDTHS,
    KernelFamily,
    bandwidth_grid,
    bandwidth_of,
    check_grid,
    default_kernels,
    expanded,
    given_kernels,
    label_of,
    numbers_of,
    repeated_bandwidth,
)
from monk_framework.two_sample.common import (
    DEFAULT_PERMUTATIONS,
    TIE_RTOL,
    check_estimator,
    check_level,
    check_permutations,
    critical_rank,
    exceedances,
    null_quantile,
    previous_form,
    sample_kind,
    signed_root,
)
from monk_framework.two_sample.robust import contamination_count, largest_budget, mmd_sensitivity

__all__ = [
    "BANDWIDTH_MAX_POINTS",
    "KernelFamily",
    "DEFAULT_FAMILIES",
    "METHODS",
    "N_BANDWIDTHS",
    "aggregated_test",
    "agg_scores",
    "bandwidth_grid",
    "check_aggregated_test",
    "given_kernels",
    "repeated_bandwidth",
    "collection_statistics",
    "default_kernels",
    "fuse_normaliser",
    "fuse_scores",
    "robust_pvalues",
]

#: the aggregations of :func:`aggregated_test`
METHODS = ("agg", "fuse")
#: what one kernel of a collection costs, generously: its object, its fitted copy and its
#: label in the result (a kernel object measured about 130 bytes)
KERNEL_BYTES = 512


def _upper_counts(column: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """#{j : column_j ≥ t − TIE_RTOL·|t|} for every threshold t (ties up to round-off count)."""
    ordered = np.sort(column)
    return len(column) - np.searchsorted(ordered, thresholds - TIE_RTOL * np.abs(thresholds), side="left")


def agg_scores(values: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """MMDAgg's scores from the (B + 1) × L statistics ``values`` (row 0: the samples as
    given): S_0 and S_1..S_B with S_i = max_l log(L·w_l / p_l(i)),
    p_l(i) = #{j : V_jl ≥ V_il}/(B + 1), and the kernels' p-values of row 0."""
    size, L = values.shape
    log_weights = np.log(L * weights)
    p = np.empty((size, L))
    for ell in range(L):
        p[:, ell] = _upper_counts(values[:, ell], values[:, ell]) / size
    S = np.max(log_weights[None, :] - np.log(p), axis=1)
    return float(S[0]), S[1:], p[0]


def robust_pvalues(values: np.ndarray, deltas: np.ndarray, r: int) -> np.ndarray:
    """Each kernel's dcMMD p-value with budget r, (1 + #{b : V_bl ≥ V_0l − 2rΔ_l})/(B + 1),
    from the (B + 1) × L V-statistic MMDs ``values`` (row 0: the samples as given)."""
    B = len(values) - 1
    return np.array([_upper_counts(values[:, ell], values[:1, ell] - 2 * r * deltas[ell])[0] for ell in range(values.shape[1])]) / (B + 1)


def _bonferroni_certificate(values: np.ndarray, deltas: np.ndarray, weights: np.ndarray, alpha: float, most: int) -> int:
    """The largest r ≤ ``most`` with some kernel's dcMMD p-value at budget r ≤ α·w_l, −1 if none."""
    return largest_budget(lambda r: bool((robust_pvalues(values, deltas, r) <= alpha * weights).any()), most)


def fuse_scores(values: np.ndarray, weights: np.ndarray, scales: np.ndarray, temperature: float) -> np.ndarray:
    """MMD-FUSE's statistic log Σ_l w_l exp(λ·V_il / N_l) of every row of ``values``, as its
    authors compute it (a log-sum-exp, without the 1/λ of the paper's soft maximum, which
    leaves every p-value as it is)."""
    z = temperature * values / scales[None, :] + np.log(weights)[None, :]
    top = z.max(axis=1)
    return top + np.log(np.exp(z - top[:, None]).sum(axis=1))


def fuse_normaliser(kernel: Kernel, Z: Any, n: int, resources: Resources) -> float:
    """N_l = √(Σ_{i≠j} k(z_i, z_j)² / (n(n − 1))), the sum over every ordered pair of the
    pooled sample and n = min(N, M): the normaliser of MMD-FUSE's authors' code, which
    with λ = n(n − 1) makes λ·V/N_l = n(n − 1)·V·√(n(n − 1)) / √(Σ_{i≠j} k²)."""
    size = len(Z)
    return pair_square_scale(kernel, Z, resources) * math.sqrt(size * (size - 1) / (n * (n - 1)))


def pair_square_scale(kernel: Kernel, Z: Any, resources: Resources) -> float:
    """N = √(Σ_{i≠j} k(z_i, z_j)² / (P(P − 1))) over the P pooled points, in row bands
    within the memory budget (MMD-FUSE's permutation-invariant normaliser)."""
    size = len(Z)
    value = math.sqrt(max(squared_kernel_sum(kernel, Z, resources=resources), 0.0) / (size * (size - 1)))
    if not value > 0:
        raise DataError(
            f"MMD-FUSE normalises each kernel's statistic by its pooled scale; {kernel.spec()} is 0 between every "
            "pair of points here. Drop that kernel or use method='agg'."
        )
    return value


def collection_statistics(
    estimator: MMDEstimator,
    kernels: Sequence[Kernel],
    X: Any,
    Y: Any,
    n_permutations: int,
    seq: np.random.SeedSequence,
    *,
    resources: Resources,
    backend: Backend | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, list[Kernel], list[tuple[Sample, Sample]]]:
    """The (B + 1) × L matrix of every kernel's MMD² on the samples as given (row 0) and
    on the same B relabellings (rows 1..B), the kernels as fitted on the pooled sample,
    and the samples as each read them (:meth:`Kernel.mmd_view`: centred, or anchored at a
    point of the data with the samples moved by it).

    Each kernel is one run of the permutation engine with the test's seed sequence
    ``seq``, so relabelling b is the same permutation for every kernel (and the one
    :func:`permutation_test` draws with that seed); the engine keeps each run under the
    memory budget and spreads it over ``backend``. ``progress`` follows all L·B. Every
    kernel reads (checks) the samples itself, as it takes them. In this process the
    relabellings, and the indicator matrices made from them, are drawn once for all the
    kernels when they fit (:class:`~monk_framework.engine.relabelling.SharedRelabellings`):
    the same rows each kernel would draw.
    """
    B, L = int(n_permutations), len(kernels)
    values = np.empty((B + 1, L))
    used: list[Kernel] = []
    views = [kernel.mmd_view(X, Y) for kernel in kernels]  # all of them before any work
    shared = None
    if L > 1 and not is_remote(backend):
        shared = SharedRelabellings.of(stream(seq, "relabel"), len(views[0][1]) + len(views[0][2]), B, resources)
    for ell, (kernel, Xk, Yk) in enumerate(views):
        tick = None if progress is None else (lambda done, total, ell=ell: progress(ell * B + done, L * B))
        stats = relabelled_statistics(estimator, kernel, Xk, Yk, B, seq, resources=resources, backend=backend, progress=tick, shared=shared)
        values[0, ell], values[1:, ell] = stats.observed, stats.null
        used.append(stats.kernel)
    return values, used, [(Xk, Yk) for _, Xk, Yk in views]


def _check_weights(weights: Any, L: int) -> np.ndarray:
    if weights is None:
        return np.full(L, 1.0 / L)
    w = numbers_of(weights)
    if w is None or w.shape != (L,) or not np.isfinite(w).all() or (w <= 0).any():
        raise ParameterError(f"weights must be {L} positive finite numbers, one per kernel; got {shown(weights)}.")
    w = w / w.max()  # so that the sum cannot overflow
    return w / w.sum()


def _check_collection_size(B: int, L: int, what: str) -> None:
    """Refuse, before any kernel is built, a collection whose (B + 1) × L matrix of
    statistics (and L kernel objects) cannot fit in memory, naming what set L."""
    reserve_memory(
        8 * (B + 1) * L + KERNEL_BYTES * L,
        what=f"n_permutations (-B) = {shown_count(B)} relabellings of {L:,} kernels ({what}) need, for their statistics,",
        fix="Use fewer permutations (B = 100,000 already resolves a p-value of 1e-5) or fewer kernels (the published collections have 10 bandwidths a family).",
    )


@previous_form("aggregated_test", ("X", "Y", "kernels"), "aggregated_test(X, Y, kernels=[...])", when=lambda args: len(args) > 2)
def aggregated_test(
    X: Any,
    Y: Any,
    *,
    kernels: Any = None,
    method: str = "agg",
    estimator: MMDEstimator | str | None = None,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alpha: float = 0.05,
    weights: Any = None,
    n_bandwidths: int = N_BANDWIDTHS,
    bandwidths: Sequence[float] | None = None,
    contamination: int | float = 0,
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
    backend: Backend | None = None,
    return_null: bool = True,
) -> AggregatedTestResult:
    """A permutation test of H₀: P = Q over a collection of kernels (module docstring).

    Parameters
    ----------
    X, Y : array_like or sequence of str
        The samples.
    kernels : list of Kernel or str, optional
        The collection. A Kernel object, or a spec that sets its bandwidth
        (``"rbf:sigma=0.5"``) or has none (``"quadratic"``, ``"ssk:n=3"``), is one
        kernel; a spec of a kernel with a bandwidth that does not set it (``"laplace"``)
        stands for its family at ``bandwidths``, or at ``n_bandwidths`` over the pooled
        distances, as ``monkfw test --aggregate -k laplace`` reads it. Default: Gaussian
        and Laplace (L1) kernels at ``n_bandwidths`` bandwidths each (:func:`default_kernels`).
    method : {"agg", "fuse"}
        MMDAgg (Schrab et al., 2023) or MMD-FUSE (Biggs et al., 2023, its authors'
        statistic).
    estimator : MMDEstimator or str, optional
        Each kernel's statistic: the U-statistic by default (the V-statistic with a
        ``contamination``).
    n_permutations, alpha, rng, progress, max_memory, backend, return_null
        As for :func:`~monk_framework.two_sample.permutation_test`; ``progress`` counts
        every kernel's relabelled statistics, L·B in all.
    weights : list of float, optional
        One positive number per kernel (normalised; uniform by default).
    n_bandwidths : int
        Bandwidths per family when read from the pooled distances.
    bandwidths : list of float, optional
        A fixed grid for every family (robust aggregation needs one).
    contamination : int or float
        r > 0 makes the test robust ("agg" only): the kernels must be bounded and fixed
        before seeing the data, the statistic is the V-statistic MMD, and the p-value
        stays valid under any r corrupted points; the result carries a certificate.

    Returns
    -------
    AggregatedTestResult
        The decision, each kernel's statistic and p-value, and (MMDAgg) the kernels
        that rejected.
    """
    start = time.perf_counter()
    items, est, report, robust = check_aggregated_test(
        X,
        kernels=kernels,
        method=method,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        n_bandwidths=n_bandwidths,
        bandwidths=bandwidths,
        contamination=contamination,
        return_null=return_null,
        progress=progress,
        backend=backend,
    )
    resources = Resources.of(max_memory)
    alpha = check_level(alpha)
    B = int(n_permutations)
    reg = get_registry()
    grid = check_grid(n_bandwidths, bandwidths)
    # the data read as the collection's kernels read them
    first = items[0] if items is not None else None
    probe = (first.kernel if isinstance(first, KernelFamily) else first) if first is not None else reg.get_kernel(DEFAULT_FAMILIES[0][0], sigma=1.0)
    Xv, Yv = probe.check_pair(X, Y)
    n, m = len(Xv), len(Yv)
    if n < 2 or m < 2:
        raise DataError(f"An aggregated test needs at least 2 points in each sample; got N = {n}, M = {m}.")
    if items is None:
        assert isinstance(Xv, np.ndarray) and isinstance(Yv, np.ndarray)  # the Gaussian probe read vectors
        collection = default_kernels(Xv, Yv, n_bandwidths=int(n_bandwidths), bandwidths=grid)
    else:
        collection = expanded(items, Xv, Yv, int(n_bandwidths), grid)
    L = len(collection)
    w = _check_weights(weights, L)
    for k in collection:  # every kernel reads the data, not only the first: before any work
        est.check_kernel(k)
        k.check_pair(Xv, Yv)
    r = contamination_count(contamination, n + m) if robust else 0
    deltas = _sensitivities(collection, Xv, Yv) if robust else None
    check_null_memory(B, pool_size=n + m, backend=backend, listed=bool(return_null))
    seq = root(rng)
    seed = seed_of(seq)

    values, used, read = collection_statistics(
        est, collection, Xv, Yv, B, seq, resources=resources, backend=backend, progress=counting(report, "kernels x permutations")
    )
    if robust:
        values = np.sqrt(np.maximum(values, 0.0))  # the V-statistic MMD, whose sensitivity is Δ_l
    # what every form reports
    shared: dict[str, Any] = dict(
        method=method,
        alpha=float(alpha),
        n_permutations=B,
        weights=w,
        contamination=r,
        kernel_specs=[label_of(k) for k in used],
        bandwidths=[bandwidth_of(k) for k in used],
        estimator=est.name,
        estimator_params=est.params(),
        kernel=", ".join(dict.fromkeys(k.name for k in used)),
        kernel_params={},
        # a robust test's grid is fixed before the data: the kernels are what was asked for
        kernel_params_requested={"kernels": "default" if kernels is None and not robust else [label_of(k) for k in collection]},
        n_x=n,
        n_y=m,
        seed=seed,
    )
    if robust:
        assert deltas is not None
        pvals = robust_pvalues(values, deltas, r)
        shares = pvals <= alpha * w
        return AggregatedTestResult(
            statistic=float(np.max(np.log(w / pvals))),
            pvalue=float(min(1.0, np.min(pvals / w))),
            reject=bool(shares.any()),
            null_distribution=None,
            null_quantile=None,
            kernel_statistics=values[0],
            kernel_pvalues=pvals,
            kernel_rejects=shares,
            kernel_levels=alpha * w,
            certificate=_bonferroni_certificate(values, deltas, w, alpha, n + m),
            sensitivities=deltas,
            timings={"total_s": time.perf_counter() - start},
            **shared,
        )
    scales = temperature = levels = None
    if method == "agg":
        S0, S, pvals = agg_scores(values, w)
    else:
        # each kernel's values on the samples as it read them, as its statistic's
        small = min(n, m)
        scales = np.array([fuse_normaliser(k, pooled(*pair), small, resources) for k, pair in zip(used, read)])
        temperature = float(small * (small - 1))
        scores = fuse_scores(values, w, scales, temperature)
        S0, S = float(scores[0]), scores[1:]
        pvals = np.array([_upper_counts(values[:, ell], values[:1, ell])[0] for ell in range(L)]) / (B + 1)
    exceed = int(exceedances(S, S0))
    reject = exceed <= critical_rank(B, alpha)
    q = null_quantile(S, alpha)
    rejects: np.ndarray | None = None
    if method == "agg":
        if q is None:
            levels, rejects = np.zeros(L), np.zeros(L, dtype=bool)
        else:
            levels = L * w * math.exp(-q)
            # the test's decision and the kernels' agree: S_0 > q̂ exactly when some kernel's term is
            rejects = (np.log(L * w) - np.log(pvals) > q) & bool(reject)
    return AggregatedTestResult(
        statistic=S0,
        pvalue=(1 + exceed) / (1 + B),
        reject=bool(reject),
        null_distribution=S if return_null else None,
        null_quantile=q,
        kernel_statistics=signed_root(values[0]),
        kernel_pvalues=pvals,
        kernel_rejects=rejects,
        kernel_levels=levels,
        kernel_scales=scales,
        temperature=temperature,
        timings={"total_s": time.perf_counter() - start},
        **shared,
    )


def check_aggregated_test(
    X: Any = None,
    *,
    kernels: Any = None,
    method: Any = "agg",
    estimator: Any = None,
    n_permutations: Any = DEFAULT_PERMUTATIONS,
    alpha: Any = 0.05,
    n_bandwidths: Any = N_BANDWIDTHS,
    bandwidths: Any = None,
    contamination: Any = 0,
    return_null: Any = True,
    progress: Any = None,
    backend: Any = None,
) -> tuple[list[Kernel | KernelFamily] | None, MMDEstimator, ProgressCallback | None, bool]:
    """Every argument of :func:`aggregated_test` that can be checked without the data,
    checked once (the command line calls it before reading files). Returns the collection
    as given (None: the default one), the estimator, the progress callback and whether
    the test is robust."""
    if isinstance(X, (str, Kernel)):
        raise ParameterError(
            "aggregated_test takes the samples first and the kernels by keyword: aggregated_test(X, Y, kernels=[...]) "
            f"(got a kernel, {X if isinstance(X, str) else X.spec()!r}, as X)."
        )
    report = progress_callback(progress)
    check_backend(backend)
    check_choice(method, "method", METHODS)
    check_flag(return_null, "return_null")
    check_level(alpha)
    B = check_permutations(n_permutations)
    reg = get_registry()
    robust = not (isinstance(contamination, (int, np.integer)) and not isinstance(contamination, bool) and contamination == 0)
    if robust and method != "agg":
        raise ParameterError(
            "contamination= is supported by method='agg' (each kernel's threshold moves by its own 2rΔ); "
            "MMD-FUSE's normalisers are not bounded under corruption."
        )
    if robust and not isinstance(contamination, (int, np.integer)):
        contamination_count(contamination, 2)  # a fraction's range does not depend on N + M
    est = _collection_estimator(reg, estimator, robust)
    grid = check_grid(n_bandwidths, bandwidths)
    per_family = int(n_bandwidths) if grid is None else len(grid)
    if kernels is None:
        if X is not None and sample_kind(X) == "string":
            raise ParameterError(
                "The default kernel collection (Gaussian and Laplace kernels) is for numeric vectors; for strings pass kernels=, e.g. ['ssk:n=3', 'ssk:n=5']."
            )
        if robust and grid is None:
            raise ParameterError(
                "A robust aggregated test needs its bandwidths fixed before seeing the data: corrupted points would "
                "move a grid read from the pooled distances. Pass bandwidths=[...] (e.g. a geometric grid around the "
                "scale you expect) or kernels= with numbers."
            )
        _check_collection_size(
            B, len(DEFAULT_FAMILIES) * per_family, f"n_bandwidths = {n_bandwidths} a family" if grid is None else f"{len(grid)} bandwidths a family"
        )
        return None, est, report, robust
    items = given_kernels(kernels)
    families = [k for k in items if isinstance(k, KernelFamily)]
    if grid is not None and not families:
        raise ParameterError(
            "bandwidths= sets the sigma of each kernel given without one (and of the default collection); every kernel "
            "given here sets its own or has none: leave bandwidths out."
        )
    if robust and grid is None and families:
        raise ParameterError(
            f"A robust aggregated test needs its bandwidths fixed before seeing the data: {families[0].spec!r} without "
            "sigma would read them from the pooled distances, which corrupted points move. Give it sigma, or "
            "bandwidths=[...]."
        )
    _check_collection_size(B, len(items) - len(families) + len(families) * per_family, "kernels=")
    return items, est, report, robust


def _sensitivities(collection: Sequence[Kernel], X: Any, Y: Any) -> np.ndarray:
    """Δ_l of every kernel of a robust collection: how far one corrupted point moves its
    V-statistic MMD. Each kernel must be fixed before the data and bounded."""
    for k in collection:
        if not k.is_fitted:
            raise ParameterError(
                f"A robust aggregated test needs kernels fixed before seeing the data; {k.spec()} reads a "
                "hyperparameter from the sample. Give numbers (e.g. 'rbf:sigma=1')."
            )
    Z = pooled(X, Y)
    sens = [mmd_sensitivity(k, len(X), len(Y), Z) for k in collection]
    if any(s is None for s in sens):
        bad = next(k for k, s in zip(collection, sens) if s is None)
        raise ParameterError(
            f"A robust aggregated test needs bounded kernels (ones that declare sup k(x, x)); {bad.spec()} is "
            "unbounded. Use robust_test(..., method='clip') for an unbounded kernel."
        )
    return np.array(sens, dtype=float)


def _collection_estimator(reg: Any, estimator: Any, robust: bool) -> MMDEstimator:
    """The estimator of an aggregated test: the U-statistic by default, the V-statistic
    (whose sensitivity a robust test is derived for) when robust."""
    if estimator is None:
        return cast(MMDEstimator, reg.estimator_with_role("v-statistic" if robust else "u-statistic"))
    est = check_estimator(reg.resolve_estimator(estimator))
    if robust and est.role != "v-statistic":
        raise ParameterError(f"A robust aggregated test uses the V-statistic MMD (its sensitivity is derived for it); got {est.name!r}.")
    return est
