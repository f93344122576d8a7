"""The compiled loops against their plain numpy twins, workload by workload.

    python benchmarks/bench_compiled.py              # about two minutes
    python benchmarks/bench_compiled.py --repeats 5

Each workload runs with the compiled loops and with ``using_compiled(False)`` (what
``MONK_COMPILED=0`` does, or a machine without numba), alternated in this process, best
of ``--repeats`` after a warm-up (numba's compilation is not timed). The ratio is
twin / compiled: what choosing the twins costs. Every workload checks that both give the
same numbers (the p-value equal, the statistic within 1e-9 relative).
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from monk_framework import get_registry
from monk_framework.engine.kernel_values import gram_matrix
from monk_framework.io.splice import load_splice
from monk_framework.numerics.compiled import compiled_available, using_compiled
from monk_framework.two_sample import permutation_test


def best(call: Callable[[], Any], compiled: bool, repeats: int) -> tuple[float, Any]:
    times, value = [], None
    for _ in range(repeats):
        with using_compiled(compiled):
            start = time.perf_counter()
            value = call()
            times.append(time.perf_counter() - start)
    return min(times), value


def workloads(reg: Any) -> list[tuple[str, Callable[[], Any], Callable[[Any], float]]]:
    g = np.random.default_rng(0)
    X4000 = g.normal(size=(4000, 10))
    X, Y = g.normal(size=(1000, 10)), g.normal(0.1, 1.0, size=(1000, 10))
    Xl, Yl = g.normal(size=(5000, 10)), g.normal(0.05, 1.0, size=(5000, 10))
    Xb, Yb = g.normal(size=(100_000, 10)), g.normal(0.02, 1.0, size=(100_000, 10))
    rbf = reg.get_kernel("rbf", sigma=float(np.sqrt(20)))
    splice = load_splice()
    ssk = reg.get_kernel("ssk", n=5, lam=0.5)
    strings = [s for s in splice["EI"][:766]] + [s for s in splice["IE"][:766]]

    def test(kernel: Any, estimator: str, A: Any, B: Any, n: int, **options: Any) -> Callable[[], Any]:
        return lambda: permutation_test(A, B, kernel=kernel, estimator=reg.get_estimator(estimator), n_permutations=n, rng=1, **options)

    def stat(result: Any) -> float:
        return float(result.statistic)

    return [
        ("RBF Gram matrix, N = 4000, d = 10", lambda: gram_matrix(rbf, X4000), lambda K: float(K.sum())),
        ("u-stat test, N = M = 1000, B = 1000 (median heuristic)", test(reg.get_kernel("rbf", sigma="median"), "u-stat", X, Y, 1000), stat),
        ("u-stat test, N = M = 5000, B = 100, matrix-free", test(rbf, "u-stat", Xl, Yl, 100, max_memory="64MB"), stat),
        (
            "monk-bcd-fast exact, N = M = 10^5, Q = 101",
            lambda: reg.get_estimator("monk-bcd-fast", solver="exact", n_blocks=101).estimate(rbf, Xb, Yb, rng=0),
            lambda r: float(r.mmd2),
        ),
        ("SSK n = 5 Gram matrix, 1532 splice sequences", lambda: gram_matrix(ssk, strings), lambda K: float(K.sum())),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not compiled_available():
        raise SystemExit("the compiled loops cannot run here (numba missing or MONK_COMPILED=0): nothing to compare")
    reg = get_registry()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; best of {args.repeats}")
    print(f"{'workload':58s} {'compiled':>10s} {'numpy twin':>11s} {'twin / compiled':>16s}")
    for name, call, number in workloads(reg):
        for compiled in (True, False):  # warm-up: compile, fill caches
            with using_compiled(compiled):
                call()
        t_fast, fast = best(call, True, args.repeats)
        t_plain, plain = best(call, False, args.repeats)
        a, b = number(fast), number(plain)
        assert abs(a - b) <= 1e-9 * max(abs(a), 1e-300), (name, a, b)
        if hasattr(fast, "pvalue"):
            assert fast.pvalue == plain.pvalue, (name, fast.pvalue, plain.pvalue)
        print(f"{name:58s} {t_fast * 1e3:8.1f} ms {t_plain * 1e3:8.1f} ms {t_plain / t_fast:15.2f}x")


if __name__ == "__main__":
    main()
