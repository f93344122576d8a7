"""The relabelling products of a permutation test, one tile on one core: subset sums
against the multiply-add loop, OpenBLAS's thin product and the GEMM floor.

    python benchmarks/bench_products.py                 # the 10⁵ test's tile, 256 × 2048, B = 101
    python benchmarks/bench_products.py --B 1000        # the everyday test's width

A matrix-free permutation test multiplies every tile R of the kernel (here 256 band rows
× 2048 points) by the 0/1 indicator columns of the relabellings and a column of ones,
[E, 1]. Three ways, on the same data, alternated, best of ``--repeats``, each on one core
(``threadpool_limits(1)``):

* ``subset sums``: :func:`monk_framework.numerics.product_loops.add_indicator_product` on the tile
  transposed and E packed four points to a byte (what the tests run);
* ``multiply-adds``: :func:`monk_framework.numerics.product_loops.add_tile_product`, the compiled
  register-blocked product the tests ran before;
* ``OpenBLAS``: ``R @ [E, 1]``, the thin GEMM.

The floor is the product's 2·256·2048·(B + 1) FLOP at this machine's GEMM rate on one
core (a 2000³ product, measured in the same run). Subset sums do about a quarter of
those operations, so they can run below it: the floor says what a product costs, not
what this sum costs.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_gram import best_time  # the best of several timed calls
from threadpoolctl import threadpool_limits

from monk_framework.engine.pooled import indicator_columns, indicator_patterns
from monk_framework.numerics.product_loops import add_indicator_product, add_tile_product


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--points", type=int, default=2048)
    parser.add_argument("--B", type=int, default=101)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    size = 4 * args.points
    perms = np.array([rng.permutation(size) for _ in range(args.B)])
    E = indicator_columns(perms, size // 2, size, ones=True, order="F")  # [E, 1], column by column
    P = indicator_patterns(perms, size // 2, size)
    offset = args.points  # a tile in the middle of the pooled sample
    R = rng.random((args.rows, args.points))
    RT = np.ascontiguousarray(R.T)
    q = args.B + 1
    flop = 2 * args.rows * args.points * q
    with threadpool_limits(1):
        A = rng.normal(size=(2000, 2000))
        A @ A
        rate = 2 * 2000**3 / best_time(lambda: A @ A, 3)
        ways = {
            "subset sums": lambda: add_indicator_product(np.zeros((q, args.rows)), RT, P, offset),
            "multiply-adds": lambda: add_tile_product(np.zeros((args.rows, q)), R, E.T, offset),
            "OpenBLAS": lambda: R @ E[offset : offset + args.points],
        }
        for fn in ways.values():
            fn()  # compiled or loaded from numba's cache
        best = {name: float("inf") for name in ways}
        for _ in range(args.repeats):
            for name, fn in ways.items():
                best[name] = min(best[name], best_time(fn, 1))
    want = R @ E[offset : offset + args.points]
    got = np.zeros((q, args.rows))
    add_indicator_product(got, RT, P, offset)
    error = float(np.abs(got.T - want).max() / np.abs(want).max())
    print(
        f"tile {args.rows} × {args.points}, {q} columns ([E, 1], B = {args.B}), one core; GEMM rate {rate / 1e9:.1f} GFLOP/s, "
        f"floor {flop / rate * 1e3:.2f} ms; subset sums against OpenBLAS: {error:.1e} relative"
    )
    print("| way | time | GFLOP/s of the product | time / floor | time / subset sums |")
    print("|---|---|---|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t * 1e3:.2f} ms | {flop / t / 1e9:.1f} | {t * rate / flop:.2f} | {t / best['subset sums']:.2f} |")


if __name__ == "__main__":
    main()
