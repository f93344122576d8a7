"""Seeded numbers of every entry point beyond the permutation tests, to compare two versions.

    python benchmarks/seeded_wide.py > now.json
    python benchmarks/seeded_wide.py --compare before.json now.json

:mod:`seeded_numbers` covers the permutation tests; this covers the rest, each stored and
over a small budget (``max_memory="1MB"``, tiles and matrix-free sources): the estimate of
every MMD estimator (with Lepski's choice of Q for MONK BCD, and the exact solvers), the
embeddings and their norms and distances, the robust tests (dc, clip, mom), the
aggregated tests (MMDAgg and MMD-FUSE) and the split test, on data with three outlying
points. A change of the code that keeps the numbers gives the same bits.
"""

from __future__ import annotations

import warnings

import numpy as np
import seeded_numbers  # the command line it shares (run from benchmarks/ or by path)

ESTIMATORS = (
    "u-stat",
    "v-stat",
    "monk-bcd:n_blocks=5",
    "monk-bcd:n_blocks=5,solver=exact",
    "monk-bcd:n_blocks=auto,n_iter=20",
    "monk-bcd-fast:n_blocks=5",
    "monk-bcd-fast:n_blocks=5,solver=exact",
    "monk-embedding-mmd:n_blocks=5",
    "incomplete-u",
    "rff:n_features=64",
)
EMBEDDINGS = ("mean", "monk-embedding:n_blocks=5", "geometric-mom:n_blocks=5")
KERNELS = ("rbf:sigma=median", "quadratic", "laplace:sigma=2")


def data(seed: int, n: int, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    X, Y = g.normal(size=(n, d)), g.normal(0.2, 1.0, size=(m, d))
    X[:3] *= 20.0
    return X, Y


def run() -> list[list]:
    from monk_framework import aggregated_test, embed, estimate, get_registry, robust_test, split_test

    reg = get_registry()
    known = {cls.name for cls in reg.estimators()}
    out: list[list] = []
    case = 0
    for d, (n, m) in ((1, (60, 50)), (4, (300, 260))):
        for mm in (None, "1MB"):
            for kernel in KERNELS:
                for est in ESTIMATORS:
                    if est.split(":")[0] not in known:
                        continue
                    X, Y = data(case, n, m, d)
                    try:
                        r = estimate(X, Y, kernel=kernel, estimator=est, rng=case, max_memory=mm)
                        out.append(["estimate", case, d, n, m, kernel, est, mm, r.mmd2, r.mmd])
                    except Exception as exc:  # noqa: BLE001 - a refusal is a number too
                        out.append(["estimate", case, d, n, m, kernel, est, mm, type(exc).__name__])
                    case += 1
                for est in EMBEDDINGS:
                    X, Y = data(case, n, m, d)
                    # one bandwidth for both embeddings: their distance needs one kernel
                    fixed = kernel.replace("sigma=median", "sigma=1.5")
                    mu, nu = embed(X, kernel=fixed, estimator=est, rng=case), embed(Y, kernel=fixed, estimator=est, rng=case + 1)
                    out.append(
                        [
                            "embed",
                            case,
                            d,
                            n,
                            m,
                            kernel,
                            est,
                            mm,
                            mu.norm(max_memory=mm),
                            mu.distance(nu, max_memory=mm),
                            float(mu.evaluate(Y[:5], max_memory=mm).sum()),
                        ]
                    )
                    case += 1
            X, Y = data(case, n, m, d)
            for method, kernel in (("dc", "rbf:sigma=1"), ("clip", "quadratic"), ("mom", "quadratic")):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = robust_test(X, Y, kernel=kernel, contamination=2, method=method, n_permutations=99, rng=case, max_memory=mm)
                out.append(["robust", case, d, n, m, kernel, method, mm, r.statistic, r.pvalue, r.certificate])
                case += 1
            for method in ("agg", "fuse"):
                r = aggregated_test(X, Y, method=method, n_permutations=99, rng=case, max_memory=mm)
                out.append(["aggregated", case, d, n, m, method, mm, r.statistic, r.pvalue])
                case += 1
            r = split_test(X, Y, kernel="rbf", grid={"sigma": [0.5, 1.0, 2.0]}, n_permutations=49, rng=case, max_memory=mm)
            out.append(["split", case, d, n, m, mm, r.statistic, r.pvalue])
            case += 1
    return out


def compare(a: list[list], b: list[list]) -> str:
    same = sum(x == y for x, y in zip(a, b))
    lines = [f"{len(a)} numbers' rows: {same} the same bits" + ("" if len(a) == len(b) else f"; {len(a)} against {len(b)} rows")]
    lines += [f"  {x}\n  -> {y}" for x, y in zip(a, b) if x != y]
    return "\n".join(lines)


if __name__ == "__main__":
    seeded_numbers.main(__doc__, run, compare)
