"""What the engine hands a plugin, and what it does for the core, as protocols.

The Gram matrix of a sample and a test's pooled sample, and the kernel work behind the
core's own methods.

An estimator never learns how the engine holds a Gram matrix (stored, evaluated tile by
tile, from the kernel's explicit features, on Dask workers): it asks a
:class:`GramMatrix` for the mathematics it needs (row sums, products, quadratic forms,
block Gram matrices) and a :class:`Pool` for the pooled sample of a test. The engine's
classes fulfil these protocols (:mod:`monk_framework.engine.gram_sources`,
:mod:`monk_framework.engine.pooled`); :mod:`monk_framework.plugin` makes them
(:func:`~monk_framework.plugin.gram_matrix_of`, :func:`~monk_framework.plugin.pooled_sample`).
Every answer has the same numbers, to round-off, whichever way the engine chose.

The core's own methods that need many kernel values (``Kernel.gram``, an
:class:`~monk_framework.core.embedding.Embedding`'s norm, inner products and witness)
hand that work to the engine through :class:`KernelWork`, which the engine installs
when it is imported (``import monk_framework`` imports it): how the work is cut in bands
and tiles, and what memory it may take, is the engine's alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel
    from monk_framework.core.resources import Resources
    from monk_framework.core.samples import Sample

__all__ = ["BandRunner", "GramMatrix", "KernelWork", "Pool", "in_turn", "install_kernel_work", "kernel_work"]

#: ``run_bands(work, bands)``: calls ``work(start, stop)`` for every band, returns the results in order
BandRunner = Callable[[Callable[[int, int], Any], list[tuple[int, int]]], list[Any]]


def in_turn(work: Callable[[int, int], Any], bands: list[tuple[int, int]]) -> list[Any]:
    """``[work(start, stop) for start, stop in bands]``, here and in order."""
    return [work(start, stop) for start, stop in bands]


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


class KernelWork(Protocol):
    """The work on a kernel's values behind the core's own methods, done by the engine
    within memory (the module :mod:`monk_framework.engine.kernel_work` fulfils it): the
    samples are validated, ``resources`` is the call's budget and progress,
    ``report(done)`` is told the kernel values evaluated so far."""

    def symmetric_gram(self, kernel: Kernel, X: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """k(X, X), exactly symmetric with ``diag_tile`` on its diagonal, built in row bands
        that ``run_bands`` runs (here in turn when None), refused before it is allocated
        when memory cannot hold it."""
        ...

    def rectangular_gram(self, kernel: Kernel, X: Sample, Y: Sample, *, run_bands: BandRunner | None = None) -> np.ndarray:
        """k(X, Y), filled in row bands after the same refusal."""
        ...

    def check_feature_matrix(self, n: int, count: int) -> None:
        """Refuse n points × ``count`` features before the plugin computes them, when
        memory cannot hold them."""
        ...

    def weighted_gram(
        self, kernel: Kernel, A: Sample, B: Sample, v: np.ndarray, *, resources: Resources, report: Callable[[float], None] | None = None
    ) -> np.ndarray:
        """K(A, B) v, the whole matrix never held when it does not fit."""
        ...

    def bilinear(
        self, kernel: Kernel, A: Sample, B: Sample | None, u: np.ndarray, v: np.ndarray, *, resources: Resources, report: Callable[[float], None] | None = None
    ) -> float:
        """uᵀ K(A, B) v (B = A when None), in tiles of the budget."""
        ...


_installed: list[KernelWork] = []


def install_kernel_work(work: KernelWork) -> None:
    """Make ``work`` what :func:`kernel_work` returns: called once, by the engine on import."""
    _installed[:] = [work]


def kernel_work() -> KernelWork:
    """The engine's :class:`KernelWork`."""
    if not _installed:
        raise RuntimeError("monk_framework's engine is not loaded: import monk_framework (it loads the engine) before computing kernel values.")
    return _installed[0]
