"""The estimator interfaces: MMD estimators and mean-embedding estimators.

A plugin subclasses :class:`MMDEstimator` (implementing ``compute_estimate``) or
:class:`EmbeddingEstimator` (implementing ``compute_embedding``). The public ``estimate`` and
``embed`` validate the samples against the kernel and the estimator's minimum sample
size, resolve data-dependent kernel hyperparameters on the pooled sample, normalise
``rng`` once (SPEC 7), time the work, and wrap the core's answer in a result that
records everything needed to reproduce it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.embedding import Embedding
from monk_framework.core.errors import DataError, MonkError, PluginFailure, plugin_code, shown
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import Configurable, finite_real, not_implemented
from monk_framework.core.protocols import Pool
from monk_framework.core.randomness import RNGLike, generator
from monk_framework.core.resources import Resources
from monk_framework.core.results import MMDResult, computed_with, jsonable
from monk_framework.core.samples import Sample

if TYPE_CHECKING:
    # what the engine hands an estimator's test hooks; the interface only names them
    from monk_framework.engine.partitions import Partition
    from monk_framework.engine.pooled import SampleSums

__all__ = [
    "checked_estimate",
    "Estimator",
    "MMDEstimator",
    "EmbeddingEstimator",
    "Estimate",
    "EmbeddingWeights",
]


@attrs.frozen(kw_only=True)
class Estimate:
    """What an MMD estimator's core returns: the numbers and its diagnostics."""

    mmd2: float
    mmd: float
    diagnostics: dict[str, Any] = attrs.field(factory=dict)
    timings: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class EmbeddingWeights:
    """What an embedding estimator's core returns: one weight per sample point."""

    weights: np.ndarray
    diagnostics: dict[str, Any] = attrs.field(factory=dict)
    timings: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Estimator(Configurable):
    """Common part of MMD and embedding estimators."""

    plugin_type: ClassVar[str] = "estimator"
    #: what the estimator returns: "mmd" or "embedding".
    estimates: ClassVar[str] = ""

    def min_sample_size(self) -> tuple[int, str]:
        """The fewest points a sample may have, and why (for the error message)."""
        return 1, ""

    def diagnostic_rows(self, diagnostics: Mapping[str, Any], timings: Mapping[str, float]) -> list[tuple[str, str]]:
        """What a report of this estimator's result shows beyond the estimate: (label, text)
        rows read from the result's ``diagnostics`` and ``timings`` (``monkfw run`` prints
        them in its table). The default shows none; an estimator whose diagnostics say
        something a user should see at a glance (the number of blocks, the median block,
        an iterative trace) overrides this. Only what the estimator itself put in
        ``diagnostics`` may be read, and every key it reads may be missing.
        """
        return []

    def report_rows(self, diagnostics: Mapping[str, Any], timings: Mapping[str, float]) -> list[tuple[str, str]]:
        """:meth:`diagnostic_rows` as a report shows them: run as plugin code and checked to
        be (label, text) pairs of strings, else a :class:`PluginFailure` naming the
        estimator."""
        with plugin_code(self, "diagnostic_rows"):
            rows = self.diagnostic_rows(diagnostics, timings)
            rows = list(rows) if isinstance(rows, (list, tuple)) else rows
        if not (isinstance(rows, list) and all(isinstance(row, tuple) and len(row) == 2 and all(isinstance(part, str) for part in row) for row in rows)):
            raise PluginFailure(f"{self.plugin_label()}: diagnostic_rows returned {shown(rows)}; it must return a list of (label, text) pairs of strings.")
        return rows

    def required_size(self) -> tuple[int, str]:
        """:meth:`min_sample_size` as the framework trusts it: a count of points (an int
        >= 0, of any size: ``n_blocks`` near 2⁶³ asks for twice as many) and a reason (a
        string), else a :class:`PluginFailure` naming the estimator (as is any error its
        code raises)."""
        with plugin_code(self, "min_sample_size"):
            answer = self.min_sample_size()
        ok = isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], str)
        need = answer[0] if ok else None
        if not (isinstance(need, (int, np.integer)) and not isinstance(need, (bool, np.bool_)) and need >= 0):
            raise PluginFailure(
                f"{self.plugin_label()}: min_sample_size returned {shown(answer)}; it must return (count, reason), a "
                "count of points >= 0 and a string saying why."
            )
        return int(need), answer[1]

    def check_size(self, sample: Any, name: str) -> None:
        """Refuse a sample smaller than :meth:`min_sample_size`, naming it (``name``)."""
        need, why = self.required_size()
        if len(sample) < need:
            # one point of many features is often a row that was meant as a column
            width = sample.shape[1] if isinstance(sample, np.ndarray) and sample.ndim == 2 else 0
            row = (
                f" {name} is one point of {width} features: if they are {width} points of one feature, transpose "
                f"it ({name}.T in Python; one value a line in a file)."
                if len(sample) == 1 and width >= need
                else ""
            )
            raise DataError(f"{name} has {len(sample)} point(s) but estimator {self.name!r} needs at least {need:,}{f' ({why})' if why else ''}.{row}")

    def plugin_label(self) -> str:
        """``estimator 'name' (module.Class)``: how errors about a plugin's results name it."""
        cls = type(self)
        return f"estimator {self.name!r} ({cls.__module__}.{cls.__qualname__})"

    @staticmethod
    def check_kernel(kernel: Any) -> Kernel:
        """``kernel`` if it is a :class:`Kernel`; else a clear error."""
        if not isinstance(kernel, Kernel):
            raise MonkError(f"Expected a Kernel (e.g. get_registry().get_kernel('rbf')); got {type(kernel).__name__}.")
        return kernel


