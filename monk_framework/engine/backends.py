"""Where independent pieces of work run: in this process, or on a Dask cluster.

A *backend* maps a top-level function over tasks, ``fn(task, shared)``, and yields
``(index, result)`` pairs as tasks finish (not necessarily in order). ``shared`` is one
object every task reads (a pooled sample, precomputed Gram matrices): the local backend
passes it as it is, the Dask backend sends it to every worker once.

Results never depend on the backend: every task carries its own seed, so the same
tasks give the same numbers in whatever order and wherever they run (the tests check
this against a real LocalCluster).

* :class:`LocalBackend` (``"local"``): in this process, in order.
* :class:`DaskBackend` (``"dask"``): on ``dask.distributed``, by default an embedded
  ``LocalCluster`` with one single-threaded worker process per core, or an existing
  cluster given its scheduler address (``tcp://host:port``). Needs the ``dask`` extra.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from monk_framework.core.errors import MonkError, ParameterError, optional_import
from monk_framework.core.resources import REUSE_MMAP_THRESHOLD, REUSE_TRIM_THRESHOLD, check_fits, format_bytes

__all__ = [
    "Backend",
    "LocalBackend",
    "ThreadBackend",
    "DaskBackend",
    "BACKENDS",
    "check_backend_options",
    "get_backend",
    "for_bands",
    "in_order",
    "is_remote",
    "in_this_process",
    "on_this_thread",
    "one_blas_thread",
    "PARALLEL_MIN_BANDS",
    "quiet_cluster_logs",
]

#: fn(task, shared) -> result; must be a module-level function for the Dask backend.
TaskFn = Callable[[Any, Any], Any]


class Backend:
    """Runs ``fn(task, shared)`` for every task; a context manager owning its resources."""

    name = "backend"
    #: whether the workers are other processes or machines (the Gram reductions of one
    #: job are then spread over them: :attr:`monk_framework.core.resources.Resources.spread`)
    remote = False

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release workers and connections (nothing for the local backend)."""

    @property
    def workers(self) -> int:
        """How many tasks can run at once."""
        return 1

    def as_completed(self, fn: TaskFn, tasks: Sequence[Any], shared: Any = None) -> Iterator[tuple[int, Any]]:
        """(index in ``tasks``, result) for each task as it finishes. ``shared`` is sent to
        the workers once per call, unless it is what :meth:`share` returned (or a tuple
        of such), which is already there."""
        raise NotImplementedError

    def share(self, obj: Any) -> Any:
        """``obj`` placed on every worker once, for several calls to read (here: itself)."""
        return obj

    def map(self, fn: TaskFn, tasks: Sequence[Any], shared: Any = None) -> list[Any]:
        """The results in the order of ``tasks``."""
        out: list[Any] = [None] * len(tasks)
        for i, result in self.as_completed(fn, tasks, shared):
            out[i] = result
        return out


class LocalBackend(Backend):
    """In this process, one task after another, in order."""

    name = "local"

    def as_completed(self, fn: TaskFn, tasks: Sequence[Any], shared: Any = None) -> Iterator[tuple[int, Any]]:
        for i, task in enumerate(tasks):
            yield i, fn(task, shared)

    def __repr__(self) -> str:
        return "LocalBackend()"


class ThreadBackend(Backend):
    """In this process, on a pool of ``n_threads`` threads (default: one per core), each
    task with one BLAS thread: for numpy work that releases the GIL, such as the tiles of
    a Gram matrix and their products, which then use every core. Results are the same
    bits as :class:`LocalBackend` run with one BLAS thread."""

    name = "threads"

    def __init__(self, n_threads: int | None = None):
        self.n_threads = n_threads or os.cpu_count() or 1

    @property
    def workers(self) -> int:
        return self.n_threads

    def as_completed(self, fn: TaskFn, tasks: Sequence[Any], shared: Any = None) -> Iterator[tuple[int, Any]]:
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with one_blas_thread(), ThreadPoolExecutor(self.n_threads) as pool:
            futures = {pool.submit(_on_thread, fn, task, shared): i for i, task in enumerate(tasks)}
            try:
                for future in as_completed(futures):
                    yield futures[future], future.result()
            finally:
                for future in futures:
                    future.cancel()

    def __repr__(self) -> str:
        return f"ThreadBackend({self.n_threads})"


