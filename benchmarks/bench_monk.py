"""MONK estimators against the U-statistic on the same data (issue 3's benchmark).

    python benchmarks/bench_monk.py            # N = 2000 per sample, d = 10, RBF, Q = 11, T = 100
    python benchmarks/bench_monk.py --large    # also matrix-free BCD at N = 20 000 per sample

Times are medians of interleaved repeats in one process; ratios are against u-stat on the same data.
Peak memory of the matrix-free run is the process's peak RSS (resource.getrusage).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from monk_framework import get_registry


def _times(fns: dict, repeats: int) -> dict:
    """Median seconds of each function, run in interleaved rounds (so drifts hit all alike)."""
    for fn in fns.values():
        fn()  # warm-up (thread pools, caches)
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--large", action="store_true", help="matrix-free BCD at N = 20 000 per sample")
    args = parser.parse_args()
    reg = get_registry()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, 10))
    Y = rng.standard_normal((args.n, 10)) + 0.1
    kernel = reg.get_kernel("rbf", sigma=float(np.sqrt(10)))
    ests = {
        "u-stat": reg.get_estimator("u-stat"),
        "monk-bcd": reg.get_estimator("monk-bcd", matrix_free=False),
        "monk-bcd-fast": reg.get_estimator("monk-bcd-fast"),
        "monk-bcd-fast (exact)": reg.get_estimator("monk-bcd-fast", solver="exact"),
        "monk-bcd (exact)": reg.get_estimator("monk-bcd", solver="exact", matrix_free=False),
    }
    fns = {name: (lambda est=est: est.estimate(kernel, X, Y, rng=1)) for name, est in ests.items()}
    medians = _times(fns, args.repeats)
    base = medians["u-stat"]
    print(f"N = M = {args.n}, d = 10, RBF sigma = sqrt(10), Q = 11, T = 100, median of {args.repeats} interleaved rounds")
    print(f"{'estimator':22} {'time (s)':>9} {'/ u-stat':>9}   gram_s / iterate_s")
    for name, fn in fns.items():
        res = fn()
        split = f"{res.timings.get('gram_s', 0):.3f} / {res.timings.get('iterate_s', res.timings.get('estimate_s', 0)):.3f}"
        print(f"{name:22} {medians[name]:9.3f} {medians[name] / base:9.2f}   {split}")
    if args.large:
        n = 20_000
        X = rng.standard_normal((n, 10))
        Y = rng.standard_normal((n, 10)) + 0.1
        est = reg.get_estimator("monk-bcd", matrix_free=True)
        start = time.perf_counter()
        res = est.estimate(kernel, X, Y, rng=1)
        elapsed = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"matrix-free monk-bcd, N = M = {n}: {elapsed:.1f} s, peak RSS {peak:.2f} GiB, MMD {res.mmd:.6f}")


if __name__ == "__main__":
    main()
