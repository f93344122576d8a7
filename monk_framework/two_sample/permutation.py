"""The permutation test for any MMD estimator, and what every two-sample test shares.

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

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import MonkError, ParameterError, ResourceError
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.randomness import ChildStreams, RNGLike, child, root, seed_of, stream
from monk_framework.core.registry import get_registry
from monk_framework.core.resources import available_memory, budgeted, format_bytes, spread_over
from monk_framework.core.results import (
    Result,
    count,
    dict_field,
    finite,
    flag,
    level,
    null_field,
    optional_count,
    optional_finite,
    optional_float,
    pvalue_range,
    seed_field,
    text,
    timings_field,
)
from monk_framework.engine.backends import Backend, LocalBackend, on_this_thread
from monk_framework.engine.backends import one_blas_thread as _one_blas_thread
from monk_framework.engine.partitions import Partition
from monk_framework.engine.pooled import PooledSample, batch_size
from monk_framework.engine.within_blocks import DRAW_CHUNK, relabellings

__all__ = [
    "RELABEL",
    "GlobalRelabellings",
    "PermutationTestResult",
    "TestResult",
    "critical_rank",
    "exceedances",
    "permutation_test",
    "signed_root",
]

#: how a permutation test relabels: "auto" (within blocks for estimators with a fixed
#: partition, else globally), "within-blocks" or "global".
RELABEL = ("auto", "within-blocks", "global")

#: a callback told (relabellings done, relabellings in all) as the null sample grows.
Progress = Callable[[int, int], None]
#: gram(kernel, ix, iy): the Gram matrix of [X[ix]; Y[iy]] (precomputed Gram matrices).
GramOf = Callable[[Kernel, np.ndarray, np.ndarray], np.ndarray]


def signed_root(mmd2: Any) -> Any:
    """sign(MMD²)·√|MMD²|: the test statistic on the MMD scale (monotone in MMD²)."""
    return np.sign(mmd2) * np.sqrt(np.abs(mmd2))


def critical_rank(n_permutations: int, alpha: float) -> int:
    """k = ⌊α(B + 1)⌋ − 1: the test rejects when at most k null values are ≥ T (−1: never)."""
    # the tolerance keeps e.g. 0.05 · 1000 = 50.000000000000007 or 0.29 · 100 at their exact value
    return int(math.floor(alpha * (n_permutations + 1) + 1e-9)) - 1


#: relabelled statistics within this relative distance of T count as ties, T_b ≥ T: a tie
#: in exact arithmetic (a relabelling that repeats X's set, or Y's when N = M, or rounded
#: data) then counts whatever the order of the additions (stored, matrix-free, tiles on
#: workers), and the p-value never depends on round-off. Round-off moves T by about
#: 1e-13 relative (it was 8e-11 at most in a 300-test comparison of two summation
#: orders); a real difference below 1e-9 of T means nothing statistically.
TIE_RTOL = 1e-9


def exceedances(null: np.ndarray, threshold: float, axis: int | None = None) -> Any:
    """#{b : T_b ≥ threshold}, ties up to :data:`TIE_RTOL` of |threshold| included."""
    return np.count_nonzero(null >= threshold - TIE_RTOL * abs(threshold), axis=axis)


def null_quantile(null: np.ndarray, alpha: float) -> float | None:
    """q̂ = T_(B−k): T > q̂ exactly when the p-value is at most α (None when it never is)."""
    k = critical_rank(len(null), alpha)
    if k < 0:
        return None
    return float(np.sort(null)[len(null) - 1 - k])


def resolve(kernel: Any, estimator: Any) -> tuple[Any, Any]:
    """A kernel and an estimator as given, or looked up by spec (``"rbf:sigma=2"``,
    ``"monk-bcd:n_blocks=21"``) in the registry of installed plugins."""
    if isinstance(kernel, str) or isinstance(estimator, str):
        reg = get_registry()
        return reg.resolve_kernel(kernel), (estimator if estimator is None else reg.resolve_estimator(estimator))
    return kernel, estimator


