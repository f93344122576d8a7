"""Power and level of the aggregated tests: the study behind docs/studies/tests.md's
"Aggregated tests" section.

Not a speed benchmark: a seeded Monte-Carlo study. Every run computes, from one set of
B relabellings (``collection_statistics``), the statistics of the default collection
(10 Gaussian and 10 Laplace kernels over the pooled distances) and reads off

* MMDAgg's and MMD-FUSE's decisions (the scores ``aggregated_test`` uses);
* every single kernel's own permutation test (the "best bandwidth in hindsight" is the
  kernel of the collection with the highest rejection rate over the cell's runs);
* the U-statistic test with the Gaussian kernel at the median heuristic (same seed).

Designs, N = M = 500 (``--n`` runs them at another size, in the same journal):

* ``fine``: X uniform on [0, 1]², Y with density 1 + a·sin(2πf·u)·sin(2πf·v) (a = 0.8,
  f = 3): structure at a scale of 1/6 where the median distance is about 0.5;
* ``blobs``: a 3 × 3 grid of Gaussians 10 apart; X's are isotropic, Y's have
  covariance eigenvalues 2 and 1/2 at 45° (the classical case where the median fails);
* ``wide``: 80 % of the points in a tight cluster N(0, 0.01 I₂), 20 % from a broad
  N(c, 16 I₂) with c = 0 for X and (2, 0) for Y: the difference lives at a scale far
  above the median distance;
* ``shift``: N(0, I₁₀) against N(0.25·e₁, I₁₀), where the median heuristic is right;
* null designs (``*-null``): the same X law for both samples, ``fine``, ``blobs`` and
  ``shift``'s, 500 runs each.

``--peer`` runs the published MMDAgg on the same data sets: kerneltests' ``mmdagg`` (extra
``bench``), a port of its authors' numpy code, at its defaults (10 Laplace and 10
Gaussian bandwidths of its own grid; for equal sizes a wild bootstrap of B1 = B2 = 2000
sign vectors), with the run as its seed; the summary sets its rates beside ours, paired.

Every run appends one line to a journal (``--journal``), so an interrupted study resumes,
and ``--summary`` prints the tables. ``python benchmarks/aggregation_study.py`` runs it
all (about an hour on 2 cores); ``--quick`` is a smoke run; ``--designs shift
--power-runs 1000`` runs (or extends) one cell to more runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from journal import done_keys, key, run_journal

ALPHA = 0.05
B = 2000
N = 500
POWER_DESIGNS = ("fine", "blobs", "wide", "shift")
NULL_DESIGNS = ("fine-null", "blobs-null", "shift-null")
POWER_RUNS, NULL_RUNS = 200, 500
FINE_AMPLITUDE, FINE_FREQUENCY = 0.8, 3
BLOB_RATIO = 2.0
WIDE_SHIFT = 2.0
SHIFT = 0.25


def _perturbed_uniform(g: np.random.Generator, n: int, amplitude: float) -> np.ndarray:
    """n points of the density 1 + a·sin(2πf u)·sin(2πf v) on [0, 1]², by rejection."""
    out = np.empty((0, 2))
    while len(out) < n:
        Z = g.uniform(size=(2 * n, 2))
        density = 1 + amplitude * np.sin(2 * np.pi * FINE_FREQUENCY * Z[:, 0]) * np.sin(2 * np.pi * FINE_FREQUENCY * Z[:, 1])
        keep = g.uniform(size=2 * n) * (1 + amplitude) < density
        out = np.vstack([out, Z[keep]])
    return out[:n]


def _blobs(g: np.random.Generator, n: int, ratio: float) -> np.ndarray:
    centres = 10.0 * np.array([(i, j) for i in range(3) for j in range(3)])
    c, s = math.cos(math.pi / 4), math.sin(math.pi / 4)
    R = np.array([[c, -s], [s, c]])
    root = R @ np.diag([math.sqrt(ratio), 1 / math.sqrt(ratio)]) @ R.T
    return centres[g.integers(9, size=n)] + g.standard_normal((n, 2)) @ root


def _wide(g: np.random.Generator, n: int, shift: float) -> np.ndarray:
    broad = g.uniform(size=n) < 0.2
    Z = 0.1 * g.standard_normal((n, 2))
    Z[broad] = 4.0 * g.standard_normal((int(broad.sum()), 2)) + np.array([shift, 0.0])
    return Z


def data(design: str, run: int, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng([run, n, (POWER_DESIGNS + NULL_DESIGNS).index(design), 37])
    base = design.removesuffix("-null")
    null = design.endswith("-null")
    if base == "fine":
        return _perturbed_uniform(g, n, 0.0), _perturbed_uniform(g, n, 0.0 if null else FINE_AMPLITUDE)
    if base == "blobs":
        return _blobs(g, n, 1.0), _blobs(g, n, 1.0 if null else BLOB_RATIO)
    if base == "wide":
        return _wide(g, n, 0.0), _wide(g, n, 0.0 if null else WIDE_SHIFT)
    X, Y = g.standard_normal((n, 10)), g.standard_normal((n, 10))
    if not null:
        Y[:, 0] += SHIFT
    return X, Y


def one_run(design: str, run: int, n: int = N, n_permutations: int = B) -> dict[str, Any]:
    from monk_framework import get_registry, permutation_test
    from monk_framework.core.randomness import root
    from monk_framework.core.resources import Resources
    from monk_framework.engine.pooled import pooled
    from monk_framework.two_sample.aggregated import agg_scores, collection_statistics, default_kernels, fuse_normaliser, fuse_scores
    from monk_framework.two_sample.common import exceedances

    X, Y = data(design, run, n)
    start = time.perf_counter()
    est = get_registry().get_estimator("u-stat")
    kernels = default_kernels(X, Y)
    L = len(kernels)
    w = np.full(L, 1.0 / L)
    values, used, read = collection_statistics(est, kernels, X, Y, n_permutations, root(run), resources=Resources.of(None))
    S0, S, singles = agg_scores(values, w)
    p_agg = (1 + int(exceedances(S, S0))) / (1 + n_permutations)
    small = min(len(X), len(Y))
    scales = np.array([fuse_normaliser(k, pooled(*pair), small, Resources.of(None)) for k, pair in zip(used, read, strict=True)])
    F = fuse_scores(values, w, scales, float(small * (small - 1)))
    p_fuse = (1 + int(exceedances(F[1:], F[0]))) / (1 + n_permutations)
    seconds = time.perf_counter() - start
    median = permutation_test(X, Y, kernel="rbf", estimator="u-stat", n_permutations=n_permutations, rng=run, return_null=False)
    return {
        "agg": p_agg,
        "fuse": p_fuse,
        "singles": singles.tolist(),
        "median": median.pvalue,
        "sigmas": [k.params()["sigma"] for k in used],
        "seconds": seconds,
    }


#: the kernel of the default collection (its second Gaussian bandwidth) with the highest
#: power in ``fine``: the one the two-kernel runs are told about in advance
FINE_ORACLE = 1
#: the share of the level the two-kernel runs give that kernel (the rest goes to the
#: median heuristic), as MMDAgg weights
TWO_KERNEL_SHARES = (0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)


def two_kernel_run(design: str, run: int, n: int = N, n_permutations: int = B) -> dict[str, Any]:
    """MMDAgg over two kernels only, the oracle of ``fine`` and the median heuristic, at
    each share of :data:`TWO_KERNEL_SHARES`: the best a test can do that is told in advance
    which two scales matter (its level calibrated by the same permutations)."""
    from monk_framework import get_registry
    from monk_framework.core.randomness import root
    from monk_framework.core.resources import Resources
    from monk_framework.two_sample.aggregated import agg_scores, collection_statistics, default_kernels
    from monk_framework.two_sample.common import exceedances

    X, Y = data(design, run, n)
    registry = get_registry()
    kernels = [default_kernels(X, Y)[FINE_ORACLE], registry.get_kernel("rbf")]
    values, used, _ = collection_statistics(registry.get_estimator("u-stat"), kernels, X, Y, n_permutations, root(run), resources=Resources.of(None))
    pvalues, singles = {}, None
    for share in TWO_KERNEL_SHARES:
        S0, S, singles = agg_scores(values, np.array([share, 1.0 - share]))  # singles: the same at every share
        pvalues[f"{share:g}"] = (1 + int(exceedances(S, S0))) / (1 + n_permutations)
    assert singles is not None
    return {"agg": pvalues, "singles": singles.tolist(), "sigmas": [k.params()["sigma"] for k in used]}


def peer_run(design: str, run: int, n: int = N) -> dict[str, Any]:
    """The published MMDAgg (kerneltests' port of its authors' code) on the run's data."""
    from kt.mmdagg import mmdagg

    X, Y = data(design, run, n)
    start = time.perf_counter()
    reject = bool(mmdagg(X, Y, alpha=ALPHA, seed=run))
    return {"reject": reject, "seconds": time.perf_counter() - start}


