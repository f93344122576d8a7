"""How close random Fourier features and the incomplete U-statistic come to the exact
statistic, and the power they lose.

Error: for D in {100, 300, 1000, 3000, 10000}, the rff MMD_U² against the exact U-statistic
on the same data (N = M = 2000, d = 10, RBF with σ = median of a calibration draw),
over 20 data draws with a shift of 0.1 in every coordinate: the median of
|MMD²_rff − MMD²_U| / MMD²_U, and the same error in units of the U-statistic's own
standard deviation across draws. Power: at N = M = 500, d = 10, a shift of 0.05 in every
coordinate, the rejection rate at α = 0.05 (B = 200, 200 seeded runs) of the exact
u-stat test and of rff at each D; and their level (no shift). Seeded; the numbers in
docs/estimators.md come from:

    python benchmarks/approx_study.py
"""

from __future__ import annotations

import numpy as np

from monk_framework import get_registry
from monk_framework.engine.median_heuristic import median_distance
from monk_framework.two_sample import permutation_test

DS = (100, 300, 1000, 3000, 10000)
LS = (1000, 10000, 100000, 1000000)


def main() -> None:
    reg = get_registry()
    calib = np.random.default_rng(99).normal(size=(2000, 10))
    kernel = reg.get_kernel("rbf", sigma=median_distance(calib))
    exact, approx = [], {D: [] for D in DS}
    incomplete: dict[int, list[float]] = {L: [] for L in LS}
    for run in range(20):
        gen = np.random.default_rng([run, 1])
        X, Y = gen.normal(size=(2000, 10)), gen.normal(0.1, 1.0, size=(2000, 10))
        exact.append(reg.get_estimator("u-stat").estimate(kernel, X, Y).mmd2)
        for D in DS:
            approx[D].append(reg.get_estimator("rff", n_features=D, feature_seed=run).estimate(kernel, X, Y).mmd2)
        for L in LS:
            incomplete[L].append(reg.get_estimator("incomplete-u", n_pairs=L).estimate(kernel, X, Y, rng=run).mmd2)
    exact_arr = np.array(exact)
    sd = exact_arr.std(ddof=1)
    print(f"N = M = 2000, d = 10: exact MMD_U^2 mean {exact_arr.mean():.4g}, sd across draws {sd:.3g}")
    print("| D | median relative error | median error / sd of the U-statistic |\n|---|---|---|")
    for D in DS:
        err = np.abs(np.array(approx[D]) - exact_arr)
        print(f"| {D} | {np.median(err / np.abs(exact_arr)):.3f} | {np.median(err) / sd:.2f} |")
    print("\n| L (incomplete-u) | median relative error | median error / sd of the U-statistic |\n|---|---|---|")
    for L in LS:
        err = np.abs(np.array(incomplete[L]) - exact_arr)
        print(f"| {L} | {np.median(err / np.abs(exact_arr)):.3f} | {np.median(err) / sd:.2f} |")
    print("\n| test | power (shift 0.05) | level (no shift) |\n|---|---|---|")
    for spec in ["u-stat"] + [f"rff:n_features={D}" for D in DS[:4]] + [f"incomplete-u:n_pairs={L}" for L in LS[1:3]]:
        rates = []
        for shift in (0.05, 0.0):
            rejected = 0
            for run in range(200):
                gen = np.random.default_rng([run, 2, int(shift * 100)])
                X, Y = gen.normal(size=(500, 10)), gen.normal(shift, 1.0, size=(500, 10))
                est = reg.resolve_estimator(f"{spec},feature_seed={run}" if spec.startswith("rff") else spec)
                rejected += permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=200, rng=run).reject
            rates.append(rejected / 200)
        print(f"| {spec} | {rates[0]:.3f} | {rates[1]:.3f} |")


if __name__ == "__main__":
    main()
