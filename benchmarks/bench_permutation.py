"""Permutation two-sample tests: ours against dcor and hyppo on the same data (issue 5).

    python benchmarks/bench_permutation.py                  # N = M = 1000, d = 1 and 10, B = 1000
    python benchmarks/bench_permutation.py --hyppo-reps 50  # hyppo's permutations, scaled to B

* ours: ``permutation_test`` with u-stat and RBF (median heuristic), and with v-stat and
  the energy kernel (the statistic dcor tests, for a like-for-like row);
* dcor: ``dcor.homogeneity.energy_test`` (energy distance, B resamples);
* hyppo: ``hyppo.ksample.MMD(compute_kernel="gaussian").test(auto=False)``, a permutation
  test of MMD with a Gaussian kernel. It is slow, so it runs ``--hyppo-reps``
  permutations and its time is scaled linearly to B (the per-permutation cost is
  constant; the fixed part, one Gram matrix, is included once, which favours hyppo).

Times are medians over ``--repeats`` runs of ours (one warm-up first), single runs of
the peers. Also: 150-permutation monk-bcd and monk-bcd-fast tests on the splice data
(766 sequences per class, SSK n = 5, λ = 0.5) and a monk-bcd test on vectors of the
same size.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from monk_framework import get_registry
from monk_framework.two_sample import permutation_test


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up: thread pools, first touch of memory, numba cache
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--hyppo-reps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-monk", action="store_true")
    args = parser.parse_args()
    import dcor
    from hyppo.ksample import MMD

    # hyppo warns that fewer than 1000 replications are unreliable: here they only time it
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="hyppo")

    reg = get_registry()
    B, n = args.permutations, args.n
    # both peers compile numba code on first use: pay that before timing
    tiny = np.random.default_rng(0).normal(size=(20, 1))
    dcor.homogeneity.energy_test(tiny, tiny + 1, num_resamples=5, random_state=0)
    MMD(compute_kernel="gaussian").test(tiny, tiny + 1, reps=5, workers=1, auto=False, random_state=0)
    print(f"N = M = {n}, B = {B} permutations, 2 cores")
    print(f"{'d':>3} {'ours u-stat RBF':>16} {'ours v-stat energy':>19} {'dcor energy':>12} {'hyppo MMD':>14} {'dcor/ours':>10} {'hyppo/ours':>11}")
    for d in (1, 10):
        rng = np.random.default_rng(d)
        X, Y = rng.normal(size=(n, d)), rng.normal(0.1, 1.0, size=(n, d))
        rbf, energy = reg.get_kernel("rbf", sigma="median"), reg.get_kernel("energy")
        ustat, vstat = reg.get_estimator("u-stat"), reg.get_estimator("v-stat")
        ours = _median_time(lambda: permutation_test(X, Y, kernel=rbf, estimator=ustat, n_permutations=B, rng=0), args.repeats)
        ours_energy = _median_time(lambda: permutation_test(X, Y, kernel=energy, estimator=vstat, n_permutations=B, rng=0), args.repeats)
        t_dcor = _once(lambda: dcor.homogeneity.energy_test(X, Y, num_resamples=B, random_state=0))
        reps = args.hyppo_reps
        t_hyppo_part = _once(lambda: MMD(compute_kernel="gaussian").test(X, Y, reps=reps, workers=1, auto=False, random_state=0))
        t_hyppo = t_hyppo_part * B / reps
        print(f"{d:>3} {ours:15.3f}s {ours_energy:18.3f}s {t_dcor:11.2f}s {t_hyppo:12.1f}s* {t_dcor / ours:9.0f}x {t_hyppo / ours:10.0f}x")
    print(f"* hyppo ran {args.hyppo_reps} permutations; time scaled by {B}/{args.hyppo_reps}")
    print("dcor/ours and hyppo/ours use ours = u-stat with RBF (the test the issue names)")
    if args.skip_monk:
        return
    from monk_framework.app.datasets import get_dataset

    X, Y = get_dataset("splice-ei-ie", n=766, ambiguous="keep").sample(0)
    ssk = reg.get_kernel("ssk", n=5, lam=0.5)
    cases = (
        ("monk-bcd", 5, {}),
        ("monk-bcd", 11, {}),
        ("monk-bcd-fast", 5, {}),
        ("monk-bcd-fast", 15, {}),
        ("monk-bcd-fast", 5, {"solver": "exact"}),
        ("monk-bcd-fast", 15, {"solver": "exact"}),
    )
    for name, q, params in cases:
        monk = reg.get_estimator(name, n_blocks=q, **params)
        t = _median_time(lambda: permutation_test(X, Y, kernel=ssk, estimator=monk, n_permutations=150, rng=0), 3)
        how = ", ".join([f"Q = {q}", *(f"{k} = {v}" for k, v in params.items())])
        print(f"{name} ({how}) test, B = 150, splice EI vs IE 766 + 766, SSK n = 5: {t:.2f} s")
    rng = np.random.default_rng(0)
    Xv, Yv = rng.normal(size=(766, 10)), rng.normal(size=(766, 10))
    monk = reg.get_estimator("monk-bcd")
    t = _median_time(lambda: permutation_test(Xv, Yv, kernel=reg.get_kernel("rbf", sigma="median"), estimator=monk, n_permutations=150, rng=0), 3)
    print(f"monk-bcd (Q = 11, T = 100) test, B = 150, vectors 766 + 766, d = 10, RBF: {t:.2f} s")


if __name__ == "__main__":
    main()
