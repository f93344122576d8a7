"""The default robust test (dcMMD at the median heuristic made robust) under clean and
contaminated nulls, and its power, beside the ordinary permutation test.

    python benchmarks/robust_median_study.py [--runs 400] [--n 200] [--r 5] [-B 199] [--shift 0.4] [--only power]

Every run draws X, Y ~ N(0, I_2) (shifted by ``--shift`` in the power designs), replaces
points as the design says, and runs ``robust_test(X, Y, contamination=r)`` (rbf, σ by the
median heuristic made robust: monk_framework.two_sample.bandwidth) and, for comparison,
``permutation_test(X, Y)`` (rbf at the plain median heuristic, u-stat), which keeps no
level under contamination, and dcMMD at the bandwidth the uncorrupted data's snapped
median heuristic gives (an oracle: what the robust bandwidth costs). Seeded: run i of a
design uses seed i.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from monk_framework import permutation_test, robust_test
from monk_framework.two_sample.bandwidth import MedianBandwidth

#: name: (shift of Y's mean, the corrupted points: list of (sample, point) to write in)
DESIGNS = {
    "null, clean": (0.0, []),
    "null, 5 far outliers in Y": (0.0, [("y", (8.0, 8.0))] * 5),
    "null, 5 points at one spot in Y": (0.0, [("y", (1.5, 0.0))] * 5),
    "null, 3 in X and 2 in Y apart": (0.0, [("x", (-2.0, 0.0))] * 3 + [("y", (2.0, 0.0))] * 2),
    "shift 0.4, clean": (0.4, []),
    "shift 0.4, 5 far outliers in Y": (0.4, [("y", (8.0, 8.0))] * 5),
}


def run(design: str, seed: int, n: int, r: int, B: int, power_shift: float) -> tuple[bool, bool, int, bool]:
    shift, corrupt = DESIGNS[design]
    shift = power_shift if shift else 0.0
    gen = np.random.default_rng(seed)
    X, Y = gen.normal(size=(n, 2)), gen.normal(size=(n, 2))
    Y[:, 0] += shift
    clean_sigma = MedianBandwidth.of(X, Y, "l2").observed()
    for i, (side, point) in enumerate(corrupt):
        (X if side == "x" else Y)[i] = point
    robust = robust_test(X, Y, contamination=r, n_permutations=B, rng=seed)
    plain = permutation_test(X, Y, n_permutations=B, rng=seed)
    oracle = robust_test(X, Y, contamination=r, kernel=f"rbf:sigma={clean_sigma!r}", n_permutations=B, rng=seed)
    return bool(robust.reject), bool(plain.reject), len(robust.bandwidths or []), bool(oracle.reject)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--r", type=int, default=5)
    parser.add_argument("-B", type=int, default=199)
    parser.add_argument("--shift", type=float, default=0.4, help="the shift of the power designs")
    parser.add_argument("--only", choices=("null", "power"), help="run only the null or the power designs")
    args = parser.parse_args()
    print(f"N = M = {args.n}, r = {args.r}, B = {args.B}, {args.runs} runs a design (seeds 0..{args.runs - 1})")
    print(f"{'design':34s} {'robust_test':>12s} {'(SE)':>7s} {'oracle sigma':>13s} {'permutation_test':>17s} {'candidates':>11s} {'s/run':>6s}")
    for design in DESIGNS:
        if args.only is not None and (DESIGNS[design][0] > 0) != (args.only == "power"):
            continue
        start = time.perf_counter()
        outcomes = [run(design, seed, args.n, args.r, args.B, args.shift) for seed in range(args.runs)]
        robust = np.mean([o[0] for o in outcomes])
        plain = np.mean([o[1] for o in outcomes])
        sizes = np.mean([o[2] for o in outcomes])
        oracle = np.mean([o[3] for o in outcomes])
        se = math.sqrt(max(robust * (1 - robust), 0.05 * 0.95) / args.runs)
        seconds = (time.perf_counter() - start) / args.runs
        label = design.replace("shift 0.4", f"shift {args.shift:g}")
        print(f"{label:34s} {robust:12.3f} {se:7.3f} {oracle:13.3f} {plain:17.3f} {sizes:11.2f} {seconds:6.2f}", flush=True)


if __name__ == "__main__":
    main()
