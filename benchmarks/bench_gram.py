"""RBF Gram matrix, N = 4000, d = 10: monk_framework against scikit-learn's rbf_kernel.

Both run in the same process on the same data, alternating, best of several repeats;
the ratio (ours / scikit-learn) is what docs/performance.md records. Peak memory is
measured with tracemalloc on a separate run of each (numpy reports its allocations
to tracemalloc). scikit-learn is a benchmark-only extra: pip install -e '.[bench]'.

    python benchmarks/bench_gram.py [--n 4000] [--d 10] [--repeats 7]
"""

from __future__ import annotations

import argparse
import platform
import time
import tracemalloc

import numpy as np

from monk_framework import get_registry
from monk_framework.engine.kernel_values import gram_matrix


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_memory(fn) -> int:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    try:
        from sklearn.metrics.pairwise import rbf_kernel
    except ImportError:
        raise SystemExit("scikit-learn is needed for this benchmark: pip install -e '.[bench]'") from None
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)" for i in threadpool_info())
    except ImportError:
        blas = "unknown"

    X = np.random.default_rng(0).normal(size=(args.n, args.d))
    sigma = 1.5
    kernel = get_registry().get_kernel("rbf", sigma=sigma)
    gamma = 1.0 / (2 * sigma**2)
    # the engine's Gram matrix, its bands on every core: what estimators and tests use
    ours = lambda: gram_matrix(kernel, X)  # noqa: E731
    # the public kernel(X): the same bands, on the calling thread
    public = lambda: kernel.gram(X)  # noqa: E731
    theirs = lambda: rbf_kernel(X, gamma=gamma)  # noqa: E731

    np.testing.assert_allclose(ours(), theirs(), rtol=1e-10, atol=1e-12)
    assert np.array_equal(ours(), public())
    ours(), public(), theirs()  # warm up
    t_ours, t_public, t_theirs = [], [], []
    for _ in range(args.repeats):  # alternate so that machine noise hits all alike
        t_ours.append(best_time(ours, 1))
        t_public.append(best_time(public, 1))
        t_theirs.append(best_time(theirs, 1))
    a, p, b = min(t_ours), min(t_public), min(t_theirs)
    m_ours, m_theirs = peak_memory(ours), peak_memory(theirs)
    print(f"machine: {platform.machine()}, {platform.python_version()}, numpy {np.__version__}, BLAS: {blas}")
    print(f"RBF Gram, N = {args.n}, d = {args.d}, best of {args.repeats}")
    print(f"  monk_framework  {a * 1e3:8.1f} ms   peak {m_ours / 2**20:7.1f} MiB   (kernel(X) on one thread: {p * 1e3:.1f} ms)")
    print(f"  scikit-learn    {b * 1e3:8.1f} ms   peak {m_theirs / 2**20:7.1f} MiB")
    print(f"  time ratio ours/sklearn = {a / b:.2f}   memory ratio = {m_ours / m_theirs:.2f}")


if __name__ == "__main__":
    main()
