"""The Dask backend on a real LocalCluster (2 worker processes) gives the local results."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("distributed")

from monk_framework import get_registry
from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.report import read_csv
from monk_framework.core.errors import ParameterError
from monk_framework.engine.backends import DaskBackend, LocalBackend, get_backend
from monk_framework.two_sample import permutation_test, split_test


@pytest.fixture(scope="module")
def dask_backend():
    backend = DaskBackend(n_workers=2)
    yield backend
    backend.close()


def _numbers(path, keys):
    return [tuple(r[k] for k in keys) for r in read_csv(path)]


def test_a_real_local_cluster_has_two_worker_processes(dask_backend):
    info = dask_backend.client.scheduler_info()
    assert len(info["workers"]) == 2 == dask_backend.workers
    pids = dask_backend.client.run(__import__("os").getpid)
    assert len(set(pids.values())) == 2


@pytest.mark.slow  # 5 s: an experiment's cells on a LocalCluster (.ci/run runs it)
def test_experiment_cells_on_dask_are_identical_to_local(tmp_path, dask_backend):
    exp = get_experiment("exp1", quick=True, runs=3, sizes=(200, 300))
    run_experiment(exp, tmp_path / "local", backend=LocalBackend())
    done = run_experiment(exp, tmp_path / "dask", backend=dask_backend)
    assert done.computed == done.cells
    keys = ("setting", "kernel", "n", "run", "estimator", "mmd2", "mmd_hat", "true_mmd")
    # bit for bit: every cell runs with one BLAS thread on either backend
    assert _numbers(tmp_path / "dask" / "results.csv", keys) == _numbers(tmp_path / "local" / "results.csv", keys)


@pytest.mark.slow  # 5 s: exp2's cells and shared Gram matrices on a LocalCluster (.ci/run runs it)
def test_exp2_with_shared_grams_on_dask_is_identical_to_local(tmp_path, dask_backend):
    exp = get_experiment("exp2", quick=True, runs=1, sizes=(60,))
    run_experiment(exp, tmp_path / "local")
    run_experiment(exp, tmp_path / "dask", backend=dask_backend)
    keys = ("panel", "n", "run", "estimator", "statistic", "null_quantile", "reject", "chosen")
    assert _numbers(tmp_path / "dask" / "results.csv", keys) == _numbers(tmp_path / "local" / "results.csv", keys)


@pytest.mark.parametrize("estimator", [("u-stat", {}), ("monk-bcd-fast", {"n_blocks": 5}), ("monk-bcd", {"n_blocks": 5, "n_iter": 20})])
def test_permutation_batches_on_dask_equal_local(dask_backend, estimator, rng):
    reg = get_registry()
    X, Y = rng.normal(size=(90, 2)), rng.normal(0.3, 1.0, size=(70, 2))
    kernel, est = reg.get_kernel("rbf", sigma=1.0), reg.get_estimator(estimator[0], **estimator[1])
    local = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=120, rng=4, return_null=True)
    remote = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=120, rng=4, return_null=True, backend=dask_backend)
    # same relabellings, same streams; BLAS threads may differ, and the u-stat spreads the
    # tiles of a matrix-free Gram matrix over the workers (its sums in another order): round-off only
    np.testing.assert_allclose(remote.null_distribution, local.null_distribution, rtol=1e-10, atol=1e-12)
    assert remote.pvalue == local.pvalue
    assert remote.statistic == pytest.approx(local.statistic, rel=1e-12)


def test_split_test_calibration_on_dask_equals_local(dask_backend, rng):
    reg = get_registry()
    X, Y = rng.normal(size=(90, 1)), rng.normal(0.5, 1.0, size=(90, 1))
    args = dict(kernel=reg.get_kernel("rbf", sigma=1.0), estimator=reg.get_estimator("u-stat"))
    local = split_test(X, Y, **args, grid={"sigma": [0.5, 2.0]}, n_permutations=60, rng=1, return_null=True)
    remote = split_test(X, Y, **args, grid={"sigma": [0.5, 2.0]}, n_permutations=60, rng=1, return_null=True, backend=dask_backend)
    np.testing.assert_allclose(remote.null_distribution, local.null_distribution, rtol=1e-10, atol=1e-12)
    assert remote.reject == local.reject and remote.kernel_params == local.kernel_params


def test_aggregated_test_on_dask_equals_local(dask_backend, rng):
    from monk_framework.two_sample import aggregated_test

    X, Y = rng.normal(size=(80, 2)), rng.normal(0.4, 1.0, size=(70, 2))
    for kwargs in (dict(n_bandwidths=2), dict(bandwidths=[0.5, 2.0], contamination=1)):
        local = aggregated_test(X, Y, n_permutations=60, rng=2, **kwargs)
        remote = aggregated_test(X, Y, n_permutations=60, rng=2, backend=dask_backend, **kwargs)
        assert remote.pvalue == local.pvalue and remote.reject == local.reject
        np.testing.assert_allclose(remote.kernel_statistics, local.kernel_statistics, rtol=1e-10)
        assert np.array_equal(remote.kernel_pvalues, local.kernel_pvalues)


def test_local_backend_and_errors():
    def twice(task, shared):
        return 2 * task + shared

    assert LocalBackend().map(twice, [1, 2, 3], 1) == [3, 5, 7]
    with pytest.raises(ParameterError, match="Unknown backend 'spark'"):
        get_backend("spark")
    with pytest.raises(ParameterError, match="needs the Dask backend"):
        get_backend("local", scheduler="tcp://localhost:8786")


def _spread_tiles_small(monkeypatch):
    # many small bands, so that a small job is several tasks per worker (a task is a band;
    # the tiles inside it are cut by the process that runs it, here or on a worker, with
    # the engine's own sizes, so that the local and the spread sums add the same tiles)
    from monk_framework.engine import spread

    monkeypatch.setattr(spread, "MATRIX_FREE_BAND_ROWS", 37)


@pytest.mark.parametrize("estimator", ["u-stat", "v-stat"])
def test_one_estimate_spread_over_workers_equals_the_local_tiled_and_stored_paths(dask_backend, monkeypatch, rng, estimator):
    _spread_tiles_small(monkeypatch)
    reg = get_registry()
    X, Y = rng.normal(size=(300, 3)), rng.normal(0.2, 1.0, size=(250, 3))
    est, kernel = reg.get_estimator(estimator), reg.get_kernel("rbf", sigma=1.5)
    local = est.estimate(kernel, X, Y, rng=0)
    spread = est.estimate(kernel, X, Y, rng=0, backend=dask_backend)
    assert spread.diagnostics["tiled"] and local.diagnostics["tiled"]
    assert spread.mmd2 == local.mmd2  # the same tiles, their shares added in band order
    Kxx, Kyy, Kxy = kernel.gram(X), kernel.gram(Y), kernel.gram(X, Y)  # the stored matrices' sums
    n, m = len(X), len(Y)
    if estimator == "v-stat":
        stored = Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    else:
        stored = (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean()
    assert spread.mmd2 == pytest.approx(stored, rel=1e-10)
    # the local tiled path with the same tiles adds the same shares in the same order
    from monk_framework.engine.spread import spread_kernel_sums

    dx, dy = kernel.diag_tile(X), kernel.diag_tile(Y)
    assert spread_kernel_sums(kernel, X, Y, dx, dy, dask_backend, 37) == spread_kernel_sums(kernel, X, Y, dx, dy, LocalBackend(), 37)


def test_one_test_spreads_its_gram_tiles_and_equals_the_stored_test(dask_backend, monkeypatch, rng):
    _spread_tiles_small(monkeypatch)
    X, Y = rng.normal(size=(200, 2)), rng.normal(0.3, 1.0, size=(180, 2))
    kw = dict(n_permutations=60, rng=5, return_null=True)
    stored = permutation_test(X, Y, kernel="rbf", estimator="u-stat", **kw)
    spread = permutation_test(X, Y, kernel="rbf", estimator="u-stat", backend=dask_backend, **kw)
    forced = permutation_test(X, Y, kernel="rbf", estimator="u-stat", max_memory="64kB", **kw)
    for other in (spread, forced):
        assert other.statistic == pytest.approx(stored.statistic, rel=1e-10)
        np.testing.assert_allclose(other.null_distribution, stored.null_distribution, rtol=1e-10, atol=1e-12)
        assert other.pvalue == stored.pvalue
    # the workers' bands are the local matrix-free bands: the same shares in the same order
    assert spread.statistic == pytest.approx(forced.statistic, rel=1e-13)


def test_monkfw_run_spreads_one_estimate_with_the_local_number():
    import json

    from typer.testing import CliRunner

    from monk_framework.app.cli import app

    args = ["run", "-k", "rbf", "-e", "u-stat", "--dataset", "gauss-outliers", "--json"]
    local = CliRunner().invoke(app, args)
    spread = CliRunner().invoke(app, [*args, "--backend", "dask", "--workers", "1"])
    assert local.exit_code == 0 == spread.exit_code, spread.output
    a, b = json.loads(local.stdout), json.loads(spread.stdout)
    assert b["diagnostics"]["tiled"] and a["diagnostics"]["tiled"]
    assert b["mmd2"] == pytest.approx(a["mmd2"], rel=1e-10)


@pytest.mark.parametrize(
    "name, params",
    [
        ("monk-bcd-fast", {"n_blocks": 7, "solver": "exact"}),
        ("monk-bcd-fast", {"n_blocks": 5}),
        ("monk-bcd", {"n_blocks": 5, "n_iter": 15}),
    ],
)
def test_monk_estimates_spread_their_blocks_with_the_local_numbers(dask_backend, monkeypatch, rng, name, params):
    _spread_tiles_small(monkeypatch)
    reg = get_registry()
    X, Y = rng.normal(size=(140, 2)), rng.normal(0.4, 1.0, size=(120, 2))
    est, kernel = reg.get_estimator(name, **params), reg.get_kernel("rbf", sigma=1.0)
    local = est.estimate(kernel, X, Y, rng=3)
    spread = est.estimate(kernel, X, Y, rng=3, backend=dask_backend)
    assert spread.mmd2 == pytest.approx(local.mmd2, rel=1e-10, abs=1e-14)


# -- a scheduler address: a Dask scheduler, or one line naming what answers there ------------


def test_a_real_scheduler_passes_the_probe_and_connects(dask_backend):
    from monk_framework.engine.backends import probe_scheduler

    address = dask_backend.client.scheduler.address
    probe_scheduler(address)
    with DaskBackend(address) as remote:
        assert remote.workers == 2


def _server(reply: bytes | None):
    """A TCP server on 127.0.0.1 that sends ``reply`` on each connection (None: says
    nothing), standing for another kind of server at a scheduler address."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if reply is not None:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n", r"is not a Dask scheduler: its first bytes \(b'SSH-2.0-'\) are not a Dask handshake"),
        (None, r"is not a Dask scheduler: it sent no Dask handshake within 0.5 s"),
        (b'\x08\x00\x00\x00\x00\x00\x00\x00{"a": 1}', r"is not a Dask scheduler: its first message is not a Dask handshake"),
    ],
    ids=["ssh-banner", "silent-http", "json"],
)
def test_another_kind_of_server_is_one_line_within_the_timeout(monkeypatch, reply, message):
    # dask would read the banner's bytes as a frame length (MemoryError: 3.07 EiB) or wait
    import time

    from monk_framework.core.errors import MonkError
    from monk_framework.engine import backends

    monkeypatch.setattr(backends, "SCHEDULER_TIMEOUT", 0.5)
    server, address = _server(reply)
    try:
        start = time.monotonic()
        with pytest.raises(MonkError, match=rf"The server at '{address}' " + message):
            DaskBackend(address)
        assert time.monotonic() - start < 5
    finally:
        server.close()


