"""The classical estimators: V- and U-statistic MMD, and the empirical mean embedding."""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework import EmbeddingEstimator, EmbeddingWeights, Estimate, Kernel, MMDEstimator, check_squared_norm, hookimpl, parameter
from monk_framework.plugin import (
    DIAGONAL_ROUND_OFF_LIMIT,
    EXACT_ESTIMATE_POINTS,
    EXACT_TEST_POINTS,
    SPLIT_MAX_POINTS,
    KernelSums,
    Pool,
    Resources,
    Sample,
    SampleSums,
    far_point_sample_sums,
    kernel_sums,
    loses_to_diagonal,
    off_diagonal_sample_sums,
    one_of,
    relabelling_batch,
    sample_sums,
    u_statistic,
    v_statistic,
    warn_lost_to_diagonal,
)


def _sums(kernel: Kernel, X: Sample, Y: Sample, resources: Resources, *, without_diagonal: bool = False) -> KernelSums:
    """The kernel sums (from the Gram matrices, or their tiles over the memory budget;
    ``without_diagonal``: see :func:`~monk_framework.plugin.kernel_sums`).

    Their V-statistic MMD² is a squared norm, so a negative one proves the kernel is not
    PSD on these points (checked here, for both statistics: the U-statistic can be
    negative for a PSD kernel, the V-statistic cannot).
    """
    sums = kernel_sums(kernel, X, Y, resources=resources, without_diagonal=without_diagonal)
    n, m = len(X), len(Y)
    vstat = sums.xx / (n * n) + sums.yy / (m * m) - 2.0 * sums.xy / (n * m)
    # |k(x, y)| <= max k(z, z) for a PSD kernel, so each of the three means is within it
    check_squared_norm(kernel, float(vstat), 4.0 * sums.max_diag, "the V-statistic MMD^2")
    return sums


class _FromSums(MMDEstimator):
    """The classical statistics are functions of the kernel sums within X, within Y and
    across (``mmd2_from_sums``): every relabelling's sums come from one pooled Gram matrix,
    B of them per matrix product."""

    spreads_gram: ClassVar[bool] = True

    def permutation_batch(self, pool: Pool) -> int:
        return relabelling_batch(pool)

    def permuted_statistics(self, pool: Pool, perms: np.ndarray, rngs: Any) -> np.ndarray:
        values = self.mmd2_from_sums(sample_sums(pool, perms), pool.n, pool.m)
        assert values is not None  # both subclasses define it
        return values


