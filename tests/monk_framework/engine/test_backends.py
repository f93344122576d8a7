"""The in-process backends: thread pools, BLAS threads, and where work runs."""

import sys
import threading
import types

import pytest

from monk_framework.engine import backends
from monk_framework.engine.backends import (
    PARALLEL_MIN_BANDS,
    LocalBackend,
    ThreadBackend,
    for_bands,
    in_order,
    in_this_process,
    on_this_thread,
    one_blas_thread,
)


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def _record(task, shared):
    shared.append((task, threading.get_ident(), _blas_threads(), type(in_this_process()).__name__))
    return task * task


def test_thread_backend_runs_every_task_once_with_one_blas_thread_and_no_nested_pool():
    seen: list = []
    out = ThreadBackend(2).map(_record, list(range(12)), seen)
    assert out == [t * t for t in range(12)]
    assert sorted(t for t, *_ in seen) == list(range(12))
    assert all(blas == [1] * len(blas) for _, _, blas, _ in seen)
    # work started inside a task stays on its thread: no pools within pools
    assert {inner for *_, inner in seen} == {"LocalBackend"}


def test_thread_backend_raises_what_a_task_raised():
    def fail(task, shared):
        if task == 3:
            raise ValueError("task 3 failed")
        return task

    with pytest.raises(ValueError, match="task 3 failed"):
        ThreadBackend(2).map(fail, list(range(6)))


def test_in_order_yields_each_result_once_the_ones_before_it_are_in():
    assert list(in_order(iter([(2, "c"), (0, "a"), (3, "d"), (1, "b")]))) == ["a", "b", "c", "d"]


def test_in_this_process_uses_the_cores_unless_told_to_stay(monkeypatch):
    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    assert isinstance(in_this_process(), ThreadBackend)
    with on_this_thread():
        assert isinstance(in_this_process(), LocalBackend)
        with on_this_thread():  # nested: the outer one still holds afterwards
            pass
        assert isinstance(in_this_process(), LocalBackend)
        # another thread is not affected
        other: list = []
        worker = threading.Thread(target=lambda: other.append(in_this_process()))
        worker.start()
        worker.join()
        assert isinstance(other[0], ThreadBackend)
    assert isinstance(in_this_process(), ThreadBackend)
    monkeypatch.setattr(backends.os, "cpu_count", lambda: 1)
    assert isinstance(in_this_process(), LocalBackend)


def test_one_blas_thread_limits_blas_and_gives_the_threads_back():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with one_blas_thread():
            assert _blas_threads() == [1] * len(before)
        assert _blas_threads() == before


def test_one_blas_thread_scans_the_libraries_again_after_an_import(monkeypatch):
    one_blas_thread().restore_original_limits()
    kept = backends._BLAS_CONTROLLER[1]
    one_blas_thread().restore_original_limits()
    assert backends._BLAS_CONTROLLER[1] is kept  # nothing imported: the same controller
    monkeypatch.setitem(sys.modules, "monkfw_test_new_module", types.ModuleType("monkfw_test_new_module"))
    one_blas_thread().restore_original_limits()
    assert backends._BLAS_CONTROLLER[1] is not kept


def test_bands_use_the_cores_from_parallel_min_bands_on(monkeypatch):
    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    assert isinstance(for_bands(PARALLEL_MIN_BANDS - 1), LocalBackend)
    assert isinstance(for_bands(PARALLEL_MIN_BANDS), ThreadBackend)
    with on_this_thread():
        assert isinstance(for_bands(100), LocalBackend)


def test_workers_beyond_memory_are_refused_before_a_cluster_starts():
    from monk_framework.core.errors import ResourceError
    from monk_framework.core.resources import available_memory
    from monk_framework.engine.backends import WORKER_PROCESS_BYTES, check_backend_options

    avail = available_memory()
    if avail is None:
        pytest.skip("the available memory is unknown here")
    too_many = int(avail // WORKER_PROCESS_BYTES) + 1
    with pytest.raises(ResourceError, match=rf"--workers {too_many:,} starts {too_many:,} worker processes .* use at most"):
        check_backend_options("dask", None, too_many)
    check_backend_options("dask", None, 2)


def test_the_sync_cancel_race_of_distributed_is_dropped_from_the_log_and_nothing_else():
    # Ctrl-C landing before distributed.utils.sync's future exists made its cancel callback
    # raise NameError, logged by tornado with a traceback around the one-line "Interrupted."
    import logging
    import sys

    from monk_framework.engine.backends import _SyncCancelRace

    def record_of(filename: str, name: str) -> logging.LogRecord:
        scope: dict = {}
        exec(compile(f"def {name}():\n    return future\n", filename, "exec"), scope)
        try:
            scope[name]()
        except NameError:
            info = sys.exc_info()
        return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "Exception in callback", None, info)

    race = _SyncCancelRace()
    assert not race.filter(record_of("/env/site-packages/distributed/utils.py", "cancel"))
    assert race.filter(record_of("/env/site-packages/distributed/client.py", "cancel"))  # another error: kept
    assert race.filter(record_of("/env/site-packages/distributed/utils.py", "other"))
    assert race.filter(logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "plain", None, None))


def test_the_embedded_schedulers_word_on_lost_scattered_data_is_dropped_and_nothing_else():
    # the tasks that needed the data raise ClusterError, and a SIGTERM to the process group
    # is the interruption's one line: the scheduler's error record would be a second line
    import logging

    from monk_framework.engine.backends import _LostScatteredData

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("distributed.scheduler", logging.ERROR, __file__, 1, msg, args, None)

    lost = _LostScatteredData()
    assert not lost.filter(
        record(
            "Removing worker %r caused the cluster to lose scattered data, which can't be recovered: %s (stimulus_id=%r)", "tcp://127.0.0.1:1", {"tuple-1"}, "s"
        )
    )
    assert lost.filter(record("Couldn't gather keys: %s", {"k": "forgotten"}))
    assert lost.filter(record("Removing worker %r caused the cluster to lose already computed task(s)", "tcp://127.0.0.1:1"))
