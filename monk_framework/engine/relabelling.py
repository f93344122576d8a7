"""The relabellings of a test's pooled sample, and the statistics computed on them.

A two-sample test asks for one thing: its estimator's MMD² on (X, Y) and on B
relabellings (:func:`relabelled_statistics`). The engine decides the rest: whether the
relabellings are drawn ahead in a background thread while the kernel is fitted, whether
the batches run here or on a backend's workers, or the tiles of one large Gram
reduction do (the pool's :class:`~monk_framework.core.resources.Resources`), and how much of the
null distribution memory can hold. Relabelling b is the b-th permutation of one stream,
and its estimator's randomness stream b, so the numbers do not depend on any of these
choices.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from monk_framework.core.errors import PluginFailure, plugin_code, shown, shown_count
from monk_framework.core.estimators import MMDEstimator
from monk_framework.core.kernels import Kernel
from monk_framework.core.randomness import ChildStreams, child, stream
from monk_framework.core.resources import Resources, check_fits
from monk_framework.core.samples import Sample
from monk_framework.engine.backends import Backend, is_remote, on_this_thread
from monk_framework.engine.backends import one_blas_thread as blas_on_one_thread
from monk_framework.engine.partitions import Partition
from monk_framework.engine.pooled import SHARED_INDICATORS, IndicatorMemo, PooledSample, batch_size
from monk_framework.engine.within_blocks import DRAW_CHUNK, relabellings

__all__ = [
    "DRAW_AHEAD_MAX_FEATURES",
    "DRAW_AHEAD_MIN_ENTRIES",
    "GlobalRelabellings",
    "Progress",
    "RelabelledStatistics",
    "SHARED_RELABELLINGS_MAX_BYTES",
    "SharedRelabellings",
    "check_null_memory",
    "estimator_statistics",
    "few_features",
    "null_statistics",
    "observed_mmd2",
    "real_statistics",
    "relabelled_statistics",
    "within_block_batch",
]

#: a callback told (relabellings done, relabellings in all) as the null sample grows.
Progress = Callable[[int, int], None]


#: bytes per relabelling that a test holds at once: its statistic, its signed root and a
#: comparison (float64 each, with room for temporaries)
NULL_BYTES_PER_PERMUTATION = 32
#: bytes per relabelling of the null kept with the result (``return_null``), and its JSON list
NULL_LIST_BYTES = 32


def check_null_memory(n_permutations: int, *, pool_size: int = 0, backend: Backend | None = None, listed: bool = False) -> None:
    """Refuse, before anything is allocated, a number of relabellings whose null
    distribution cannot fit in memory (with the figures in the message).

    For a remote ``backend`` every relabelling (``pool_size`` indices each) is drawn
    before the work starts; ``listed``: the null is kept with the result.
    """
    all_drawn = is_remote(backend)
    need = n_permutations * (NULL_BYTES_PER_PERMUTATION + (NULL_LIST_BYTES if listed else 0))
    if all_drawn:
        need += 8 * n_permutations * pool_size
    check_fits(
        need,
        lambda need_text, avail, _: (
            f"n_permutations (-B) = {shown_count(n_permutations)} needs about {need_text} for the null distribution"
            f"{' and its relabellings, all drawn up front for the backend' if all_drawn else ''}, but only {avail} of "
            "memory are available. Use fewer permutations: the p-value's resolution is 1/(B + 1), so B = 100,000 "
            "already resolves 1e-5."
        ),
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

    def __init__(self, seq: np.random.SeedSequence, size: int, *, shared: np.ndarray | None = None):
        self.size = size
        #: every relabelling drawn already, after one identity row (:class:`SharedRelabellings`)
        self._shared = shared
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
            self._held.enter_context(blas_on_one_thread())
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
        if self._shared is not None and b < len(self._shared):
            if lead == 0:
                return self._shared[1 + a : 1 + b]
            if lead == 1 and a == 0:
                return self._shared[: 1 + b]
            out = np.empty((lead + b - a, self.size), dtype=np.int64)
            out[:lead] = np.arange(self.size)
            out[lead:] = self._shared[1 + a : 1 + b]
            return out
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


#: the most bytes the relabellings an aggregated test shares between its kernels may take,
#: with the indicator matrices made from them (16 bytes a point a relabelling: its index,
#: and its 0/1 entry); beyond it (or a quarter of the memory budget) each kernel draws
#: them again, batch by batch, as a single test does
SHARED_RELABELLINGS_MAX_BYTES = 256 * 1024 * 1024


class SharedRelabellings:
    """The B global relabellings of a test's seed sequence, drawn once for every kernel
    of a collection (:func:`monk_framework.two_sample.aggregated.collection_statistics`),
    with the indicator matrices made from them (:class:`~monk_framework.engine.pooled.IndicatorMemo`).

    Each kernel's test would draw the same rows from the same stream and make the same
    0/1 matrices from them; at N + M = 1000 and B = 2000 that is 30 ms a kernel, as much as
    its products with the Gram matrix. Drawn once, they are the rows ``seq``'s
    :class:`GlobalRelabellings` gives, to the bit, so every statistic is the same.
    :meth:`of` gives None where they would not fit :data:`SHARED_RELABELLINGS_MAX_BYTES`
    (or a quarter of the budget): each kernel then draws its own.
    """

    def __init__(self, seq: np.random.SeedSequence, size: int, n_permutations: int, memo_bytes: int):
        self.seq, self.size, self.n_permutations = seq, int(size), int(n_permutations)
        rows = GlobalRelabellings(seq, self.size).rows(0, self.n_permutations, lead=1)
        rows.flags.writeable = False  # every kernel reads the same rows
        self.rows = rows
        self.indicators = IndicatorMemo(rows, memo_bytes)

    @classmethod
    def of(cls, seq: np.random.SeedSequence, size: int, n_permutations: int, resources: Resources) -> SharedRelabellings | None:
        """The shared relabellings of ``seq`` (a test's "relabel" stream), or None if
        they and their indicator matrices would take more than the limit."""
        need = 16 * (int(n_permutations) + 1) * int(size)
        room = SHARED_RELABELLINGS_MAX_BYTES if resources.budget is None else min(SHARED_RELABELLINGS_MAX_BYTES, resources.budget // 4)
        if need > room:
            return None
        return cls(seq, size, n_permutations, room - 8 * (int(n_permutations) + 1) * int(size))

    def serves(self, seq: np.random.SeedSequence, size: int, n_permutations: int) -> bool:
        """Whether these are the relabellings a test of ``seq`` on ``size`` points with
        ``n_permutations`` relabellings draws."""
        same_seq = seq.entropy == self.seq.entropy and tuple(seq.spawn_key) == tuple(self.seq.spawn_key)
        return same_seq and size == self.size and n_permutations <= self.n_permutations

    def cursor(self) -> GlobalRelabellings:
        """A kernel's own reader of the rows, in order from the first."""
        return GlobalRelabellings(self.seq, self.size, shared=self.rows)


#: the first relabellings are drawn ahead, in a thread, only from this many indices on:
#: starting and joining the thread costs about 0.25 ms, the time numpy takes to draw some
#: 30 000 indices (measured: 20 000 in 0.18 ms, 80 000 in 0.71 ms), so a smaller draw
#: (a test on a few hundred points with a few hundred relabellings) is made when first
#: asked for; the rows are the same either way
DRAW_AHEAD_MIN_ENTRIES = 65_536


#: while the first relabellings are drawn ahead, BLAS runs on one thread and the row
#: bands of the fit and the Gram matrix on this thread when the data have at most this
#: many features: their distance products gain little from a second thread (measured at
#: N + M = 2000 and 10 000: within 5 % up to d = 30, 20-25 % slower at d = 100), and the
#: draw gets the other core; with more, the bands use every core (engine.kernel_values.on_cores)
DRAW_AHEAD_MAX_FEATURES = 32


def few_features(X: Any) -> bool:
    """Whether the pooled Gram matrix of this sample is cheap in BLAS: strings, or vectors
    with at most DRAW_AHEAD_MAX_FEATURES features."""
    return not isinstance(X, np.ndarray) or X.ndim < 2 or X.shape[1] <= DRAW_AHEAD_MAX_FEATURES


def _within_batch(progress: Progress, start: int, stop: int, total: int) -> Callable[[float], None]:
    """A band listener that reports relabellings start..stop as the bands of their pass
    are done (whole relabellings, never going back when a batch walks K again)."""
    reached = [start]

    def told(share: float) -> None:
        done = start + int(share * (stop - start))
        if done > reached[0] and done < stop:
            reached[0] = done
            progress(done, total)

    return told


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
    building: Progress | None = None,
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
    when the caller has started drawing them ahead (:class:`GlobalRelabellings`). The
    caller has checked B with :func:`check_null_memory` before any kernel work.
    ``building(share, 1)`` hears a stored Gram matrix being built, before the batches.
    """
    remote = is_remote(backend)
    # the children seq.spawn(2) gives on a fresh sequence, whoever asked for them before
    perm_seq, est_seq = child(seq, 0), child(seq, 1)
    globally = drawn if drawn is not None else GlobalRelabellings(seq, pool.size)
    if building is not None and not remote:
        # choosing the batch may build a stored Gram matrix: a stage of its own, in shares
        pool.band_listener = lambda share: building(share, 1.0)  # type: ignore[arg-type]
    if partition is None:
        step = max(1, int(estimator.permutation_batch(pool)))
    else:
        step = within_block_batch(pool, n_permutations)
    pool.band_listener = None

    def draw(a: int, b: int, lead: int = 0) -> np.ndarray:
        """Relabellings a..b, after ``lead`` identity rows (global relabelling only)."""
        if partition is not None:
            return relabellings(partition, pool.n, a, b, perm_seq)
        return globally.rows(a, b, lead)

    if progress is not None:
        progress(0, n_permutations)
    batches = _NullBatches(estimator, pool, n_permutations, step, draw, est_seq, progress, partition)
    if not remote:
        out, first = batches.here(observed)
    else:
        assert backend is not None
        out, first = batches.on_workers(backend), None
    if observed is None:
        return out
    return np.concatenate([[observed_mmd2(estimator, pool, observed, partition) if first is None else first], out])


@attrs.frozen
class _NullBatches:
    """The batches of one null distribution (relabellings ``draw(a, b)``, ``step`` at a
    time): what computing them here and on a backend's workers share."""

    estimator: MMDEstimator
    pool: PooledSample
    n_permutations: int
    step: int
    draw: Callable[..., np.ndarray]
    est_seq: np.random.SeedSequence
    progress: Progress | None
    partition: Partition | None

    def bounds(self) -> list[tuple[int, int]]:
        B = self.n_permutations
        return [(a, min(a + self.step, B)) for a in range(0, B, self.step)]

    def here(self, observed: np.random.SeedSequence | None) -> tuple[np.ndarray, float | None]:
        """:func:`null_statistics` in this process, batch by batch (memory stays at one batch
        of relabellings), and the observed statistic when it came with the first batch."""
        pool, progress, B = self.pool, self.progress, self.n_permutations
        out = np.empty(B)
        first: float | None = None
        for done, stop in self.bounds():
            if progress is not None:
                # a batch over a large matrix-free K is one long pass: reported band by band
                pool.band_listener = _within_batch(progress, done, stop, B)
            if done == 0 and observed is not None and self.partition is None:
                streams = ChildStreams(self.est_seq, done, stop, first=observed)
                values = estimator_statistics(self.estimator, pool, self.draw(done, stop, lead=1), streams)
                first, out[done:stop] = float(values[0]), values[1:]
            else:
                out[done:stop] = _batch_statistics(self._task(done, stop), pool)
            if progress is not None:
                pool.band_listener = None
                progress(stop, B)
        return out, first

    def on_workers(self, backend: Backend) -> np.ndarray:
        """:func:`null_statistics` with its batches as tasks on a remote backend, in any order."""
        out = np.empty(self.n_permutations)
        bounds = self.bounds()
        finished = 0
        for i, values in backend.as_completed(_batch_statistics, [self._task(a, b) for a, b in bounds], self.pool):
            a, b = bounds[i]
            out[a:b] = values
            finished += b - a
            if self.progress is not None:
                self.progress(finished, self.n_permutations)
        return out

    def _task(self, a: int, b: int) -> tuple[Any, ...]:
        return (self.estimator, self.draw(a, b), self.est_seq, a, b, self.partition)


def within_block_batch(pool: PooledSample, n_permutations: int) -> int:
    """Relabellings per batch of a within-block test: whole draw chunks, about ten batches
    (so a progress bar moves), at most one batch of the engine's size."""
    tenth = -(-n_permutations // 10)
    chunks = max(1, min(batch_size(pool.size), tenth) // DRAW_CHUNK)
    return chunks * DRAW_CHUNK


def _batch_statistics(task: tuple[Any, ...], pool: PooledSample) -> np.ndarray:
    """One batch of relabellings on a backend's worker (module level: it is pickled)."""
    estimator, perms, est_seq, a, b, partition = task
    return estimator_statistics(estimator, pool, perms, ChildStreams(est_seq, a, b), partition)


def estimator_statistics(estimator: MMDEstimator, pool: PooledSample, perms: np.ndarray, rngs: Any, partition: Partition | None = None) -> np.ndarray:
    """The estimator's MMD² of every relabelling in ``perms``: its
    :meth:`~MMDEstimator.partition_statistics` on ``partition``, or its
    :meth:`~MMDEstimator.permuted_statistics` without one. The one place a test calls
    an estimator's hooks, so their answer is checked here for every test: one finite
    value per relabelling, else a :class:`PluginFailure` naming the estimator (as is
    any error its code raises)."""
    method = "permuted_statistics" if partition is None else "partition_statistics"
    with plugin_code(estimator, method):
        if partition is None:
            raw = estimator.permuted_statistics(pool, perms, rngs)
        else:
            raw = estimator.partition_statistics(pool, partition, perms, rngs)
    values = real_statistics(estimator, method, raw)
    if values.shape != (len(perms),):
        raise PluginFailure(
            f"{estimator.plugin_label()}: {method} returned shape {values.shape} for {len(perms)} relabellings; "
            f"it must return one MMD^2 per relabelling, shape ({len(perms)},)."
        )
    if not np.isfinite(values).all():
        b = int(np.flatnonzero(~np.isfinite(values))[0])
        raise PluginFailure(f"{estimator.plugin_label()}: {method} returned {values[b]} for relabelling {b}; an MMD^2 must be a finite number.")
    return values


def real_statistics(estimator: MMDEstimator, method: str, raw: Any) -> np.ndarray:
    """An estimator's relabelled statistics (what its hook ``method`` returned) as float64,
    refusing by name what is not real numbers: numpy would drop complex values' imaginary
    parts with only a warning, and a p-value would follow."""
    try:
        values = np.asarray(raw)
        if values.dtype.kind not in "cSUV":
            return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        pass
    raise PluginFailure(f"{estimator.plugin_label()}: {method} returned {shown(raw)}; it must return one real MMD^2 per relabelling, a float array.")


def observed_mmd2(estimator: MMDEstimator, pool: PooledSample, seq: np.random.SeedSequence, partition: Partition | None = None) -> float:
    """T on the samples as given: the identity relabelling, computed like the null values."""
    identity = np.arange(pool.size)[None, :]
    return float(estimator_statistics(estimator, pool, identity, [np.random.default_rng(seq)], partition)[0])


@attrs.frozen
class RelabelledStatistics:
    """What :func:`relabelled_statistics` gives: the estimator's MMD² on the samples as
    given (``observed``) and on the B relabellings (``null``), the kernel as fitted on
    the pooled sample, and the seconds the statistics took."""

    observed: float
    null: np.ndarray
    kernel: Kernel
    seconds: float


def relabelled_statistics(
    estimator: MMDEstimator,
    kernel: Kernel,
    X: Sample,
    Y: Sample,
    n_permutations: int,
    seq: np.random.SeedSequence,
    *,
    resources: Resources,
    partition: Partition | None = None,
    backend: Backend | None = None,
    gram: np.ndarray | None = None,
    progress: Progress | None = None,
    shared: SharedRelabellings | None = None,
    building: Progress | None = None,
) -> RelabelledStatistics:
    """The estimator's MMD² on (X, Y) and on ``n_permutations`` relabellings of the pooled
    sample: globally, or within the blocks of ``partition``.

    ``seq`` is the test's seed sequence: the relabellings come from its stream
    "relabel", the estimator's randomness for the samples as given from "estimate". The
    kernel is fitted on the pooled sample (not when a precomputed ``gram`` is given).
    The engine draws the first batch of global relabellings while the kernel is fitted
    and the pooled Gram matrix computed; on a remote ``backend`` it spreads the tiles of
    a classical statistic's Gram reductions over the workers (``spreads_gram``), or else
    the batches of relabellings. ``resources`` holds the call's memory budget (its
    ``spread`` is ignored: the engine chooses it from ``backend`` as said). The caller
    checks B first (:func:`check_null_memory`). ``shared``: the relabellings of ``seq``
    drawn once for several kernels (:class:`SharedRelabellings`), read here in place of
    drawing them again when the test relabels globally in this process.
    """
    remote = is_remote(backend)
    spread = remote and estimator.spreads_gram
    relabel_seq = stream(seq, "relabel")
    size = len(X) + len(Y)
    drawn = None
    if shared is not None and not (partition is None and not remote and shared.serves(relabel_seq, size, n_permutations)):
        shared = None
    if shared is not None:
        drawn = shared.cursor()
    elif partition is None and (spread or not remote):
        drawn = GlobalRelabellings(relabel_seq, size)
        ahead = min(int(n_permutations), batch_size(size))
        if ahead * size >= DRAW_AHEAD_MIN_ENTRIES:
            drawn.draw_ahead(ahead, lead=1, one_blas_thread=few_features(X))
    try:
        fitted = kernel if gram is not None else kernel.fitted(X, Y)
        spread_gram = spread and partition is None and gram is None
        pool = PooledSample(fitted, X, Y, gram=gram, resources=attrs.evolve(resources.silent(), spread=backend if spread_gram else None))
        if shared is not None:
            pool.cache[SHARED_INDICATORS] = shared.indicators
        tick = time.perf_counter()
        # T with the first batch of relabellings (one pass over a matrix-free Gram matrix)
        values = null_statistics(
            estimator,
            pool,
            int(n_permutations),
            relabel_seq,
            progress,
            None if spread_gram else backend,
            partition,
            observed=stream(seq, "estimate"),
            drawn=drawn,
            building=building,
        )
        seconds = time.perf_counter() - tick
    finally:
        if drawn is not None:  # on any error too: BLAS gets its threads back
            drawn.close()
    return RelabelledStatistics(observed=float(values[0]), null=values[1:], kernel=fitted, seconds=seconds)