_THREAD = threading.local()


@contextlib.contextmanager
def on_this_thread() -> Iterator[None]:
    """Within it, :func:`in_this_process` gives the local backend on this thread: the
    computations it starts here use no pool of threads, leaving the other cores to work
    that runs beside them (a permutation test's draw of relabellings)."""
    before = getattr(_THREAD, "busy", False)
    _THREAD.busy = True
    try:
        yield
    finally:
        _THREAD.busy = before


#: (number of loaded modules, threadpoolctl controller): scanning the loaded libraries
#: costs 0.6 ms, limiting through a controller kept from the last scan 13 µs (measured)
_BLAS_CONTROLLER: list[Any] = []


def one_blas_thread() -> Any:
    """A context manager under which BLAS runs on one thread (threadpoolctl's limit).

    Besides leaving the cores to the library's own threads, it keeps OpenBLAS's thread
    pool asleep: after a parallel call its idle threads spin for about 0.1 s, taking a
    core from whatever runs next (docs/performance.md). The controller is kept between
    calls and scanned again when a module has been imported since, which is how a new
    BLAS library would arrive.
    """
    import sys

    from threadpoolctl import ThreadpoolController

    loaded = len(sys.modules)
    if not _BLAS_CONTROLLER or _BLAS_CONTROLLER[0] != loaded:
        _BLAS_CONTROLLER[:] = [loaded, ThreadpoolController()]
    return _BLAS_CONTROLLER[1].limit(limits=1, user_api="blas")


def _on_thread(fn: TaskFn, task: Any, shared: Any) -> Any:
    """fn(task, shared) on a pool thread, marked so that work inside it stays on it."""
    _THREAD.busy = True
    try:
        return fn(task, shared)
    finally:
        _THREAD.busy = False


def in_this_process() -> Backend:
    """The backend for the tasks of one computation here: threads over the cores, or
    one after another inside a Dask worker (whose one thread is its share of a machine)
    or inside a task already on a pool thread (no pools within pools)."""
    import sys

    if getattr(_THREAD, "busy", False):
        return LocalBackend()

    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            distributed.get_worker()
            return LocalBackend()
        except ValueError:
            pass
    cores = os.cpu_count() or 1
    return ThreadBackend(cores) if cores > 1 else LocalBackend()


#: from this many bands (row bands, chunks of rows) on, a computation runs them on every core
PARALLEL_MIN_BANDS = 4


def is_remote(backend: Backend | None) -> bool:
    """Whether ``backend`` runs its tasks in other processes or on other machines."""
    return backend is not None and backend.remote


def for_bands(count: int) -> Backend:
    """Where ``count`` independent bands of one computation run: on every core
    (:func:`in_this_process`) from PARALLEL_MIN_BANDS bands on, else here in order."""
    return in_this_process() if count >= PARALLEL_MIN_BANDS else LocalBackend()


def in_order(results: Iterator[tuple[int, Any]]) -> Iterator[Any]:
    """The results of ``as_completed`` in task order, each as soon as the ones before it are
    in (so that sums over tasks add in one order wherever and however they ran)."""
    waiting: dict[int, Any] = {}
    nxt = 0
    for i, result in results:
        waiting[i] = result
        while nxt in waiting:
            yield waiting.pop(nxt)
            nxt += 1


def _import_distributed() -> Any:
    return optional_import("distributed", "dask", "The Dask backend and --backend dask")


def _importing_the_script_in_a_worker() -> bool:
    """Whether this process is a child that multiprocessing started and that is now
    running the parent's script as ``__mp_main__`` (a module-level cluster start)."""
    import multiprocessing

    # the flag multiprocessing itself reads before it refuses to start a process from a
    # child that is still importing the parent's script (spawn._check_not_importing_main)
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