@attrs.frozen(kw_only=True)
class VStatistic(_FromSums):
    """MMD_V² = mean(Kxx) + mean(Kyy) − 2 mean(Kxy), the biased (plug-in) estimator."""

    name: ClassVar[str] = "v-stat"
    role: ClassVar[str | None] = "v-statistic"
    summary: ClassVar[str] = "V-statistic MMD: distance between the empirical mean embeddings."
    formula: ClassVar[str] = "MMD_V^2 = 1/N^2 sum_ij k(x_i,x_j) + 1/M^2 sum_ij k(y_i,y_j) - 2/(NM) sum_ij k(x_i,y_j); MMD = sqrt(max(MMD_V^2, 0))"

    def compute_estimate(self, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
        sums = _sums(kernel, X, Y, resources)
        start = time.perf_counter()
        mmd2 = float(self.mmd2_from_sums(sums, len(X), len(Y)))  # type: ignore[arg-type]
        # MMD_V^2 >= 0 in exact arithmetic; a tiny negative value is round-off
        return Estimate(
            mmd2=mmd2,
            mmd=math.sqrt(max(mmd2, 0.0)),
            diagnostics={"tiled": sums.tiled, **({"features": True} if sums.features else {})},
            timings={"gram_s": sums.seconds, "estimate_s": time.perf_counter() - start},
        )

    def mmd2_from_sums(self, sums: SampleSums, n: Any, m: Any) -> np.ndarray:
        """S_xx/N² + S_yy/M² − 2 S_xy/(NM)."""
        return np.asarray(v_statistic(sums, n, m))


@attrs.frozen(kw_only=True)
class UStatistic(_FromSums):
    """MMD_U², the unbiased estimator: the within-sample means exclude the diagonal."""

    name: ClassVar[str] = "u-stat"
    role: ClassVar[str | None] = "u-statistic"
    summary: ClassVar[str] = "U-statistic MMD: unbiased MMD^2 (may be negative; see 'root')."
    formula: ClassVar[str] = (
        "MMD_U^2 = 1/(N(N-1)) sum_{i!=j} k(x_i,x_j) + 1/(M(M-1)) sum_{i!=j} k(y_i,y_j) "
        "- 2/(NM) sum_ij k(x_i,y_j); MMD = sqrt(max(MMD_U^2, 0)) (root='clip') "
        "or sign(MMD_U^2) sqrt(|MMD_U^2|) (root='signed')"
    )

    root: str = parameter(
        "clip",
        doc="how MMD_U^2 < 0 becomes an MMD: 'clip' gives 0 (a distance), 'signed' gives -sqrt(|MMD_U^2|) (keeps the information, for error plots)",
        check=one_of("clip", "signed"),
    )

    def min_sample_size(self) -> tuple[int, str]:
        return 2, "the U-statistic averages over pairs of distinct points"

    def compute_estimate(self, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
        # the sums within X and within Y added up without the diagonal, which an unbounded
        # kernel's k(z, z) can dwarf (monk_framework.plugin.loses_to_diagonal)
        sums = _sums(kernel, X, Y, resources, without_diagonal=True)
        start = time.perf_counter()
        mmd2 = float(self.mmd2_from_sums(sums, len(X), len(Y)))  # type: ignore[arg-type]
        if sums.xx_off is None:  # feature sums, kept beyond EXACT_ESTIMATE_POINTS: said if they lost digits
            warn_lost_to_diagonal(kernel, sums, mmd2, len(X), len(Y), EXACT_ESTIMATE_POINTS)
        if self.root == "clip":
            mmd = math.sqrt(max(mmd2, 0.0))
        else:
            mmd = math.copysign(math.sqrt(abs(mmd2)), mmd2)
        return Estimate(
            mmd2=mmd2,
            mmd=mmd,
            diagnostics={"negative_mmd2": bool(mmd2 < 0), "root": self.root, "tiled": sums.tiled, **({"features": True} if sums.features else {})},
            timings={"gram_s": sums.seconds, "estimate_s": time.perf_counter() - start},
        )

    def permuted_statistics(self, pool: Pool, perms: np.ndarray, rngs: Any) -> np.ndarray:
        # the fast sums hold the diagonal; where subtracting it costs digits (an unbounded
        # kernel whose k(z, z) dwarfs its values between points), the batch is summed
        # again without it: exact, at about twice the cost, and only there
        sums = sample_sums(pool, perms)
        values = np.asarray(u_statistic(sums, pool.n, pool.m))
        if not np.any(loses_to_diagonal(sums, values, pool.n, pool.m)):
            return values
        if pool.reads_features:
            # features: the few far points apart, O(size·(D + h)) a relabelling
            found = _far_points_apart(pool, perms)
            if found is not None:
                return found
        if pool.size > EXACT_TEST_POINTS:
            # all the kernel values for every batch would take too long: said once a test
            if "diagonal-said" not in pool.cache:
                if warn_lost_to_diagonal(pool.kernel, sums, values, pool.n, pool.m, EXACT_TEST_POINTS):
                    pool.cache["diagonal-said"] = True
        else:
            values = np.asarray(u_statistic(off_diagonal_sample_sums(pool, perms), pool.n, pool.m))
        return values

    def mmd2_from_sums(self, sums: SampleSums, n: Any, m: Any) -> np.ndarray:
        """Σ_{i≠j} k(x_i, x_j)/(N(N−1)) + Σ_{i≠j} k(y_i, y_j)/(M(M−1)) − 2 S_xy/(NM), the
        within sums without the diagonal where given, else S_xx − tr_x and S_yy − tr_y."""
        return np.asarray(u_statistic(sums, n, m))


def _far_points_apart(pool: Pool, perms: np.ndarray) -> np.ndarray | None:
    """MMD_U² of every relabelling with the h points of largest k(z, z) apart from the
    feature sums (:func:`~monk_framework.plugin.far_point_sample_sums`), h = 1, 2,
    4, … up to SPLIT_MAX_POINTS until every relabelling's bound is below
    DIAGONAL_ROUND_OFF_LIMIT of its value (the h found is where the next batch starts);
    None if none suffices."""
    h = int(pool.cache.get("far-points", 1))
    while h <= min(SPLIT_MAX_POINTS, pool.size // 4):
        sums, bound = far_point_sample_sums(pool, perms, h)
        values = np.asarray(u_statistic(sums, pool.n, pool.m))
        if np.all(bound <= DIAGONAL_ROUND_OFF_LIMIT * np.abs(values)):
            pool.cache["far-points"] = h
            return values
        h *= 2
    return None


@attrs.frozen(kw_only=True)
class MeanEmbedding(EmbeddingEstimator):
    """μ̂ = (1/N) Σ_i k(·, x_i), the empirical mean embedding (the V-statistic's)."""

    name: ClassVar[str] = "mean"
    summary: ClassVar[str] = "Empirical mean embedding: equal weights 1/N (the V-statistic's embedding)."
    formula: ClassVar[str] = "mu_hat = 1/N sum_i k(., x_i)"

    def compute_embedding(self, kernel: Kernel, X: Sample, rng: np.random.Generator, resources: Resources) -> EmbeddingWeights:
        return EmbeddingWeights(weights=np.full(len(X), 1.0 / len(X)))


@hookimpl
def monk_estimators() -> list[type[MMDEstimator] | type[EmbeddingEstimator]]:
    return [VStatistic, UStatistic, MeanEmbedding]