def check_test_params(estimator: Any, n_permutations: Any, alpha: Any) -> MMDEstimator:
    if not isinstance(estimator, MMDEstimator):
        raise MonkError(
            f"A two-sample test needs an MMD estimator (e.g. get_registry().get_estimator('u-stat')); "
            f"got {getattr(estimator, 'name', type(estimator).__name__)!r}."
        )
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, (int, np.integer)) or n_permutations < 1:
        raise ParameterError(f"n_permutations must be an int >= 1; got {n_permutations!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ParameterError(f"alpha must be a number in (0, 1); got {alpha!r}.")
    return estimator


#: bytes per relabelling that a test holds at once: its statistic, its signed root and a
#: comparison (float64 each, with room for temporaries)
NULL_BYTES_PER_PERMUTATION = 32
#: bytes per relabelling of the null returned as a list (``return_null``): a Python float
NULL_LIST_BYTES = 32


def check_null_memory(n_permutations: int, *, pool_size: int = 0, all_drawn: bool = False, listed: bool = False) -> None:
    """Refuse, before anything is allocated, a number of relabellings whose null
    distribution cannot fit in memory (with the figures in the message).

    ``all_drawn``: every relabelling (``pool_size`` indices each) is drawn before the
    work starts, as for a remote backend; ``listed``: the null is returned as a list.
    """
    need = n_permutations * (NULL_BYTES_PER_PERMUTATION + (NULL_LIST_BYTES if listed else 0))
    if all_drawn:
        need += 8 * n_permutations * pool_size
    avail = available_memory()
    if avail is not None and need > 0.5 * avail:
        raise ResourceError(
            f"n_permutations (-B) = {n_permutations:,} needs about {format_bytes(need)} for the null distribution"
            f"{' and its relabellings, all drawn up front for the backend' if all_drawn else ''}, but only "
            f"{format_bytes(avail)} of memory are available. Use fewer permutations: the p-value's resolution is "
            "1/(B + 1), so B = 100,000 already resolves 1e-5."
        )


class GlobalRelabellings:
    """The relabellings of the whole pooled sample of a test, in order, from the stream
    ``child(seq, 0)`` of its null stream ``seq``: relabelling b is what the b-th call of
    ``rng.permutation(size)`` gives, however the rows are asked for in batches.

    :meth:`draw_ahead` starts drawing the first rows in a background thread, so that
    they are drawn while the kernel is fitted and the pooled Gram matrix computed, steps
    that mostly run on one core (their numpy passes release the GIL, so the two threads
    run together: measured). The rows, and so every p-value, are the same with or
    without it.
    """

    def __init__(self, seq: np.random.SeedSequence, size: int):
        self.size = size
        self._rng = np.random.default_rng(child(seq, 0))
        self._next = 0  # the first relabelling not handed out yet
        self._thread: threading.Thread | None = None
        self._held = contextlib.ExitStack()  # one BLAS thread and no pool while drawing ahead
        self._drawn: list[Any] = []  # what the thread left: [rows] or [exception]
        self._ahead: np.ndarray | None = None  # rows drawn ahead and not handed out yet
        self._ahead_lead = 0  # identity rows in front of them
        self._ahead_next = 0  # the first of them not handed out

    def _fresh(self, rows: np.ndarray) -> None:
        """Draw each row of ``rows`` (in place) as a permutation of 0..size−1."""
        rows[...] = np.arange(self.size)
        self._rng.permuted(rows, axis=1, out=rows)

    def _draw(self, count: int, lead: int) -> np.ndarray:
        rows = np.empty((lead + count, self.size), dtype=np.int64)
        rows[:lead] = np.arange(self.size)
        self._fresh(rows[lead:])
        return rows

    def draw_ahead(self, count: int, lead: int = 0, *, one_blas_thread: bool = False) -> None:
        """Start drawing relabellings 0..count in a background thread (after ``lead``
        identity rows, as the first :meth:`rows` call will ask for them).

        ``one_blas_thread``: until the rows are collected, BLAS runs on one thread and
        the library's row bands stay on this thread (:func:`on_this_thread`), so that
        the draw has the other core. OpenBLAS's idle threads spin for a while after each
        parallel call and would take that core (measured: the overlap then gains
        nothing); only worth it when the products meanwhile are small. The rows are
        collected, and :meth:`close` called, on the thread that called this.
        """
        if self._thread is not None or self._next:
            raise RuntimeError("draw_ahead must come before any relabelling is drawn, and only once.")
        self._ahead_lead = lead

        def work() -> None:
            try:
                self._drawn[:] = [self._draw(count, lead)]
            except BaseException as exc:  # e.g. a MemoryError: raised where the rows are asked for
                self._drawn[:] = [exc]

        if one_blas_thread:
            self._held.enter_context(_one_blas_thread())
            self._held.enter_context(on_this_thread())
        self._thread = threading.Thread(target=work, name="monkfw-relabellings", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a draw ahead and give BLAS its threads back (idempotent)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._held.close()

    def _collect(self) -> None:
        if self._thread is None:
            return
        self.close()
        drawn, self._drawn = self._drawn, []
        if isinstance(drawn[0], BaseException):
            raise drawn[0]
        self._ahead = drawn[0]

    def rows(self, a: int, b: int, lead: int = 0) -> np.ndarray:
        """Relabellings a..b (rows of indices), after ``lead`` identity rows; each call
        starts where the previous one stopped."""
        if a != self._next or b < a:
            raise RuntimeError(f"Relabellings are drawn in order: asked for {a}..{b} after {self._next}.")
        self._next = b
        self._collect()
        ahead = self._ahead
        if ahead is None:
            return self._draw(b - a, lead)
        first = self._ahead_lead + self._ahead_next
        have = len(ahead) - first
        served = min(b - a, have)
        if first == lead and served == b - a:
            out = ahead[: lead + served]  # the first batch, as drawn ahead: no copy
        else:
            out = np.empty((lead + b - a, self.size), dtype=np.int64)
            out[:lead] = np.arange(self.size)
            out[lead : lead + served] = ahead[first : first + served]
            self._fresh(out[lead + served :])
        self._ahead_next += served
        if served == have:
            self._ahead = None
        return out


#: while the first relabellings are drawn ahead, BLAS runs on one thread and the row
#: bands of the fit and the Gram matrix on this thread when the data have at most this
#: many features: their distance products gain little from a second thread (measured at
#: N + M = 2000 and 10 000: within 5 % up to d = 30, 20-25 % slower at d = 100), and the
#: draw gets the other core; with more, the bands use every core (kernels.on_cores)
DRAW_AHEAD_MAX_FEATURES = 32


def _few_features(X: Any) -> bool:
    """Whether the pooled Gram matrix of this sample is cheap in BLAS: strings, or vectors
    with at most DRAW_AHEAD_MAX_FEATURES features."""
    return not isinstance(X, np.ndarray) or X.ndim < 2 or X.shape[1] <= DRAW_AHEAD_MAX_FEATURES


def null_statistics(
    estimator: MMDEstimator,
    pool: PooledSample,
    n_permutations: int,
    seq: np.random.SeedSequence,
    progress: Progress | None,
    backend: Backend | None = None,
    partition: Partition | None = None,
    observed: np.random.SeedSequence | None = None,
    drawn: GlobalRelabellings | None = None,
) -> np.ndarray:
    """T_1..T_B of B random relabellings of ``pool`` (mmd2 values), batch by batch.

    With ``observed`` (the estimate stream) and global relabelling in this process, the
    identity relabelling is computed with the first batch, from the same pass over the
    Gram matrix (a matrix-free one is then evaluated once), and returned first: B + 1
    values, T then T_1..T_B.

    With a ``partition`` the relabellings permute labels within its blocks and the
    estimator computes every statistic on it (:meth:`MMDEstimator.partition_statistics`);
    without, they permute the whole pooled sample. The relabellings are drawn here, in
    order, from one stream; relabelling b's own randomness is stream b. So a batch
    computes the same values wherever it runs, and a ``backend`` (e.g. Dask) may run the
    batches anywhere, in any order. ``drawn``: the global relabellings of ``seq``,
    when the caller has started drawing them ahead (:class:`GlobalRelabellings`).
    """
    remote = backend is not None and not isinstance(backend, LocalBackend)
    check_null_memory(n_permutations, pool_size=pool.size, all_drawn=remote)
    # the children seq.spawn(2) gives on a fresh sequence, whoever asked for them before
    perm_seq, est_seq = child(seq, 0), child(seq, 1)
    globally = drawn if drawn is not None else GlobalRelabellings(seq, pool.size)
    if partition is None:
        step = max(1, int(estimator.permutation_batch(pool)))
    else:
        step = within_block_batch(pool, n_permutations)

    def draw(a: int, b: int, lead: int = 0) -> np.ndarray:
        """Relabellings a..b, after ``lead`` identity rows (global relabelling only)."""
        if partition is not None:
            return relabellings(partition, pool.n, a, b, perm_seq)
        return globally.rows(a, b, lead)

    out = np.empty(n_permutations)
    if progress is not None:
        progress(0, n_permutations)
    if not remote:
        first: float | None = None
        # drawn batch by batch: memory stays at one batch of permutations
        for done in range(0, n_permutations, step):
            stop = min(done + step, n_permutations)
            if done == 0 and observed is not None and partition is None:
                streams = ChildStreams(est_seq, done, stop, first=observed)
                values = estimator.permuted_statistics(pool, draw(done, stop, lead=1), streams)
                first, out[done:stop] = float(values[0]), values[1:]
            else:
                out[done:stop] = _batch_statistics((estimator, draw(done, stop), est_seq, done, stop, partition), pool)
            if progress is not None:
                progress(stop, n_permutations)
        if observed is not None:
            return np.concatenate([[observed_mmd2(estimator, pool, observed, partition) if first is None else first], out])
        return out
    assert backend is not None  # remote
    bounds = [(a, min(a + step, n_permutations)) for a in range(0, n_permutations, step)]
    tasks = [(estimator, draw(a, b), est_seq, a, b, partition) for a, b in bounds]
    finished = 0
    for i, values in backend.as_completed(_batch_statistics, tasks, pool):
        a, b = bounds[i]
        out[a:b] = values
        finished += b - a
        if progress is not None:
            progress(finished, n_permutations)
    if observed is not None:
        return np.concatenate([[observed_mmd2(estimator, pool, observed, partition)], out])
    return out


def within_block_batch(pool: PooledSample, n_permutations: int) -> int:
    """Relabellings per batch of a within-block test: whole draw chunks, about ten batches
    (so a progress bar moves), at most what ``BATCH_BYTES`` allows."""
    tenth = -(-n_permutations // 10)
    chunks = max(1, min(batch_size(pool.size), tenth) // DRAW_CHUNK)
    return chunks * DRAW_CHUNK


def _batch_statistics(task: tuple[Any, ...], pool: PooledSample) -> np.ndarray:
    """One batch of relabellings on a backend's worker (module level: it is pickled)."""
    estimator, perms, est_seq, a, b, partition = task
    if partition is not None:
        return estimator.partition_statistics(pool, partition, perms, ChildStreams(est_seq, a, b))
    return estimator.permuted_statistics(pool, perms, ChildStreams(est_seq, a, b))


def observed_mmd2(
    estimator: MMDEstimator, pool: PooledSample, seq: np.random.SeedSequence, partition: Partition | None = None
) -> float:
    """T on the samples as given: the identity relabelling, computed like the null values."""
    identity = np.arange(pool.size)[None, :]
    streams = [np.random.default_rng(seq)]
    if partition is not None:
        return float(estimator.partition_statistics(pool, partition, identity, streams)[0])
    return float(estimator.permuted_statistics(pool, identity, streams)[0])


def check_relabel(estimator: MMDEstimator, relabel: str) -> None:
    """Refuse an unknown ``relabel``, or "within-blocks" for an estimator without fixed blocks."""
    if relabel not in RELABEL:
        raise ParameterError(f"relabel must be one of {', '.join(map(repr, RELABEL))}; got {relabel!r}.")
    has_blocks = type(estimator).fixed_partition is not MMDEstimator.fixed_partition
    if relabel == "within-blocks" and (not has_blocks or getattr(estimator, "n_blocks", None) == "auto"):
        _no_fixed_partition(estimator)


def _no_fixed_partition(estimator: MMDEstimator) -> None:
    raise ParameterError(
        f"relabel='within-blocks' needs an estimator with a fixed partition into blocks; "
        f"{estimator.spec()} has none (a classical estimator, or n_blocks='auto', which chooses "
        "Q from the data). Give n_blocks a number, or use relabel='global'."
    )


def choose_partition(
    estimator: MMDEstimator, relabel: str, n: int, m: int, seq: np.random.SeedSequence
) -> Partition | None:
    """The fixed partition of a within-block test, or None for global relabelling."""
    check_relabel(estimator, relabel)
    if relabel == "global":
        return None
    partition = estimator.fixed_partition(n, m, np.random.default_rng(seq))
    if partition is None and relabel == "within-blocks":
        _no_fixed_partition(estimator)
    return partition


@attrs.frozen(kw_only=True)
class TestResult(Result):
    """What every two-sample test result shares, in scipy.stats' names: ``statistic``,
    ``pvalue``, ``null_distribution`` (the relabelled statistics, an array, when kept),
    ``alternative`` ("greater": large MMD speaks against H₀), and unpacking as
    ``statistic, pvalue = result``. ``reject == (pvalue <= alpha)``."""

    derived: ClassVar[tuple[str, ...]] = ("decision",)

    if TYPE_CHECKING:  # fields every subclass declares (attrs fields of the subclasses)
        statistic: float
        pvalue: float
        null_distribution: np.ndarray | None
        alpha: float
        reject: bool
        kernel: str
        kernel_params: dict[str, Any]
        timings: dict[str, float]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.statistic, self.pvalue))

    @property
    def decision(self) -> str:
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class PermutationTestResult(TestResult):
    """The outcome of a permutation two-sample test of H₀: P = Q.

    ``statistic`` is T = sign(MMD²)√|MMD²| of the estimator on (X, Y);
    ``null_distribution`` (kept on request) holds the B values on relabellings;
    ``null_quantile`` is q̂ with ``reject == (statistic > null_quantile) == (pvalue <= alpha)``.
    ``relabel`` says how the relabellings were drawn ("global" or "within-blocks"),
    ``n_blocks`` the number of blocks of a within-block test's partition.
    """

    kind: ClassVar[str] = "permutation-test"

    estimator: str = attrs.field(validator=text)
    estimator_params: dict[str, Any] = dict_field()
    kernel: str = attrs.field(validator=text)
    kernel_params: dict[str, Any] = dict_field()
    kernel_params_requested: dict[str, Any] = dict_field()
    statistic: float = attrs.field(converter=float, validator=finite)
    statistic_mmd2: float = attrs.field(converter=float, validator=finite)
    pvalue: float = attrs.field(converter=float, validator=pvalue_range)
    null_quantile: float | None = attrs.field(converter=optional_float, validator=optional_finite)
    alpha: float = attrs.field(converter=float, validator=level)
    reject: bool = attrs.field(validator=flag)
    n_permutations: int = attrs.field(converter=int, validator=count)
    n_x: int = attrs.field(converter=int, validator=count)
    n_y: int = attrs.field(converter=int, validator=count)
    seed: Any = seed_field()
    null_distribution: np.ndarray | None = null_field()
    timings: dict[str, float] = timings_field()
    relabel: str = attrs.field(default="global", validator=attrs.validators.in_(("global", "within-blocks")))
    n_blocks: int | None = attrs.field(default=None, validator=optional_count)
    #: a within-block test's estimator MMD estimate with the same seed (``report_estimate=True``)
    estimate: float | None = attrs.field(default=None, converter=optional_float, validator=optional_finite)
    alternative: str = attrs.field(default="greater", validator=attrs.validators.in_(("greater",)))

    @property
    def decision(self) -> str:
        """The decision in words."""
        if self.reject:
            return (
                f"Reject H0 (same distribution) at level {self.alpha:g}: p = {self.pvalue:.4g} <= {self.alpha:g}; "
                f"the statistic {self.statistic:.6g} exceeds the null quantile {self.null_quantile:.6g}."
            )
        if self.null_quantile is None:
            return (
                f"Cannot reject at level {self.alpha:g} with {self.n_permutations} permutations: the smallest "
                f"attainable p-value is 1/{self.n_permutations + 1}; use at least {math.ceil(1 / self.alpha) - 1}."
            )
        return (
            f"No evidence of a difference at level {self.alpha:g}: p = {self.pvalue:.4g} > {self.alpha:g} "
            f"(statistic {self.statistic:.6g}, null quantile {self.null_quantile:.6g})."
        )


@budgeted
def permutation_test(
    kernel: Kernel,
    estimator: MMDEstimator,
    X: Any,
    Y: Any,
    *,
    n_permutations: int = 1000,
    alpha: float = 0.05,
    rng: RNGLike = None,
    return_null: bool = False,
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
    kernel, estimator = resolve(kernel, estimator)
    estimator = check_test_params(estimator, n_permutations, alpha)
    kernel = estimator.check_kernel(kernel)
    Xv, Yv = kernel.check_pair(X, Y)
    estimator.check_size(Xv, "X")
    estimator.check_size(Yv, "Y")
    # before any kernel evaluation: a B that cannot fit is refused at once
    check_null_memory(int(n_permutations), pool_size=len(Xv) + len(Yv),
                      all_drawn=backend is not None and not isinstance(backend, LocalBackend), listed=bool(return_null))
    seq = root(rng)
    seed = seed_of(seq)
    partition = choose_partition(estimator, relabel, len(Xv), len(Yv), stream(seq, "partition"))
    # one large job on a remote backend: the tiles of the Gram reductions go to the
    # workers (classical statistics); otherwise the batches of relabellings do
    spread = backend is not None and not isinstance(backend, LocalBackend) and estimator.spreads_gram
    relabel_seq = stream(seq, "relabel")
    drawn = None
    if partition is None and (spread or backend is None or isinstance(backend, LocalBackend)):
        # the first batch of relabellings (a stored Gram matrix's batch, at most) is drawn
        # while the kernel is fitted and the Gram matrix computed
        size = len(Xv) + len(Yv)
        drawn = GlobalRelabellings(relabel_seq, size)
        drawn.draw_ahead(min(int(n_permutations), batch_size(size)), lead=1, one_blas_thread=_few_features(Xv))
    try:
        fitted = kernel if gram is not None else kernel.fit(Xv, Yv)
        with spread_over(backend if spread and partition is None and gram is None else None) as spreading:
            pool = PooledSample(fitted, Xv, Yv, gram=gram)
            tick = time.perf_counter()
            # T with the first batch of relabellings (one pass over a matrix-free Gram matrix)
            values = null_statistics(estimator, pool, int(n_permutations), relabel_seq, progress,
                                     None if spreading is not None else backend, partition, observed=stream(seq, "estimate"),
                                     drawn=drawn)
            mmd2, null2 = float(values[0]), values[1:]
            null_s = time.perf_counter() - tick
    finally:
        if drawn is not None:  # on any error too: BLAS gets its threads back
            drawn.close()
    T, null = float(signed_root(mmd2)), signed_root(null2)
    exceed = int(exceedances(null, T))
    q = null_quantile(null, alpha)
    return PermutationTestResult(
        estimator=estimator.name,
        estimator_params=estimator.params(),
        kernel=kernel.name,
        kernel_params=fitted.params(),
        kernel_params_requested=kernel.params(),
        statistic=T,
        statistic_mmd2=mmd2,
        pvalue=(1 + exceed) / (1 + n_permutations),
        null_quantile=q,
        alpha=float(alpha),
        reject=exceed <= critical_rank(int(n_permutations), alpha),
        n_permutations=int(n_permutations),
        n_x=len(Xv),
        n_y=len(Yv),
        seed=seed,
        null_distribution=null if return_null else None,
        timings={"null_s": null_s, "total_s": time.perf_counter() - start},  # null_s includes T
        relabel="global" if partition is None else "within-blocks",
        n_blocks=None if partition is None else partition.n_blocks,
        # with global relabelling T is that estimate already: no second computation
        estimate=_same_seed_estimate(estimator, fitted, pool, seq) if report_estimate and partition is not None else None,
    )


def _same_seed_estimate(estimator: MMDEstimator, kernel: Kernel, pool: PooledSample, seq: np.random.SeedSequence) -> float:
    """What ``estimator.estimate(kernel, X, Y, rng=seed).mmd`` reports, from the pool."""
    X, Y = pool.relabelled(np.arange(pool.size))
    stream_gen = np.random.default_rng(stream(seq, "estimate"))
    return float(estimator.compute_estimate(kernel, X, Y, stream_gen).mmd)
