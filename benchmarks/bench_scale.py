"""Scale (issue 18): large estimates and tests against this machine's floor, measured in the same run.

    python benchmarks/bench_scale.py                   # every case at the issue's sizes (about 10 min)
    python benchmarks/bench_scale.py --only everyday   # one case (repeatable option)
    python benchmarks/bench_scale.py --scale 0.2       # sizes times 0.2: a quick look

The floor. First this process measures the machine: the GEMM rate R (FLOP/s, a 4000³
product on both cores) and the time e of one ``np.exp`` per value (one core). A case
evaluates E kernel entries and does F floating-point operations in products (distances
as GEMM, relabelling products, sums), so no implementation on this machine can beat

    floor_FLOP = F / R          (products at the GEMM rate), or, counting the one exp
    floor_exp  = F / R + E·e/2  that every RBF entry needs, spread over the 2 cores.

Each large case runs in a child process (its own peak memory: ``ru_maxrss``, plus the
workers' for Dask) and reports its time over both floors. Cases:

* ``everyday``: the u-stat test with the median heuristic at N = M = 1000, d = 10,
  B = 1000, against its one relabelling product, a 2000 × 2000 × 1000 GEMM: tests back
  to back as a study runs them, and the GEMM back to back, in alternated rounds; then
  each test right after a GEMM (medians of 9), with glibc's allocator defaults and after
  ``reuse_freed_memory()`` (what ``monkfw`` does); one at a time after an idle moment
  (OpenBLAS's idle threads asleep, as in a program that runs one test now and then);
  and right after a GEMM in a process started with OPENBLAS_THREAD_TIMEOUT=4 (its
  threads sleep at once);
* ``ustat-estimate``: the u-stat estimate at N = M = 10⁵, d = 10, ``max_memory="2GB"``;
* ``ustat-test``: the u-stat test with B = 100 at N = M = 10⁵, d = 10, 2 GB, here and on
  Dask with 1 and 2 local workers (the same statistic and p-value are checked);
* ``monk-bcd``: monk-bcd matrix-free, Q = 101, T = 100 iterations, at N = M = 10⁵;
* ``bcd-fast``: monk-bcd-fast's exact solver, Q = 1001, at N = M = 10⁶, here and on 2 workers;
* ``model``: the cost model t = E·(a·passes + b·(B + 1))/k fitted on two small
  1-worker tests, checked against the 10⁵ test on 1 and 2 workers, then used for 10⁷.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

D = 10
CORES = 2
BLOCK_SIZE = "2GB"


def _rates() -> tuple[float, float]:
    """(GEMM FLOP/s on both cores, seconds per np.exp value on one core)."""
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4000, 4000)), rng.normal(size=(4000, 4000))
    A @ B
    gemm = min(_clock(lambda: A @ B) for _ in range(3))
    x = np.full(1 << 24, -0.3)
    np.exp(x)
    e = min(_clock(lambda: np.exp(x, out=x)) for _ in range(3))
    return 2 * 4000**3 / gemm, e / x.size


def _clock(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _data(n: int, seed: int, shift: float = 0.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(shift, 1.0, size=(n, D))


# -- cases, each run in a child process -----------------------------------------------------


def _count_entries():
    """Patch Kernel.gram_tile to count the kernel entries evaluated in this process."""
    from monk_framework.core.kernels import Kernel

    counter = {"entries": 0}
    original = Kernel.gram_tile

    def counted(self, X, Y, **options):
        counter["entries"] += len(X) * len(Y)
        return original(self, X, Y, **options)

    Kernel.gram_tile = counted
    return counter


def _backend(workers: int):
    if not workers:
        return None
    from monk_framework.engine.backends import DaskBackend

    return DaskBackend(n_workers=workers)


def _worker_peak(backend) -> int:
    if backend is None:
        return 0
    peaks = backend.client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return 1024 * sum(peaks.values())


def _warm_up(case: str, reg, kernel) -> None:
    """A tiny run of the case's path (matrix-free where the case is) before the clock
    starts: the numba loops compile, or load from their disk cache, outside the timing
    (a first run after an edit of their module would otherwise count a few seconds of
    compilation)."""
    from monk_framework.two_sample import permutation_test

    X, Y = _data(400, 3), _data(400, 4)
    if case == "ustat-estimate":
        reg.get_estimator("u-stat").estimate(kernel, X, Y, rng=0, max_memory="1MB")
    elif case == "ustat-test":
        permutation_test(X, Y, kernel=kernel, estimator="u-stat", n_permutations=5, rng=0, max_memory="1MB")
    elif case == "monk-bcd":
        reg.get_estimator("monk-bcd", n_blocks=5, matrix_free=True, trace=False).estimate(kernel, X, Y, rng=0, max_memory="1MB")
    elif case == "bcd-fast":
        reg.get_estimator("monk-bcd-fast", n_blocks=5, solver="exact").estimate(kernel, X, Y, rng=0)


def child(case: str, n: int, workers: int, B: int) -> dict:
    from monk_framework import get_registry
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    X, Y = _data(n, 1), _data(n, 2, 0.01)
    kernel = reg.get_kernel("rbf", sigma=float(math.sqrt(2 * D)))  # about the median distance
    _warm_up(case, reg, kernel)
    backend = _backend(workers)
    counter = _count_entries() if not workers else {"entries": None}
    out: dict = {"case": case, "n": n, "workers": workers}
    start = time.perf_counter()
    if case == "ustat-estimate":
        r = reg.get_estimator("u-stat").estimate(kernel, X, Y, rng=0, max_memory=BLOCK_SIZE, backend=backend)
        out.update(mmd2=r.mmd2)
        out["entries"] = n * (n + 1) // 2 * 2 + n * n
        out["flop"] = out["entries"] * (2 * D + 3)
    elif case == "ustat-test":
        r = permutation_test(X, Y, kernel=kernel, estimator="u-stat", n_permutations=B, rng=0, max_memory=BLOCK_SIZE, backend=backend)
        out.update(statistic=r.statistic, pvalue=r.pvalue)
        S = 2 * n
        out["entries"] = S * (S + 1) // 2
        out["flop"] = out["entries"] * (2 * D + 3 + 2 * (B + 1) + 1)
    elif case == "monk-bcd":
        est = reg.get_estimator("monk-bcd", n_blocks=101, matrix_free=True, trace=False)
        r = est.estimate(kernel, X, Y, rng=0, max_memory=BLOCK_SIZE)
        out.update(mmd2=r.mmd2)
    elif case == "bcd-fast":
        from monk_framework.engine.partitions import block_sizes

        est = reg.get_estimator("monk-bcd-fast", n_blocks=1001, solver="exact")
        r = est.estimate(kernel, X, Y, rng=0, max_memory=BLOCK_SIZE, backend=backend)
        out.update(mmd2=r.mmd2)
        # each block's pooled Gram matrix, its upper half with the diagonal
        sizes = block_sizes(n, 1001) * 2
        out["entries"] = int((sizes * (sizes + 1) // 2).sum())
        out["flop"] = out["entries"] * (2 * D + 3 + 2 * 2)
    else:
        raise SystemExit(f"unknown case {case}")
    out["seconds"] = time.perf_counter() - start
    if counter["entries"] is not None and "entries" not in out:
        out["entries"] = counter["entries"]
        out["flop"] = counter["entries"] * (2 * D + 3)
    out["peak_bytes"] = 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + _worker_peak(backend)
    if backend is not None:
        backend.close()
    return out


def _run_child(case: str, n: int, workers: int = 0, B: int = 100) -> dict:
    cmd = [sys.executable, __file__, "--child", case, "--n", str(n), "--workers", str(workers), "--B", str(B)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _report(row: dict, R: float, e: float) -> str:
    floor_flop = row["flop"] / R
    floor_exp = floor_flop + row["entries"] * e / CORES
    where = f"Dask, {row['workers']} worker{'s' if row['workers'] > 1 else ''}" if row["workers"] else "this process"
    return (
        f"| {row['case']} | {row['n']:,} + {row['n']:,} | {where} | {row['seconds']:.1f} s | {row['entries']:.3g} | "
        f"{floor_flop:.1f} s | {row['seconds'] / floor_flop:.2f} | {floor_exp:.1f} s | {row['seconds'] / floor_exp:.2f} | "
        f"{row['peak_bytes'] / 1e9:.2f} GB |"
    )


# -- the everyday test --------------------------------------------------------------------------


#: the idle moment before a timed call in the "one test at a time" rows: longer than
#: OpenBLAS's idle threads spin after a parallel call (measured: 0.10-0.11 s of CPU)
IDLE_SECONDS = 0.3


def everyday(rows: tuple[str, ...]) -> None:
    """The everyday test against its GEMM (medians of 9 or more), under the conditions
    named in ``rows``:

    * "loop": tests back to back, as a study runs them, and the GEMM back to back, in
      three alternated rounds of nine each (OpenBLAS's and glibc's defaults apart from
      ``reuse_freed_memory()``, which ``monkfw`` calls);
    * "defaults" and "reuse": each test right after a GEMM, alternately (with glibc's
      allocator defaults, then after ``reuse_freed_memory()``): the GEMM's idle BLAS
      threads spin into the test that follows;
    * "idle": one at a time, after an idle moment (OpenBLAS's idle threads asleep);
    * "sleeping-blas": alternately, in a process started with OPENBLAS_THREAD_TIMEOUT=4.
    """
    from monk_framework import get_registry
    from monk_framework.core.resources import reuse_freed_memory
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    X, Y = _data(1000, 10), _data(1000, 11, 0.1)
    kernel, est = reg.get_kernel("rbf", sigma="median"), reg.get_estimator("u-stat")
    rng = np.random.default_rng(0)
    K, E = rng.normal(size=(2000, 2000)), rng.normal(size=(2000, 1000))
    test = lambda: permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=1000, rng=0)  # noqa: E731
    gemm = lambda: K @ E  # noqa: E731
    labels = {
        "loop": "tests back to back (3 rounds of 9), the GEMM back to back",
        "defaults": "each test right after a GEMM, glibc's allocator defaults",
        "reuse": "each test right after a GEMM, reuse_freed_memory()",
        "idle": f"one at a time, after {IDLE_SECONDS} s idle",
        "sleeping-blas": "each test right after a GEMM, OPENBLAS_THREAD_TIMEOUT=4",
    }
    for row in rows:
        if row != "defaults":
            reuse_freed_memory()
        pause = IDLE_SECONDS if row == "idle" else 0.0

        def clock(fn) -> float:
            time.sleep(pause)
            return _clock(fn)

        test(), gemm()
        t_test, t_gemm = [], []
        if row == "loop":
            for _ in range(3):
                t_gemm += [clock(gemm) for _ in range(9)]
                t_test += [clock(test) for _ in range(9)]
        else:
            for _ in range(9):  # alternately, so that both see the same machine
                t_test.append(clock(test))
                t_gemm.append(clock(gemm))
        a, g = statistics.median(t_test), statistics.median(t_gemm)
        r = test()
        print(f"| 1000 | 1000 | {labels[row]} | {a * 1e3:.1f} ms | {g * 1e3:.1f} ms | {a / g:.2f} | {2 * a / g:.2f} | {r.pvalue:.4g} |", flush=True)


def everyday_all() -> None:
    print("| N = M | B | how | test | GEMM 2000 × 2000 × 1000 | test / GEMM | test / half GEMM (the FLOPs it does) | p-value |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    everyday(("loop", "defaults", "reuse", "idle"))
    # OpenBLAS reads its spin time when it loads: a process of its own
    env = {**os.environ, "OPENBLAS_THREAD_TIMEOUT": "4"}
    proc = subprocess.run([sys.executable, __file__, "--everyday", "sleeping-blas"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"everyday (sleeping BLAS threads) failed:\n{proc.stderr[-3000:]}")
    print(proc.stdout.strip())


# -- the cost model -------------------------------------------------------------------------


def model(R: float, e: float, scale: float, measured: list[dict]) -> None:
    """t = E·(a·passes + b·(B + 1)) / k: a per kernel entry and pass, b per entry and column."""
    n = int(20000 * scale) or 2000
    runs = {B: _run_child("ustat-test", n, 1, B) for B in (10, 100)}
    E = runs[10]["entries"]
    b = (runs[100]["seconds"] - runs[10]["seconds"]) / (E * 90)
    a = runs[10]["seconds"] / E - b * 11
    print(
        f"\nFitted on 1-worker tests at N = M = {n:,} (B = 10: {runs[10]['seconds']:.1f} s, B = 100: "
        f"{runs[100]['seconds']:.1f} s): a = {a * 1e9:.2f} ns per entry and pass, b = {b * 1e9:.3f} ns per entry and column."
    )
    print("\n| N = M | workers | model | measured | measured / model |")
    print("|---|---|---|---|---|")
    for row in measured:
        if row["case"] == "ustat-test" and row["workers"]:
            pred = row["entries"] * (a + b * 101) / row["workers"]
            print(f"| {row['n']:,} | {row['workers']} | {pred:.1f} s | {row['seconds']:.1f} s | {row['seconds'] / pred:.2f} |")
    S = 2 * 10**7
    entries = S * (S + 1) / 2
    budget = 12e9  # half of this machine's 24 GB per worker host
    per_pass = max(1, int(budget // (4 * 8 * S)))
    passes = math.ceil(101 / per_pass)
    print(
        f"\n10⁷ + 10⁷ points, B = 100 ({passes} passes over the kernel: E of {per_pass} relabellings per pass "
        f"within a {budget / 1e9:.0f} GB budget; the data, 1.6 GB, on every worker):"
    )
    print("\n| workers | model |")
    print("|---|---|")
    for k in (1, 2, 16, 64, 256):
        t = entries * (a * passes + b * 101) / k
        print(f"| {k} | {t / 3600:.1f} h |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=["everyday", "ustat-estimate", "ustat-test", "monk-bcd", "bcd-fast", "model"])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--child")
    parser.add_argument("--everyday", help="one row of the everyday case (used by the case itself)")
    parser.add_argument("--n", type=int)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--B", type=int, default=100)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.workers, args.B)))
        return
    if args.everyday:
        everyday((args.everyday,))
        return
    only = set(args.only or ["everyday", "ustat-estimate", "ustat-test", "monk-bcd", "bcd-fast", "model"])
    R, e = _rates()
    print(f"GEMM rate {R / 1e9:.0f} GFLOP/s (2 cores); np.exp {e * 1e9:.2f} ns per value (1 core)\n")
    if "everyday" in only:
        everyday_all()
    big, huge = int(1e5 * args.scale), int(1e6 * args.scale)
    plan = []
    if "ustat-estimate" in only:
        plan.append(("ustat-estimate", big, 0))
    if "ustat-test" in only or "model" in only:
        plan += [("ustat-test", big, 0), ("ustat-test", big, 1), ("ustat-test", big, 2)]
    if "monk-bcd" in only:
        plan.append(("monk-bcd", big, 0))
    if "bcd-fast" in only:
        plan += [("bcd-fast", huge, 0), ("bcd-fast", huge, 2)]
    rows = []
    if plan:
        print("\n| case | N + M | where | time | kernel entries | floor (FLOP) | time / floor | floor (FLOP + exp) | time / floor | peak memory |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for case, n, workers in plan:
        row = _run_child(case, n, workers)
        rows.append(row)
        print(_report(row, R, e), flush=True)
    tests = [r for r in rows if r["case"] == "ustat-test"]
    if tests:
        same = all(r["pvalue"] == tests[0]["pvalue"] for r in tests)
        spread = max(abs(r["statistic"] - tests[0]["statistic"]) / abs(tests[0]["statistic"]) for r in tests)
        print(f"\nThe 10⁵ tests: the same p-value everywhere: {same} ({tests[0]['pvalue']:.4g}); statistics within {spread:.1e} relative.")
        ones = {r["workers"]: r["seconds"] for r in tests}
        if 1 in ones and 2 in ones:
            print(f"Dask speedup, 2 workers over 1: {ones[1] / ones[2]:.2f}x.")
    if "model" in only:
        model(R, e, args.scale, rows)


if __name__ == "__main__":
    main()