@contextlib.contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Start the embedded cluster's processes with SIGINT ignored (they inherit it, and
    Python keeps an ignored SIGINT): Ctrl-C reaches the whole process group of a
    terminal, and each worker would print its own KeyboardInterrupt traceback (about 70
    lines around the one-line "Interrupted."). This process still gets Ctrl-C, stops,
    and closes the cluster, which ends the workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: seconds a scheduler address has to accept a connection and to send its handshake
SCHEDULER_TIMEOUT = 10.0  # as long as dask gives a connection (Client(timeout="10s"))
#: a Dask handshake is a few dozen bytes (58 measured); a first frame claiming more is
#: another protocol's bytes read as a length
HANDSHAKE_MAX_BYTES = 1 << 16


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Refuse, within ``timeout`` seconds, a ``tcp://host:port`` where no Dask scheduler
    answers: a closed port, no answer, or another kind of server. A Dask scheduler
    writes its handshake as soon as a connection opens (an 8-byte length, then a small
    msgpack frame naming its compression and pickle protocol); anything else would
    make dask read another protocol's bytes as a frame length (an allocation of
    exbibytes) or wait for an answer that never comes. Other schemes (tls://, inproc://)
    are left to dask. ``timeout``: :data:`SCHEDULER_TIMEOUT` unless given."""
    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    endpoint = _tcp_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        raise MonkError(f"The Dask scheduler at {address!r} does not answer: no connection within {timeout:g} s.") from None
    except OSError as exc:
        raise MonkError(f"Cannot reach the Dask scheduler at {address!r}: {exc.strerror or exc}.") from None
    with sock:
        _check_handshake(sock, address, timeout)


def _tcp_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``tcp://host:port`` scheduler address (a bare ``host:port`` too);
    None for another scheme dask reaches by itself; a ParameterError for one no other
    process reaches, or that is not a valid address."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme == "inproc":
        raise ParameterError(
            f"The scheduler address {address!r} (--scheduler) names a scheduler inside one Python process (inproc://), "
            "which no other process reaches; give its network address, e.g. tcp://host:8786."
        )
    if scheme == "ucx" and importlib.util.find_spec("distributed_ucxx") is None:
        raise ParameterError(
            f"The scheduler address {address!r} (--scheduler) uses UCX, which needs the distributed-ucxx package "
            "(not installed here); give the scheduler's tcp:// address, or install it."
        )
    if scheme != "tcp":
        return None
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ParameterError(f"The scheduler address {address!r} (--scheduler) is not valid; expected tcp://host:port.")
    if not 0 < int(port) <= 65535:
        raise ParameterError(
            f"The scheduler address {address!r} (--scheduler) has port {int(port)}; a TCP port is 1 to 65535 (a Dask scheduler's default is 8786)."
        )
    return host.strip("[]"), int(port)


def _check_handshake(sock: socket.socket, address: str, timeout: float) -> None:
    """The first message on a new connection is a Dask handshake (an 8-byte length, then a
    small msgpack frame naming its compression), within ``timeout`` seconds."""
    not_dask = f"The server at {address!r} is not a Dask scheduler"
    sock.settimeout(timeout)
    try:
        head = _read_exactly(sock, 8)
        (length,) = struct.unpack("<Q", head)
        if not 0 < length <= HANDSHAKE_MAX_BYTES:
            raise MonkError(f"{not_dask}: its first bytes ({head!r}) are not a Dask handshake (another kind of server?).")
        body = _read_exactly(sock, length)
    except TimeoutError:
        raise MonkError(f"{not_dask}: it sent no Dask handshake within {timeout:g} s (another kind of server, or one too busy to answer).") from None
    except OSError as exc:
        raise MonkError(f"{not_dask}: the connection failed before a Dask handshake ({exc.strerror or exc}).") from None
    if b"compression" not in body:
        raise MonkError(f"{not_dask}: its first message is not a Dask handshake (another kind of server?).")


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return data


def _local_cluster(distributed: Any, n_workers: int | None, quiet: bool) -> Any:
    """An embedded LocalCluster of ``n_workers`` single-threaded worker processes (one a
    core by default), their logs quiet and their allocations kept in their heaps."""
    if _importing_the_script_in_a_worker():
        # a worker of the cluster being started runs the script's module level again
        # (multiprocessing's spawn): leave at once and quietly, so that the script's own
        # process tells the one thing to do (DaskBackend's message)
        raise SystemExit(3)
    import logging

    if quiet:
        logging.getLogger("distributed").setLevel(logging.ERROR)
    _drop_lost_scattered_data()
    import dask

    # dask's default MALLOC_TRIM_THRESHOLD_ also fixes glibc's mmap threshold at 128 kB, so
    # every tile a task allocates (MBs) is mapped and page-faulted anew: measured 27 %
    # slower on one large test. Heap allocations up to 128 MB, and trimming above 1 GB,
    # keep them in the worker's heap.
    with (
        dask.config.set(
            {
                "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": REUSE_TRIM_THRESHOLD,
                "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": REUSE_MMAP_THRESHOLD,
            }
        ),
        _workers_ignore_ctrl_c(),
    ):
        return distributed.LocalCluster(
            n_workers=n_workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: never clash with another cluster
        )


class DaskBackend(Backend):
    """On dask.distributed: an embedded LocalCluster, or the cluster at ``scheduler``.

    ``n_workers`` sizes the embedded cluster (default: one single-threaded worker process
    per core, so BLAS threads do not oversubscribe the machine); it is ignored with a
    ``scheduler`` address. Tasks that raise are re-raised here with the worker's error.
    """

    name = "dask"
    remote = True

    def __init__(self, scheduler: str | None = None, *, n_workers: int | None = None, quiet: bool = True):
        distributed = _import_distributed()
        if n_workers is not None and n_workers < 1:
            raise ParameterError(f"n_workers must be at least 1. Got {n_workers} instead.")
        self.scheduler = scheduler
        self._cluster = None
        _drop_the_sync_cancel_race()
        try:
            if scheduler is None:
                self._cluster = _local_cluster(distributed, n_workers, quiet)
                self.client = distributed.Client(self._cluster)
            else:
                probe_scheduler(scheduler)
                self.client = distributed.Client(scheduler, timeout="10s")
        except MonkError:
            raise
        except RuntimeError as exc:
            if scheduler is not None:
                raise
            raise MonkError(
                "The embedded Dask cluster could not start its worker processes. A script that starts it "
                "(get_backend('dask'), DaskBackend()) must do so under `if __name__ == \"__main__\":`, since each "
                f"worker process imports the script again ({exc})."
            ) from None
        except OSError as exc:
            raise MonkError(f"Cannot reach the Dask scheduler at {scheduler!r}: {exc}") from exc
        except (ValueError, TypeError) as exc:  # dask's own parse of the address
            if str(scheduler).partition("://")[0] in ("tls", "wss"):
                raise ParameterError(
                    f"The scheduler address {scheduler!r} (--scheduler) uses TLS, which needs dask's TLS settings "
                    "(distributed.comm.tls: a CA file and this client's certificate and key, in the dask config or "
                    f"DASK_DISTRIBUTED__COMM__TLS__* variables), and dask found none it could use ({exc})."
                ) from None
            raise ParameterError(f"The scheduler address {scheduler!r} (--scheduler) is not valid ({exc}); expected something like tcp://host:8786.") from None

    @property
    def workers(self) -> int:
        return cast(int, max(1, sum(self.client.nthreads().values())))

    def as_completed(self, fn: TaskFn, tasks: Sequence[Any], shared: Any = None) -> Iterator[tuple[int, Any]]:
        distributed = _import_distributed()
        if not tasks:
            return
        n = len(tasks)
        if isinstance(shared, tuple) and shared and _on_workers(shared, distributed):
            # parts already on the workers: each is passed as its own argument (dask
            # resolves Futures given directly), then handed to fn as the tuple
            futures = self.client.map(_with_parts, list(tasks), [fn] * n, *[[part] * n for part in shared], pure=False)
        else:
            # one copy of the shared object per worker, not one per task (none if already there)
            shared_future = shared if _on_workers(shared, distributed) else self.share(shared)
            futures = self.client.map(fn, list(tasks), [shared_future] * n, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for future in distributed.as_completed(futures):
                with self._cluster_failures():
                    value = future.result()
                yield index[future.key], value
        finally:
            for future in futures:
                future.cancel()

    def share(self, obj: Any) -> Any:
        with self._cluster_failures():
            # in a one-item list: scatter would spread a tuple or list item by item
            return self.client.scatter([obj], broadcast=True, hash=False)[0]

    @contextlib.contextmanager
    def _cluster_failures(self) -> Iterator[None]:
        """The cluster's own failures as a :class:`ClusterError`; a task's error as it is."""
        try:
            yield
        except Exception as exc:
            failure = _cluster_error(exc, _import_distributed(), self)
            if failure is None:
                raise
            raise failure from None

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            # left through Ctrl-C or an error: the cluster goes down with work in flight,
            # and dask logs every lost piece of it; the user is told what happened in
            # one line, by whoever raised
            _quiet_distributed_logs()
            if self._cluster is not None:
                with contextlib.suppress(Exception):
                    self.client.run(_quiet_distributed_logs)
        self.close()

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def __repr__(self) -> str:
        where = self.scheduler or f"LocalCluster({self.workers} workers)"
        return f"DaskBackend({where})"


class _SyncCancelRace:
    """A logging filter for tornado's error log in this process: distributed's ``sync``
    schedules a ``cancel`` callback when Ctrl-C (or SIGTERM) interrupts it, and if the
    interruption lands before its future exists that callback raises a NameError, which
    tornado logs as an error with its traceback (a race in distributed.utils.sync). That
    record is the interruption the user asked for, said in one line by the command; every
    other record passes."""

    def filter(self, record: Any) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, NameError) or exc.__traceback__ is None:
            return True
        import traceback

        last = traceback.extract_tb(exc.__traceback__)[-1]
        return not (last.name == "cancel" and last.filename.replace("\\", "/").endswith("distributed/utils.py"))


def _drop_the_sync_cancel_race() -> None:
    """Install :class:`_SyncCancelRace` on tornado's application log, once."""
    import logging

    log = logging.getLogger("tornado.application")
    if not any(isinstance(f, _SyncCancelRace) for f in log.filters):
        log.addFilter(_SyncCancelRace())


class _LostScatteredData:
    """A logging filter for the embedded scheduler, which runs in this process: it logs
    a worker's death as an error when the worker held data shared with the tasks
    ("caused the cluster to lose scattered data"). What that means for the work is said
    once, by who can say it: the tasks that needed the data raise :class:`ClusterError`,
    and when a SIGTERM to the whole process group killed the workers (a batch
    scheduler's), the interruption's one line; the record would be a second line, or,
    while this process finishes a long computation before it can handle the signal,
    the first one. Every other record passes."""

    def filter(self, record: Any) -> bool:
        return "lose scattered data" not in str(record.msg)


def _drop_lost_scattered_data() -> None:
    """Install :class:`_LostScatteredData` on the scheduler's log, once."""
    import logging

    log = logging.getLogger("distributed.scheduler")
    if not any(isinstance(f, _LostScatteredData) for f in log.filters):
        log.addFilter(_LostScatteredData())


class ClusterError(MonkError):
    """The Dask cluster failed under the work: a worker died (killed, or out of memory)
    and took with it what the tasks needed, or the scheduler went away. Nothing computed
    is wrong; nothing of this work is returned."""


def _cluster_error(exc: BaseException, distributed: Any, backend: DaskBackend) -> ClusterError | None:
    """A :class:`ClusterError` saying what happened to the cluster, when ``exc`` is the
    cluster's failure (a task's own error, raised again here with its type, is None:
    it is the task's, and whoever ran the task names it)."""
    from distributed.comm.core import CommClosedError

    cluster = f"the Dask cluster at {backend.scheduler!r}" if backend.scheduler else "the embedded Dask cluster"
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (CommClosedError, distributed.CancelledError)) and getattr(backend.client, "status", "running") != "running":
        # the client gave up on the scheduler (it reconnects for 10 s first), not on a worker
        scheduler = f"the Dask scheduler at {backend.scheduler!r}" if backend.scheduler else "the embedded Dask scheduler"
        return ClusterError(
            f"The connection to {scheduler} was lost during this work ({what}): the scheduler stopped, or the network "
            "failed. Nothing was returned; run again once the scheduler answers."
        )
    if isinstance(exc, distributed.KilledWorker):
        return ClusterError(
            f"Workers of {cluster} died while running this work, each one that took the task ({what}): out of "
            "memory, or killed. Nothing was returned; give the workers more memory (fewer workers a machine, or "
            "a smaller max_memory, --max-memory) and run again."
        )
    if isinstance(exc, (CommClosedError, distributed.CancelledError)) or type(exc).__module__.startswith("distributed."):
        return ClusterError(
            f"{cluster[0].upper()}{cluster[1:]} lost a worker during this work, and with it data the tasks needed "
            f"({what}): a worker killed, or out of memory? Nothing was returned; run again."
        )
    return None


