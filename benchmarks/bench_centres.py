"""The two centres of ``monk-embedding-mmd``: MONK's minmax embedding (cutting planes with
an exact oracle) against the geometric median of the block means, in one run.

    python benchmarks/bench_centres.py            # the dimension study's settings, Q = 11
    python benchmarks/bench_centres.py --quick    # d = 1 and 5, N = 200

Data as in the dimension study: X ~ N(0, I_d), Y ~ N(0.5·1, I_d), N = M, clean or with
the last 5 points of X at 2000 and of Y at 4000; RBF with σ = √d and the quadratic
kernel. Each row: the median of ``--repeats`` estimates with each centre (seeds 0, 1, …)
and the ratio minmax / geometric. The minmax oracle enumerates faces of at most
min(majority, dimension + 1) blocks, where dimension is that of the span of the block
means: with the quadratic kernel on one feature (three dimensions) it is several times
cheaper than with a kernel whose block means span all Q dimensions.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from monk_framework import estimate


def _median_seconds(kernel: str, spec: str, X: np.ndarray, Y: np.ndarray, repeats: int) -> float:
    times = []
    for seed in range(repeats):
        start = time.perf_counter()
        estimate(X, Y, kernel=kernel, estimator=spec, rng=seed)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 1 and 5, N = 200 only")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dims, sizes = ((1, 5), (200,)) if args.quick else ((1, 5, 50), (200, 1000))
    estimate(np.ones((40, 1)), np.zeros((40, 1)), kernel="quadratic", estimator="monk-embedding-mmd:center=minmax")  # compile, warm up
    print(f"{'kernel':10s} {'d':>3s} {'N':>5s} {'data':8s} {'minmax':>10s} {'geometric':>10s} {'ratio':>7s}")
    for name in ("rbf", "quadratic"):
        for d in dims:
            kernel = f"rbf:sigma={float(np.sqrt(d))!r}" if name == "rbf" else "quadratic"
            for n in sizes:
                for data in ("clean", "outliers"):
                    rng = np.random.default_rng(0)
                    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, d)) + 0.5
                    if data == "outliers":
                        X[-5:], Y[-5:] = 2000.0, 4000.0
                    t_min = _median_seconds(kernel, "monk-embedding-mmd:center=minmax", X, Y, args.repeats)
                    t_geo = _median_seconds(kernel, "monk-embedding-mmd:center=geometric", X, Y, args.repeats)
                    print(f"{name:10s} {d:3d} {n:5d} {data:8s} {t_min * 1e3:8.1f}ms {t_geo * 1e3:8.1f}ms {t_min / t_geo:7.1f}", flush=True)


if __name__ == "__main__":
    main()
