"""MMD estimators for data beyond exact reach: random Fourier features, and the
incomplete U-statistic.

**Random Fourier features** (Rahimi & Recht 2007). A translation-invariant kernel
k(x, y) = κ(x − y) is, by Bochner's theorem, κ(0) E_ω cos(ωᵀ(x − y)) for ω drawn from
its spectral density (``Kernel.spectral_frequencies``). With D frequencies ω_j and phases
b_j ~ U[0, 2π], φ(x) = √(2κ(0)/D) (cos(ω_jᵀx + b_j))_j gives E φ(x)ᵀφ(y) = k(x, y), and
the MMD statistics of the features cost O((N + M) D) instead of O((N + M)²):

    MMD_V² = ‖mean φ(X) − mean φ(Y)‖²,
    MMD_U² = (‖Σφ(x)‖² − Σ‖φ(x)‖²)/(N(N−1)) + (same for Y) − 2 mean φ(X)ᵀ mean φ(Y).

**Incomplete U-statistic** (Blom 1976; Gretton et al. 2012 for the linear-time MMD).
Instead of all pairs, L pairs drawn at random with replacement: L pairs i ≠ i′ of X, L
pairs j ≠ j′ of Y and L pairs (i, j) across, and

    MMD_inc² = mean k(x_i, x_i′) + mean k(y_j, y_j′) − 2 mean k(x_i, y_j),

which is unbiased for MMD² (each mean is unbiased for its expectation) and costs O(L)
kernel values. Its pairs are drawn from ``rng``; in a permutation test each relabelling
draws its own, independently of the labels, so the test stays exact.

The features are part of the estimator (drawn from ``feature_seed``), so every
relabelling of a permutation test uses the same ones: the test is an exact permutation
test of the feature statistic, and B relabellings cost O((N + M) D B) in one matrix
product. docs/estimators.md records its error against the exact statistic and the power
it loses.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework import Estimate, Kernel, MMDEstimator, ParameterError, hookimpl, parameter
from monk_framework.plugin import Pool, Resources, Sample, chunk_rows, integer, one_of, reserve_memory, take, u_statistic, v_statistic


@attrs.frozen
class _FeatureSums:
    """The kernel sums of the feature kernel φ(x)ᵀφ(y) (what ``mmd2_from_sums`` reads)."""

    xx: Any
    yy: Any
    xy: Any
    trace_x: Any
    trace_y: Any


@attrs.frozen(kw_only=True)
class RandomFourierMMD(MMDEstimator):
    """MMD of D random Fourier features of a translation-invariant kernel."""

    name: ClassVar[str] = "rff"
    summary: ClassVar[str] = "MMD from D random Fourier features of a translation-invariant kernel (rbf, laplace): O((N+M) D) per statistic."
    formula: ClassVar[str] = (
        "phi(x) = sqrt(2 k(0) / D) cos(W x + b), W ~ the kernel's spectral density, b ~ U[0, 2 pi]; "
        "MMD_U^2 (statistic='u') or MMD_V^2 ('v') of the features: k(x, y) ~ phi(x)^T phi(y)"
    )

    n_features: int = parameter(1000, doc="D, the number of random features", check=integer(ge=1), kind="int")
    statistic: str = parameter("u", doc="'u' (the unbiased MMD_U^2 of the features) or 'v' (MMD_V^2)", check=one_of("u", "v"))
    feature_seed: int = parameter(
        0,
        doc="seed of the random features: part of the estimator, so every relabelling of a test uses the same ones",
        check=integer(ge=0),
        kind="int",
    )

    def min_sample_size(self) -> tuple[int, str]:
        return 2, "the U-statistic averages over pairs of distinct points"

    def check_kernel(self, kernel: Any) -> Kernel:  # type: ignore[override]
        """A translation-invariant kernel (one with a spectral density); others are refused
        before any data are read."""
        kernel = super().check_kernel(kernel)
        if not kernel.translation_invariant:
            raise ParameterError(f"Estimator 'rff' needs a translation-invariant kernel (such as rbf or laplace); kernel {kernel.name!r} is not one.")
        return kernel

    def frequencies(self, kernel: Kernel, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(W, b, scale): D × d frequencies, D phases and √(2κ(0)/D), from ``feature_seed``.

        The frequencies are a plugin's numbers, checked here as its Gram values are (shape,
        finiteness, the plugin named). κ(0) is the kernel's own k(z, z), the same at every
        point of a translation-invariant kernel: a declared ``sup_diag`` may be a looser
        bound, and would scale every feature wrongly."""
        d = Z.shape[1]
        gen = np.random.default_rng(self.feature_seed)
        W = kernel.checked_spectral_frequencies(d, self.n_features, gen)
        if W is None:
            raise ParameterError(
                f"Estimator 'rff' needs a translation-invariant kernel (such as rbf or laplace); kernel {kernel.name!r} has no spectral density."
            )
        b = gen.uniform(0.0, 2.0 * math.pi, self.n_features)
        kappa0 = float(kernel.diag_tile(Z[:1])[0])
        return W, b, math.sqrt(2.0 * kappa0 / self.n_features)

    def features(self, kernel: Kernel, Z: Sample) -> np.ndarray:
        """φ(Z), an (n, D) array."""
        Z = np.asarray(Z)
        D = self.n_features
        # the features of Z and the frequencies, before either is drawn
        reserve_memory(
            8 * D * (len(Z) + Z.shape[1] + 1),
            what=f"Estimator 'rff': n_features = {D:,} random features of {len(Z):,} points need",
            fix="Use fewer features (the error falls like 1/sqrt(D)).",
        )
        W, b, scale = self.frequencies(kernel, Z)
        out = Z @ W.T
        out += b
        np.cos(out, out=out)
        out *= scale
        return out

    def compute_estimate(self, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
        start = time.perf_counter()
        Fx, Fy = self.features(kernel, X), self.features(kernel, Y)
        sx, sy = Fx.sum(axis=0), Fy.sum(axis=0)
        sums = _FeatureSums(
            xx=float(sx @ sx),
            yy=float(sy @ sy),
            xy=float(sx @ sy),
            trace_x=float(np.einsum("ij,ij->", Fx, Fx)),
            trace_y=float(np.einsum("ij,ij->", Fy, Fy)),
        )
        mmd2 = float(self._feature_mmd2(sums, len(X), len(Y)))
        mmd = math.sqrt(max(mmd2, 0.0))
        return Estimate(
            mmd2=mmd2,
            mmd=mmd,
            diagnostics={"n_features": self.n_features, "statistic": self.statistic, "feature_seed": self.feature_seed},
            timings={"features_s": time.perf_counter() - start},
        )

    def permutation_batch(self, pool: Pool) -> int:
        # the indicator E ((N+M) × B) and Eᵀ Φ (B × D) of one batch: a tile's worth of rows
        return chunk_rows(8 * (pool.size + self.n_features))

    def permuted_statistics(self, pool: Pool, perms: np.ndarray, rngs: Any) -> np.ndarray:
        """Every relabelling from the features of the pooled sample: Σ_{x ∈ X_b} φ(x) = Eᵀ Φ,
        one (B × (N+M)) × ((N+M) × D) product for B relabellings."""
        F = self.features(pool.kernel, pool.Z)
        norms = np.einsum("ij,ij->i", F, F)
        total, total_norm = F.sum(axis=0), float(norms.sum())
        perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
        B = len(perms)
        E = np.zeros((B, pool.size))
        E[np.repeat(np.arange(B), pool.n), perms[:, : pool.n].ravel()] = 1.0
        SX = E @ F
        SY = total[None, :] - SX
        tx = E @ norms
        sums = _FeatureSums(
            xx=np.einsum("ij,ij->i", SX, SX),
            yy=np.einsum("ij,ij->i", SY, SY),
            xy=np.einsum("ij,ij->i", SX, SY),
            trace_x=tx,
            trace_y=total_norm - tx,
        )
        return np.asarray(self._feature_mmd2(sums, pool.n, pool.m))

    def _feature_mmd2(self, sums: Any, n: Any, m: Any) -> Any:
        """The feature kernel's MMD_V² or MMD_U² from its sums (as the classical statistics)."""
        return v_statistic(sums, n, m) if self.statistic == "v" else u_statistic(sums, n, m)


def _distinct_pairs(n: int, L: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """L pairs (i, i′) with i ≠ i′, uniformly among the ordered pairs of n points."""
    i = rng.integers(0, n, L)
    j = rng.integers(0, n - 1, L)
    j += j >= i  # skip i itself: uniform over the n − 1 others
    return i, j


def _pair_values(kernel: Kernel, A: Sample, B: Sample, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """k(A[i_l], B[j_l]) for every drawn pair l. When the draws are at least four times the
    pairs there are (small samples), most are repeats: each distinct pair is evaluated
    once and its value copied to its draws, in their order, the same values bit for bit
    (20 + 20 strings with the SSK and L = 10⁵ had taken 31 s for 780 distinct pairs)."""
    if 4 * len(A) * len(B) > len(i):  # too few repeats to pay for the sort (rbf, 200 points, L = 10⁵: 2x slower)
        return kernel.pair_values(take(A, i), take(B, j))
    codes = i.astype(np.int64) * len(B) + j
    distinct, where = np.unique(codes, return_inverse=True)
    return kernel.pair_values(take(A, distinct // len(B)), take(B, distinct % len(B)))[where]


@attrs.frozen(kw_only=True)
class IncompleteU(MMDEstimator):
    """MMD² from L random pairs of each kind: unbiased, O(L) kernel values."""

    name: ClassVar[str] = "incomplete-u"
    summary: ClassVar[str] = "Incomplete U-statistic MMD: L random pairs of each kind, unbiased, O(L) kernel values."
    formula: ClassVar[str] = (
        "MMD_inc^2 = mean_l k(x_{i_l}, x_{i'_l}) + mean_l k(y_{j_l}, y_{j'_l}) - 2 mean_l k(x_{a_l}, y_{b_l}), "
        "L pairs of each kind drawn uniformly (i != i', j != j'); MMD = sqrt(max(MMD_inc^2, 0))"
    )

    n_pairs: int = parameter(100000, doc="L, the number of random pairs of each kind need", check=integer(ge=1), kind="int")

    def min_sample_size(self) -> tuple[int, str]:
        return 2, "pairs of distinct points"

    def compute_estimate(self, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
        start = time.perf_counter()
        n, m, L = len(X), len(Y), self.n_pairs
        # six index arrays, the two samples of pairs of one kind at a time, and their values
        width = X.shape[1] if isinstance(X, np.ndarray) and X.ndim == 2 else 1
        reserve_memory(
            L * (6 * 8 + 2 * 8 * width + 8),
            what=f"Estimator 'incomplete-u': n_pairs = {L:,} pairs of each kind need",
            fix="Use fewer pairs (its standard error falls like 1/sqrt(n_pairs)).",
        )
        ix, jx = _distinct_pairs(n, L, rng)
        iy, jy = _distinct_pairs(m, L, rng)
        a, b = rng.integers(0, n, L), rng.integers(0, m, L)
        kxx = _pair_values(kernel, X, X, ix, jx).mean()
        kyy = _pair_values(kernel, Y, Y, iy, jy).mean()
        kxy = _pair_values(kernel, X, Y, a, b).mean()
        mmd2 = float(kxx + kyy - 2.0 * kxy)
        return Estimate(
            mmd2=mmd2,
            mmd=math.sqrt(max(mmd2, 0.0)),
            diagnostics={"n_pairs": L},
            timings={"pairs_s": time.perf_counter() - start},
        )


@hookimpl
def monk_estimators() -> list[type[MMDEstimator]]:
    return [RandomFourierMMD, IncompleteU]