@attrs.frozen(kw_only=True)
class MMDEstimator(Estimator):
    """An estimator of MMD(P, Q) from X ~ P and Y ~ Q."""

    estimates: ClassVar[str] = "mmd"

    #: whether the statistics of many relabellings are reductions of the pooled Gram source
    #: (the classical estimators' kernel sums): a test on a remote backend then spreads the
    #: tiles of those reductions over the workers instead of batches of relabellings
    spreads_gram: ClassVar[bool] = False
    #: the classical statistic the estimator computes, if any: "v-statistic" (MMD_V², the
    #: mean of the whole Gram blocks) or "u-statistic" (MMD_U², without the diagonals).
    #: Tests that are built on one of them find it by this role, never by name:
    #: ``robust_test`` takes the V-statistic for dcMMD (its sensitivity is derived for it)
    #: and the U-statistic by default inside the blocks of "mom".
    role: ClassVar[str | None] = None

    def estimate(
        self,
        kernel: Kernel,
        X: Any,
        Y: Any,
        *,
        rng: RNGLike = None,
        max_memory: Any = None,
        backend: Any = None,
        progress: Any = None,
    ) -> MMDResult:
        """Estimate MMD between the distributions of X and Y (N ≠ M allowed).

        ``max_memory`` (bytes, or e.g. ``"2GB"``) bounds the memory beyond the data
        (:mod:`monk_framework.core.resources`); over it the Gram matrices are used in tiles.
        ``backend`` (e.g. Dask, :mod:`monk_framework.engine.backends`) spreads the Gram reductions
        of this one estimate over its workers, tile by tile
        (:mod:`monk_framework.engine.spread`), with the numbers of the local tiled path.
        Both reach the engine in one :class:`~monk_framework.core.resources.Resources`,
        the last argument of :meth:`compute_estimate`, with ``progress``, a callback
        ``(done, total, what)`` told how long work advances (a tiled Gram reduction's
        bands, a MONK estimator's iterations).
        """
        resources = Resources.of(max_memory, backend, progress)
        kernel = self.check_kernel(kernel)
        view, Xv, Yv = kernel.mmd_view(X, Y)
        self.check_size(Xv, "X")
        self.check_size(Yv, "Y")
        stream, seed = generator(rng)
        start = time.perf_counter()
        fitted = view.fitted(Xv, Yv)
        fitted.check_contract(Xv, Yv)
        core = checked_estimate(self, fitted, Xv, Yv, stream, resources)
        total = time.perf_counter() - start
        return MMDResult(
            **computed_with(self, kernel, fitted, len(Xv), len(Yv), seed),
            mmd2=core.mmd2,
            mmd=core.mmd,
            timings={**core.timings, "total_s": total},
            diagnostics=core.diagnostics,
        )

    def compute_estimate(self, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
        """The estimator's core, on validated samples with a fitted kernel.

        ``resources`` is what the call lets the engine use (its memory budget, and a
        remote backend to spread over): pass it on to every function of
        :mod:`monk_framework.plugin` the core calls (``kernel_sums``, ``gram_matrix_of``,
        ``pooled_sample``, ...), which choose a stored, tiled or spread path from it. An
        estimator that calls none ignores it.
        """
        raise not_implemented(self, "compute_estimate")

    def permuted_statistics(self, pool: Pool, perms: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """MMD² estimates of relabellings of a pooled sample, one per row of ``perms``.

        Row b of ``perms`` is a permutation of 0..N+M−1 whose first N entries are the
        relabelled X (``pool.relabelled(perm)``, ``pool.relabelling(perm)``); ``rngs[b]`` drives the
        estimator's own randomness for that relabelling. The identity permutation gives
        the estimate on (X, Y) itself. ``perms`` may be read-only (an aggregated test's
        kernels read the same rows): read it, never write into it.

        This default re-runs the estimator's core on each relabelled pair: right for every
        estimator, at the price of its Gram matrices each time. Estimators override it
        to reuse ``pool``'s Gram matrix (the built-in ones all do).
        """
        out = np.empty(len(perms))
        for b, (perm, rng) in enumerate(zip(perms, rngs)):
            X, Y = pool.relabelled(perm)
            out[b] = self.compute_estimate(pool.kernel, X, Y, rng, pool.resources).mmd2
        return out

    def permutation_batch(self, pool: Pool) -> int:
        """How many relabellings :meth:`permuted_statistics` should get per call (memory-bounded)."""
        return 1

    # -- within-block relabelling (median-of-means estimators) -----------------------

    def fixed_partition(self, n: int, m: int, rng: np.random.Generator) -> Partition | None:
        """The partition that a within-block permutation test keeps fixed, or None.

        A median-of-means estimator returns its paired partition of X (n points) and Y
        (m points) into blocks, drawn from ``rng`` independently of the data; the test then
        relabels inside the blocks only (:mod:`monk_framework.engine.within_blocks`) and computes
        every statistic with :meth:`partition_statistics` on that partition. The default,
        None, says the estimator has no fixed blocks: its tests relabel the whole pooled
        sample. An estimator that chooses its blocks from the data (Lepski's
        ``n_blocks="auto"``) also returns None.
        """
        return None

    def partition_statistics(
        self,
        pool: Pool,
        partition: Partition,
        perms: np.ndarray,
        rngs: Sequence[np.random.Generator],
    ) -> np.ndarray:
        """MMD² estimates of relabellings, every one computed on the fixed ``partition``.

        ``partition`` is in pooled coordinates (block q is X[x_labels == q] and
        Y[y_labels == q]); row b of ``perms`` is a within-block relabelling (its first N
        entries are the relabelled X, each point still in its block), and the identity
        gives the observed statistic. Block reductions for this are in
        :mod:`monk_framework.plugin` (``within_block_sums``, ``block_means_gram``). Only called when :meth:`fixed_partition`
        returned a partition.
        """
        raise MonkError(f"Estimator {self.name!r} has no fixed-partition form; relabel globally instead.")

    def mmd2_from_sums(self, sums: SampleSums, n: int, m: int) -> np.ndarray | None:
        """MMD² from kernel sums (within X, within Y, across, the traces) of n and m points.

        Estimators whose statistic is such a function (the V- and U-statistics) return it,
        elementwise over the arrays in ``sums``; a robust median-of-means test then computes
        the statistic inside every block (:func:`monk_framework.two_sample.robust.robust_test`). The
        default None says the statistic is not a function of these sums.
        """
        return None


#: how far from 1 the weights of an estimator declaring ``affine_weights`` may sum
AFFINE_RTOL = 1e-9


@attrs.frozen(kw_only=True)
class EmbeddingEstimator(Estimator):
    """An estimator of the kernel mean embedding μ_P = E k(·, x) from X ~ P."""

    estimates: ClassVar[str] = "embedding"
    #: the weights always sum to 1 (an affine combination of the points, such as a
    #: geometric median), so they may be chosen on the sample moved to its median when the
    #: kernel's MMD ignores the origin (:meth:`Kernel.centred`), where they keep their digits
    affine_weights: ClassVar[bool] = False

    def embed(self, kernel: Kernel, X: Any, *, rng: RNGLike = None, max_memory: Any = None, progress: Any = None) -> Embedding:
        """Estimate the mean embedding of the distribution of X (``max_memory`` and
        ``progress``: as for :meth:`MMDEstimator.estimate`)."""
        resources = Resources.of(max_memory, progress=progress)
        kernel = self.check_kernel(kernel)
        Xv = kernel.check_sample(X)
        self.check_size(Xv, "X")
        stream, seed = generator(rng)
        start = time.perf_counter()
        fitted = kernel.fitted(Xv)
        fitted.check_contract(Xv)
        work = fitted.centred(Xv) if type(self).affine_weights else Xv
        with plugin_code(self, "compute_embedding"):
            core = self.compute_embedding(fitted, work, stream, resources)
        if not isinstance(core, EmbeddingWeights):
            raise PluginFailure(f"{self.plugin_label()}: compute_embedding returned {type(core).__name__}; it must return EmbeddingWeights(weights=...).")
        weights = _check_weights(self.plugin_label(), core.weights, len(Xv))
        check_json_data(self.plugin_label(), "compute_embedding", core.diagnostics, core.timings)
        total = time.perf_counter() - start
        embedding = Embedding(
            kernel=fitted,
            sample=Xv,
            weights=weights,
            estimator=self.name,
            estimator_params=self.params(),
            seed=seed,
            timings={**core.timings, "total_s": total},
            diagnostics=core.diagnostics,
        )
        if type(self).affine_weights:
            # weights chosen on the moved sample are the embedding of the sample as given
            # only if they sum to 1: a plugin that says so and does not would be silently off
            weight_sum = float(np.sum(embedding.weights))
            if not abs(weight_sum - 1.0) <= AFFINE_RTOL:
                raise PluginFailure(f"{self.plugin_label()}: declares affine_weights (weights summing to 1), but its weights sum to {weight_sum:.12g}.")
        return embedding

    def compute_embedding(self, kernel: Kernel, X: Sample, rng: np.random.Generator, resources: Resources) -> EmbeddingWeights:
        """The estimator's core, on a validated sample with a fitted kernel (``resources``:
        as for :meth:`MMDEstimator.compute_estimate`)."""
        raise not_implemented(self, "compute_embedding")


#: how far |MMD| may be from √|MMD²| (relative) in an estimator's answer: a root taken
#: in float32 (correctly rounded, 6e-8) passes, a different number does not
ROOT_RTOL = 1e-6


def checked_estimate(estimator: MMDEstimator, kernel: Kernel, X: Sample, Y: Sample, rng: np.random.Generator, resources: Resources) -> Estimate:
    """``estimator.compute_estimate(...)``, with its answer checked: an :class:`Estimate`
    with finite ``mmd2`` and ``mmd``, and ``mmd`` a root of ``mmd2``: √|MMD²|, or for a
    negative MMD² 0 or the signed root −√|MMD²| (MMD is a norm; the U-statistic's
    ``root="clip"`` and ``root="signed"``). Anything else, and any error the estimator's code raises, is a
    :class:`PluginFailure` naming the estimator, never a number passed on."""
    label = estimator.plugin_label()
    with plugin_code(estimator, "compute_estimate"):
        core = estimator.compute_estimate(kernel, X, Y, rng, resources)
    if not isinstance(core, Estimate):
        raise PluginFailure(f"{label}: compute_estimate returned {type(core).__name__}; it must return Estimate(mmd2=..., mmd=...).")
    mmd2, mmd = finite_real(core.mmd2), finite_real(core.mmd)
    if mmd2 is None or mmd is None:
        raise PluginFailure(f"{label}: compute_estimate returned mmd2={shown(core.mmd2)}, mmd={shown(core.mmd)}; both must be finite numbers.")
    if mmd < 0 and not (mmd2 < 0 and abs(-mmd - np.sqrt(-mmd2)) <= ROOT_RTOL * max(-mmd, 1e-300)):
        raise PluginFailure(
            f"{label}: compute_estimate returned MMD = {mmd:.6g} with MMD^2 = {mmd2:.6g}; MMD is a norm, so it "
            "can be negative only as the signed root -sqrt(|MMD^2|) of a negative MMD^2."
        )
    if mmd >= 0 and not (abs(mmd - np.sqrt(abs(mmd2))) <= ROOT_RTOL * max(mmd, 1e-300) or (mmd == 0 and mmd2 < 0)):
        # one number reported two ways: a table, a test's statistic and a results file
        # would otherwise disagree about it
        raise PluginFailure(
            f"{label}: compute_estimate returned MMD = {mmd:.6g} with MMD^2 = {mmd2:.6g}, whose root is "
            f"{np.sqrt(abs(mmd2)):.6g}; MMD must be the root of MMD^2 (or 0, or the signed root, for a negative MMD^2)."
        )
    check_json_data(label, "compute_estimate", core.diagnostics, core.timings)
    return attrs.evolve(core, mmd2=mmd2, mmd=mmd)


def _check_weights(label: str, weights: Any, n: int) -> np.ndarray:
    """An embedding estimator's weights as float64, checked before they become an
    embedding: one finite real number per sample point (a Fraction or a Decimal is read
    as its float), or a :class:`PluginFailure` naming the estimator (the sample is not
    what is wrong). Their sum is free: a shrinkage
    estimator's is below 1."""
    try:
        w = np.asarray(weights)
    except Exception:  # noqa: BLE001 - whatever it is, it is not weights
        w = np.asarray(None)
    if w.dtype.kind == "O" and w.ndim == 1:
        # exact numbers (Fraction, Decimal) are numbers, as an MMD estimate's are
        exact = [finite_real(v) for v in w]
        if all(v is not None for v in exact):
            w = np.array(exact, dtype=np.float64)
    what = None
    if w.dtype.kind not in "iuf":
        what = f"weights of dtype {w.dtype}" if w.dtype.kind != "O" else f"{shown(weights)} as weights"
    elif w.shape != (n,):
        what = f"weights of shape {w.shape}"
    elif not np.isfinite(w).all():
        bad = int(np.flatnonzero(~np.isfinite(w))[0])
        what = f"weight {float(w[bad])!r} for point {bad}"
    if what is not None:
        raise PluginFailure(f"{label}: compute_embedding returned {what}; it must return one finite real weight per sample point (shape ({n},)).")
    return np.array(w, dtype=np.float64)  # a copy: the plugin may keep its array, and change it


def check_json_data(label: str, method: str, diagnostics: Any, timings: Any) -> None:
    """An estimator's diagnostics and timings become part of every result file: refuse,
    naming the plugin and the key, what JSON cannot hold (a function, a set, an object)
    and any non-finite number (a results file never holds NaN)."""
    for what, value in (("diagnostics", diagnostics), ("timings", timings)):
        if not isinstance(value, Mapping):
            raise PluginFailure(f"{label}: {method} returned {what} of type {type(value).__name__}; they must be a dict.")
        for key, item in value.items():
            try:
                json.dumps(jsonable(item), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise PluginFailure(
                    f"{label}: {method} returned {what}[{key!r}] = {shown(item)}, which a results file cannot hold "
                    f"({exc}); give JSON data: numbers (finite), strings, lists, dicts."
                ) from None
