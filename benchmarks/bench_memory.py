"""The u-stat estimate from tiles (what every classical estimate does, within the memory
budget or over it) against the three stored Gram matrices summed afterwards (the former
path within the budget, still the SSK's).

At sizes where both fit, the two run in the same process on the same data, best of
several repeats: the ratio tiles / stored, and the peak memory of each (tracemalloc,
numpy's allocations). Then, at N = M = 60 000 (d = 10), the estimate in a child process
under ``ulimit -v`` 4 GB, with its time, peak resident memory and the floor of its
kernel work (the squared distances as a GEMM of the same FLOP count, timed here).

Last, an embedding's distance ‖μ̂ − ν̂‖ (what ``monkfw run`` prints for an embedding
estimator) from row tiles, against the three stored Gram matrices uᵀKv it was formed
from before, at sizes where a stored matrix takes 0.5 to 3.2 GB.

    python benchmarks/bench_memory.py [--repeats 5] [--big 60000 (0: skip)] [--embedding 8000,20000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from monk_framework import get_registry
from monk_framework.engine.kernel_values import gram_matrix


def _timed(fn, repeats: int) -> tuple[float, float]:
    """Best time and peak traced bytes of fn()."""
    best, peak = float("inf"), 0
    for _ in range(repeats):
        tracemalloc.start()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return best, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--big", type=int, default=60000)
    parser.add_argument("--embedding", default="8000,20000", help="sizes of the embedding distance part ('' to skip)")
    args = parser.parse_args()
    reg = get_registry()
    est, kernel = reg.get_estimator("u-stat"), reg.get_kernel("rbf", sigma=3.0)
    print("| N = M, d = 10 | three stored Gram matrices | tiles (the estimate) | tiles / stored | peak stored | peak tiles | relative difference |")
    print("|---|---|---|---|---|---|---|")
    for n in (500, 2000, 4000, 8000):
        gen = np.random.default_rng(n)
        X, Y = gen.normal(size=(n, 10)), gen.normal(0.1, 1.0, size=(n, 10))

        def stored() -> float:
            # what the estimate did within the budget before: the engine's Gram matrices, summed
            Kxx, Kyy, Kxy = gram_matrix(kernel, X), gram_matrix(kernel, Y), gram_matrix(kernel, X, Y)
            return float((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (n * (n - 1)) - 2.0 * Kxy.sum() / (n * n))

        result = est.estimate(kernel, X, Y)
        assert result.diagnostics["tiled"]
        t_stored, m_stored = _timed(stored, args.repeats)
        t_tiled, m_tiled = _timed(lambda: est.estimate(kernel, X, Y), args.repeats)
        print(
            f"| {n} | {t_stored:.3f} s | {t_tiled:.3f} s | {t_tiled / t_stored:.2f} | {m_stored / 2**20:.0f} MiB | "
            f"{m_tiled / 2**20:.0f} MiB | {abs(result.mmd2 - stored()) / abs(result.mmd2):.1e} |"
        )
    if args.big:
        big(args.big)
    if args.embedding:
        embedding_distance([int(v) for v in args.embedding.split(",")], max(1, min(args.repeats, 3)))


def big(n: int) -> None:
    """N = M = n under ``ulimit -v`` 4 GB in a child process, against its GEMM floor."""
    # the floor: the 7.2e9 pair terms as GEMMs of the same FLOP count (2 d flops a pair)
    Z = np.random.default_rng(0).normal(size=(4000, 10))
    start = time.perf_counter()
    for _ in range(3):
        Z @ Z.T
    rate = 3 * 2 * 10 * 4000 * 4000 / (time.perf_counter() - start)
    pairs = n * n / 2 + n * n / 2 + n * n  # the two upper triangles and the cross block
    floor = pairs * 2 * 10 / rate
    code = (
        "import json, numpy as np; from monk_framework import get_registry as g; r = g(); "
        f"gen = np.random.default_rng(1); X, Y = gen.normal(size=({n}, 10)), gen.normal(0.1, 1.0, size=({n}, 10)); "
        "res = r.get_estimator('u-stat').estimate(r.get_kernel('rbf', sigma=3.0), X, Y); "
        "print(json.dumps({'mmd2': res.mmd2, 'tiled': res.diagnostics['tiled'], 'seconds': res.timings['total_s']}))"
    )
    limit = 4 * 10**9
    child = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    if child.returncode != 0:
        print(child.stderr)
        raise SystemExit(1)
    out = json.loads(child.stdout)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(
        f"\nN = M = {n}, d = 10, under ulimit -v 4 GB: {out['seconds']:.1f} s, tiled = {out['tiled']}, "
        f"peak resident {peak:.2f} GiB (data {2 * n * 10 * 8 / 2**30:.3f} GiB); GEMM floor of its "
        f"{pairs:.2e} pair terms at {rate / 1e9:.0f} GFLOP/s: {floor:.1f} s, ratio {out['seconds'] / floor:.1f}"
    )


def embedding_distance(sizes: list[int], repeats: int) -> None:
    """‖μ̂_X − μ̂_Y‖² from row tiles (the upper triangle of the symmetric terms), against
    the stored matrices: u'K(X)u + v'K(Y)v − 2u'K(X, Y)v, each matrix built whole."""
    from monk_framework import Embedding

    kernel = get_registry().get_kernel("rbf", sigma=1.0)
    print("\n| embedding distance, N = M, d = 3 | stored Gram matrices | row tiles | tiles / stored | peak stored | peak tiles | relative difference |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        gen = np.random.default_rng(n)
        X, Y = gen.normal(size=(n, 3)), gen.normal(0.3, 1.0, size=(n, 3))
        u, v = gen.random(n), gen.random(n)
        u, v = u / u.sum(), v / v.sum()
        ex, ey = Embedding(kernel=kernel, sample=X, weights=u, estimator="x"), Embedding(kernel=kernel, sample=Y, weights=v, estimator="y")

        def stored() -> float:
            return float(u @ kernel.gram(X) @ u + v @ kernel.gram(Y) @ v - 2.0 * (u @ kernel.gram(X, Y) @ v))

        t_stored, m_stored = _timed(stored, repeats)
        t_tiles, m_tiles = _timed(lambda: ex.distance(ey), repeats)
        diff = abs(ex.distance(ey) ** 2 - stored()) / stored()
        print(f"| {n} | {t_stored:.2f} s | {t_tiles:.2f} s | {t_tiles / t_stored:.2f} | {m_stored / 2**20:.0f} MiB | {m_tiles / 2**20:.0f} MiB | {diff:.1e} |")


if __name__ == "__main__":
    main()
