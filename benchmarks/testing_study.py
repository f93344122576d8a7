"""Level and robustness of the permutation tests: rejection rates over seeded runs.

Not a speed benchmark: a Monte-Carlo study whose output is recorded in docs/studies/tests.md.

* **level**: X, Y ~ N(0, 1) (the same law), N = M = 100, RBF with the median
  heuristic, B = 100 permutations (exact level 5/101), α = 0.05, 500 runs per
  estimator (u-stat, monk-bcd, monk-bcd-fast with its iterations and with its exact
  solver; Q = 11, T = 100).
* **robustness**: X, Y ~ N(0, 1), N points in X and M in Y (``--sizes N,M``, default
  200,200), quadratic kernel (xy + 1)², 5 of X's points replaced by 2000; with and
  without a real shift of Y by +1 (and +2: "shift2"); and the shifts without outliers.
  200 runs per cell, B = 100; MONK at Q = 11, 21 and 41.

MONK tests relabel within their blocks (the default since the robustness study,
``benchmarks/robustness_study.py``, which covers more designs, kernels and sizes);
``--relabel global`` gives the relabelling the first tables of this study used. This
script is kept for the cells the robustness study has not: unequal sizes
(``--sizes 200,400``) and the RBF median heuristic.

Estimators are specs (``monk-bcd-fast:n_blocks=41``); ``--only`` keeps some of them,
``--settings`` some settings. Run ``python benchmarks/testing_study.py`` (about an hour
on 2 cores for everything; ``--quick`` for a 1-minute smoke run with 20 runs a cell).
Runs are spread over processes; every run is seeded by its index, so the rates are
reproducible and a cell gives the same rate in any invocation.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

LEVEL_ESTIMATORS = ("u-stat", "monk-bcd", "monk-bcd-fast", "monk-bcd-fast:solver=exact")
#: robustness also at larger Q (see docs/studies/tests.md for why Q matters here)
ROBUST_ESTIMATORS = (
    "u-stat",
    "monk-bcd",
    "monk-bcd:n_blocks=21",
    "monk-bcd:n_blocks=41",
    "monk-bcd-fast",
    "monk-bcd-fast:n_blocks=21",
    "monk-bcd-fast:n_blocks=41",
    "monk-bcd-fast:solver=exact",
    "monk-bcd-fast:n_blocks=21,solver=exact",
    "monk-bcd-fast:n_blocks=41,solver=exact",
)
ROBUST_SETTINGS = ("outliers", "outliers+shift", "shift", "outliers+shift2", "shift2")
#: run only when named in --settings: outliers in both samples at the same positions
#: (5 of X's points at 2000 and the same 5 of Y's at 4000, as in the data of Experiment 1)
EXTRA_SETTINGS = ("outliers-both", "outliers-both+shift")


def one_run(task: tuple[str, str, int, int, int, int, int, str]) -> tuple[str, str, bool]:
    setting, spec, seed, n, m, B, salt, relabel = task
    from monk_framework import get_registry
    from monk_framework.core.params import parse_spec
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    rng = np.random.default_rng([seed, salt])
    X, Y = rng.normal(size=(n, 1)), rng.normal(size=(m, 1))
    if setting == "level":
        kernel = reg.get_kernel("rbf", sigma="median")
    else:
        kernel = reg.get_kernel("quadratic")
        if "outliers" in setting:
            X[:5] = 2000.0
        if "outliers-both" in setting:
            Y[:5] = 4000.0
        if "shift" in setting:
            Y += 2.0 if setting.endswith("shift2") else 1.0
    name, params = parse_spec(spec)
    result = permutation_test(X, Y, kernel=kernel, estimator=reg.get_estimator(name, **params), n_permutations=B, rng=seed, relabel=relabel)
    return setting, spec, result.reject


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 runs per cell instead of 500 / 200")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default=None, help="estimator specs to run, separated by ';', e.g. 'u-stat;monk-bcd:n_blocks=41'")
    parser.add_argument("--settings", default=None, help="comma-separated settings, e.g. 'level,outliers'")
    parser.add_argument("--sizes", default="200,200", help="N,M of the robustness cells (X holds the outliers)")
    parser.add_argument("--runs", type=int, default=None, help="runs per cell (default 500 for level, 200 for robustness)")
    parser.add_argument("--salt", type=int, default=2026, help="data seeds are [run, salt]: another salt replicates a cell on new data")
    parser.add_argument("--relabel", default="auto", choices=("auto", "within-blocks", "global"), help="how the permutation test relabels")
    args = parser.parse_args()
    level_runs, robust_runs = (20, 20) if args.quick else (500, 200)
    if args.runs is not None:
        level_runs = robust_runs = args.runs
    n, m = (int(v) for v in args.sizes.split(","))
    tasks = [("level", e, s, 100, 100, 100, args.salt, args.relabel) for e in LEVEL_ESTIMATORS for s in range(level_runs)]
    extra = [t for t in EXTRA_SETTINGS if args.settings and t in args.settings.split(",")]
    for setting in (*ROBUST_SETTINGS, *extra):
        tasks += [(setting, e, s, n, m, 100, args.salt, args.relabel) for e in ROBUST_ESTIMATORS for s in range(robust_runs)]
    if args.only:
        keep = set(args.only.split(";"))
        tasks = [t for t in tasks if t[1] in keep]
    if args.settings:
        keep = set(args.settings.split(","))
        tasks = [t for t in tasks if t[0] in keep]
    start = time.perf_counter()
    counts: dict[tuple[str, str], list[int]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for setting, spec, reject in pool.map(one_run, tasks, chunksize=4):
            cell = counts.setdefault((setting, spec), [0, 0])
            cell[0] += int(reject)
            cell[1] += 1
    print(f"rejection rates at alpha = 0.05 ({time.perf_counter() - start:.0f} s; robustness cells N = {n}, M = {m}; salt {args.salt}; relabel {args.relabel})")
    print(f"{'setting':<22}{'estimator':<40}{'rate':>7}{'runs':>6}  95% interval")
    for (setting, spec), (k, runs) in counts.items():
        p = k / runs
        half = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / runs)
        print(f"{setting:<22}{spec:<40}{p:7.3f}{runs:6d}  [{max(p - half, 0):.3f}, {min(p + half, 1):.3f}]")


if __name__ == "__main__":
    main()
