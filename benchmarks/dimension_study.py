"""How far MONK estimates fall from the true MMD beyond one dimension (issue 19).

Not a speed benchmark: a seeded Monte-Carlo study of estimation error.

* Data: X ~ N(0, I_d), Y ~ N(0.5·1, I_d) (the bundled ``gauss`` data set with those
  parameters), N = M in {200, 1000}, d in {1, 2, 5, 10, 50}; ``clean``, and
  ``outliers``: Experiment 1's outliers (the last 5 points of X at 2000 and of Y at 4000
  in every coordinate, the ``gauss-outliers`` data set).
* Kernels: RBF with sigma = sqrt(d), RBF with the median heuristic (fitted on each pooled
  sample, outliers included, and frozen: every estimator and the truth use that sigma),
  and the quadratic kernel (xy + 1)^2.
* Estimators: the U-statistic (signed root); MONK BCD and BCD-Fast (Q = 11, T = 100,
  the authors' variant), each run once and read at both reporting points
  (``@authors``: the median before the last update, what the published code and
  ``report="before-update"`` report; ``@final``: the median of the final f,
  ``report="final"``); BCD's and BCD-Fast's exact solvers; the minmax and the geometric
  median-of-means embedding MMD.
* Error: estimate minus the closed-form MMD of the clean Gaussians
  (``Kernel.gaussian_mmd2``); ``--check-truth`` compares the closed-form MMD² with the
  mean of 20 U-statistics (unbiased) on 2000 + 2000 points.

Every run is seeded by its index and the cell, so a cell gives the same numbers in any
invocation; a journal (JSON lines) lets an interrupted study resume, and ``--summary``
prints the median and interquartile range of the error of every estimator in every
cell, then each default setting against its alternative by median |error| (the tables
of docs/studies/reproduction.md). ``--only LABELS --journal J`` runs some estimators into a
supplement journal, and ``--merge J`` adds a supplement to the summary run by run. ``--quick`` runs 3 runs a cell at N = 200 (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from journal import done_keys, key, run_journal  # the resumable journal shared by the studies

DIMENSIONS = (1, 2, 5, 10, 50)
SIZES = (200, 1000)
KERNELS = ("rbf-sqrt-d", "rbf-median", "quadratic")
DATA = ("clean", "outliers")
SHIFT = 0.5
#: label -> estimator spec; the iterations (monk-bcd, monk-bcd-fast) are run once each
#: and read at both reporting points from their trace
ESTIMATORS = {
    "u-stat": "u-stat:root=signed",
    "monk-bcd": "monk-bcd:trace=true",
    "monk-bcd:solver=exact": "monk-bcd:solver=exact",
    "monk-bcd-fast": "monk-bcd-fast:trace=true",
    "monk-bcd-fast:solver=exact": "monk-bcd-fast:solver=exact",
    "monk-embedding-mmd": "monk-embedding-mmd:center=minmax",  # the label of its first runs
    "monk-embedding-mmd:center=geometric": "monk-embedding-mmd:center=geometric",
    # the other settings a default could take: the pseudo-code's variant, BCD-Fast's
    # indicator start (each read by its own rule: 'paper' reports the final f)
    "monk-bcd:variant=paper": "monk-bcd:variant=paper",
    "monk-bcd-fast:variant=paper": "monk-bcd-fast:variant=paper",
    "monk-bcd-fast:start=indicator": "monk-bcd-fast:start=indicator",
}
READ_TWICE = ("monk-bcd", "monk-bcd-fast")


def data_set(data: str, n: int, d: int) -> Any:
    from monk_framework.app.datasets import get_dataset

    params = dict(n=n, d=d, mean_x=0.0, std_x=1.0, mean_y=SHIFT, std_y=1.0)
    return get_dataset("gauss" if data == "clean" else "gauss-outliers", **params)


def kernel_for(name: str, d: int, Z: np.ndarray) -> Any:
    from monk_framework import get_registry

    reg = get_registry()
    if name == "quadratic":
        return reg.get_kernel("quadratic")
    if name == "rbf-sqrt-d":
        return reg.get_kernel("rbf", sigma=math.sqrt(d))
    return reg.get_kernel("rbf", sigma="median").fit(Z)


def one_run(task: dict[str, Any]) -> dict[str, Any]:
    from monk_framework import get_registry
    from monk_framework.core.params import parse_spec

    reg = get_registry()
    n, d = task["n"], task["d"]
    cell_seed = zlib.crc32(f"{task['data']}|{task['kernel']}|{n}|{d}".encode())
    X, Y = data_set(task["data"], n, d).sample(np.random.default_rng([task["run"], cell_seed]))
    kernel = kernel_for(task["kernel"], d, np.vstack([X, Y]))
    clean = data_set("clean", n, d)
    truth = float(clean.true_mmd(kernel))
    errors: dict[str, float] = {}
    seconds: dict[str, float] = {}
    only = task.get("only")
    for label, spec in ESTIMATORS.items():
        if only and label not in only.split(","):
            continue
        name, params = parse_spec(spec)
        start = time.perf_counter()
        result = reg.get_estimator(name, **params).estimate(kernel, X, Y, rng=np.random.default_rng(task["run"]))
        seconds[label] = time.perf_counter() - start
        value = math.copysign(math.sqrt(abs(result.mmd2)), result.mmd2)
        if label in READ_TWICE:
            # trace[-2]: the median before the last update (what the published code
            # reports); trace[-1]: the median of the final f on the last partition
            trace = result.diagnostics["trace"]
            errors[f"{label}@authors"] = float(trace[-2]) - truth
            errors[f"{label}@final"] = float(trace[-1]) - truth
        else:
            errors[label] = value - truth
    return {"truth": truth, "errors": errors, "seconds": seconds}


def tasks(quick: bool, sizes: tuple[int, ...], only: str | None = None) -> list[dict[str, Any]]:
    runs = 3 if quick else 100
    out = []
    for run in range(runs):
        for n in (200,) if quick else sizes:
            for d in DIMENSIONS:
                for kernel in KERNELS:
                    for data in DATA:
                        task: dict[str, Any] = {"n": n, "d": d, "kernel": kernel, "data": data, "run": run}
                        if only:
                            task["only"] = only  # a supplement: its own journal keys
                        out.append(task)
    return out


def execute(task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return task, one_run(task)


def run(journal: Path, workers: int, quick: bool, sizes: tuple[int, ...], only: str | None = None) -> None:
    done = done_keys(journal)
    todo = [t for t in tasks(quick, sizes, only) if key(t) not in done]
    print(f"{len(todo)} runs to do ({len(done)} in the journal)", flush=True)
    run_journal(todo, execute, journal, workers, report_every=50)


#: column titles of the docs tables
TITLES = {
    "u-stat": "U-Stat",
    "monk-bcd@authors": "BCD",
    "monk-bcd@final": "BCD, final f",
    "monk-bcd:solver=exact": "BCD exact",
    "monk-bcd-fast@authors": "BCD-Fast",
    "monk-bcd-fast@final": "BCD-Fast, final f",
    "monk-bcd-fast:solver=exact": "BCD-Fast exact",
    "monk-embedding-mmd": "embedding MMD (minmax)",
    "monk-embedding-mmd:center=geometric": "embedding MMD (geometric)",
    "monk-bcd:variant=paper": "BCD, paper",
    "monk-bcd-fast:variant=paper": "BCD-Fast, paper",
    "monk-bcd-fast:start=indicator": "BCD-Fast, indicator start",
}
#: (setting, default, alternative): each default against the study's alternative
CHOICES = (
    ("monk-bcd report", "monk-bcd@authors", "monk-bcd@final"),
    ("monk-bcd solver", "monk-bcd@authors", "monk-bcd:solver=exact"),
    ("monk-bcd variant", "monk-bcd@authors", "monk-bcd:variant=paper"),
    ("monk-bcd-fast report", "monk-bcd-fast@authors", "monk-bcd-fast@final"),
    ("monk-bcd-fast solver", "monk-bcd-fast@authors", "monk-bcd-fast:solver=exact"),
    ("monk-bcd-fast variant", "monk-bcd-fast@authors", "monk-bcd-fast:variant=paper"),
    ("monk-bcd-fast start", "monk-bcd-fast@authors", "monk-bcd-fast:start=indicator"),
    ("monk-embedding-mmd center", "monk-embedding-mmd:center=geometric", "monk-embedding-mmd"),
)


def load(journals: list[Path]) -> tuple[dict[tuple, dict[str, np.ndarray]], dict[tuple, float]]:
    """cell (kernel, data, N, d) -> label -> errors over the runs, and the cell's median truth.

    Several journals are merged run by run (a supplement run with ``--only`` adds labels
    to the runs of the main journal; a run's data depend only on its cell and index).
    """
    runs: dict[tuple, dict[str, float]] = defaultdict(dict)
    truth_of: dict[tuple, float] = {}
    for journal in journals:
        for line in journal.read_text().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            t = rec["task"]
            run = (t["kernel"], t["data"], t["n"], t["d"], t["run"])
            truth_of[run] = rec["result"]["truth"]
            runs[run].update(rec["result"]["errors"])
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    truths: dict[tuple, list[float]] = defaultdict(list)
    for run, errors in sorted(runs.items()):
        cell = run[:4]
        truths[cell].append(truth_of[run])
        for label, err in errors.items():
            cells[cell][label].append(err)
    order = sorted(cells, key=lambda c: (KERNELS.index(c[0]), DATA.index(c[1]), c[2], c[3]))
    return ({c: {k: np.asarray(v) for k, v in cells[c].items()} for c in order}, {c: float(np.median(truths[c])) for c in order})


def summary(journals: list[Path]) -> None:
    """Per kernel and data: the median error [IQR] of every estimator in every (N, d) cell,
    then each default setting against its alternative by median |error|."""
    cells, truths = load(journals)
    labels = list(TITLES)
    print("Median error [interquartile range] of the estimate minus the closed-form MMD")
    for kernel in KERNELS:
        for data in DATA:
            rows = [c for c in cells if c[0] == kernel and c[1] == data]
            if not rows:
                continue
            print(f"\n**{kernel}, {data}**\n")
            print("| N, d | runs | MMD | " + " | ".join(TITLES[k] for k in labels) + " |")
            print("|---" * (len(labels) + 3) + "|")
            for cell in rows:
                text = []
                for label in labels:
                    v = cells[cell].get(label)
                    if v is None:
                        text.append("—")
                        continue
                    q1, med, q3 = np.percentile(v, [25, 50, 75])
                    text.append(f"{med:+.3f} [{q1:+.3f}, {q3:+.3f}]")
                runs = max(len(v) for v in cells[cell].values())
                print(f"| {cell[2]}, {cell[3]} | {runs} | {truths[cell]:.3f} | " + " | ".join(text) + " |")
    defaults(cells)
    bcd_clean(cells)


def bcd_clean(cells: dict[tuple, dict[str, np.ndarray]]) -> None:
    """monk-bcd's median |error| in every clean cell: its default reading (the published
    one, which variant='authors' reports) against the final f and the exact solver."""
    labels = ("monk-bcd@authors", "monk-bcd@final", "monk-bcd:solver=exact")
    print("\n**monk-bcd, clean cells: median |error|** (the default reads the published value, as variant='authors' does)\n")
    print("| kernel | N, d | default = variant='authors' | final f | exact solver |")
    print("|---|---|---|---|---|")
    for cell, values in cells.items():
        if cell[1] != "clean" or not all(k in values for k in labels):
            continue
        text = " | ".join(f"{np.median(np.abs(values[k])):.3f}" for k in labels)
        print(f"| {cell[0]} | {cell[2]}, {cell[3]} | {text} |")


def defaults(cells: dict[tuple, dict[str, np.ndarray]]) -> None:
    """Each default against its alternative: the ratio of median |error| per cell
    (default / alternative; below 1 the default is closer), over the 30 clean and the 30
    contaminated cells."""
    print("\n**Defaults: median |error| of the default / of the alternative, per cell**\n")
    print("| setting: default vs alternative | data | cells where the default is closer | geometric mean of the ratio | range of the ratio |")
    print("|---|---|---|---|---|")
    for setting, default, other in CHOICES:
        for data in DATA:
            ratios = [
                float(np.median(np.abs(v[default])) / np.median(np.abs(v[other]))) for c, v in cells.items() if c[1] == data and default in v and other in v
            ]
            if not ratios:
                continue
            closer = sum(r <= 1.0 for r in ratios)
            mean = math.exp(float(np.mean(np.log(ratios))))
            print(
                f"| {setting}: {TITLES[default]} vs {TITLES[other]} | {data} | {closer} of {len(ratios)} | {mean:.2f} | {min(ratios):.2f}–{max(ratios):.2f} |"
            )


def check_truth(n: int = 2000, reps: int = 20) -> None:
    """The closed form against the U-statistic, unbiased for MMD², averaged over seeds."""
    from monk_framework import get_registry

    u = get_registry().get_estimator("u-stat")
    print(f"closed-form MMD² against the mean of {reps} U-statistics on {n} + {n} clean points")
    for d in DIMENSIONS:
        for name in KERNELS:
            values, truths = [], []
            for seed in range(reps):
                X, Y = data_set("clean", n, d).sample(np.random.default_rng([seed, d]))
                kernel = kernel_for(name, d, np.vstack([X, Y]))
                truths.append(float(data_set("clean", n, d).true_mmd(kernel)) ** 2)
                values.append(u.estimate(kernel, X, Y).mmd2)
            mean, se = float(np.mean(values)), float(np.std(values, ddof=1) / math.sqrt(reps))
            print(f"d = {d:2d} {name:<11} closed form {np.mean(truths):.5f}  U-statistic {mean:.5f} ± {se:.5f}  ({(mean - np.mean(truths)) / se:+.1f} SE)")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--journal", type=Path, default=Path("monk-results/dimension-study.jsonl"))
    parser.add_argument("--only", default=None, help="run only these estimator labels (comma-separated), e.g. a supplement into its own --journal")
    parser.add_argument("--merge", type=Path, action="append", default=[], help="more journals to merge run by run into the summary")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 runs a cell at N = 200")
    parser.add_argument("--sizes", default="200,1000", help="N = M values, comma-separated")
    parser.add_argument("--summary", action="store_true", help="print the tables from the journal and stop")
    parser.add_argument("--check-truth", action="store_true", help="compare the closed forms with a large U-statistic")
    args = parser.parse_args()
    if args.check_truth:
        check_truth()
        return
    if args.only and (unknown := set(args.only.split(",")) - set(ESTIMATORS)):
        parser.error(f"--only: unknown labels {sorted(unknown)}; known: {', '.join(ESTIMATORS)}")
    if not args.summary:
        run(args.journal, args.workers, args.quick, tuple(int(v) for v in args.sizes.split(",")), args.only)
    summary([args.journal, *args.merge])


if __name__ == "__main__":
    cli()
