"""When the plain progress lines of a long ``monkfw test`` arrive, with stderr not a
terminal (a log file, a batch job): the first line's time and the largest gap.

    python benchmarks/progress_lines.py [--n 20000] [-d 2] [-B 1000] [--args ...]

It writes N + N Gaussian points (Y shifted by 0.1) to CSV files in a temporary folder,
runs ``monkfw test X Y -k rbf -p sigma=1 -B B`` as a process with stderr to a pipe, and
stamps each line as it arrives. The promise it checks: a line within the first 5 s and
at least one every 5 s after, until the result.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("-d", type=int, default=2)
    parser.add_argument("-B", type=int, default=1000)
    parser.add_argument("--args", nargs=argparse.REMAINDER, default=[], help="more monkfw test options")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    try:
        gen = np.random.default_rng(0)
        np.savetxt(folder / "x.csv", gen.normal(size=(args.n, args.d)), delimiter=",")
        np.savetxt(folder / "y.csv", gen.normal(0.1, 1.0, size=(args.n, args.d)), delimiter=",")
        monkfw = Path(sys.executable).with_name("monkfw")
        command = [str(monkfw), "test", str(folder / "x.csv"), str(folder / "y.csv"), "-k", "rbf", "-p", "sigma=1", "-B", str(args.B), "--json", *args.args]
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        stamps = []
        for line in process.stderr:
            stamps.append(time.monotonic() - start)
            print(f"{stamps[-1]:7.2f} s  {line.rstrip()}")
        process.wait()
        end = time.monotonic() - start
        progress = [t for t in stamps]
        gaps = np.diff([0.0, *progress, end]) if progress else np.array([end])
        print(
            f"exit {process.returncode}; {len(progress)} lines; first at {progress[0] if progress else float('nan'):.2f} s; "
            f"largest gap {gaps.max():.2f} s (up to the result at {end:.2f} s)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
