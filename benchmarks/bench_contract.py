"""What the kernel-contract checks cost: an RBF Gram matrix with and without them.

``gram(X)`` checks each diagonal block of the Gram matrix (symmetry, ``compute_gram``'s diagonal
against ``compute_diag``, Cauchy–Schwarz on its first 64 points). Both variants run in the
same process on the same data, alternating, best of several repeats; the ratio
(checked / unchecked) is what docs/performance.md records.

    python benchmarks/bench_contract.py [--d 10] [--repeats 9]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from monk_framework import get_registry
from monk_framework.core.kernels import Kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    kernel = get_registry().get_kernel("rbf", sigma=3.0)
    checked = Kernel.check_diagonal_block
    print(f"RBF Gram matrix gram(X), d = {args.d}, best of {args.repeats} alternating runs")
    print("| N | with the checks | without | ratio |")
    print("|---|---|---|---|")
    for n in (200, 500, 2000, 6000):
        X = np.random.default_rng(0).normal(size=(n, args.d))
        best = {"with": float("inf"), "without": float("inf")}
        for _ in range(args.repeats):
            for mode in ("with", "without"):
                Kernel.check_diagonal_block = checked if mode == "with" else (lambda *a: None)  # type: ignore[method-assign]
                start = time.perf_counter()
                kernel.gram(X)
                best[mode] = min(best[mode], time.perf_counter() - start)
        Kernel.check_diagonal_block = checked  # type: ignore[method-assign]
        print(f"| {n} | {best['with'] * 1e3:.2f} ms | {best['without'] * 1e3:.2f} ms | {best['with'] / best['without']:.2f} |")


if __name__ == "__main__":
    main()