def tasks(quick: bool, designs: tuple[str, ...] = POWER_DESIGNS + NULL_DESIGNS, power_runs: int = POWER_RUNS, n: int = N) -> list[dict[str, Any]]:
    out = []
    for design in designs:
        runs = 3 if quick else (NULL_RUNS if design.endswith("-null") else power_runs)
        # the sample size is in a task only when it is not the study's N (the journal's keys stay)
        out += [{"design": design, "run": run, **({} if n == N else {"n": n})} for run in range(runs)]
    out.sort(key=lambda t: (t["run"], t["design"]))  # every cell fills in together
    return out


def execute(task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    n = task.get("n", N)
    if task.get("kind") == "two-kernels":
        return task, two_kernel_run(task["design"], task["run"], n)
    if task.get("kind") == "peer":
        return task, peer_run(task["design"], task["run"], n)
    return task, one_run(task["design"], task["run"], n)


def _two_kernel_aggregation(two: dict[str, list[dict[str, Any]]]) -> None:
    """MMDAgg over the two kernels known in advance (``--two-kernels``), at each share of
    the level, against the acceptance pair's references over the same runs."""
    fine, shift = two.get("fine", []), two.get("shift", [])
    if not fine or not shift:
        return
    runs = min(len(fine), len(shift))
    ref_fine = float(np.mean([r["singles"][0] <= ALPHA for r in fine]))
    ref_shift = float(np.mean([r["singles"][1] <= ALPHA for r in shift]))
    print(
        f"\nMMDAgg over the two kernels only ({runs} runs a design; the oracle of fine has {ref_fine:.3f} there at "
        f"{ALPHA}, the median heuristic {ref_shift:.3f} on shift)\n"
    )
    print("| weight of fine's oracle kernel | power on fine | gap to the oracle | power on shift | gap to the median heuristic | larger gap |")
    print("|---|---|---|---|---|---|")
    for share in TWO_KERNEL_SHARES:
        label = f"{share:g}"
        power_fine = float(np.mean([r["agg"][label] <= ALPHA for r in fine]))
        power_shift = float(np.mean([r["agg"][label] <= ALPHA for r in shift]))
        gaps = ref_fine - power_fine, ref_shift - power_shift
        print(f"| {label} | {power_fine:.3f} | {gaps[0]:+.3f} | {power_shift:.3f} | {gaps[1]:+.3f} | {max(gaps):+.3f} |")


def paired_gap(reference: np.ndarray, test: np.ndarray) -> tuple[float, float]:
    """The power gap reference − test over the same runs, and its standard error: the runs
    are paired, so the error is that of the mean of the per-run differences of the two
    rejection indicators."""
    diff = np.asarray(reference, dtype=float) - np.asarray(test, dtype=float)
    se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else math.nan
    return float(diff.mean()), se


def _paired_gaps(cells: dict[str, list[dict[str, Any]]]) -> None:
    """MMDAgg's gap to the oracle and to the median heuristic, paired over each design's
    runs, with its standard error and a one-sided 95 % upper bound (gap + 1.645 SE)."""
    rows = [(design, cells[design]) for design in POWER_DESIGNS if len(cells.get(design, [])) >= 4]
    if not rows:
        return
    print("\nMMDAgg's paired gaps (standard error; one-sided 95 % upper bound)\n")
    print("| design | runs | to the oracle | to the median heuristic |")
    print("|---|---|---|---|")
    for design, runs in rows:
        agg = np.array([r["agg"] <= ALPHA for r in runs])
        P = np.array([r["singles"] for r in runs]) <= ALPHA
        oracle = P[:, int(np.argmax(P.mean(axis=0)))]
        median = np.array([r["median"] <= ALPHA for r in runs])
        cols = []
        for reference in (oracle, median):
            gap, se = paired_gap(reference, agg)
            cols.append(f"{gap:+.3f} ({se:.3f}; {gap + 1.645 * se:+.3f})")
        print(f"| {design} | {len(runs)} | " + " | ".join(cols) + " |")


def _beside_the_peer(cells: dict[str, list[dict[str, Any]]], peer: dict[tuple[str, int], bool]) -> None:
    """Our MMDAgg against the published one (``--peer``) over the runs both made."""
    rows = []
    for design in POWER_DESIGNS + NULL_DESIGNS:
        pairs = [(r["agg"] <= ALPHA, peer[(design, r["run"])]) for r in cells.get(design, []) if (design, r["run"]) in peer]
        if pairs:
            ours, theirs = (np.array(side) for side in zip(*pairs, strict=True))
            rows.append((design, len(pairs), ours.mean(), theirs.mean(), *paired_gap(theirs, ours), float(np.mean(ours == theirs))))
    if not rows:
        return
    print("\nMMDAgg here against the published MMDAgg (kerneltests' port of its authors' code) on the same runs\n")
    print("| design | runs | ours | published | published − ours (SE) | same decision |")
    print("|---|---|---|---|---|---|")
    for design, runs, ours_rate, theirs_rate, gap, se, same in rows:
        print(f"| {design} | {runs} | {ours_rate:.3f} | {theirs_rate:.3f} | {gap:+.3f} ({se:.3f}) | {same:.3f} |")


def summary(journal: Path, n: int = N) -> None:
    cells: dict[str, list[dict[str, Any]]] = defaultdict(list)
    two: dict[str, list[dict[str, Any]]] = defaultdict(list)
    peer: dict[tuple[str, int], bool] = {}
    for line in journal.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            task = rec["task"]
            if task.get("n", N) != n:
                continue
            if task.get("kind") == "peer":
                peer[(task["design"], task["run"])] = rec["result"]["reject"]
            elif task.get("kind") == "two-kernels":
                two[task["design"]].append(rec["result"])
            else:
                cells[task["design"]].append({**rec["result"], "run": task["run"]})
    print(f"Rejection rates at alpha = {ALPHA}, B = {B}, N = M = {n}\n")
    print("| design | runs | MMDAgg | MMD-FUSE | median heuristic | best single (hindsight) | its kernel | Bonferroni-free gap |")
    print("|---|---|---|---|---|---|---|---|")
    for design in POWER_DESIGNS + NULL_DESIGNS:
        rows = cells.get(design, [])
        if not rows:
            continue
        agg = np.mean([r["agg"] <= ALPHA for r in rows])
        fuse = np.mean([r["fuse"] <= ALPHA for r in rows])
        med = np.mean([r["median"] <= ALPHA for r in rows])
        singles = np.mean([np.asarray(r["singles"]) <= ALPHA for r in rows], axis=0)
        best = int(np.argmax(singles))
        family = "Gaussian" if best < len(singles) // 2 else "Laplace"
        sigma = np.median([r["sigmas"][best] for r in rows])
        print(
            f"| {design} | {len(rows)} | {agg:.3f} | {fuse:.3f} | {med:.3f} | {singles[best]:.3f} | "
            f"{family}, sigma ~ {sigma:.3g} | {singles[best] - agg:+.3f} |"
        )
    # where the gap comes from: the oracle kernel at the level MMDAgg leaves each kernel
    # (about 0.015), and the oracle chosen on the other half of the runs (selection bias)
    print("\n| design | oracle at 0.05 | oracle at 0.025 | oracle at 0.015 | oracle at 0.0025 (Bonferroni) | oracle chosen on the other half | MMDAgg |")
    print("|---|---|---|---|---|---|---|")
    for design in POWER_DESIGNS:
        rows = cells.get(design, [])
        if len(rows) < 4:
            continue
        P = np.array([r["singles"] for r in rows])
        best = int(np.argmax((P <= ALPHA).mean(axis=0)))
        half = len(rows) // 2
        first, second = (int(np.argmax((part <= ALPHA).mean(axis=0))) for part in (P[:half], P[half:]))
        crossed = ((P[half:, first] <= ALPHA).sum() + (P[:half, second] <= ALPHA).sum()) / len(rows)
        at = [float((P[:, best] <= level).mean()) for level in (0.05, 0.025, 0.015, ALPHA / P.shape[1])]
        agg = np.mean([r["agg"] <= ALPHA for r in rows])
        print(f"| {design} | " + " | ".join(f"{v:.3f}" for v in at) + f" | {crossed:.3f} | {agg:.3f} |")
    _paired_gaps(cells)
    _beside_the_peer(cells, peer)
    _two_kernel_aggregation(two)
    secs = [r["seconds"] for rows in cells.values() for r in rows]
    if secs:
        print(f"\nmedian seconds per run (20 kernels, both aggregations, B = {B}): {np.median(secs):.2f}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--journal", type=Path, default=Path("monk-results/aggregation-study.jsonl"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--two-kernels", action="store_true", help="run MMDAgg over only the oracle of fine and the median heuristic, on fine and shift")
    parser.add_argument("--peer", action="store_true", help="run the published MMDAgg (kerneltests, extra bench) on the same data sets")
    parser.add_argument("--designs", default=",".join(POWER_DESIGNS + NULL_DESIGNS), help="comma-separated designs to run (default: all)")
    parser.add_argument("--n", type=int, default=N, help=f"N = M, the size of each sample (default {N})")
    parser.add_argument(
        "--power-runs", type=int, default=POWER_RUNS, help=f"runs a power cell (default {POWER_RUNS}; runs 0..R-1, so a larger R extends a cell)"
    )
    args = parser.parse_args()
    designs = tuple(d.strip() for d in args.designs.split(",") if d.strip())
    unknown = sorted(set(designs) - set(POWER_DESIGNS + NULL_DESIGNS))
    if unknown:
        parser.error(f"unknown designs {unknown}; known: {', '.join(POWER_DESIGNS + NULL_DESIGNS)}")
    if args.n < 2:
        parser.error("--n must be at least 2")
    if args.summary:
        summary(args.journal, args.n)
        return
    args.journal.parent.mkdir(parents=True, exist_ok=True)
    done = done_keys(args.journal)
    planned = tasks(args.quick, designs, args.power_runs, args.n)
    if args.two_kernels and args.peer:
        parser.error("--two-kernels and --peer are separate runs: give one")
    if args.two_kernels:
        planned = [{**t, "kind": "two-kernels"} for t in planned if t["design"] in ("fine", "shift")]
    if args.peer:
        planned = [{**t, "kind": "peer"} for t in planned]
    todo = [t for t in planned if key(t) not in done]
    print(f"{len(todo)} tasks to run ({len(done)} in the journal)", flush=True)
    run_journal(todo, execute, args.journal, args.workers, report_every=100)
    summary(args.journal, args.n)


if __name__ == "__main__":
    cli()
