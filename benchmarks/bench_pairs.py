"""The incomplete U-statistic's kernel values: a direct ``compute_pair_values`` against
the framework's default, in one run.

    python benchmarks/bench_pairs.py                  # L = 10^5 and 10^6 pairs, d = 10

``incomplete-u`` needs k(a_l, b_l) for 3L pairs (``Kernel.pair_values``). Without a
direct formula it takes the diagonals of 32 × 32 Gram blocks, so it computes 32 kernel
values a pair and makes one call per 32 pairs; RBF and Laplace compute one difference a
pair instead (``compute_pair_values``). Rows, each
the median of ``--repeats`` runs after one warm-up, on the same pairs:

* ``pair_values`` of each kernel (its direct formula, checked) and the default's blocks
  (``gram_tile`` on :data:`PAIR_BLOCK` pairs at a time) on the same kernel: the ratio is
  the speed-up;
* the floor of the direct form: one pass over the 2·L·d inputs (``(A - B)`` squared and
  summed), the memory traffic it cannot avoid; the ratio to it is what exp and the
  norm cost on top.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_permutation import _median_time as median_time  # one warm-up, then the median

from monk_framework import get_registry
from monk_framework.core.kernels import PAIR_BLOCK, Kernel


def blocks(kernel: Kernel, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The default of ``Kernel.pair_values`` without a direct formula: Gram-block diagonals."""
    return np.concatenate([np.diagonal(kernel.gram_tile(A[a : a + PAIR_BLOCK], B[a : a + PAIR_BLOCK])) for a in range(0, len(A), PAIR_BLOCK)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reg = get_registry()
    print(f"d = {args.d}; median of {args.repeats} runs after a warm-up\n")
    print("| kernel | L | direct pair_values | default (32 x 32 blocks) | speed-up | floor (one read) | direct / floor |")
    print("|---|---|---|---|---|---|---|")
    for L in args.pairs:
        gen = np.random.default_rng(L)
        A, B = gen.normal(size=(L, args.d)), gen.normal(size=(L, args.d))
        floor = median_time(lambda A=A, B=B: (A.sum(), B.sum()), args.repeats)  # every input read once
        for spec in ("rbf", "laplace", "laplace:norm=l1"):
            kernel = reg.resolve_kernel(f"{spec}{':' if ':' not in spec else ','}sigma=3.0")
            direct = median_time(lambda k=kernel, A=A, B=B: k.pair_values(A, B), args.repeats)
            default = median_time(lambda k=kernel, A=A, B=B: blocks(k, A, B), max(1, args.repeats // 2))
            assert np.allclose(kernel.pair_values(A[:1000], B[:1000]), blocks(kernel, A[:1000], B[:1000]), rtol=1e-12)
            print(
                f"| {spec} | {L:,} | {direct * 1e3:.1f} ms | {default * 1e3:.0f} ms | {default / direct:.0f}x | {floor * 1e3:.1f} ms | {direct / floor:.2f} |"
            )


if __name__ == "__main__":
    main()