def test_a_closed_port_is_one_line():
    import socket

    from monk_framework.core.errors import MonkError

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(MonkError, match=rf"Cannot reach the Dask scheduler at 'tcp://127.0.0.1:{port}': Connection refused"):
        DaskBackend(f"tcp://127.0.0.1:{port}")


def test_monkfw_with_another_server_at_the_scheduler_address_is_one_line_as_a_real_process():
    import subprocess
    import sys
    import time

    server, address = _server(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    try:
        start = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "monk_framework",
                "run",
                "-k",
                "rbf",
                "-e",
                "u-stat",
                "--data-param",
                "n=30",
                "--backend",
                "dask",
                "--scheduler",
                address,
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert time.monotonic() - start < 30
    finally:
        server.close()
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: The server at '{address}' is not a Dask scheduler: its first bytes (b'HTTP/1.1') are not a Dask handshake (another kind of server?)."
    ]


@pytest.mark.slow  # 5 s: a script's process and its would-be workers (.ci/run runs it)
def test_a_script_that_starts_the_cluster_at_module_level_gets_the_one_thing_to_do(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text("from monk_framework.engine.backends import get_backend\nget_backend('dask', n_workers=1).close()\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("monk_framework.core.errors.MonkError: The embedded Dask cluster could not start its worker processes. A script that starts it")
        and 'if __name__ == "__main__":' in last
    )
    assert "bootstrapping phase" not in done.stderr and len(done.stderr.splitlines()) < 15


@pytest.mark.slow  # 3 s: two clusters of one worker, whose workers die (.ci/run runs it)
def test_a_worker_that_dies_is_the_clusters_failure_in_one_line_not_a_plugins():
    import contextlib
    import os

    import dask

    from monk_framework.engine.backends import ClusterError

    # defined here, so that they travel by value (this test module is no module a worker imports)
    def _double(task, shared):
        return 2 * task + len(shared)

    def _exit_now(task, shared):  # a task that ends its worker process, as an out-of-memory kill does
        os._exit(1)

    # the shared data lived on the one worker: its death loses them
    backend = DaskBackend(n_workers=1)
    try:
        shared = backend.share(np.arange(5.0))
        assert sorted(v for _, v in backend.as_completed(_double, [1, 2], shared)) == [7, 9]
        with contextlib.suppress(Exception):
            backend.client.run(os._exit, 1)
        backend.client.wait_for_workers(1, timeout=60)
        with pytest.raises(
            ClusterError,
            match=r"^The embedded Dask cluster lost a worker during this work, and with it "
            r"data the tasks needed \(.*\): a worker killed, or out of memory\? Nothing was returned",
        ):
            list(backend.as_completed(_double, [1, 2], shared))
        # the cluster still works for new data
        assert sorted(v for _, v in backend.as_completed(_double, [1], np.arange(2.0))) == [4]
    finally:
        backend.close()
    # a task whose every worker dies (an out-of-memory kill) is KilledWorker, said as such
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        backend = DaskBackend(n_workers=1)
    try:
        with pytest.raises(
            ClusterError,
            match=r"^Workers of the embedded Dask cluster died while running this work, each "
            r"one that took the task \(KilledWorker: .*\): out of memory, or killed",
        ):
            list(backend.as_completed(_exit_now, [1], None))
    finally:
        backend.close()


def test_a_lost_scheduler_is_told_apart_from_a_lost_worker():
    # the client closes itself once it cannot reconnect to the scheduler (10 s): then the
    # same CommClosedError means the scheduler, not a worker, went away
    import types

    import distributed
    from distributed.comm.core import CommClosedError

    from monk_framework.engine.backends import _cluster_error

    lost = CommClosedError("ConnectionPool closing.")
    for status, scheduler, message in [
        (
            "closed",
            "tcp://127.0.0.1:8799",
            r"^The connection to the Dask scheduler at 'tcp://127.0.0.1:8799' was lost during "
            r"this work \(CommClosedError: ConnectionPool closing.\): the scheduler stopped",
        ),
        ("running", "tcp://127.0.0.1:8799", r"^The Dask cluster at 'tcp://127.0.0.1:8799' lost a worker during this work"),
        ("running", None, r"^The embedded Dask cluster lost a worker during this work"),
    ]:
        backend = types.SimpleNamespace(client=types.SimpleNamespace(status=status), scheduler=scheduler)
        assert re.match(message, str(_cluster_error(lost, distributed, backend)))
    # a task's own error is the task's: not the cluster's
    backend = types.SimpleNamespace(client=types.SimpleNamespace(status="running"), scheduler=None)
    assert _cluster_error(ValueError("a plugin's fault"), distributed, backend) is None
