"""Reading a table of numbers: ``load_sample`` on a CSV file against numpy's C parser
(``np.loadtxt``), the same file, in one run.

    python benchmarks/bench_read.py                   # 400 000 points of 10 features (80 MB)

``load_sample`` streams the file through Python's csv module into a float64 buffer, so
that a bad cell is named by line and column, a header or pandas' index is recognised and
the memory stays near 8 bytes a value; ``np.loadtxt`` (numpy >= 1.23) parses in C and is
the floor a Python reader cannot reach. Rows: the median of ``--repeats`` reads of each,
after one warm-up, the values checked equal, and the ratio to ``np.loadtxt``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from bench_permutation import _median_time as median_time  # one warm-up, then the median

from monk_framework import load_sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=400_000)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X = np.random.default_rng(0).normal(size=(args.points, args.features))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.csv"
        np.savetxt(path, X, delimiter=",", fmt="%.17g")
        ours = load_sample(path)
        assert np.array_equal(ours, np.loadtxt(path, delimiter=",")) and np.array_equal(ours, X)
        t_ours = median_time(lambda: load_sample(path), args.repeats)
        t_numpy = median_time(lambda: np.loadtxt(path, delimiter=","), args.repeats)
        size = path.stat().st_size
    print(f"{args.points} x {args.features} values, {size / 2**20:.1f} MiB of CSV")
    print(f"load_sample  {t_ours:.3f} s  ({size / 2**20 / t_ours:.1f} MiB/s)")
    print(f"np.loadtxt   {t_numpy:.3f} s  ({size / 2**20 / t_numpy:.1f} MiB/s)")
    print(f"ratio load_sample / np.loadtxt: {t_ours / t_numpy:.2f}")


if __name__ == "__main__":
    main()
