"""The aggregated test against the single-kernel tests it aggregates, in one run (issue 37).

    python benchmarks/bench_aggregated.py                  # N = M = 1000, d = 2, B = 2000, 10 kernels
    python benchmarks/bench_aggregated.py --n 500 --kernels 20

Rows, each the median of ``--repeats`` runs after one warm-up, on the same data:

* ``aggregated_test`` (MMDAgg) over the collection: ``--kernels`` / 2 Gaussian and as
  many Laplace kernels over the pooled distances (the default families);
* the same kernels, one ``permutation_test`` each (U-statistic, same B and seed), summed:
  the ratio asked for (the aggregate is at most their cost plus the scores);
* MMD-FUSE over the same collection (its normalisers are one more pass over each Gram);
* the floor: one GEMM per kernel of the pooled Gram matrix with the B relabelling
  indicators, (N+M) x (N+M) x B, the product a test cannot avoid (ours adds subset sums
  instead of multiplying, so a test can beat it).

``--peer`` adds the published MMDAgg against ours, each at its defaults (10 Gaussian and
10 Laplace bandwidths, B = 2000), on the same data: kerneltests' ``mmdagg`` (extra
``bench``), a port of the authors' numpy code, with ``fast=False`` (their code, to the
bit, by its own account) and its default ``fast=True``. For equal sample sizes both
calibrate by a wild bootstrap over the N x N matrix k(x_i, x_j) + k(y_i, y_j) −
k(x_i, y_j) − k(y_i, x_j) with B1 + B2 = 4000 sign vectors (a quarter of the pooled
matrix, twice the draws); ours by B = 2000 permutations of the pooled sample, each
kernel's p-value exact.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_permutation import _median_time as median_time  # one warm-up, then the median
from threadpoolctl import threadpool_info

from monk_framework.two_sample import aggregated_test, permutation_test
from monk_framework.two_sample.aggregated import default_kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--kernels", type=int, default=10, help="kernels in all (half Gaussian, half Laplace)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer", action="store_true", help="also time kerneltests' MMDAgg against ours, both at defaults")
    args = parser.parse_args()
    n, d, B = args.n, args.d, args.permutations
    g = np.random.default_rng(0)
    X, Y = g.standard_normal((n, d)), g.standard_normal((n, d)) + 0.05
    kernels = default_kernels(X, Y, n_bandwidths=args.kernels // 2)
    L = len(kernels)
    blas = ", ".join(f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info() if i["user_api"] == "blas")
    print(f"N = M = {n}, d = {d}, B = {B}, {L} kernels; BLAS: {blas}")

    agg = median_time(lambda: aggregated_test(X, Y, kernels=kernels, n_permutations=B, rng=1, return_null=False), args.repeats)
    singles = [
        median_time(lambda k=k: permutation_test(X, Y, kernel=k, estimator="u-stat", n_permutations=B, rng=1, return_null=False), args.repeats) for k in kernels
    ]
    fuse = median_time(lambda: aggregated_test(X, Y, kernels=kernels, method="fuse", n_permutations=B, rng=1, return_null=False), args.repeats)
    size = 2 * n
    K = g.standard_normal((size, size))
    E = (g.uniform(size=(size, B)) < 0.5).astype(float)
    gemm = median_time(lambda: K @ E, args.repeats)
    single_sum = float(np.sum(singles))
    print(f"| aggregated_test, agg ({L} kernels) | {agg:.2f} s | {agg / single_sum:.2f} | {agg / (L * gemm):.2f} |")
    print(f"| {L} single-kernel permutation tests | {single_sum:.2f} s | 1.00 | {single_sum / (L * gemm):.2f} |")
    print(f"| aggregated_test, fuse ({L} kernels) | {fuse:.2f} s | {fuse / single_sum:.2f} | {fuse / (L * gemm):.2f} |")
    print(f"| {L} GEMMs {size} x {size} x {B} (the floor) | {L * gemm:.2f} s | {L * gemm / single_sum:.2f} | 1.00 |")
    print("columns: time; ratio to the single-kernel tests; ratio to the GEMM floor")
    if args.peer:
        peer(X, Y, B, args.repeats)


def peer(X: np.ndarray, Y: np.ndarray, B: int, repeats: int) -> None:
    """Ours against kerneltests' MMDAgg (the authors' protocol), each at its defaults."""
    from kt.mmdagg import mmdagg

    ours = median_time(lambda: aggregated_test(X, Y, n_permutations=B, rng=1, return_null=False), repeats)
    fast = median_time(lambda: mmdagg(X, Y, seed=1, fast=True), repeats)
    exact = median_time(lambda: mmdagg(X, Y, seed=1, fast=False), repeats)
    agree = aggregated_test(X, Y, n_permutations=B, rng=1).reject == bool(mmdagg(X, Y, seed=1))
    print(f"\nMMDAgg at defaults (20 kernels), N = M = {len(X)}: the same decision here: {agree}")
    print("| test | time | / ours |")
    print("|---|---|---|")
    print(f"| ours, `aggregated_test(X, Y)` (B = {B} permutations) | {ours:.2f} s | 1.00 |")
    print(f"| kerneltests `mmdagg(X, Y)` (fast=True; B1 + B2 = 4000 wild bootstrap) | {fast:.2f} s | {fast / ours:.2f} |")
    print(f"| kerneltests `mmdagg(X, Y, fast=False)` (the authors' code) | {exact:.2f} s | {exact / ours:.2f} |")


if __name__ == "__main__":
    main()
