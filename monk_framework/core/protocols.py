"""What the engine hands a plugin, as protocols: the Gram matrix of a sample and a test's pooled sample.

An estimator never learns how the engine holds a Gram matrix (stored, evaluated tile by
tile, from the kernel's explicit features, on Dask workers): it asks a
:class:`GramMatrix` for the mathematics it needs (row sums, products, quadratic forms,
block Gram matrices) and a :class:`Pool` for the pooled sample of a test. The engine's
classes fulfil these protocols (:mod:`monk_framework.engine.gram_sources`,
:mod:`monk_framework.engine.pooled`); :mod:`monk_framework.plugin` makes them
(:func:`~monk_framework.plugin.gram_matrix_of`, :func:`~monk_framework.plugin.pooled_sample`).
Every answer has the same numbers, to round-off, whichever way the engine chose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel
    from monk_framework.core.resources import Resources
    from monk_framework.core.samples import Sample

__all__ = ["GramMatrix", "Pool"]


class GramMatrix(Protocol):
    """The Gram matrix K of n points, K_ij = k(z_i, z_j), as the engine holds it.

    Every method is a reduction of K, computed within the call's memory budget: a stored
    K is read, a matrix-free one evaluated tile by tile (each call evaluates the values it
    needs again), K = ΦΦᵀ from the kernel's explicit features where they pay.
    """

    #: the number of points
    n: int
    #: seconds spent evaluating the kernel so far (results report Gram time apart)
    kernel_s: float

    @property
    def storage(self) -> str:
        """How the engine holds K: "stored", "matrix-free", "features" or "spread" (Dask
        workers); a diagnostic for results, never a choice a plugin makes."""
        ...

    def row_sums(self) -> np.ndarray:
        """K 1."""
        ...

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """K w for a vector w (or an n × B matrix)."""
        ...

    def rows_combination(self, idx: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """K[:, idx] coef = Σ_k coef_k K[idx_k, :] (K is symmetric): the columns ``idx`` of K, combined."""
        ...

    def quadratic_forms(self, E: np.ndarray) -> np.ndarray:
        """diag(Eᵀ K E) = (e_bᵀ K e_b)_b for the columns of an n × B matrix E."""
        ...

    def block_gram(self, W: Any) -> np.ndarray:
        """G = Wᵀ K W for an n × Q weight matrix W (dense or scipy sparse)."""
        ...


class Pool(Protocol):
    """The pooled sample Z = [X; Y] of a two-sample computation, with its fitted kernel.

    A permutation test builds one and hands it to every batch of relabellings
    (:meth:`~monk_framework.core.estimators.MMDEstimator.permuted_statistics`); an
    estimator may build one for an estimate (:func:`~monk_framework.plugin.pooled_sample`).
    Its Gram matrix, diagonal and row sums are computed once, on first use.
    """

    kernel: Kernel
    #: what the call lets the engine use; pass it on to every engine function
    resources: Resources
    #: the sizes N of X and M of Y
    n: int
    m: int
    #: reductions reused across the batches of one test (e.g. a partition's block Gram
    #: matrices); they live as long as the pool
    cache: dict[str, Any]

    @property
    def size(self) -> int:
        """N + M."""
        ...

    @property
    def X(self) -> Sample:
        """The first sample."""
        ...

    @property
    def Y(self) -> Sample:
        """The second sample."""
        ...

    @property
    def Z(self) -> Sample:
        """[X; Y] (rows for vectors, the concatenation for strings)."""
        ...

    @property
    def gram(self) -> GramMatrix:
        """The Gram matrix of Z."""
        ...

    @property
    def diag(self) -> np.ndarray:
        """k(z, z) for every pooled point."""
        ...

    @property
    def row_sums(self) -> np.ndarray:
        """K 1 of the pooled Gram matrix."""
        ...

    @property
    def kernel_seconds(self) -> float:
        """Seconds spent evaluating the kernel for this pool so far (0 before its Gram matrix is made)."""
        ...

    @property
    def reads_features(self) -> bool:
        """Whether the classical sums of this pool come from the kernel's explicit features."""
        ...

    def relabelled(self, perm: np.ndarray) -> tuple[Sample, Sample]:
        """The samples (X', Y') = (Z[perm[:N]], Z[perm[N:]]) of one relabelling."""
        ...

    def relabelling(self, perm: np.ndarray) -> Pool:
        """The pool of one relabelling, Z[perm] with its first N points as X: it reads this
        pool's Gram matrix, diagonal and row sums through the permutation (a stored K is
        never copied, a matrix-free one never evaluated twice for its row sums)."""
        ...