def quiet_cluster_logs() -> None:
    """Say nothing more of Dask's logs in this process below CRITICAL: for a signal
    handler that ends the work (SIGTERM), to call before it raises.

    A batch scheduler's SIGTERM (``scancel``, ``timeout``) reaches the whole process
    group, so an embedded cluster's workers die with this process; its scheduler and
    client, which run here, log each lost worker, scattered datum and result as an
    error while the interruption unwinds (two to four lines around the one-line
    "Interrupted."). Silenced when the signal arrives, they lose that race. A no-op
    while distributed is not imported."""
    if "distributed" in sys.modules:
        _quiet_distributed_logs()


def _quiet_distributed_logs() -> None:
    """No more Dask logs below CRITICAL in this process (a worker of the embedded cluster
    being shut down after Ctrl-C, or this one). Dask's logging configuration gives some
    of distributed's loggers their own level (``distributed.client``: warning), which
    their parent's would not override: each is set."""
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _with_parts(task: Any, fn: TaskFn, *parts: Any) -> Any:
    """fn(task, parts) on a worker, the parts of a shared tuple resolved one by one."""
    return fn(task, parts)


def _on_workers(shared: Any, distributed: Any) -> bool:
    """Whether ``shared`` is a Future of scattered data, or a tuple of them."""
    items = shared if isinstance(shared, tuple) and shared else (shared,)
    return all(isinstance(item, distributed.Future) for item in items)


