"""Level and robustness of the permutation tests: rejection rates over seeded runs.

Not a speed benchmark: a Monte-Carlo study whose output is recorded in docs/testing.md.

* **level**: X, Y ~ N(0, 1) (the same law), N = M = 100, RBF with the median
  heuristic, B = 100 permutations (exact level 5/101), α = 0.05, 500 runs per
  estimator (u-stat, monk-bcd, monk-bcd-fast with their defaults: Q = 11, T = 100).
* **robustness**: X, Y ~ N(0, 1), N = M = 200, quadratic kernel (xy + 1)², 5 of X's
  points replaced by 2000; with and without a real shift of Y by +1 (and +2: "shift2");
  and the shifts without outliers. 200 runs per cell, B = 100; MONK at Q = 11, 21 and 41.

Run ``python benchmarks/testing_study.py`` (about 50 minutes on 2 cores; ``--only`` runs some cells; ``--quick``
for a 1-minute smoke run with fewer runs). Runs are spread over processes; every run
is seeded by its index, so the rates are reproducible.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

#: (estimator, n_blocks) pairs; None keeps the estimator's default (Q = 11 for MONK)
ESTIMATORS = (("u-stat", None), ("monk-bcd", None), ("monk-bcd-fast", None))
#: robustness also at larger Q (see docs/testing.md for why Q matters here)
ROBUST_ESTIMATORS = ESTIMATORS + (("monk-bcd", 21), ("monk-bcd-fast", 21), ("monk-bcd", 41), ("monk-bcd-fast", 41))


def one_run(task: tuple[str, str, int | None, int, int, int]) -> tuple[str, str, bool]:
    setting, estimator, n_blocks, seed, n, B = task
    from monk_framework import get_registry
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    rng = np.random.default_rng([seed, 2026])
    X, Y = rng.normal(size=(n, 1)), rng.normal(size=(n, 1))
    if setting == "level":
        kernel = reg.get_kernel("rbf", sigma="median")
    else:
        kernel = reg.get_kernel("quadratic")
        if "outliers" in setting:
            X[:5] = 2000.0
        if "shift" in setting:
            Y += 2.0 if setting.endswith("shift2") else 1.0
    est = reg.get_estimator(estimator, **({} if n_blocks is None else {"n_blocks": n_blocks}))
    result = permutation_test(kernel, est, X, Y, n_permutations=B, rng=seed)
    label = estimator if n_blocks is None else f"{estimator} Q={n_blocks}"
    return setting, label, result.reject


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 runs per cell instead of 500 / 200")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default=None, help="comma-separated cells to run, e.g. 'monk-bcd Q=41,u-stat'")
    args = parser.parse_args()
    level_runs, robust_runs = (20, 20) if args.quick else (500, 200)
    tasks = [("level", e, q, s, 100, 100) for e, q in ESTIMATORS for s in range(level_runs)]
    for setting in ("outliers", "outliers+shift", "shift", "outliers+shift2", "shift2"):
        tasks += [(setting, e, q, s, 200, 100) for e, q in ROBUST_ESTIMATORS for s in range(robust_runs)]
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if (t[1] if t[2] is None else f"{t[1]} Q={t[2]}") in keep]
    start = time.perf_counter()
    counts: dict[tuple[str, str], list[int]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for setting, estimator, reject in pool.map(one_run, tasks, chunksize=4):
            cell = counts.setdefault((setting, estimator), [0, 0])
            cell[0] += int(reject)
            cell[1] += 1
    print(f"rejection rates at alpha = 0.05 ({time.perf_counter() - start:.0f} s)")
    print(f"{'setting':<16}{'estimator':<20}{'rate':>7}{'runs':>6}  95% interval")
    for (setting, estimator), (k, runs) in counts.items():
        p = k / runs
        half = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / runs)
        print(f"{setting:<16}{estimator:<20}{p:7.3f}{runs:6d}  [{max(p - half, 0):.3f}, {min(p + half, 1):.3f}]")


if __name__ == "__main__":
    main()
