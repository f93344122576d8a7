"""Whole workloads of the library, one per call, to time two versions against each other.

    python benchmarks/bench_workloads.py --list
    python benchmarks/bench_workloads.py permutation-u-stat      # prints the workload's seconds

Each workload is what a user runs: a permutation test, an estimate of every kind, a robust
and an aggregated test, the string kernel's Gram matrix, at sizes of a few seconds on two
cores. Run it from two checkouts (each with its own environment) in turn, A B A B, and
take the ratio pair by pair; docs/performance.md gives the figures and the command.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def _data(n: int, m: int, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    return g.normal(size=(n, d)), g.normal(0.1, 1.0, size=(m, d))


def permutation_u_stat() -> None:
    from monk_framework import permutation_test

    X, Y = _data(1000, 1000)
    permutation_test(X, Y, n_permutations=1000, rng=0)


def permutation_matrix_free() -> None:
    from monk_framework import permutation_test

    X, Y = _data(3000, 3000)
    permutation_test(X, Y, kernel="rbf:sigma=1", n_permutations=200, rng=0, max_memory="8MB")


def monk_bcd() -> None:
    from monk_framework import estimate

    X, Y = _data(2000, 2000)
    estimate(X, Y, estimator="monk-bcd:n_blocks=11,n_iter=200", rng=0)


def monk_bcd_fast() -> None:
    from monk_framework import estimate

    X, Y = _data(20000, 20000)
    estimate(X, Y, kernel="rbf:sigma=1", estimator="monk-bcd-fast:n_blocks=101", rng=0)


def within_blocks_test() -> None:
    from monk_framework import permutation_test

    X, Y = _data(400, 400)
    permutation_test(X, Y, kernel="rbf:sigma=1", estimator="monk-bcd:n_blocks=11,n_iter=50", n_permutations=200, rng=0)


def robust_dc() -> None:
    from monk_framework import robust_test

    X, Y = _data(1000, 1000)
    robust_test(X, Y, kernel="rbf:sigma=1", contamination=5, n_permutations=1000, rng=0)


def aggregated() -> None:
    from monk_framework import aggregated_test

    X, Y = _data(500, 500)
    aggregated_test(X, Y, n_permutations=500, rng=0)


def embedding_distance() -> None:
    from monk_framework import embed

    X, Y = _data(4000, 4000)
    mu = embed(X, kernel="rbf:sigma=1", estimator="monk-embedding:n_blocks=11", rng=0)
    nu = embed(Y, kernel="rbf:sigma=1", estimator="monk-embedding:n_blocks=11", rng=1)
    mu.distance(nu)


def ssk_gram() -> None:
    from monk_framework import get_registry, load_splice

    data = load_splice()
    get_registry().get_kernel("ssk", n=3).gram(data["EI"][:300] + data["IE"][:300])


def ssk_pairs() -> None:
    from monk_framework import get_registry

    # 26 letters: the pair programme (no feature alphabet fits), every pair of 800 strings
    g = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    S = ["".join(g.choice(letters, 60)) for _ in range(800)]
    get_registry().get_kernel("ssk", n=5).gram(S)


WORKLOADS: dict[str, Callable[[], None]] = {
    "permutation-u-stat": permutation_u_stat,
    "permutation-matrix-free": permutation_matrix_free,
    "monk-bcd": monk_bcd,
    "monk-bcd-fast": monk_bcd_fast,
    "within-blocks-test": within_blocks_test,
    "robust-dc": robust_dc,
    "aggregated": aggregated,
    "embedding-distance": embedding_distance,
    "ssk-gram": ssk_gram,
    "ssk-pairs": ssk_pairs,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", choices=sorted(WORKLOADS))
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list or args.workload is None:
        print("\n".join(sorted(WORKLOADS)))
        return
    start = time.perf_counter()
    WORKLOADS[args.workload]()
    print(f"{args.workload}: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
