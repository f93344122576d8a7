"""Everything a kernel or estimator plugin needs, in one module.

A plugin imports from two places only: the public top level (``monk_framework``: the
interfaces :class:`Kernel`, :class:`MMDEstimator`, :class:`EmbeddingEstimator`, the
results, the errors, :func:`hookimpl` and :func:`parameter`) and this module, the
mathematics it may ask the engine for. How the engine computes it (a stored Gram matrix
or tiles evaluated on the fly, threads or Dask workers, the sizes of tiles and batches)
is the engine's choice within the call's memory budget: a plugin never chooses.

The groups below are documented where they are defined; ``docs/plugins.md`` shows
them at work.

**Parameters and randomness.** :func:`parameter` (top level) declares a hyperparameter
with one of the checks :func:`real`, :func:`integer`, :func:`boolean`, :func:`one_of`,
:func:`real_or`, :func:`integer_or`. An estimator's core receives a
``numpy.random.Generator`` drawn from the call's seed; :class:`ChildStreams` gives
independent children for independent parts.

**Samples and resources.** :data:`Sample` (a validated float64 array or a list of
strings), :func:`take` (points by index, for either kind), :func:`pooled` ([X; Y]),
:class:`Resources` (what the call lets the engine use: pass it on), and the two
refusals before allocation: :func:`reserve_memory`, of what a user's number (D features,
L pairs) would need beyond the memory available, and :func:`reserve_budget`, of what a
computation would keep (an iteration trace) beyond the call's memory budget;
:func:`table_room` is what tables built to go faster may take, and :func:`chunk_rows` how
many rows one band, tile or block of a kind of work holds (the engine's one rule).

**Gram matrices.** :func:`gram_matrix_of` gives the :class:`GramMatrix` of a sample
(row sums, products, quadratic forms, block Gram matrices, columns), and
:func:`pooled_sample` the :class:`Pool` of two samples (its Gram matrix, diagonal and
row sums, and :meth:`Pool.relabelling`, a relabelling's view of it); a test hands its
estimator a :class:`Pool`.

**Classical sums.** :func:`kernel_sums` (Σk within X, within Y, across, the traces,
of two samples), :func:`sample_sums` (the same for every relabelling of a pool, B per
product with the Gram matrix), :func:`relabelling_batch`, :func:`v_statistic` and
:func:`u_statistic` from either; the U-statistic's guard against sums that lose digits
to a dominant diagonal (:func:`loses_to_diagonal`, :func:`off_diagonal_sample_sums`,
:func:`far_point_sample_sums`, :func:`warn_lost_to_diagonal`).

**Blocks.** :class:`Partition`, :func:`pair_partition`, :func:`random_partition`, the
median convention (:func:`median_value`, :func:`median_block`, :func:`median_position`,
:func:`majority`), :func:`check_n_blocks`, :func:`blocks_min_sample_size`, Lepski's
choice of Q (:func:`choose_n_blocks`), and the block reductions:
:func:`paired_block_sums`, :func:`within_block_sums`, :func:`block_means_gram`,
:func:`pooled_block_means_gram`, :func:`kept_blocks_mmd2`,
:func:`block_trace_variances`.

**Kernels on vectors.** Distances that keep their digits at any magnitude
(:func:`squared_distances`, :func:`distances`, :func:`scaled_distances`,
:func:`scaled_l1_distances`, :func:`exp_scaled_squared_distances`, :func:`row_norms`,
:func:`homogeneous_pairwise`, :func:`magnitude`, :func:`power_of_two`), the median
heuristic (:func:`median_distance`), and the RBF kernel's compiled block form
(:func:`exp_squared_distance_form`). :data:`VALUE_LIMIT` is the largest kernel value
the library sums.

**Compiled loops.** :class:`CompiledLoops` compiles a plugin's loops with numba on first
use and keeps each one's plain-Python twin, with the library's switch
(``MONK_COMPILED=0``, :func:`~monk_framework.set_compiled`) and one warning where
compilation is impossible; :data:`NOT_RUN`, :func:`compiled_available`,
:func:`compiled_threads` (numba's own threads, for a plugin's ``prange`` loop).
:data:`BandRunner` is what a kernel's own ``symmetric_gram`` receives to run its bands;
without one, it asks the engine to run them on the machine's cores
(:func:`run_on_cores`, :func:`band_cores` of them side by side), or in turn
(:func:`in_turn`). A compiled loop runs on one thread (``nogil=True``): the engine, not
the loop, spreads the bands.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from monk_framework.core.kernels import VALUE_LIMIT, BandRunner, Kernel, in_turn
from monk_framework.core.params import boolean, integer, integer_or, one_of, real, real_or
from monk_framework.core.protocols import GramMatrix, Pool
from monk_framework.core.randomness import ChildStreams
from monk_framework.core.resources import Resources
from monk_framework.core.samples import Sample, take
from monk_framework.engine import pooled as _pooled
from monk_framework.engine import within_blocks as _within
from monk_framework.engine.gram_sources import gram_source
from monk_framework.engine.kernel_values import band_cores
from monk_framework.engine.kernel_values import on_cores as run_on_cores
from monk_framework.engine.lepski import choose_n_blocks
from monk_framework.engine.median_heuristic import median_distance
from monk_framework.engine.memory import chunk_rows, reserve_budget, reserve_memory, table_room
from monk_framework.engine.partitions import (
    Partition,
    blocks_min_sample_size,
    check_n_blocks,
    majority,
    median_block,
    median_position,
    median_value,
    pair_partition,
    random_partition,
)
from monk_framework.engine.pooled import PooledSample, SampleSums, pooled, v_statistic
from monk_framework.engine.reductions import (
    DIAGONAL_ROUND_OFF_LIMIT,
    EXACT_ESTIMATE_POINTS,
    EXACT_TEST_POINTS,
    SPLIT_MAX_POINTS,
    KernelSums,
    block_trace_variances,
    kernel_sums,
    loses_to_diagonal,
    u_statistic,
    warn_lost_to_diagonal,
)
from monk_framework.numerics.compiled import NOT_RUN, CompiledLoops, compiled_available, compiled_threads
from monk_framework.numerics.distances import (
    distances,
    exp_scaled_squared_distances,
    homogeneous_pairwise,
    magnitude,
    power_of_two,
    row_norms,
    scaled_distances,
    scaled_l1_distances,
    squared_distances,
)
from monk_framework.numerics.exp_loops import exp_squared_distance_form

__all__ = [
    "DIAGONAL_ROUND_OFF_LIMIT",
    "EXACT_ESTIMATE_POINTS",
    "EXACT_TEST_POINTS",
    "NOT_RUN",
    "SPLIT_MAX_POINTS",
    "VALUE_LIMIT",
    "BandRunner",
    "ChildStreams",
    "CompiledLoops",
    "GramMatrix",
    "KernelSums",
    "Partition",
    "Pool",
    "Resources",
    "Sample",
    "SampleSums",
    "band_cores",
    "block_means_gram",
    "block_trace_variances",
    "blocks_min_sample_size",
    "boolean",
    "check_n_blocks",
    "choose_n_blocks",
    "compiled_available",
    "compiled_threads",
    "distances",
    "exp_scaled_squared_distances",
    "chunk_rows",
    "exp_squared_distance_form",
    "far_point_sample_sums",
    "gram_matrix_of",
    "homogeneous_pairwise",
    "in_turn",
    "integer",
    "integer_or",
    "kept_blocks_mmd2",
    "kernel_sums",
    "loses_to_diagonal",
    "magnitude",
    "majority",
    "median_block",
    "median_distance",
    "median_position",
    "median_value",
    "off_diagonal_sample_sums",
    "one_of",
    "pair_partition",
    "paired_block_sums",
    "pooled",
    "pooled_block_means_gram",
    "pooled_sample",
    "power_of_two",
    "random_partition",
    "real",
    "real_or",
    "relabelling_batch",
    "reserve_budget",
    "reserve_memory",
    "row_norms",
    "run_on_cores",
    "sample_sums",
    "scaled_distances",
    "scaled_l1_distances",
    "squared_distances",
    "table_room",
    "take",
    "u_statistic",
    "v_statistic",
    "warn_lost_to_diagonal",
    "within_block_sums",
]


def gram_matrix_of(kernel: Kernel, Z: Sample, *, resources: Resources) -> GramMatrix:
    """The Gram matrix K_ij = k(z_i, z_j) of a validated sample Z, for a fitted kernel.

    The engine stores K when it fits in the budget of ``resources``, and otherwise
    evaluates it tile by tile at every reduction (from the kernel's explicit features
    where they pay, on Dask workers when ``resources`` spreads over them); the answers
    are the same to round-off, and ``storage`` says which way was taken.
    """
    return gram_source(kernel, Z, resources=resources)


def pooled_sample(kernel: Kernel, X: Sample, Y: Sample, *, resources: Resources) -> Pool:
    """The :class:`Pool` of two validated samples with a fitted kernel: Z = [X; Y], its
    Gram matrix, diagonal and row sums, each computed once, on first use. The kernel
    contract is checked on the pooled points first, as for every test."""
    pool: Any = PooledSample(kernel, X, Y, resources=resources)
    return pool


def _engine_pool(pool: Pool) -> PooledSample:
    """The engine's pool behind the protocol (what :func:`pooled_sample` made, or a test
    handed the estimator), else a clear error."""
    if not isinstance(pool, PooledSample):
        raise TypeError(
            f"Expected a pool made by the engine (monk_framework.plugin.pooled_sample, or the one a test hands its estimator); got {type(pool).__name__}."
        )
    return pool


def sample_sums(pool: Pool, perms: np.ndarray) -> SampleSums:
    """The kernel sums within X, within Y, across, and the two traces, of every relabelling
    in ``perms`` (B × (N + M), its first N entries the relabelled X): with E the 0/1
    indicators of the relabelled X, S_xx = diag(EᵀKE), S_x1 = EᵀK1, S_xy = S_x1 − S_xx,
    S_yy = 1ᵀK1 − S_x1 − S_xy, in a few products with the pooled Gram matrix."""
    return _pooled.sample_sums(_engine_pool(pool), perms)


def relabelling_batch(pool: Pool) -> int:
    """How many relabellings one product with the pool's Gram matrix should take (its
    :meth:`~monk_framework.core.estimators.MMDEstimator.permutation_batch`), within the budget."""
    return _pooled.relabelling_batch(_engine_pool(pool))


def off_diagonal_sample_sums(pool: Pool, perms: np.ndarray) -> SampleSums:
    """:func:`sample_sums` with the sums within X and within Y added up without the
    diagonal k(z, z) (``xx_off``, ``yy_off``): exact where the diagonal dwarfs the values
    between points, at about twice the cost."""
    return _pooled.off_diagonal_sample_sums(_engine_pool(pool), perms)


def far_point_sample_sums(pool: Pool, perms: np.ndarray, h: int) -> tuple[SampleSums, np.ndarray]:
    """:func:`off_diagonal_sample_sums` for a pool read through the kernel's features, with
    the h points of largest k(z, z) taken apart, and each relabelling's bound on the
    round-off of the rest (compare it with |MMD_U²|)."""
    return _pooled.far_point_sample_sums(_engine_pool(pool), perms, h)


def within_block_sums(pool: Pool, partition: Partition, perms: np.ndarray) -> SampleSums:
    """Per-block kernel sums of every within-block relabelling (arrays B × Q), from the Q
    within-block Gram matrices only ((N + M)²/Q kernel values, once per test)."""
    return _within.within_block_sums(_engine_pool(pool), partition, perms)


def block_means_gram(pool: Pool, partition: Partition, perms: np.ndarray) -> np.ndarray:
    """The B × 2Q × 2Q Gram matrices ⟨μ_{S_q}, μ_{S_r}⟩, ⟨μ_{S_q}, μ_{T_r}⟩, ⟨μ_{T_q}, μ_{T_r}⟩
    of the block-part means of every relabelling (X's blocks first)."""
    return _within.block_means_gram(_engine_pool(pool), partition, perms)


def pooled_block_means_gram(pool: Pool, partition: Partition) -> np.ndarray:
    """The Q × Q Gram matrix of the pooled block means p_q (all of block q's points),
    which no within-block relabelling changes."""
    return _within.pooled_block_means_gram(_engine_pool(pool), partition)


def kept_blocks_mmd2(pool: Pool, partition: Partition, keep: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """‖(1/k) Σ_{q∈K} (μ_{S_q} − μ_{T_q})‖² over the kept blocks K = ``keep``, for every relabelling."""
    return _within.kept_blocks_mmd2(_engine_pool(pool), partition, keep, perms)


def paired_block_sums(pool: Pool, partitions: list[Partition]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(A_q, B_q, C_q) = (Σ k over S_q×S_q, over T_q×T_q, over S_q×T_q) of every block of
    each paired partition of the pool's two samples: from each block's own Gram matrix
    (N²/Q-order kernel values), or, on a relabelling of a stored pooled Gram matrix, one
    product for every partition."""
    return _within.paired_block_sums(_engine_pool(pool), partitions)