BACKENDS = {"local": LocalBackend, "dask": DaskBackend}


#: memory of one worker of the embedded Dask cluster with its nanny, before any work: the
#: worker measured 105 MiB resident after importing the library and its plugins
WORKER_PROCESS_BYTES = 160 * 2**20


def check_backend_options(name: str, scheduler: str | None = None, n_workers: int | None = None) -> None:
    """Refuse bad backend options before any data is read or any cluster started."""
    if name not in BACKENDS:
        raise ParameterError(f"Unknown backend {name!r}: choose one of {', '.join(BACKENDS)}.")
    if scheduler is not None and name != "dask":
        raise ParameterError("A scheduler address needs the Dask backend (--backend dask).")
    if n_workers is not None and (name != "dask" or scheduler is not None):
        raise ParameterError("--workers sizes the embedded Dask cluster: use it with --backend dask and no --scheduler.")
    if n_workers is not None:
        # each worker of the embedded cluster is a process (and its nanny) before any work
        check_fits(
            int(n_workers) * WORKER_PROCESS_BYTES,
            lambda need, avail, avail_bytes: (
                f"--workers {n_workers:,} starts {n_workers:,} worker processes of about {format_bytes(WORKER_PROCESS_BYTES)} "
                f"each before any work, {need}, but only {avail} of memory are available; use at most "
                f"{max(1, int(0.9 * avail_bytes) // WORKER_PROCESS_BYTES):,}."
            ),
            share=0.9,
        )


def get_backend(name: str = "local", *, scheduler: str | None = None, n_workers: int | None = None) -> Backend:
    """A backend by name: "local", or "dask" (embedded LocalCluster, or ``scheduler``)."""
    check_backend_options(name, scheduler, n_workers)
    if name == "local":
        return LocalBackend()
    return DaskBackend(scheduler, n_workers=n_workers)
