"""Robust and within-block tests against the plain U-statistic test, in one run (issue 15).

    python benchmarks/bench_robust.py                 # N = M = 1000, d = 10, B = 1000
    python benchmarks/bench_robust.py --n 2000 --d 1

Rows, each timed as the median of ``--repeats`` runs after one warm-up, on the same data:

* the U-statistic permutation test (RBF with sigma = sqrt(d), and the quadratic kernel):
  the baseline, and the floor it is compared with: one GEMM of the pooled Gram matrix
  with the B relabelling indicators, (N+M) x (N+M) x B, the product it cannot avoid;
* ``robust_test`` with each method: dcMMD with RBF (the same product as the U-statistic
  test), dcMMD on the clipped quadratic kernel (the same product) and the median of
  block p-values with the quadratic kernel (Q blocks, one small product per block);
* MONK tests relabelled within blocks and globally: BCD-Fast at Q = 21 and BCD at Q = 11
  (its default symmetric test-time form, and the signed one; the global BCD row runs
  ``--global-permutations`` relabellings and is scaled to B: its cost per relabelling is
  constant), and the embedding MMD at Q = 21 within blocks (its default trimmed form and
  the separate embeddings).

Ratios are to the U-statistic test with the same kernel.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from bench_permutation import _median_time as median_time  # one warm-up, then the median
from threadpoolctl import threadpool_info

from monk_framework import get_registry
from monk_framework.two_sample import permutation_test
from monk_framework.two_sample.robust import robust_test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--contamination", type=int, default=10)
    parser.add_argument("--global-permutations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, d, B, r = args.n, args.d, args.permutations, args.contamination
    g = np.random.default_rng(0)
    X, Y = g.standard_normal((n, d)), g.standard_normal((n, d)) + 0.1
    X[:5] = 50.0
    reg = get_registry()
    rbf, quad = reg.get_kernel("rbf", sigma=math.sqrt(d)), reg.get_kernel("quadratic")
    u = reg.get_estimator("u-stat")
    blas = ", ".join(f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info() if i["user_api"] == "blas")
    print(f"N = M = {n}, d = {d}, B = {B}, contamination {r}; BLAS: {blas}")

    size = 2 * n
    K = g.standard_normal((size, size))
    E = (g.uniform(size=(size, B)) < 0.5).astype(float)
    floor = median_time(lambda: K @ E, args.repeats)
    print(f"GEMM floor, {size} x {size} x {B}: {floor * 1e3:.1f} ms ({2 * size * size * B / floor / 1e9:.0f} GFLOP/s)")

    rows, bases = [], {}
    for label, kernel in (("RBF", rbf), ("quadratic", quad)):
        base = median_time(lambda: permutation_test(X, Y, kernel=kernel, estimator=u, n_permutations=B, rng=1), args.repeats)
        bases[label] = base
        rows.append((f"u-stat test, {label}", base, base, floor))
        for method in ("dc",) if label == "RBF" else ("clip", "mom"):
            result = robust_test(X, Y, kernel=kernel, contamination=r, method=method, n_permutations=B, rng=1)
            t = median_time(lambda: robust_test(X, Y, kernel=kernel, contamination=r, method=method, n_permutations=B, rng=1), args.repeats)
            extra = f", Q = {result.n_blocks}" if method == "mom" else ""
            rows.append((f"robust_test {method}, {label}{extra}", t, base, floor))
        if label == "quadratic":
            for spec, est in (
                ("BCD-Fast Q = 21", reg.get_estimator("monk-bcd-fast", n_blocks=21)),
                ("BCD Q = 11", reg.get_estimator("monk-bcd")),
            ):
                t = median_time(lambda: permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=B, rng=1), args.repeats)
                rows.append((f"{spec}, within blocks", t, base, floor))
                if spec == "BCD Q = 11":
                    signed = reg.get_estimator("monk-bcd", test_form="signed")
                    t = median_time(lambda: permutation_test(X, Y, kernel=kernel, estimator=signed, n_permutations=B, rng=1), args.repeats)
                    rows.append((f"{spec}, within blocks, signed", t, base, floor))
                Bg = args.global_permutations if "BCD Q" in spec else B
                reps = 1 if "BCD Q" in spec else args.repeats
                tg = median_time(lambda: permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=Bg, rng=1, relabel="global"), reps)
                scaled = f" (scaled from {Bg})" if Bg != B else ""
                rows.append((f"{spec}, global{scaled}", tg * B / Bg, base, floor))
    for spec, est in (
        ("embedding MMD Q = 21, trimmed", reg.get_estimator("monk-embedding-mmd", n_blocks=21)),
        ("embedding MMD Q = 21, separate", reg.get_estimator("monk-embedding-mmd", n_blocks=21, test_form="separate")),
    ):
        t = median_time(lambda: permutation_test(X, Y, kernel=quad, estimator=est, n_permutations=B, rng=1), args.repeats)
        rows.append((f"{spec}, quadratic, within blocks", t, bases["quadratic"], floor))
    print("\n| test | time | vs the u-stat test | vs the GEMM floor |\n|---|---|---|---|")
    for label, t, base, fl in rows:
        print(f"| {label} | {t * 1e3:.0f} ms | {t / base:.2f}x | {t / fl:.2f}x |")


if __name__ == "__main__":
    main()
