"""String subsequence kernel: full Gram matrix of the 1532 EI + IE splice sequences.

    python benchmarks/bench_ssk.py            # n = 3, 5, 8, lambda = 0.5, all peers
    python benchmarks/bench_ssk.py --quick    # peers on a 400-sequence subset, extrapolated
    python benchmarks/bench_ssk.py --long     # 80 random DNA strings of 20 000 letters

Compared in the same run:
* monk_framework's ``ssk`` (normalised; ``cumulative=True`` is shogun's convention);
* ``strkernels`` (shogun's C++ SSK, benchmark-only extra), which is cumulative and
  normalised, so it is compared with ``cumulative=True`` (values checked equal);
* the plain Lodhi recursion of the test suite (pure Python), timed on a few pairs and
  extrapolated to all n(n+1)/2 pairs.
Also: 1532 random strings of length 60 over 26 letters, n = 5 (the large-alphabet path).

Each measurement runs in a fresh child process (ours: after one untimed run); its peak
memory is the child's peak RSS minus its RSS before the computation.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import resource
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _sequences() -> list[str]:
    from monk_framework import load_splice

    data = load_splice(("EI", "IE"), drop_ambiguous=False)
    rng = np.random.default_rng(0)
    # 766 + 766, as in the MONK paper (ambiguity codes kept: the rare-letter path is exercised)
    ei = [data["EI"][i] for i in rng.choice(len(data["EI"]), 766, replace=False)]
    ie = [data["IE"][i] for i in rng.choice(len(data["IE"]), 766, replace=False)]
    return ei + ie


def _rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def _child(job, args, queue, warm) -> None:
    before = _rss_mib()
    if warm:
        # one untimed run first: BLAS threads, and this VM's first touch of fresh memory
        # (0.7 s per GiB here, ten times the steady cost) are paid before timing
        job(*args)
    start = time.perf_counter()
    value = job(*args)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((elapsed, max(peak - before, 0.0), value))


def measure(job, *args, warm=True):
    queue: mp.Queue = mp.Queue()
    proc = mp.get_context("fork").Process(target=_child, args=(job, args, queue, warm))
    proc.start()
    out = queue.get()
    proc.join()
    return out


def ours(strings, n, cumulative):
    from monk_framework import get_registry

    K = get_registry().get_kernel("ssk", n=n, lam=0.5, cumulative=cumulative).gram(strings)
    return K[:50, :50].copy()


def strkernels_gram(strings, n):
    from strkernels import SubsequenceStringKernel

    K = SubsequenceStringKernel(maxlen=n, ssk_lambda=0.5)(np.array(strings), np.array(strings))
    return np.asarray(K)[:50, :50].copy()


def _reference():
    spec = importlib.util.spec_from_file_location("ssk_reference", ROOT / "tests/plugins/test_string_kernels.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module.lodhi_ssk


def reference_seconds_per_pair(strings, n, pairs=6):
    lodhi = _reference()
    start = time.perf_counter()
    for i in range(pairs):
        lodhi(strings[i], strings[-1 - i], n, 0.5)
    return (time.perf_counter() - start) / pairs


def ours_plain(strings, n, cumulative):
    from monk_framework.numerics.compiled import using_compiled

    with using_compiled(False):
        return ours(strings, n, cumulative)


def strkernels_seconds_per_pair(length: int, n: int) -> float:
    """shogun's SSK on two random strings of ``length`` letters: the time of its 2 x 2
    Gram call, over the 3 distinct pairs it computes (its cost is O(n |s| |t|) a pair)."""
    from strkernels import SubsequenceStringKernel

    rng = np.random.default_rng(2)
    pair = np.array(["".join(rng.choice(list("ACGT"), length)) for _ in range(2)])
    start = time.perf_counter()
    SubsequenceStringKernel(maxlen=n, ssk_lambda=0.5)(pair, pair)
    return (time.perf_counter() - start) / 3


def long_strings() -> None:
    """80 random DNA strings of 20 000 letters, n = 5: the per-string tables dominate."""
    rng = np.random.default_rng(3)
    length, count, n = 20_000, 80, 5
    strings = ["".join(rng.choice(list("ACGT"), length)) for _ in range(count)]
    ours(strings[:2], n, False)  # numba compiles (or loads) its loops before the children fork
    t, mem, K = measure(ours, strings, n, False)
    tp, memp, Kp = measure(ours_plain, strings, n, False, warm=False)
    assert np.array_equal(K, Kp), "the compiled and reference paths differ"
    pairs = count * (count + 1) // 2
    short = 2000
    ts = strkernels_seconds_per_pair(short, n) * (length / short) ** 2 * pairs
    print(f"{count} random DNA strings of {length} letters, n = {n}, lambda = 0.5 (normalised Gram matrix)")
    print(
        f"  ssk {t:.2f} s ({mem:.0f} MiB); compiled loops off (numpy reference, the same bits) {tp:.2f} s "
        f"({tp / t:.1f}x); strkernels ~{ts / 3600:.0f} h (pairs of {short} letters, x{(length / short) ** 2:.0f} "
        f"a pair, {pairs} pairs: {ts / t:.0f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="peers on 400 sequences, extrapolated by (N/400)^2")
    parser.add_argument("--levels", default="3,5,8")
    parser.add_argument("--long", action="store_true", help="only the long-strings measurement")
    args = parser.parse_args()
    from monk_framework import get_registry

    get_registry()  # plugin discovery happens once, before the timed children fork
    if args.long:
        long_strings()
        return
    strings = _sequences()
    N = len(strings)
    subset = strings[:200] + strings[-200:] if args.quick else strings
    scale = (N * (N + 1)) / (len(subset) * (len(subset) + 1))
    pairs = N * (N + 1) // 2
    print(f"{N} EI + IE splice sequences (766 + 766, length 60, ambiguity codes kept), lambda = 0.5")
    print(f"{'n':>2} {'ours (s)':>9} {'MiB':>6} {'ours cum. (s)':>13} {'MiB':>6} {'strkernels (s)':>15} {'MiB':>6} {'ratio':>7} {'recursion (s, extrap.)':>23}")
    for n in [int(v) for v in args.levels.split(",")]:
        t, mem, K = measure(ours, strings, n, False)
        tc, memc, Kc = measure(ours, strings, n, True)
        ts, mems, Ks = measure(strkernels_gram, subset, n, warm=False)
        if not args.quick:
            assert np.allclose(Kc, Ks, rtol=1e-6, atol=1e-9), "strkernels and ssk(cumulative=True) disagree"
        ts_full = ts * scale
        tref = reference_seconds_per_pair(strings, n) * pairs
        mark = "*" if args.quick else ""
        print(f"{n:>2} {t:9.3f} {mem:6.0f} {tc:13.3f} {memc:6.0f} {ts_full:14.1f}{mark} {mems:6.0f} {ts_full / tc:7.0f}x {tref:23.0f}")
    if args.quick:
        print("* extrapolated from 400 sequences by (N(N+1))/(400*401)")
    rng = np.random.default_rng(1)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    random26 = ["".join(rng.choice(letters, 60)) for _ in range(N)]
    part = random26 if not args.quick else random26[:300]
    t26, mem26, _ = measure(ours, part, 5, False)
    extra = "" if not args.quick else f" (300 strings; x{(N * (N + 1)) / (300 * 301):.1f} for {N}: {t26 * (N * (N + 1)) / (300 * 301):.1f} s)"
    print(f"26 letters, {len(part)} random strings of length 60, n = 5: {t26:.2f} s, {mem26:.0f} MiB{extra}")


if __name__ == "__main__":
    main()
