"""Two-sample tests whose level holds when up to r points are corrupted, with a certificate.

Setting: X ~ P and Y ~ Q, but at most r of the N + M points have been replaced by
arbitrary values, which may be chosen after seeing the data (and the test's partition).
:func:`robust_test` keeps P(reject) ≤ α under H₀: P = Q for every such corruption.
Two methods, both exact for finite samples (docs/studies/tests.md has the proofs):

* ``"dc"`` (dcMMD, Schrab & Kim, AISTATS 2025), for bounded kernels. Replacing one point
  moves the V-statistic MMD = ‖μ̂_X − μ̂_Y‖_H by at most Δ = D / min(N, M), D the kernel's
  feature diameter (:meth:`Kernel.feature_diameter`; √2 for RBF). Every relabelled MMD
  moves by at most Δ per corrupted point as well, so with q̂ the ordinary permutation
  quantile the test rejects when MMD > q̂ + 2rΔ; its p-value is the permutation p-value of
  MMD − 2rΔ.
* ``"mom"``, for any kernel. A partition into Q blocks is drawn once, stratified; each
  block gets its own within-block permutation p-value p_q of its statistic (the
  U-statistic MMD² by default). Corrupting r points touches at most r blocks and leaves
  the others exactly as they were; clean blocks are independent and their p-values
  super-uniform under H₀. With k = ⌊(Q − 1)/2⌋ + 1 (the median), the k-th smallest p-value
  is at least the (k − r)-th smallest of the uncorrupted data's p-values, so
  P(Binomial(Q, p_(k)) ≥ k − r) is a valid p-value whatever the corruption.

* ``"clip"``, for any kernel: dcMMD on the clipped-feature kernel
  k_c(x, y) = k(x, y)·s(x)·s(y), s(x) = min(1, c/√k(x, x)), which is bounded (feature
  diameter ≤ 2c) and equals k wherever ‖φ(x)‖ ≤ c. The radius c is given, or the
  τ-quantile of the pooled feature norms √k(z, z); since r corrupted points move that
  quantile within the observed order statistics of ranks j ± r, and moving c by ε moves
  every MMD by at most ε·(the share of points beyond the smaller radius, X's and Y's), the
  test widens dcMMD's margin by that much (docs/studies/tests.md has the proof).

**Certificate.** Every result reports the largest number of corrupted points under which
the same test (same partition, same relabellings) still rejects at α: None when it does
not reject even without corruption (the internal helpers count −1 for that).

**Default kernel.** Without one, and for any kernel whose ``sigma`` is "median", dcMMD at
the median heuristic made robust (:mod:`monk_framework.two_sample.bandwidth`): it rejects
only when dcMMD rejects at every bandwidth the uncorrupted data's snapped median
heuristic could give.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from monk_framework.core.combinators import RADIUS_RANGE, ClippedKernel
from monk_framework.core.errors import (
    MonkDeprecationWarning,
    MonkError,
    ParameterError,
    shown,
)
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import check_choice, check_flag, finite_real
from monk_framework.core.randomness import RNGLike, root, seed_of, stream
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import (
    ProgressCallback,
    Resources,
    check_backend,
    counting,
    outside_stacklevel,
    progress_callback,
)
from monk_framework.core.results import computed_with
from monk_framework.core.test_results import RobustTestResult
from monk_framework.engine.backends import Backend
from monk_framework.engine.partitions import median_position, pair_partition
from monk_framework.engine.pooled import PooledSample, pooled
from monk_framework.engine.relabelling import (
    check_null_memory,
    relabelled_statistics,
)
from monk_framework.two_sample.bandwidth import MedianBandwidth, reads_its_bandwidth, unbounded
from monk_framework.two_sample.block_pvalues import auto_blocks, block_exceedances, check_blocks, median_pvalue
from monk_framework.two_sample.clipping import CLIP_QUANTILE, ClipRadius, clip_radius, quantile_rank
from monk_framework.two_sample.common import (
    DEFAULT_PERMUTATIONS,
    check_estimator,
    check_level,
    check_permutations,
    critical_rank,
    exceedances,
    null_quantile,
    previous_form,
    resolve_with_defaults,
)

__all__ = [
    "CLIP_QUANTILE",
    "METHODS",
    "ClipRadius",
    "clip_radius",
    "auto_blocks",
    "check_robust_test",
    "largest_budget",
    "shifted_certificate",
    "contamination_count",
    "median_pvalue",
    "mmd_sensitivity",
    "robust_test",
]

#: the methods of :func:`robust_test`.
METHODS = ("auto", "clip", "dc", "mom")


def mmd_sensitivity(kernel: Kernel, n: int, m: int, Z: Any = None) -> float | None:
    """Δ = D / min(N, M): the most that replacing one point can move the V-statistic MMD.

    With μ̂_X = Σ φ(x_i)/N, replacing x_i by x' moves μ̂_X by (φ(x') − φ(x_i))/N, whose
    norm is at most D = sup ‖φ(x) − φ(x')‖ (the kernel's feature diameter); the triangle
    inequality carries this to ‖μ̂_X − μ̂_Y‖. The same holds for Y with M, and for every
    relabelling. None when the kernel is unbounded. D is the kernel's declaration,
    checked against the pooled sample ``Z`` when given (:meth:`Kernel.checked_feature_diameter`).
    """
    diameter = kernel.checked_feature_diameter(Z)
    if diameter is None:
        return None
    return float(diameter) / min(n, m)


def contamination_count(contamination: Any, total: int) -> int:
    """r from a count (an int, 0 ≤ r ≤ N + M) or a fraction f in [0, 1/2) of the N + M points (⌊f·(N + M)⌋)."""
    if isinstance(contamination, bool):
        raise ParameterError(f"contamination must be a count or a fraction below 1/2; got {contamination!r}.")
    if isinstance(contamination, (int, np.integer)):
        if not 0 <= contamination <= total:
            raise ParameterError(f"contamination must lie between 0 and the {total} points of X and Y; got {shown(contamination)}.")
        return int(contamination)
    fraction = finite_real(contamination)  # a float, or an exact Fraction or Decimal
    if fraction is not None:
        if not 0 <= fraction < 0.5:
            raise ParameterError(f"contamination as a fraction must lie in [0, 1/2); got {shown(contamination)} (give a number of points as an int).")
        return int(math.floor(fraction * total + 1e-9))
    raise ParameterError(f"contamination must be a count (int) or a fraction in [0, 1/2); got {contamination!r}.")


def _check_clip(clip: Any, clip_quantile: Any, chosen: str) -> None:
    radius = None if clip is None else finite_real(clip)
    if clip is not None and (radius is None or not radius > 0):
        raise ParameterError(f"clip must be a radius > 0 (a finite number); got {shown(clip)}.")
    if radius is not None and not RADIUS_RANGE[0] <= radius <= RADIUS_RANGE[1]:
        raise ParameterError(
            f"clip must be a radius whose square is within float64's range ({RADIUS_RANGE[0]:.3g} <= clip <= "
            f"{RADIUS_RANGE[1]:.3g}): the clipped kernel's values are bounded by clip²; got {clip!r}."
        )
    quantile = finite_real(clip_quantile)
    if quantile is None or not 0 < quantile <= 1:
        raise ParameterError(f"clip_quantile must be a number in (0, 1]; got {shown(clip_quantile)}.")
    if chosen != "clip" and (clip is not None or clip_quantile != CLIP_QUANTILE):
        raise ParameterError(f"clip and clip_quantile set the radius of method='clip'; the test runs method={chosen!r}.")


def check_robust_test(
    X: Any = None,
    *,
    kernel: Any = None,
    contamination: Any,
    method: Any = "auto",
    estimator: Any = None,
    n_permutations: Any = DEFAULT_PERMUTATIONS,
    alpha: Any = 0.05,
    clip: Any = None,
    clip_quantile: Any = CLIP_QUANTILE,
    n_blocks: Any = "auto",
    return_null: Any = True,
    progress: Any = None,
    backend: Any = None,
) -> tuple[Kernel, str, MMDEstimator, ProgressCallback | None]:
    """Every argument of :func:`robust_test` that can be checked without the data, checked
    once (the command line calls it before reading files). Returns the kernel, the method
    ("dc", "clip" or "mom"), the estimator it will use and the progress callback. With
    ``method="auto"``, a number of blocks asks for mom, the one method that has blocks."""
    report = progress_callback(progress)
    check_backend(backend)  # a name such as 'dask' would run here, silently
    kernel, estimator = resolve_with_defaults(kernel, estimator, X, default_estimator=False)
    _check_test_params(n_permutations, alpha, method)
    check_flag(return_null, "return_null")
    if estimator is not None:
        check_estimator(estimator)  # before _resolve_method reads its role
    if not isinstance(contamination, (int, np.integer)) or isinstance(contamination, bool):
        contamination_count(contamination, 2)  # a fraction's range does not depend on N + M
    kernel = _robust_kernel(kernel)
    blocks_given = not (isinstance(n_blocks, str) and n_blocks == "auto")
    chosen = "mom" if method == "auto" and blocks_given else _resolve_method(method, kernel, estimator)
    if blocks_given and chosen != "mom":
        raise ParameterError(f"n_blocks (--blocks) sets the blocks of method='mom'; the test runs method={chosen!r}, which has none.")
    _check_clip(clip, clip_quantile, chosen)
    if chosen == "mom":
        warnings.warn(
            "method='mom' (the median of block p-values) is deprecated and will be removed in the release after 0.2: "
            "in every design measured it had less power than dc (bounded kernels) and clip (any kernel), and no "
            "power at all in many (0 of 150 runs at N = M = 500 and 2000 where dc had 0.57 and 0.90). Use "
            "method='dc' or 'clip' (with the V-statistic, estimator=None).",
            MonkDeprecationWarning,
            stacklevel=outside_stacklevel(),
        )
    if reads_its_bandwidth(kernel) and chosen != "dc":
        raise ParameterError(
            f"{kernel.spec()} reads its bandwidth from the data: robust_test accounts for what corrupted points do to "
            f"the median heuristic with method='dc' (the test runs method={chosen!r}). Use method='dc', or give sigma."
        )
    return kernel, chosen, _default_estimator(chosen, estimator), report


def _robust_kernel(kernel: Any) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise MonkError(f"Expected a Kernel (e.g. get_registry().get_kernel('rbf')); got {type(kernel).__name__}.")
    if not kernel.is_fitted and not reads_its_bandwidth(kernel):
        raise ParameterError(
            f"robust_test needs a kernel fixed before seeing the data; {kernel.spec()} resolves a "
            "hyperparameter from the sample, which the corrupted points would move (so the level "
            "guarantee would not hold). Give a number chosen without these data (monkfw: -p sigma=1.0; "
            "Python: get_kernel('rbf', sigma=1.0), or kernel.fit(X_trusted) on trusted data)."
        )
    return kernel


def _check_test_params(n_permutations: Any, alpha: Any, method: Any) -> None:
    check_permutations(n_permutations)
    check_level(alpha)
    check_choice(method, "method", METHODS)


def _resolve_method(method: str, kernel: Kernel, estimator: MMDEstimator | None) -> str:
    bounded = kernel.checked_feature_diameter() is not None
    if method == "auto":
        if estimator is not None and estimator.role != "v-statistic":
            return "mom"
        # measured: with a bounded kernel dcMMD is the more powerful, with an unbounded one
        # dcMMD on its clipped features (docs/studies/robustness.md)
        return "dc" if bounded else "clip"
    if method == "dc" and not bounded:
        raise ParameterError(
            f"method='dc' needs a bounded kernel (one that declares sup k(x, x)); {kernel.spec()} is "
            "unbounded. Use method='clip' (dcMMD on its clipped features) or 'mom', which work for any kernel."
        )
    return method


def _default_estimator(method: str, estimator: Any) -> MMDEstimator:
    if estimator is None:
        return get_registry().estimator_with_role("u-statistic" if method == "mom" else "v-statistic")
    if method in ("dc", "clip") and estimator.role != "v-statistic":
        raise ParameterError(
            f"method={method!r} uses the V-statistic MMD (dcMMD's sensitivity is derived for it); got estimator "
            f"{estimator.name!r}. Leave estimator=None or pass an estimator whose role is 'v-statistic' (v-stat)."
        )
    if method == "mom" and type(estimator).mmd2_from_sums is MMDEstimator.mmd2_from_sums:
        raise ParameterError(
            f"method='mom' computes the estimator's statistic inside every block from kernel sums; "
            f"{estimator.name!r} does not declare it (mmd2_from_sums). Use u-stat or v-stat."
        )
    return estimator


@previous_form("robust_test", ("kernel", "X", "Y"), "robust_test(X, Y, contamination=r, kernel=...)")
def robust_test(
    X: Any,
    Y: Any,
    *,
    contamination: int | float,
    kernel: Kernel | str | None = None,
    estimator: MMDEstimator | str | None = None,
    method: str = "auto",
    n_blocks: int | str = "auto",
    n_permutations: int = DEFAULT_PERMUTATIONS,
    alpha: float = 0.05,
    rng: RNGLike = None,
    progress: ProgressCallback | None = None,
    max_memory: Any = None,
    backend: Backend | None = None,
    return_null: bool = True,
    clip: float | None = None,
    clip_quantile: float = CLIP_QUANTILE,
) -> RobustTestResult:
    """A two-sample test whose level is at most α with up to ``contamination`` corrupted points.

    Parameters
    ----------
    X, Y : array_like or sequence of str
        The samples, of which up to ``contamination`` points may have been replaced by
        anything, chosen after seeing the data.
    contamination : int or float
        r, a number of points, or a fraction of N + M below 1/2.
    kernel : Kernel or str, optional
        Fixed before seeing the data (the corrupted points would move a hyperparameter
        read from them). Default: ``"rbf"`` with σ by the median heuristic made robust
        (module docstring).
    estimator : MMDEstimator or str, optional
        The statistic: v-stat for "dc" and "clip" (the default), u-stat or v-stat for
        "mom", computed inside every block.
    method : {"auto", "dc", "clip", "mom"}
        "dc" (dcMMD, bounded kernels), "clip" (dcMMD on the kernel's clipped features,
        any kernel), "mom" (median of block p-values; deprecated) or "auto" (dc when the
        kernel is bounded, clip otherwise).
    n_blocks : int or "auto"
        Q of "mom".
    n_permutations, alpha, rng, progress, max_memory, backend, return_null
        As for :func:`~monk_framework.two_sample.permutation_test`.
    clip : float, optional
        The radius c of "clip" in the kernel's feature norm √k(x, x), fixed without these
        data; by default the ``clip_quantile`` of the pooled norms, whose movement under
        corruption the test accounts for (:class:`ClipRadius`).

    Returns
    -------
    RobustTestResult
        With ``certificate``: the largest number of corrupted points under which the
        rejection stays a level-α decision (None when it does not reject).
    """
    start = time.perf_counter()
    kernel, chosen, est, report = check_robust_test(
        X,
        kernel=kernel,
        contamination=contamination,
        method=method,
        estimator=estimator,
        n_permutations=n_permutations,
        alpha=alpha,
        clip=clip,
        clip_quantile=clip_quantile,
        n_blocks=n_blocks,
        return_null=return_null,
        progress=progress,
        backend=backend,
    )
    resources = Resources.of(max_memory)
    tick = counting(report, "permutations")
    # checked above: finite reals, read as floats (a Decimal would not mix with them)
    clip = None if clip is None else finite_real(clip)
    quantile = finite_real(clip_quantile)
    assert quantile is not None
    clip_quantile, alpha = quantile, check_level(alpha)
    # mom's block statistics are MMDs of the kernel itself, read as every MMD is (centred, or
    # anchored far from the origin: Kernel.mmd_view), the same numbers in exact arithmetic
    # wherever corrupted points move the centre; a clipped kernel's features depend on the origin
    view = kernel
    if chosen == "mom":
        view, Xv, Yv = kernel.mmd_view(X, Y)
    else:
        Xv, Yv = kernel.check_pair(X, Y)
        kernel.warn_if_far_from_origin(Xv, Yv, clipped=chosen == "clip")
    n, m = len(Xv), len(Yv)
    if n < 2 or m < 2:
        raise MonkError(f"A robust test needs at least 2 points in each sample; got N = {n}, M = {m}.")
    r = contamination_count(contamination, n + m)
    seq = root(rng)
    seed = seed_of(seq)
    null_seq = stream(seq, "relabel")
    B = int(n_permutations)
    if chosen != "mom":  # before any kernel evaluation: a B that cannot fit is refused at once
        check_null_memory(B, pool_size=n + m, backend=backend, listed=bool(return_null))
    # the kernel is fixed before the data: as requested is as used
    common: dict[str, Any] = dict(
        alpha=float(alpha),
        contamination=r,
        n_permutations=B,
        **computed_with(est, kernel, kernel, n, m, seed),
    )
    if reads_its_bandwidth(kernel):
        return _median_heuristic_dc(
            kernel, est, Xv, Yv, r, B, seq, float(alpha), resources=resources, backend=backend, tick=tick, return_null=bool(return_null), start=start, seed=seed
        )
    if chosen != "mom":
        radius = clip_radius(kernel, Xv, Yv, clip=clip, quantile=clip_quantile) if chosen == "clip" else None
        used = kernel if radius is None else ClippedKernel(c=radius.radius, kernel=kernel)
        delta = mmd_sensitivity(used, n, m, pooled(Xv, Yv))
        assert delta is not None
        shift: Callable[[int], float] = (lambda c: c * delta) if radius is None else (lambda c: radius.shift(c, delta))
        if not math.isfinite(shift(r)):
            assert radius is not None and radius.quantile is not None  # a given radius has no slack
            j = quantile_rank(radius.quantile, n + m)
            why = (
                f"the radius's rank plus {r} exceeds the {n + m} points"
                if j + r > n + m
                else f"the norm {r} ranks above the radius is beyond float64 (gross outliers for this kernel)"
            )
            raise ParameterError(
                f"method='clip' with clip_quantile = {clip_quantile:g} cannot tolerate contamination = {r}: {why}, "
                "so corrupted points could set the radius anywhere. Use a lower clip_quantile or give the radius (clip=c)."
            )
        # the engine's entrance, as the permutation test: relabellings drawn while the Gram
        # matrix is computed, T from the first batch's pass
        stats = relabelled_statistics(est, used, Xv, Yv, B, seq, resources=resources, backend=backend, progress=tick, building=counting(report, "Gram matrix"))
        T = math.sqrt(max(stats.observed, 0.0))
        null = np.sqrt(np.maximum(stats.null, 0.0))
        k = critical_rank(B, alpha)
        q = null_quantile(null, alpha)
        exceed = int(exceedances(null, T - 2 * shift(r)))
        return RobustTestResult(
            method=chosen,
            statistic=T,
            pvalue=(1 + exceed) / (1 + B),
            reject=exceed <= k,
            certificate=shifted_certificate(T, q, shift, n + m),
            sensitivity=delta,
            null_quantile=q,
            threshold=None if q is None else q + 2 * shift(r),
            clip_radius=None if radius is None else radius.radius,
            clip_slack=None if radius is None else radius.slack(r),
            null_distribution=null if return_null else None,
            timings={"total_s": time.perf_counter() - start},
            **common,
        )
    pool = PooledSample(view, Xv, Yv, resources=resources)
    Q = auto_blocks(n, m, r) if isinstance(n_blocks, str) and n_blocks == "auto" else check_blocks(n_blocks, n, m)
    partition = pair_partition(n, m, Q, np.random.default_rng(stream(seq, "partition")))
    counts = block_exceedances(est, pool, partition, B, null_seq, tick)
    pvalues = (1.0 + counts) / (1.0 + B)
    p = median_pvalue(pvalues, r)
    order = median_position(Q) + 1
    certificate = largest_budget(lambda c: median_pvalue(pvalues, c) <= alpha, order - 1)
    return RobustTestResult(
        method="mom",
        statistic=float(np.sort(pvalues)[order - 1]),
        pvalue=p,
        reject=p <= alpha,
        certificate=certificate,
        n_blocks=Q,
        order=order,
        block_pvalues=pvalues,
        timings={"total_s": time.perf_counter() - start},
        **common,
    )


def _median_heuristic_dc(
    kernel: Kernel,
    est: MMDEstimator,
    Xv: Any,
    Yv: Any,
    r: int,
    B: int,
    seq: np.random.SeedSequence,
    alpha: float,
    *,
    resources: Resources,
    backend: Backend | None,
    tick: Any,
    return_null: bool,
    start: float,
    seed: Any,
) -> RobustTestResult:
    """dcMMD with the bandwidth of the median heuristic, made robust (:mod:`.bandwidth`):
    it rejects only when dcMMD rejects at every bandwidth the uncorrupted data's snapped
    median heuristic could have given, all with the same relabellings."""
    n, m = len(Xv), len(Yv)
    bandwidth = MedianBandwidth.of(Xv, Yv, kernel.distance_metric)  # type: ignore[attr-defined]
    Z = pooled(Xv, Yv)
    k = critical_rank(B, alpha)
    at: dict[float, tuple[Kernel, float, np.ndarray, float]] = {}

    def statistics(sigma: float) -> tuple[Kernel, float, np.ndarray, float]:
        """The kernel at σ, its V-statistic MMD, its B relabelled MMDs and its Δ (computed once)."""
        if sigma not in at:
            fixed = type(kernel).from_params({**kernel.params(), "sigma": sigma})
            stats = relabelled_statistics(est, fixed, Xv, Yv, B, seq, resources=resources, backend=backend, progress=tick)
            delta = mmd_sensitivity(fixed, n, m, Z)
            assert delta is not None  # the kernel declares its bound at any σ (checked before)
            at[sigma] = (fixed, math.sqrt(max(stats.observed, 0.0)), np.sqrt(np.maximum(stats.null, 0.0)), delta)
        return at[sigma]

    def exceeding(sigma: float, c: int) -> int:
        _, T, null, delta = statistics(sigma)
        return int(exceedances(null, T - 2 * c * delta))

    def rejects(c: int) -> bool:
        sigmas = bandwidth.candidates(c)
        # the candidates already computed first: a failing one ends the check without another pass
        return sigmas is not None and all(exceeding(s, c) <= k for s in sorted(sigmas, key=lambda s: s not in at))

    sigmas = bandwidth.candidates(r)
    if sigmas is None:
        raise unbounded(kernel, r, bandwidth)
    chosen = bandwidth.observed()
    used, T, null, delta = statistics(chosen)
    worst = max(exceeding(s, r) for s in sigmas)
    q = null_quantile(null, alpha)
    certificate = largest_budget(rejects, n + m)
    return RobustTestResult(
        method="dc",
        statistic=T,
        pvalue=(1 + worst) / (1 + B),
        reject=worst <= k,
        certificate=certificate,
        sensitivity=delta,
        null_quantile=q,
        threshold=None if q is None else q + 2 * r * delta,
        bandwidths=sigmas,
        null_distribution=null if return_null else None,
        alpha=alpha,
        contamination=r,
        n_permutations=B,
        timings={"total_s": time.perf_counter() - start},
        **computed_with(est, kernel, used, n, m, seed),
    )


def largest_budget(holds: Callable[[int], bool], most: int) -> int:
    """The largest r in 0..``most`` with ``holds(r)``, −1 when not even ``holds(0)``: a
    certificate, for a rule that gets harder to meet as r grows (doubling, then bisection)."""
    if not holds(0):
        return -1
    low, high = 0, 1  # holds(low); find a high that fails, then bisect
    while high <= most and holds(high):
        low, high = high, 2 * high
    high = min(high, most + 1)
    while high - low > 1:
        mid = (low + high) // 2
        if holds(mid):
            low = mid
        else:
            high = mid
    return low


def shifted_certificate(T: float, q: float | None, shift: Callable[[int], float], most: int) -> int:
    """The largest r ≤ ``most`` with T − 2·shift(r) > q̂ (the rejection rule of dcMMD and
    its clipped form; ``shift`` nondecreasing with shift(0) = 0), −1 if none."""
    if q is None:
        return -1
    return largest_budget(lambda r: T - 2 * shift(r) > q, most)
