"""The same Monte-Carlo cells on the local backend and on Dask (issue 6's backend).

    python benchmarks/bench_backends.py              # exp1 cells, N = 600, 1000, 1400, 10 runs, 6 panels
    python benchmarks/bench_backends.py --workers 4  # a bigger embedded LocalCluster

Each backend runs the same cells into a fresh directory; the time includes starting the
LocalCluster and writing the journal. It also checks that both gave the same numbers.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from monk_framework.app.experiments import get_experiment, run_experiment
from monk_framework.app.experiments.report import read_csv
from monk_framework.engine.backends import DaskBackend, LocalBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="600,1000,1400")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    sizes = tuple(int(v) for v in args.sizes.split(","))
    exp = get_experiment("exp1", runs=args.runs, sizes=sizes)
    print(f"exp1 cells: {len(exp.cells())} ({args.runs} runs x 6 panels x N in {sizes}), {len(exp.estimators)} estimators each")
    times, numbers = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("local", "dask"):
            start = time.perf_counter()
            backend = LocalBackend() if name == "local" else DaskBackend(n_workers=args.workers)
            with backend:
                run_experiment(exp, Path(tmp) / name, backend=backend)
            times[name] = time.perf_counter() - start
            numbers[name] = [r["mmd2"] for r in read_csv(Path(tmp) / name / "results.csv")]
    print(f"local (this process)             {times['local']:8.2f} s")
    print(f"dask LocalCluster, {args.workers} workers     {times['dask']:8.2f} s   speed-up {times['local'] / times['dask']:.2f}x")
    print(f"same numbers: {numbers['local'] == numbers['dask']}")


if __name__ == "__main__":
    main()
