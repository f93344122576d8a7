"""BCD-Fast's two solvers against BCD and the U-statistic, beyond Experiment 1's one dimension.

Not a speed benchmark: an accuracy check whose output is recorded in docs/estimators.md.
X ~ N(0, I_d), Y ~ N(0.4·1, I_d), N = M = 400, clean data, 20 seeded runs per setting;
the quadratic kernel (x·y + 1)² and RBF with σ = √d, whose MMDs have closed forms:

* quadratic: MMD² = ‖E xxᵀ − E yyᵀ‖²_F + 2‖E x − E y‖² = d²μ⁴ + 2dμ²;
* RBF: with c = (σ²/(σ² + 2))^{d/2}, MMD² = 2c(1 − exp(−dμ²/(2(σ² + 2)))).

Prints the mean signed error and the median ln|error| of each estimator.
Run ``python benchmarks/bcd_fast_solvers.py`` (about 5 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from monk_framework import get_registry

MU = 0.4
ESTIMATORS = {
    "u-stat": ("u-stat", {"root": "signed"}),
    "monk-bcd": ("monk-bcd", {}),
    "monk-bcd-fast (bcd)": ("monk-bcd-fast", {}),
    "monk-bcd-fast (exact)": ("monk-bcd-fast", {"solver": "exact"}),
    "monk-bcd-fast (exact), Q = 21": ("monk-bcd-fast", {"solver": "exact", "n_blocks": 21}),
}


def true_mmd(kernel: str, d: int) -> float:
    if kernel == "quadratic":
        return math.sqrt(d**2 * MU**4 + 2 * d * MU**2)
    s2 = float(d)
    c = (s2 / (s2 + 2)) ** (d / 2)
    return math.sqrt(2 * c * (1 - math.exp(-d * MU**2 / (2 * (s2 + 2)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dims", default="1,2,5,10")
    args = parser.parse_args()
    reg = get_registry()
    ests = {label: reg.get_estimator(name, **params) for label, (name, params) in ESTIMATORS.items()}
    print(f"N = M = {args.n}, mu = {MU}, {args.runs} runs; mean error / median ln|error|")
    for kernel_name in ("quadratic", "rbf"):
        for d in (int(v) for v in args.dims.split(",")):
            kernel = reg.get_kernel("quadratic") if kernel_name == "quadratic" else reg.get_kernel("rbf", sigma=math.sqrt(d))
            truth = true_mmd(kernel_name, d)
            errors: dict[str, list[float]] = {label: [] for label in ests}
            for seed in range(args.runs):
                rng = np.random.default_rng([seed, d])
                X, Y = rng.normal(size=(args.n, d)), rng.normal(size=(args.n, d)) + MU
                for label, est in ests.items():
                    errors[label].append(est.estimate(kernel, X, Y, rng=seed).mmd - truth)
            row = "  ".join(
                f"{label} {np.mean(e):+.3f}/{np.median(np.log(np.abs(e))):.2f}" for label, e in errors.items()
            )
            print(f"{kernel_name:9} d = {d:2d} MMD = {truth:.3f}: {row}", flush=True)


if __name__ == "__main__":
    main()
