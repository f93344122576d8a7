"""Explicit features against the Gram matrix: the classical statistics of the linear and
quadratic kernels, estimate and permutation test, each path in the same run.

    python benchmarks/bench_features.py              # N = M = 1000 and 5000, d = 5, B = 1000
    python benchmarks/bench_features.py --sizes 20000 --permutations 200
    python benchmarks/bench_features.py --sizes 20000 --permutations 200 --budget 1MB   # under a budget

* features: the default (``monk_framework.core.kernels.paying_features``: with D features a point,
  at most 1/16 of the points, the sums are products of feature sums);
* Gram: the same calls with the feature path switched off (``FEATURES_PAY`` set beyond
  any sample), as before it existed: the stored Gram matrix, or its tiles.

With ``--budget``, estimates and tests under that memory budget (``max_memory``): where
the feature matrices do not fit, the features are summed in blocks of rows
(``monk_framework.core.kernels.feature_sums``), and a test's products Φᵀ E are added up
over such blocks, against the Gram matrix's tiles. The estimate's floor is computing
the features once (``kernel.features`` of each sample, whole).

The floor of the feature path of a test is drawing its B relabellings of N + M points
(numpy's ``permutation``, B times) and its product Φᵀ E (D × (N + M) × B), both timed
beside it. Times are the best of ``--repeats`` runs after a
warm-up; the two paths alternate.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from monk_framework import estimate, get_registry
from monk_framework.core import kernels as features
from monk_framework.two_sample import permutation_test


def _best(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _paired(fn, repeats: int) -> tuple[float, float]:
    """(features, Gram) seconds of ``fn``, the two paths alternating."""
    on, off = [], []
    fn()
    for _ in range(repeats):
        for path, times in ((features.FEATURES_PAY, on), (10**18, off)):
            saved = features.FEATURES_PAY
            features.FEATURES_PAY = path
            try:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            finally:
                features.FEATURES_PAY = saved
    return min(on), min(off)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", default=None, help="estimates and tests under this max_memory (e.g. 1MB)")
    args = parser.parse_args()
    reg = get_registry()
    if args.budget is not None:
        _under_budget(args, reg)
        return
    print("| kernel | N = M | D | estimate: features | Gram | ratio | test: features | Gram | ratio | test / its floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, n, g, X, Y, kernel, D in _cases(args, reg):
        est_on, est_off = _paired(lambda kernel=kernel: estimate(X, Y, kernel=kernel, estimator="u-stat"), args.repeats)
        B = args.permutations
        test_on, test_off = _paired(lambda kernel=kernel: permutation_test(X, Y, kernel=kernel, estimator="u-stat", n_permutations=B, rng=0), args.repeats)
        # the floor: drawing B relabellings of 2N points, and the product Φᵀ E
        Phi_T = np.asfortranarray(g.normal(size=(D, 2 * n)))
        E = g.integers(0, 2, size=(2 * n, B)).astype(float)
        draw = np.random.default_rng(0)
        floor = _best(lambda: [draw.permutation(2 * n) for _ in range(B)], args.repeats) + _best(lambda: Phi_T @ E, args.repeats)
        print(
            f"| {name} | {n} | {D} | {est_on * 1e3:.2f} ms | {est_off * 1e3:.1f} ms | **{est_off / est_on:.0f}×** | "
            f"{test_on * 1e3:.1f} ms | {test_off * 1e3:.0f} ms | **{test_off / test_on:.0f}×** | {test_on / floor:.1f} |"
        )


def _cases(args: argparse.Namespace, reg):
    """(kernel name, N, its generator, X, Y, kernel, D) for each size and kernel."""
    for n in (int(s) for s in args.sizes.split(",")):
        g = np.random.default_rng(n)
        X, Y = g.normal(size=(n, args.d)), g.normal(size=(n, args.d)) + 0.05
        for name in ("linear", "quadratic"):
            kernel = reg.get_kernel(name)
            yield name, n, g, X, Y, kernel, kernel.features(X[:1]).shape[1]


def _under_budget(args: argparse.Namespace, reg) -> None:
    B = args.permutations
    print(
        f"| kernel | N = M | D | estimate under {args.budget}: features in blocks | Gram tiles | ratio | features / floor "
        f"| test (B = {B}): features in blocks | Gram tiles | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, n, _, X, Y, kernel, D in _cases(args, reg):

        def run(kernel=kernel, X=X, Y=Y):
            return estimate(X, Y, kernel=kernel, estimator="u-stat", max_memory=args.budget)

        def test(kernel=kernel, X=X, Y=Y):
            return permutation_test(X, Y, kernel=kernel, estimator="u-stat", n_permutations=B, rng=0, max_memory=args.budget)

        assert run().diagnostics.get("features") is True  # the blocks, not the tiles
        on, off = _paired(run, args.repeats)
        floor = _best(lambda kernel=kernel: (kernel.features(X).sum(axis=0), kernel.features(Y).sum(axis=0)), args.repeats)
        test_on, test_off = _paired(test, args.repeats)
        print(
            f"| {name} | {n} | {D} | {on * 1e3:.1f} ms | {off * 1e3:.0f} ms | **{off / on:.0f}×** | {on / floor:.1f} "
            f"| {test_on * 1e3:.0f} ms | {test_off:.1f} s | **{test_off / test_on:.0f}×** |"
        )


if __name__ == "__main__":
    main()
